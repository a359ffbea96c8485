#!/usr/bin/python3
"""Golden vectors for the 2-D rotary encodings rope-2d and rope-mixed (package posenc).

Run with Debian's python (torch 1.13), from the repository root::

    /usr/bin/python3 testdata/golden/gen_golden_rope.py [--out DIR] [--check-only]

``generate(out_dir)`` (called by gen_golden.py) runs the self-check below, then writes
``2d-rope-<case>.safetensors`` files and returns ``[(path, size), ...]``. Everything is
float64 and seeded, so the bytes are the same on every run.

Reference: Heo et al. 2024, "Rotary Position Embedding for Vision Transformer" (ECCV 2024),
code naver-ai/rope-vit, models/vit_rope.py. The functions ``compute_axial_cis``,
``init_t_xy``, ``compute_mixed_cis``, ``init_random_2d_freqs``, ``reshape_for_broadcast`` and
``apply_rotary_emb`` are copied below verbatim (prefixed ``rv_``; Apache-2.0, NAVER Corp.,
parts from Meta's codellama) but for the autocast context of compute_mixed_cis (a no-op on
the CPU). They work in float32 (``.float()``); the golden vectors use float64 versions of the
same formulas (``axial_cis``, ``mixed_cis``, ``rotate``) taking explicit coordinates, which
the self-check compares with the verbatim code on raster grids.

The computation of every case is the QK hook of one attention layer
(posenc.QKTransformer.TransformQK)::

    q [B, H, TQ, dh], k [B, H, TK, dh]      random N(0, 1)
    q_coords, k_coords I64 [T, 2]           (row, col) of each query and key on a rows x cols grid
    t_x = col, t_y = row                    (rope-vit: t_x = index % end_x, t_y = index // end_x)
    cis_q = cis(t_x, t_y of the queries), cis_k likewise        complex [.., T, dh/2]
    q_out = view_as_real(view_as_complex(q as [.., dh/2, 2]) * cis_q)   (interleaved pairs)
    loss  = sum(q_out * wq) + sum(k_out * wk),  wq, wk random N(0, 1)

rope-2d (RoPE-Axial): ``cis[t, p] = exp(i phi)`` with theta_k = base^(-4k/dh), k < dh/4,
phi = t_x theta_p for p < dh/4 (the column first: freqs_cis = cat([freqs_cis_x,
freqs_cis_y])) and t_y theta_{p-dh/4} after; the same for every head. base in the metadata
(rope-vit's rope_theta, default 100).

rope-mixed (RoPE-Mixed): parameter ``freqs`` [2, H, dh/2] (the layer's
``<prefix>/rope_mixed_freqs``), ``cis[h, t, p] = exp(i (t_x freqs[0, h, p] + t_y freqs[1, h,
p]))`` (compute_mixed_cis of one layer). The file holds ``grad/freqs`` too. The case "mixed"
uses freqs = init_random_2d_freqs(dh, H, theta=base) with per-head angles ``alpha`` [H]
(stored), "mixed-cross" random N(0, 0.5) freqs. The case "mixed-init" holds only
``alpha`` [H] and ``freqs`` [2, H, dh/2] = init_random_2d_freqs with those angles
(posenc.RopeMixedFreqs).

Files hold q, k, q_coords, k_coords, wq, wk, q_out, k_out, grad/q, grad/k (and freqs,
grad/freqs, alpha). Metadata (strings): case, pos, B, H, dh, rows, cols, base.

Self-check (before writing): the float64 formulas against the verbatim rope-vit code (float32:
cis and rotations to 1e-5 relative; compute_mixed_cis in float64 exactly;
init_random_2d_freqs with the angles it draws to 1e-6), against a plain-Python per-element
rotation at 1e-12, and autograd against a central finite difference of the loss along a random
direction.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------------------------------
# naver-ai/rope-vit models/vit_rope.py, verbatim (autocast context removed)
# ---------------------------------------------------------------------------------------

def rv_init_random_2d_freqs(dim: int, num_heads: int, theta: float = 10.0, rotate: bool = True):
    freqs_x = []
    freqs_y = []
    mag = 1 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    for i in range(num_heads):
        angles = torch.rand(1) * 2 * torch.pi if rotate else torch.zeros(1)
        fx = torch.cat([mag * torch.cos(angles), mag * torch.cos(torch.pi/2 + angles)], dim=-1)
        fy = torch.cat([mag * torch.sin(angles), mag * torch.sin(torch.pi/2 + angles)], dim=-1)
        freqs_x.append(fx)
        freqs_y.append(fy)
    freqs_x = torch.stack(freqs_x, dim=0)
    freqs_y = torch.stack(freqs_y, dim=0)
    freqs = torch.stack([freqs_x, freqs_y], dim=0)
    return freqs


def rv_compute_mixed_cis(freqs: torch.Tensor, t_x: torch.Tensor, t_y: torch.Tensor, num_heads: int):
    N = t_x.shape[0]
    depth = freqs.shape[1]
    freqs_x = (t_x.unsqueeze(-1) @ freqs[0].unsqueeze(-2)).view(depth, N, num_heads, -1).permute(0, 2, 1, 3)
    freqs_y = (t_y.unsqueeze(-1) @ freqs[1].unsqueeze(-2)).view(depth, N, num_heads, -1).permute(0, 2, 1, 3)
    freqs_cis = torch.polar(torch.ones_like(freqs_x), freqs_x + freqs_y)
    return freqs_cis


def rv_compute_axial_cis(dim: int, end_x: int, end_y: int, theta: float = 100.0):
    freqs_x = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    freqs_y = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))

    t_x, t_y = rv_init_t_xy(end_x, end_y)
    freqs_x = torch.outer(t_x, freqs_x)
    freqs_y = torch.outer(t_y, freqs_y)
    freqs_cis_x = torch.polar(torch.ones_like(freqs_x), freqs_x)
    freqs_cis_y = torch.polar(torch.ones_like(freqs_y), freqs_y)
    return torch.cat([freqs_cis_x, freqs_cis_y], dim=-1)


def rv_init_t_xy(end_x: int, end_y: int):
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    t_x = (t % end_x).float()
    t_y = torch.div(t, end_x, rounding_mode='floor').float()
    return t_x, t_y


def rv_reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    if freqs_cis.shape == (x.shape[-2], x.shape[-1]):
        shape = [d if i >= ndim-2 else 1 for i, d in enumerate(x.shape)]
    elif freqs_cis.shape == (x.shape[-3], x.shape[-2], x.shape[-1]):
        shape = [d if i >= ndim-3 else 1 for i, d in enumerate(x.shape)]

    return freqs_cis.view(*shape)


def rv_apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = rv_reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq).to(xq.device), xk_out.type_as(xk).to(xk.device)


# ---------------------------------------------------------------------------------------
# float64 references with explicit coordinates
# ---------------------------------------------------------------------------------------

def axial_freqs(dim, theta):
    """compute_axial_cis's frequencies in float64: theta^(-4k/dim), k < dim/4."""
    return 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].double() / dim))


