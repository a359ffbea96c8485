#!/usr/bin/python3
"""Golden vectors for the conditional position encoding cpe (package posenc).

Run with Debian's python (torch 1.13), from the repository root::

    /usr/bin/python3 testdata/golden/gen_golden_cpe.py [--out DIR] [--check-only]

``generate(out_dir)`` (called by gen_golden.py) runs the self-check below, then writes
``2d-cpe*.safetensors`` files and returns ``[(path, size), ...]``. Everything is float64 and
seeded, so the bytes are the same on every run.

The computation of every case is the PEG of Chu et al. 2023 ("Conditional Positional
Encodings for Vision Transformers"), the hook posenc.CPE.AfterBlock at the block it acts on::

    x      [B, T, d]     random N(0, 1), the hidden states after the block
    coords I64 [T, 2]    (row, col) of every token on a rows x cols grid (raster order, shuffled,
                         or a shuffled subset of the cells)
    img    [B, d, rows, cols]   x scattered onto the grid by coords; cells without a token are 0
    conv   = F.conv2d(img, conv_weight [d, 1, k, k], conv_bias [d], stride=1, padding=k//2,
                      groups=d)
    out    = x + conv[b, :, row_t, col_t]   for every token t        [B, T, d]
    loss   = sum(out * w),  w [B, T, d] random N(0, 1)   (a fixed random linear functional)

For raster coordinates this is timm's PosConv (timm/models/twins.py) with stride 1:
x.transpose(1, 2).view(B, d, rows, cols), the depthwise conv, plus the input, flattened back.

A file holds ``x``, ``coords``, ``w``, ``conv_weight`` [d, 1, k, k] and ``conv_bias`` [d] (the
torch parameters), ``cpe/w`` [k*k, d] and ``cpe/b`` [d] (the same numbers in the Go layout:
cpe/w[u*k + v, c] = conv_weight[c, 0, u, v]), ``out``, and the autograd gradients ``grad/x``,
``grad/conv_weight``, ``grad/conv_bias``, ``grad/cpe/w``, ``grad/cpe/b`` (the latter two the
former two in the Go layout).

Metadata (strings): case, pos ("cpe"), B, T, d, rows, cols, kernel.

Self-check (before writing): the convolution of every case is compared at 1e-12 with a
plain-Python per-element cross-correlation (output (r, c) reads input (r+u-k//2, c+v-k//2)
with weight [u, v], zero outside the grid and at empty cells) computed directly from the
token list, without building an image; the raster cases also against a PosConv-style
reshape (transpose + view) instead of the scatter; and a central finite difference of the
loss along a random direction against autograd.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)

# (case, rows, cols, kernel, d, B, cells: 0 = raster order, "perm" = all cells shuffled,
#  n > 0 = a shuffled subset of n cells)
CASES = [
    ("cpe", 3, 5, 3, 4, 2, 0),
    ("cpe-k5", 4, 6, 5, 3, 2, 0),
    ("cpe-perm", 5, 3, 3, 4, 2, "perm"),
    ("cpe-holes", 4, 5, 3, 3, 2, 13),
]


def grid_coords(rows, cols, cells, g):
    """Token coordinates [T, 2] (row, col)."""
    idx = torch.arange(rows * cols)
    if cells == "perm":
        idx = torch.randperm(rows * cols, generator=g)
    elif cells:
        idx = torch.randperm(rows * cols, generator=g)[:cells]
    return torch.stack([idx // cols, idx % cols], dim=1).to(torch.int64)


def peg(x, coords, rows, cols, weight, bias):
    """x + the zero-padded depthwise conv of x placed on the grid by coords: [B, T, d]."""
    B, T, d = x.shape
    k = weight.shape[-1]
    img = x.new_zeros(B, d, rows, cols)
    img[:, :, coords[:, 0], coords[:, 1]] = x.transpose(1, 2)
    conv = F.conv2d(img, weight, bias, stride=1, padding=k // 2, groups=d)
    return x + conv[:, :, coords[:, 0], coords[:, 1]].transpose(1, 2)


def posconv_raster(x, rows, cols, weight, bias):
    """PosConv-style (stride 1) on raster-ordered tokens: reshape instead of scatter."""
    B, T, d = x.shape
    k = weight.shape[-1]
    feat = x.transpose(1, 2).reshape(B, d, rows, cols)
    y = F.conv2d(feat, weight, bias, stride=1, padding=k // 2, groups=d) + feat
    return y.flatten(2).transpose(1, 2)


def bf_peg(x, coords, rows, cols, weight, bias):
    """Per-element reference from the token list."""
    B, T, d = x.shape
    k = weight.shape[-1]
    h = k // 2
    cl = coords.tolist()
    at = {(r, c): t for t, (r, c) in enumerate(cl)}
    xs, ws, bs = x.tolist(), weight.tolist(), bias.tolist()
    out = [[[0.0] * d for _ in range(T)] for _ in range(B)]
    for b in range(B):
        for t, (r, c) in enumerate(cl):
            for ch in range(d):
                s = xs[b][t][ch] + bs[ch]
                for u in range(k):
                    for v in range(k):
                        j = at.get((r + u - h, c + v - h))
                        if j is not None:
                            s += ws[ch][0][u][v] * xs[b][j][ch]
                out[b][t][ch] = s
    return torch.tensor(out)


def self_check():
    for i, (case, rows, cols, k, d, B, cells) in enumerate(CASES):
        g = torch.Generator().manual_seed(500 + i)
        coords = grid_coords(rows, cols, cells, g)
        x = torch.randn(B, coords.shape[0], d, generator=g)
        weight = torch.randn(d, 1, k, k, generator=g)
        bias = torch.randn(d, generator=g)
        got = peg(x, coords, rows, cols, weight, bias)
        err = (got - bf_peg(x, coords, rows, cols, weight, bias)).abs().max().item()
        assert err < 1e-12, (case, "per-element", err)
        if cells == 0:
            err = (got - posconv_raster(x, rows, cols, weight, bias)).abs().max().item()
            assert err < 1e-12, (case, "PosConv", err)
    # a hand value: 1x2 grid, d=1, k=3, every weight 1, bias 0.5, x = [1, 2]:
    # token 0 = 1 + (1 + 2) + 0.5 = 4.5, token 1 = 2 + (1 + 2) + 0.5 = 5.5
    v = peg(torch.tensor([[[1.0], [2.0]]]), torch.tensor([[0, 0], [0, 1]]), 1, 2,
            torch.ones(1, 1, 3, 3), torch.tensor([0.5]))
    assert torch.allclose(v, torch.tensor([[[4.5], [5.5]]])), v


def to_go(weight):
    """conv_weight [d, 1, k, k] -> cpe/w [k*k, d]."""
    d, _, k, _ = weight.shape
    return weight.reshape(d, k * k).t().contiguous()


def generate(out_dir):
    """Self-checks, then writes every 2d-cpe* case into out_dir. Returns [(path, size)]."""
    self_check()
    written = []
    for i, (case, rows, cols, k, d, B, cells) in enumerate(CASES):
        g = torch.Generator().manual_seed(3000 + i)
        coords = grid_coords(rows, cols, cells, g)
        T = coords.shape[0]
        x = torch.randn(B, T, d, generator=g)
        w = torch.randn(B, T, d, generator=g)
        weight = torch.randn(d, 1, k, k, generator=g) * 0.5
        bias = torch.randn(d, generator=g) * 0.5

        def loss_of(xx, ww, bb):
            out = peg(xx, coords, rows, cols, ww, bb)
            return (out * w).sum(), out

        vals = [x, weight, bias]
        req = [v.clone().requires_grad_(True) for v in vals]
        loss, out = loss_of(*req)
        grads = torch.autograd.grad(loss, req)
        check_directional_fd(loss_of, vals, grads, 1e-6, case)

        tensors = {"x": x, "w": w, "coords": coords, "conv_weight": weight, "conv_bias": bias,
                   "cpe/w": to_go(weight), "cpe/b": bias.clone(), "out": out.detach(),
                   "grad/x": grads[0], "grad/conv_weight": grads[1], "grad/conv_bias": grads[2],
                   "grad/cpe/w": to_go(grads[1]), "grad/cpe/b": grads[2].clone()}
        meta = {"case": "2d-" + case, "pos": "cpe", "B": B, "T": T, "d": d, "rows": rows,
                "cols": cols, "kernel": k}
        path = os.path.join(out_dir, f"2d-{case}.safetensors")
        written.append(write_case(path, tensors, meta))
    return written


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
