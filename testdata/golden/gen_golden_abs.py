#!/usr/bin/python3
"""Golden vectors for the absolute 2-D encodings learned-2d and sinusoidal-2d (package posenc).

Run with Debian's python (torch 1.13), from the repository root::

    /usr/bin/python3 testdata/golden/gen_golden_abs.py [--out DIR] [--check-only]

``generate(out_dir)`` (called by gen_golden.py) runs the self-check below, then writes
``2d-<case>.safetensors`` files and returns ``[(path, size), ...]``. Everything is float64
and seeded, so the bytes are the same on every run.

The computation of every case is the input hook of a ViT (posenc.InputAdder.AddToInput)::

    x     [B, T, d]   random N(0, 1), the patch embeddings
    coords I64 [T, 2] (row, col) of every token on a rows x cols grid (raster order or shuffled)
    out   = x + PE[token]                                   [B, T, d]
    loss  = sum(out * w),  w [B, T, d] random N(0, 1)       (a fixed random linear functional)

and a file holds ``x``, ``coords``, ``w``, ``out``, ``grad/x`` and, for learned-2d, the
parameter ``pos_emb_2d`` [R*C, d] with ``grad/pos_emb_2d`` (torch autograd), plus
``aux/pe`` [rows*cols, d], the whole table added on the input grid (resampled, scaled).

learned-2d (Dosovitskiy et al. 2021, ViT)
    ``pos_emb_2d`` [R*C, d], row r*C + c for grid cell (r, c). On a grid rows x cols other
    than R x C it is resampled as timm's ``resample_abs_pos_embed`` (timm/layers/pos_embed.py;
    num_prefix_tokens=0, old_size=(R, C)): the table is seen as a [1, d, R, C] image and
    ``F.interpolate(size=(rows, cols), mode, align_corners=False, antialias=False)``, then
    flattened back in raster order. timm casts to float32 around the interpolation; here it
    stays float64. PE[token] = resampled[r*cols + c].
sinusoidal-2d (He et al. 2022, MAE ``get_2d_sincos_pos_embed``)
    With q = d/4 and omega_k = 1/10000^(k/q), k < q::

        PE[(r, c)] = scale * [sin(c*omega), cos(c*omega), sin(r*omega), cos(r*omega)]

    the column first, as MAE's code: its grid is ``np.meshgrid(grid_w, grid_h)`` whose first
    plane (used for "emb_h", the first d/2 channels) holds the column coordinate. The
    self-check compares this with MAE's own functions (copied below, ``np.float`` ->
    ``np.float64``). scale is in the metadata (default 1/sqrt(d) in Go).

Metadata (strings): case, pos, B, T, d, rows, cols (the input grid), and for learned-2d
table_rows, table_cols, resample ("none", "bilinear", "bicubic"); for sinusoidal-2d scale
(repr of the float).

Self-check (before writing): the resampling of every learned case is compared at 1e-12 with a
plain-Python per-element implementation of PyTorch's CPU kernels written from their source
(source index (i + 0.5) * in/out - 0.5; bilinear clamps it at 0 and the upper neighbour at
in-1; bicubic uses Keys' kernel with A = -0.75 and clamps the four taps to [0, in-1]); the
sinusoidal table against MAE's code at 1e-12; and a central finite difference of the loss
along a random direction against autograd.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)

# (case, table R, C, input grid rows, cols, resample, d, B, shuffled coords (count or 0))
LEARNED_CASES = [
    ("learned", 3, 4, 3, 4, "none", 6, 2, 0),
    ("learned-perm", 3, 4, 3, 4, "none", 6, 2, 7),
    ("learned-bilinear-up", 3, 4, 5, 7, "bilinear", 6, 2, 0),
    ("learned-bilinear-down", 6, 5, 4, 3, "bilinear", 6, 2, 0),
    ("learned-bilinear-mixed", 5, 3, 3, 8, "bilinear", 4, 2, 0),
    ("learned-bicubic-up", 3, 4, 6, 9, "bicubic", 6, 2, 0),
    ("learned-bicubic-down", 7, 6, 4, 5, "bicubic", 6, 2, 0),
    ("learned-bicubic-mixed", 4, 6, 7, 3, "bicubic", 4, 2, 11),
]

# (case, rows, cols, d, scale, B, shuffled)
SINUSOIDAL_CASES = [
    ("sinusoidal", 3, 5, 8, 1 / math.sqrt(8), 2, 0),
    ("sinusoidal-scaled", 4, 2, 12, 0.5, 2, 5),
    ("sinusoidal-large", 12, 16, 16, 1.0, 1, 0),
]


# --------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------

def resample_abs_pos_embed(posemb, new_size, old_size, interpolation):
    """timm.layers.pos_embed.resample_abs_pos_embed with num_prefix_tokens=0,
    antialias=False and without the float32 cast. posemb [1, R*C, d]."""
    embed_dim = posemb.shape[-1]
    posemb = posemb.reshape(1, old_size[0], old_size[1], -1).permute(0, 3, 1, 2)
    posemb = F.interpolate(posemb, size=new_size, mode=interpolation, antialias=False,
                           align_corners=False)
    return posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)


def learned_pe(table, R, C, rows, cols, resample):
    """The whole table on the rows x cols grid [rows*cols, d]."""
    if (rows, cols) == (R, C):
        return table
    assert resample in ("bilinear", "bicubic"), resample
    return resample_abs_pos_embed(table[None], (rows, cols), (R, C), resample)[0]


def sincos_2d(coords, d, scale):
    """MAE's 2-D sin-cos table of coords [T, 2] (row, col), times scale: [T, d]."""
    q = d // 4
    omega = 1.0 / 10000 ** (torch.arange(q, dtype=torch.float64) / q)
    r = coords[:, 0].to(torch.float64)[:, None] * omega
    c = coords[:, 1].to(torch.float64)[:, None] * omega
    return scale * torch.cat([torch.sin(c), torch.cos(c), torch.sin(r), torch.cos(r)], dim=1)