def axial_cis(dim, t_x, t_y, theta):
    """compute_axial_cis for tokens at (t_x, t_y): complex [T, dim/2], column pairs first."""
    f = axial_freqs(dim, theta)
    fx, fy = torch.outer(t_x, f), torch.outer(t_y, f)
    return torch.cat([torch.polar(torch.ones_like(fx), fx), torch.polar(torch.ones_like(fy), fy)], dim=-1)


def mixed_cis(freqs, t_x, t_y):
    """compute_mixed_cis of one layer: freqs [2, H, dim/2] -> complex [H, T, dim/2]."""
    H = freqs.shape[1]
    return rv_compute_mixed_cis(freqs.reshape(2, 1, -1), t_x, t_y, H)[0]


def init_freqs(dim, alpha, theta):
    """init_random_2d_freqs(dim, H, theta, rotate=True) with the per-head angles alpha [H]."""
    mag = axial_freqs(dim, theta)
    fx = torch.stack([torch.cat([mag * torch.cos(a), mag * torch.cos(math.pi / 2 + a)]) for a in alpha])
    fy = torch.stack([torch.cat([mag * torch.sin(a), mag * torch.sin(math.pi / 2 + a)]) for a in alpha])
    return torch.stack([fx, fy])


def rotate(x, cis):
    """apply_rotary_emb for one tensor x [B, H, T, dim] in float64 (interleaved pairs)."""
    x_ = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * rv_reshape_for_broadcast(cis, x_)).flatten(3)


def txy(coords):
    """t_x (column) and t_y (row) of coords I64 [T, 2] (row, col)."""
    return coords[:, 1].double(), coords[:, 0].double()


