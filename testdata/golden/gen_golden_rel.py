#!/usr/bin/python3
"""Golden vectors for the 2-D relative score biases of package posenc: swin, swin-log, alibi-2d.

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_rel.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_rel.py --check-only

gen_golden.py calls ``generate(out_dir)``, which runs the self-check and writes one
``2d-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run).

Each file holds the hook's computation for one attention call on grid positions:

* ``q_coords`` [Tq, 2], ``k_coords`` [Tk, 2] (int64): (row, col) of every query and key;
  ``extent`` [2] (int64): the grid's rows and cols.
* ``table`` [R, H] (swin, swin-log): the learnable table, N(0, 1) so nothing is special;
  ``index`` [Tq, Tk] (int64): the table row of every pair.
* ``bias`` [H, Tq, Tk]: the score bias (ScoreBias).
* ``R`` [H, Tq, Tk] and, for swin and swin-log, ``grad_table`` [R, H]: the gradient of the
  linear functional ``L = sum(bias * R)`` w.r.t. the table, by autograd.

Metadata: ``pos`` (encoding name), ``heads``, and the options ``grid_rows``, ``grid_cols``
(swin), ``rel2d_buckets``, ``rel2d_max_distance`` (swin-log).

Conventions (the Go encodings must follow them)
-----------------------------------------------
swin (Liu et al. 2021, Swin Transformer; microsoft/Swin-Transformer models/swin_transformer.py,
WindowAttention): the index is built exactly as Swin's ``relative_position_index``, generalised
from one window's raster coordinates to any query and key coordinates::

    rel = coords_q[:, None, :] - coords_k[None, :, :]      # query minus key, [Tq, Tk, 2]
    rel[..., 0] += rows - 1; rel[..., 1] += cols - 1
    rel[..., 0] *= 2 * cols - 1
    index = rel.sum(-1)
    bias = table[index.view(-1)].view(Tq, Tk, H).permute(2, 0, 1)

For a raster rows x cols grid this is Swin's own construction (coords_flatten from
meshgrid([arange(rows), arange(cols)])), which the self-check compares.

swin-log: per axis, T5's bidirectional bucket (gen_golden.t5_relative_position_bucket, the HF
transcription) of key minus query with 2*buckets buckets and max distance, row bucket major::

    index = bucket(k_row - q_row) * 2b + bucket(k_col - q_col)

alibi-2d (Press et al. 2022 slopes, the paper's get_slopes; the Euclidean 2-D form of CROMA's
get_2dalibi, Fuller et al. 2023)::

    bias[h, i, j] = -m_h * sqrt((r_i - r_j)^2 + (c_i - c_j)^2)

The self-check compares it with a transcription of CROMA's get_2dalibi (square grid, loops)
in float64.
"""

import itertools
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import (alibi_get_slopes, module_main, read_safetensors,  # noqa: E402
                        t5_relative_position_bucket, write_case, write_safetensors)

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------

def swin_window_index(rows, cols):
    """Swin's relative_position_index of a rows x cols window (WindowAttention.__init__)."""
    coords_h = torch.arange(rows)
    coords_w = torch.arange(cols)
    coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))  # 2, Wh, Ww
    coords_flatten = torch.flatten(coords, 1)  # 2, Wh*Ww
    relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # 2, N, N
    relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # N, N, 2
    relative_coords[:, :, 0] += rows - 1
    relative_coords[:, :, 1] += cols - 1
    relative_coords[:, :, 0] *= 2 * cols - 1
    return relative_coords.sum(-1)  # N, N


def swin_index(qc, kc, rows, cols):
    """Swin's index for query coords qc [Tq, 2] and key coords kc [Tk, 2] (LongTensors)."""
    rel = (qc[:, None, :] - kc[None, :, :]).contiguous()
    assert rel[..., 0].abs().max() <= rows - 1 and rel[..., 1].abs().max() <= cols - 1
    rel[..., 0] += rows - 1
    rel[..., 1] += cols - 1
    rel[..., 0] *= 2 * cols - 1
    return rel.sum(-1)


def swin_log_index(qc, kc, buckets, max_distance):
    nb = 2 * buckets
    br = t5_relative_position_bucket(kc[None, :, 0] - qc[:, None, 0], True, nb, max_distance)
    bc = t5_relative_position_bucket(kc[None, :, 1] - qc[:, None, 1], True, nb, max_distance)
    return br * nb + bc


def gather_bias(table, index):
    """Swin's gather: [H, Tq, Tk] from table [R, H] and index [Tq, Tk]."""
    tq, tk = index.shape
    return table[index.view(-1)].view(tq, tk, -1).permute(2, 0, 1).contiguous()