# MAE util/pos_embed.py (facebookresearch/mae), verbatim but np.float -> np.float64.
def mae_get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False):
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, grid_size, grid_size])
    pos_embed = mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed


def mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid):
    assert embed_dim % 2 == 0
    emb_h = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])  # (H*W, D/2)
    emb_w = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])  # (H*W, D/2)
    return np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)


def mae_get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.
    omega = 1. / 10000**omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = np.einsum('m,d->md', pos, omega)  # (M, D/2), outer product
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)  # (M, D)


# --------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------

def bf_weights(mode, n_in, n_out):
    """Per-element 1-D weights [n_out][n_in] of PyTorch's CPU upsample kernels
    (align_corners=False, no scale factor, no antialias)."""
    scale = n_in / n_out
    W = [[0.0] * n_in for _ in range(n_out)]
    clamp = lambda i: min(max(i, 0), n_in - 1)  # noqa: E731
    for i in range(n_out):
        src = scale * (i + 0.5) - 0.5
        if mode == "bilinear":
            src = max(src, 0.0)
            i0 = min(int(math.floor(src)), n_in - 1)
            lam = min(max(src - i0, 0.0), 1.0)
            W[i][i0] += 1 - lam
            W[i][clamp(i0 + 1)] += lam
        else:
            A = -0.75
            i0 = math.floor(src)
            t = src - i0
            cc1 = lambda x: ((A + 2) * x - (A + 3)) * x * x + 1  # noqa: E731
            cc2 = lambda x: ((A * x - 5 * A) * x + 8 * A) * x - 4 * A  # noqa: E731
            for off, w in ((-1, cc2(t + 1)), (0, cc1(t)), (1, cc1(1 - t)), (2, cc2(2 - t))):
                W[i][clamp(i0 + off)] += w
    return W


def bf_resample(table, R, C, rows, cols, mode):
    Wr, Wc = bf_weights(mode, R, rows), bf_weights(mode, C, cols)
    d = table.shape[1]
    tab = table.tolist()
    out = [[0.0] * d for _ in range(rows * cols)]
    for i in range(rows):
        for j in range(cols):
            for a in range(R):
                for b in range(C):
                    w = Wr[i][a] * Wc[j][b]
                    if w != 0.0:
                        for k in range(d):
                            out[i * cols + j][k] += w * tab[a * C + b][k]
    return torch.tensor(out)