def raster(rows, cols):
    r = torch.arange(rows * cols)
    return torch.stack([r // cols, r % cols], dim=1)


def cells(rows, cols, n, g):
    """n distinct random cells of the grid, in random order."""
    return raster(rows, cols)[torch.randperm(rows * cols, generator=g)[:n]]


def cis_of(pos, coords, dh, base, freqs):
    t_x, t_y = txy(coords)
    if pos == "rope-2d":
        return axial_cis(dh, t_x, t_y, base)
    return mixed_cis(freqs, t_x, t_y)


def forward(pos, t, dh, base):
    """q_out, k_out and the loss of the tensors t (see the module doc)."""
    freqs = t.get("freqs")
    qo = rotate(t["q"], cis_of(pos, t["q_coords"], dh, base, freqs))
    ko = rotate(t["k"], cis_of(pos, t["k_coords"], dh, base, freqs))
    return qo, ko, (qo * t["wq"]).sum() + (ko * t["wk"]).sum()


# ---------------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------------

def close(name, got, want, tol):
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.is_complex() or want.is_complex():  # compare real and imaginary parts
        got, want = torch.view_as_real(got.to(torch.complex128)), torch.view_as_real(want.to(torch.complex128))
    got, want = got.double(), want.double()
    err = ((got - want).abs() / (1 + want.abs())).max().item()
    assert err <= tol, f"{name}: max rel error {err} > {tol}"


def bf_rotate(x, angle):
    """Per-element rotation of x [B, H, T, dim] by angle(h, t, p), plain Python floats."""
    B, H, T, D = x.shape
    out = x.clone()
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for p in range(D // 2):
                    phi = angle(h, t, p)
                    a, bb = x[b, h, t, 2 * p].item(), x[b, h, t, 2 * p + 1].item()
                    out[b, h, t, 2 * p] = a * math.cos(phi) - bb * math.sin(phi)
                    out[b, h, t, 2 * p + 1] = bb * math.cos(phi) + a * math.sin(phi)
    return out


def self_check():
    g = torch.Generator().manual_seed(7)
    rows, cols, dh, H = 3, 5, 8, 2
    # axial: the float64 formula with explicit raster coordinates is rope-vit's
    rc = raster(rows, cols)
    t_x, t_y = txy(rc)
    close("axial cis vs rope-vit", axial_cis(dh, t_x, t_y, 100.0), rv_compute_axial_cis(dh, cols, rows, 100.0), 1e-5)
    rx, ry = rv_init_t_xy(cols, rows)
    close("t_x is the column", rx, t_x, 0)
    close("t_y is the row", ry, t_y, 0)
    q, k = torch.randn(2, H, rows * cols, dh, generator=g), torch.randn(2, H, rows * cols, dh, generator=g)
    cis = axial_cis(dh, t_x, t_y, 100.0)
    rq, rk = rv_apply_rotary_emb(q, k, rv_compute_axial_cis(dh, cols, rows, 100.0))
    close("axial rotation vs rope-vit", rotate(q, cis), rq, 1e-5)
    close("axial rotation vs rope-vit (k)", rotate(k, cis), rk, 1e-5)
    th = axial_freqs(dh, 100.0).tolist()

    def axial_angle(h, t, p):
        r, c = rc[t].tolist()
        return c * th[p] if p < dh // 4 else r * th[p - dh // 4]
    close("axial rotation vs per element", rotate(q, cis), bf_rotate(q, axial_angle), 1e-12)
    # mixed: init with the angles rope-vit draws, cis, rotation
    torch.manual_seed(3)
    rv = rv_init_random_2d_freqs(dh, H, theta=10.0)
    torch.manual_seed(3)
    alpha = torch.stack([torch.rand(1)[0] * 2 * torch.pi for _ in range(H)]).double()
    close("init_random_2d_freqs", init_freqs(dh, alpha, 10.0), rv, 1e-6)
    freqs = torch.randn(2, H, dh // 2, generator=g)
    mc = mixed_cis(freqs, t_x, t_y)
    fl = freqs.tolist()

    def mixed_angle(h, t, p):
        r, c = rc[t].tolist()
        return c * fl[0][h][p] + r * fl[1][h][p]
    close("mixed rotation vs per element", rotate(q, mc), bf_rotate(q, mixed_angle), 1e-12)
    rq, _ = rv_apply_rotary_emb(q, k, rv_compute_mixed_cis(freqs.reshape(2, 1, -1).float(), rx, ry, H)[0])
    close("mixed rotation vs rope-vit (float32)", rotate(q, mc), rq, 1e-4)
    # a zero-angle mixed init is the axial encoding with the same base
    close("alpha = 0 is axial", mixed_cis(init_freqs(dh, torch.zeros(H), 100.0), t_x, t_y),
          axial_cis(dh, t_x, t_y, 100.0).expand(H, -1, -1), 1e-12)
    # autograd vs a central difference along a random direction
    for pos in ("rope-2d", "rope-mixed"):
        t = {"q": q.clone().requires_grad_(), "k": k[:, :, :7].clone().requires_grad_(),
             "q_coords": rc, "k_coords": cells(rows, cols, 7, g),
             "wq": torch.randn(q.shape, generator=g), "wk": torch.randn(2, H, 7, dh, generator=g)}
        names = ["q", "k"]
        if pos == "rope-mixed":
            t["freqs"] = freqs.clone().requires_grad_()
            names.append("freqs")
        _, _, loss = forward(pos, t, dh, 100.0)
        grads = torch.autograd.grad(loss, [t[n] for n in names])
        dirs = [torch.randn(t[n].shape, generator=g) for n in names]
        an = sum((gr * d).sum() for gr, d in zip(grads, dirs)).item()
        eps = 1e-6
        with torch.no_grad():
            lp = forward(pos, {**t, **{n: t[n] + eps * d for n, d in zip(names, dirs)}}, dh, 100.0)[2]
            lm = forward(pos, {**t, **{n: t[n] - eps * d for n, d in zip(names, dirs)}}, dh, 100.0)[2]
        fd = ((lp - lm) / (2 * eps)).item()
        assert abs(fd - an) <= 1e-6 * (1 + abs(an)), f"{pos}: finite difference {fd}, autograd {an}"


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

# (case, pos, rows, cols, B, H, dh, base, TQ, TK (0: the raster grid, self-attention), freqs)
CASES = [
    ("axial", "rope-2d", 3, 4, 2, 2, 8, 100.0, 0, 0, None),
    ("axial-cross", "rope-2d", 4, 5, 2, 3, 12, 30.0, 6, 9, None),
    ("mixed", "rope-mixed", 3, 4, 2, 2, 8, 10.0, 0, 0, "init"),
    ("mixed-cross", "rope-mixed", 4, 5, 2, 3, 12, 10.0, 6, 9, "random"),
]


def generate(out_dir):
    """Self-checks, then writes every 2d-rope-* case into out_dir. Returns [(path, size)]."""
    self_check()
    written = []
    for i, (case, pos, rows, cols, B, H, dh, base, TQ, TK, fr) in enumerate(CASES):
        g = torch.Generator().manual_seed(3000 + i)
        if TQ == 0:
            qc = kc = raster(rows, cols)
        else:
            qc, kc = cells(rows, cols, TQ, g), cells(rows, cols, TK, g)
        tq, tk = qc.shape[0], kc.shape[0]
        t = {"q": torch.randn(B, H, tq, dh, generator=g), "k": torch.randn(B, H, tk, dh, generator=g),
             "wq": torch.randn(B, H, tq, dh, generator=g), "wk": torch.randn(B, H, tk, dh, generator=g),
             "q_coords": qc, "k_coords": kc}
        names = ["q", "k"]
        if fr == "init":
            t["alpha"] = torch.rand(H, generator=g) * 2 * math.pi
            t["freqs"] = init_freqs(dh, t["alpha"], base)
        elif fr == "random":
            t["freqs"] = torch.randn(2, H, dh // 2, generator=g) * 0.5
        if fr:
            names.append("freqs")
        for n in names:
            t[n] = t[n].clone().requires_grad_()
        qo, ko, loss = forward(pos, t, dh, base)
        grads = torch.autograd.grad(loss, [t[n] for n in names])
        out = {n: v.detach() for n, v in t.items()}
        out["q_out"], out["k_out"] = qo.detach(), ko.detach()
        for n, gr in zip(names, grads):
            out["grad/" + n] = gr
        meta = {"case": case, "pos": pos, "B": B, "H": H, "dh": dh, "rows": rows, "cols": cols, "base": repr(base)}
        path = os.path.join(out_dir, f"2d-rope-{case}.safetensors")
        written.append(write_case(path, out, meta))
    # the init of rope-mixed alone: angles -> freqs
    g = torch.Generator().manual_seed(3100)
    H, dh, base = 4, 12, 10.0
    alpha = torch.rand(H, generator=g) * 2 * math.pi
    path = os.path.join(out_dir, "2d-rope-mixed-init.safetensors")
    written.append(write_case(path, {"alpha": alpha, "freqs": init_freqs(dh, alpha, base)},
                              {"case": "mixed-init", "pos": "rope-mixed", "H": H, "dh": dh, "base": repr(base)}))
    return written


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