def alibi2d_bias(qc, kc, heads):
    m = torch.tensor(alibi_get_slopes(heads), dtype=torch.float64)
    d = (qc[:, None, :] - kc[None, :, :]).to(torch.float64)
    dist = torch.sqrt(d[..., 0] ** 2 + d[..., 1] ** 2)
    return -m[:, None, None] * dist[None]


def croma_get_2dalibi(num_heads, num_patches):
    """CROMA's get_2dalibi (antofuller/CROMA), transcribed in float64."""
    points = list(itertools.product(range(int(math.sqrt(num_patches))), range(int(math.sqrt(num_patches)))))
    slopes = torch.tensor(alibi_get_slopes(num_heads), dtype=torch.float64).unsqueeze(1)
    idxs = []
    for p1 in points:
        for p2 in points:
            dist = math.sqrt((p1[0] - p2[0]) ** 2 + (p1[1] - p2[1]) ** 2)
            idxs.append(dist * slopes * -1)
    all_bias = torch.cat(idxs, dim=1)
    return all_bias.view(1, num_heads, num_patches, num_patches)


def raster(rows, cols):
    return torch.tensor([[r, c] for r in range(rows) for c in range(cols)], dtype=torch.long)


# ---------------------------------------------------------------------------------------
# Self-check: per-element brute force against the vectorised references
# ---------------------------------------------------------------------------------------

def bf_t5(rel, nb, maxd):
    half = nb // 2
    off = half if rel > 0 else 0
    n = abs(rel)
    me = half // 2
    if n < me:
        return off + n
    return off + min(me + int(math.log(n / me) / math.log(maxd / me) * (half - me)), half - 1)


