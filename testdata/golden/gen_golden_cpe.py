#!/usr/bin/python3
"""Golden vectors for cpe, the conditional position encoding (PEG) of package posenc.

Chu et al. 2023, "Conditional Positional Encodings for Vision Transformers" (CPVT; the PEG is
timm's PosConv with stride 1): after a block, the tokens x [B, T, d] on a rows x cols grid are
reshaped to [B, d, rows, cols], convolved depthwise (groups = d, kernel k, zero padding k//2,
stride 1, with bias) and added: out = x + conv(x).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_cpe.py

gen_golden.py calls ``generate(out_dir)``. Each ``2d-cpe*.safetensors`` holds ``coords``
[T, 2] (int64, (row, col) of token t: the tokens are in a shuffled order, so the Go side must
place them by their coordinates), ``extent`` [2], ``x`` [B, T, d], ``w`` [k*k, d] (the Go
layout: row (dy+k//2)*k + dx+k//2 is torch's weight[:, 0, dy+k//2, dx+k//2]), ``b`` [d],
``out`` [B, T, d], ``R`` [B, T, d] and the gradients ``grad_x``, ``grad_w``, ``grad_b`` of
L = sum(out * R), by autograd. Metadata: kernel.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import read_safetensors, write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)


def peg(x, coords, rows, cols, w, b, k):
    """x [B, T, d] at coords [T, 2] -> x + depthwise conv of the grid image (empty cells 0)."""
    B, T, d = x.shape
    # scatter the tokens into the image (differentiable)
    flat = torch.zeros(B, d, rows * cols)
    idx = (coords[:, 0] * cols + coords[:, 1]).view(1, 1, T).expand(B, d, T)
    flat = flat.scatter(2, idx, x.permute(0, 2, 1))
    img = flat.view(B, d, rows, cols)
    weight = w.t().reshape(d, 1, k, k)  # [d, 1, k, k]: torch's depthwise layout
    conv = F.conv2d(img, weight, b, stride=1, padding=k // 2, groups=d)  # [B, d, rows, cols]
    conv = conv.view(B, d, rows * cols).gather(2, idx).permute(0, 2, 1)  # back to the tokens
    return x + conv


def case(name, rows, cols, k, B, d, seed, n_tokens=None):
    g = torch.Generator().manual_seed(seed)
    cells = torch.randperm(rows * cols, generator=g)
    if n_tokens is not None:
        cells = cells[:n_tokens]
    coords = torch.stack([cells // cols, cells % cols], dim=1)
    T = len(cells)
    x = torch.randn(B, T, d, generator=g, requires_grad=True)
    w = torch.randn(k * k, d, generator=g, requires_grad=True)
    b = torch.randn(d, generator=g, requires_grad=True)
    R = torch.randn(B, T, d, generator=g)
    out = peg(x, coords, rows, cols, w, b, k)
    (out * R).sum().backward()
    # self-check: one token's conv by hand
    t0 = 0
    r0, c0 = coords[t0].tolist()
    want = x[0, t0].detach().clone() + b.detach()
    for dy in range(-(k // 2), k // 2 + 1):
        for dx in range(-(k // 2), k // 2 + 1):
            for j in range(T):
                if coords[j, 0] == r0 + dy and coords[j, 1] == c0 + dx:
                    want += w.detach()[(dy + k // 2) * k + dx + k // 2] * x.detach()[0, j]
    assert torch.allclose(out[0, t0].detach(), want, atol=1e-12), name
    tensors = {"coords": coords.to(torch.int64), "extent": torch.tensor([rows, cols]), "x": x.detach(),
               "w": w.detach(), "b": b.detach(), "out": out.detach(), "R": R, "grad_x": x.grad,
               "grad_w": w.grad, "grad_b": b.grad}
    return tensors, {"pos": "cpe", "kernel": k}


CASES = [("cpe", dict(rows=3, cols=5, k=3, B=2, d=4, seed=7)),
         ("cpe-k5", dict(rows=4, cols=6, k=5, B=2, d=3, seed=8)),
         ("cpe-partial", dict(rows=5, cols=4, k=3, B=1, d=2, seed=9, n_tokens=11))]


def generate(out_dir):
    out = []
    for name, c in CASES:
        tensors, meta = case(name, **c)
        path = os.path.join(out_dir, f"2d-{name}.safetensors")
        write_safetensors(path, tensors, meta)
        back, _ = read_safetensors(path)
        for key, v in tensors.items():
            assert back[key].tobytes() == v.contiguous().numpy().tobytes(), (path, key)
        out.append((path, os.path.getsize(path)))
    return out


if __name__ == "__main__":
    for p, s in generate(os.path.dirname(os.path.abspath(__file__))):
        print(f"{os.path.basename(p):30s} {s / 1024:7.1f} KiB")