def self_check():
    g = torch.Generator().manual_seed(5)
    for case, R, C, rows, cols, mode, d, _, _ in LEARNED_CASES:
        if mode == "none":
            continue
        table = torch.randn(R * C, d, generator=g)
        got = learned_pe(table, R, C, rows, cols, mode)
        want = bf_resample(table, R, C, rows, cols, mode)
        err = (got - want).abs().max().item()
        assert err < 1e-12, (case, err)
        # the identity on an unchanged axis
        same = learned_pe(table, R, C, R, C + 1, mode)
        assert torch.allclose(learned_pe(table, R, C, R, C, mode), table)
        assert same.shape == (R * (C + 1), d)
    for d in (4, 8, 12, 16):
        for s in (1, 3, 7):
            ii, jj = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
            coords = torch.tensor(np.stack([ii.reshape(-1), jj.reshape(-1)], axis=1))
            got = sincos_2d(coords, d, 1.0)
            want = torch.tensor(mae_get_2d_sincos_pos_embed(d, s))
            err = (got - want).abs().max().item()
            assert err < 1e-12, ("sinusoidal vs MAE", d, s, err)
    # a hand value: d=4, (r, c) = (2, 1): [sin 1, cos 1, sin 2, cos 2]
    v = sincos_2d(torch.tensor([[2, 1]]), 4, 1.0)[0]
    assert torch.allclose(v, torch.tensor([math.sin(1), math.cos(1), math.sin(2), math.cos(2)]))


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

def grid_coords(rows, cols, shuffled, g):
    """Raster coordinates [rows*cols, 2], or `shuffled` distinct cells in random order."""
    cells = torch.arange(rows * cols)
    if shuffled:
        cells = torch.randperm(rows * cols, generator=g)[:shuffled]
    return torch.stack([cells // cols, cells % cols], dim=1).to(torch.int64)


def finish(out_dir, case, tensors, leaves, pe_fn, meta):
    """Adds out, loss gradients and a directional finite-difference check; writes the file."""
    x, w, coords = tensors["x"], tensors["w"], tensors["coords"]

    def loss_of(*vals):
        pe_all = pe_fn(*vals[1:])
        tok = pe_all[coords[:, 0] * meta["cols"] + coords[:, 1]]
        return ((vals[0] + tok) * w).sum(), vals[0] + tok

    vals = [x] + [tensors[n] for n in leaves]
    req = [v.clone().requires_grad_(True) for v in vals]
    loss, out = loss_of(*req)
    grads = torch.autograd.grad(loss, req)
    check_directional_fd(loss_of, vals, grads, 1e-6, case)
    tensors = dict(tensors)
    tensors["out"] = out.detach()
    tensors["aux/pe"] = pe_fn(*vals[1:]).detach()
    tensors["grad/x"] = grads[0]
    for n, gr in zip(leaves, grads[1:]):
        tensors["grad/" + n] = gr
    meta = dict(meta, case="2d-" + case, B=x.shape[0], T=x.shape[1], d=x.shape[2])
    path = os.path.join(out_dir, f"2d-{case}.safetensors")
    return write_case(path, tensors, meta)


def generate(out_dir):
    """Self-checks, then writes every 2d-learned* and 2d-sinusoidal* case into out_dir.
    Returns [(path, size)]."""
    self_check()
    written = []
    for i, (case, R, C, rows, cols, mode, d, B, shuffled) in enumerate(LEARNED_CASES):
        g = torch.Generator().manual_seed(1000 + i)
        coords = grid_coords(rows, cols, shuffled, g)
        T = coords.shape[0]
        tensors = {"x": torch.randn(B, T, d, generator=g), "w": torch.randn(B, T, d, generator=g),
                   "pos_emb_2d": torch.randn(R * C, d, generator=g), "coords": coords}
        meta = {"pos": "learned-2d", "rows": rows, "cols": cols, "table_rows": R, "table_cols": C,
                "resample": mode}
        written.append(finish(out_dir, case, tensors, ["pos_emb_2d"],
                              lambda tab: learned_pe(tab, R, C, rows, cols, mode), meta))
    for i, (case, rows, cols, d, scale, B, shuffled) in enumerate(SINUSOIDAL_CASES):
        g = torch.Generator().manual_seed(2000 + i)
        coords = grid_coords(rows, cols, shuffled, g)
        T = coords.shape[0]
        tensors = {"x": torch.randn(B, T, d, generator=g), "w": torch.randn(B, T, d, generator=g),
                   "coords": coords}
        full = grid_coords(rows, cols, 0, g)
        meta = {"pos": "sinusoidal-2d", "rows": rows, "cols": cols, "scale": repr(scale)}
        written.append(finish(out_dir, case, tensors, [],
                              lambda: sincos_2d(full, d, scale), meta))
    return written


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