def self_check():
    # Swin's own window index equals the generalised one on a raster grid, and a per-element
    # formula; it covers every table row exactly once per offset.
    for rows, cols in [(3, 4), (4, 3), (7, 7), (1, 5)]:
        w = swin_window_index(rows, cols)
        g = raster(rows, cols)
        assert torch.equal(w, swin_index(g, g, rows, cols)), (rows, cols)
        for i, (qr, qc) in enumerate(g.tolist()):
            for j, (kr, kc) in enumerate(g.tolist()):
                assert w[i, j] == (qr - kr + rows - 1) * (2 * cols - 1) + (qc - kc + cols - 1)
        assert set(w.view(-1).tolist()) == set(range((2 * rows - 1) * (2 * cols - 1)))
    # Swin's gather matches per-element lookups.
    gen = torch.Generator().manual_seed(1)
    table = torch.randn(35, 3, generator=gen)
    idx = swin_window_index(3, 4)
    b = gather_bias(table, idx)
    for h in range(3):
        for i in range(12):
            for j in range(12):
                assert b[h, i, j] == table[idx[i, j], h]
    # swin-log buckets per element, and exact small offsets.
    for buckets, maxd in [(2, 6), (4, 6), (8, 32)]:
        g = raster(9, 11)
        ix = swin_log_index(g, g, buckets, maxd)
        nb = 2 * buckets
        for i, (qr, qc) in enumerate(g.tolist()):
            for j, (kr, kc) in enumerate(g.tolist()):
                assert ix[i, j] == bf_t5(kr - qr, nb, maxd) * nb + bf_t5(kc - qc, nb, maxd)
        # offsets with |d| < buckets/2 on both axes have distinct rows
        small = {}
        for i, (qr, qc) in enumerate(g.tolist()):
            for j, (kr, kc) in enumerate(g.tolist()):
                if abs(kr - qr) < buckets // 2 and abs(kc - qc) < buckets // 2:
                    small.setdefault((kr - qr, kc - qc), set()).add(int(ix[i, j]))
        rows_used = [next(iter(v)) for v in small.values()]
        assert all(len(v) == 1 for v in small.values()) and len(set(rows_used)) == len(rows_used)
    # alibi-2d against CROMA's transcription (square grids), and per element.
    for heads in [1, 4, 6]:
        for side in [1, 3, 4]:
            g = raster(side, side)
            got = alibi2d_bias(g, g, heads)
            want = croma_get_2dalibi(heads, side * side)[0]
            assert torch.allclose(got, want, rtol=0, atol=1e-15), (heads, side)
    m = alibi_get_slopes(6)
    g = raster(4, 5)
    b = alibi2d_bias(g, g, 6)
    for h in range(6):
        for i, (qr, qc) in enumerate(g.tolist()):
            for j, (kr, kc) in enumerate(g.tolist()):
                assert abs(b[h, i, j] - (-m[h] * math.hypot(qr - kr, qc - kc))) < 1e-15
    # safetensors round trip of an int and a float tensor.
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        write_safetensors(p, {"a": torch.arange(6).view(2, 3), "b": torch.randn(3, generator=gen)}, {"x": "1"})
        out, meta = read_safetensors(p)
        assert out["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and meta == {"x": "1"}


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def cells(gen, n, rows, cols, r0=0, c0=0, must=()):
    """n distinct random cells of the window rows x cols at (r0, c0), including must."""
    pick = list(must)
    perm = torch.randperm(rows * cols, generator=gen).tolist()
    for p in perm:
        c = (r0 + p // cols, c0 + p % cols)
        if len(pick) >= n:
            break
        if c not in pick:
            pick.append(c)
    return torch.tensor(pick, dtype=torch.long)


def case_specs():
    gen = torch.Generator().manual_seed(2026)
    specs = []
    g = raster(3, 4)
    specs.append(("swin", dict(pos="swin", heads=3, extent=(3, 4), q=g, k=g, grid_rows=3, grid_cols=4)))
    # cross attention on a 6x7 grid inside a 4x5 window at (2, 1), corners included so that the
    # table's extreme offsets occur; token order is random.
    q = cells(gen, 7, 4, 5, 2, 1, must=[(2, 1), (5, 5)])
    k = cells(gen, 9, 4, 5, 2, 1, must=[(5, 5), (2, 1)])
    specs.append(("swin-cross", dict(pos="swin", heads=2, extent=(6, 7), q=q, k=k, grid_rows=4, grid_cols=5)))
    # log buckets with clipping: offsets up to 8 rows and 10 cols, max distance 6
    q = cells(gen, 10, 9, 11, must=[(0, 0), (8, 10)])
    k = raster(9, 11)
    specs.append(("swin-log", dict(pos="swin-log", heads=3, extent=(9, 11), q=q, k=k,
                                   rel2d_buckets=4, rel2d_max_distance=6)))
    g = raster(7, 7)
    specs.append(("swin-log-default", dict(pos="swin-log", heads=2, extent=(7, 7), q=g, k=g,
                                           rel2d_buckets=8, rel2d_max_distance=32)))
    g = raster(4, 5)
    specs.append(("alibi", dict(pos="alibi-2d", heads=6, extent=(4, 5), q=g, k=g)))
    q = cells(gen, 4, 5, 3)
    k = cells(gen, 6, 5, 3)
    specs.append(("alibi-cross", dict(pos="alibi-2d", heads=4, extent=(5, 3), q=q, k=k)))
    return specs


def build_case(name, c, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, H = c["q"], c["k"], c["heads"]
    tensors = {"q_coords": q, "k_coords": k, "extent": torch.tensor(c["extent"], dtype=torch.long)}
    meta = {"pos": c["pos"], "heads": H}
    table = None
    if c["pos"] == "swin":
        rows, cols = c["grid_rows"], c["grid_cols"]
        index = swin_index(q, k, rows, cols)
        table = torch.randn((2 * rows - 1) * (2 * cols - 1), H, generator=gen)
        meta.update(grid_rows=rows, grid_cols=cols)
    elif c["pos"] == "swin-log":
        b, md = c["rel2d_buckets"], c["rel2d_max_distance"]
        index = swin_log_index(q, k, b, md)
        table = torch.randn(4 * b * b, H, generator=gen)
        meta.update(rel2d_buckets=b, rel2d_max_distance=md)
    if table is not None:
        table.requires_grad_(True)
        bias = gather_bias(table, index)
        tensors["index"] = index
    else:
        bias = alibi2d_bias(q, k, H)
    R = torch.randn(bias.shape, generator=gen)
    tensors["bias"], tensors["R"] = bias.detach(), R
    if table is not None:
        L = (bias * R).sum()
        L.backward()
        tensors["table"], tensors["grad_table"] = table.detach(), table.grad.detach()
        # directional finite difference (L is linear: exact up to rounding)
        u = torch.randn(table.shape, generator=gen)
        with torch.no_grad():
            fd = ((gather_bias(table + 1e-3 * u, index) * R).sum() - (gather_bias(table - 1e-3 * u, index) * R).sum()) / 2e-3
        an = (table.grad * u).sum()
        assert abs(fd - an) < 1e-8 * (1 + abs(an)), (name, fd, an)
    return tensors, meta


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    out = []
    for n, (name, c) in enumerate(case_specs()):
        tensors, meta = build_case(name, c, 100 + n)
        path = os.path.join(out_dir, f"2d-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
