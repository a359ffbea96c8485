#!/usr/bin/python3
"""Golden vectors for KERPLE's and Sandwich's score biases of package posenc: kerple-log, kerple-power, sandwich.

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_kerple.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_kerple.py --check-only

gen_golden.py calls ``generate(out_dir)``, which runs the self-check and writes one
``kerple-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run); the
Sandwich cases are ``kerple-sandwich-<case>.safetensors``.

Each file holds the hook's computation for one attention call on line positions:

* ``q_pos`` [Tq], ``k_pos`` [Tk] (int64): the positions QStart+i and KStart+j.
* ``r1``, ``r2`` [H]: the parameters (stored values, before the clamp).
* ``bias`` [H, Tq, Tk]: the score bias (ScoreBias).
* ``R`` [H, Tq, Tk], ``grad_r1``, ``grad_r2`` [H]: the gradients of the linear functional
  ``L = sum(bias * R)`` w.r.t. r1 and r2, by autograd.

Metadata: ``pos`` (encoding name), ``heads``, ``q_start``, ``k_start``, ``eps``.

Conventions (the Go encodings must follow them)
-----------------------------------------------
From Chi et al. 2022 (KERPLE) and their code (github.com/chijames/KERPLE,
megatron/mpu/layers.py, ParallelKerpleLog and ParallelKerplePower)::

    log:    bias[h, i, j] = -r1[h] * log(1 + r2[h] * |k_pos[j] - q_pos[i]|)   (bias_p = r1, bias_a = r2)
    power:  bias[h, i, j] = -r1[h] * |k_pos[j] - q_pos[i]| ** r2[h]           (bias_a = r1, bias_p = r2)

with r1, r2 clamped to >= eps (0.01) and the power's exponent r2 to <= 2. The paper's code
clamps the stored values in place (``.data.clamp``) before the forward pass and computes the
distance of the causal lower triangle (``torch.tril`` of i - j); the encoding uses |rel| for
every pair (the upper triangle is masked in causal attention) and clamps in the graph
(``torch.clamp``: gradient 0 for a stored value outside the range). The self-check compares
the two on a causal square span with parameters in range (where they agree, gradients
included). The cases have parameters in range but for ``power-clamped``, which pins the
clamp convention: its out-of-range parameters get gradient 0.

Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via the Lens of
Receptive Field Analysis", appendix construction): the inner product of the sinusoidal
embeddings of the query's and the key's positions, divided per head by 8(h+1)/H::

    p(t) = cat(sin(t * w), cos(t * w)),  w_k = 10000 ** (-2k / d_bar),  k = 0 .. d_bar/2 - 1
    bias[h, i, j] = p(q_pos[i]) . p(k_pos[j]) / (8 (h+1) / H)

A Sandwich file has ``q_pos``, ``k_pos`` and ``bias`` (no parameters, so no gradients) and the
metadata ``pos`` = sandwich, ``heads``, ``q_start``, ``k_start``, ``sandwich_dim``. The
self-check compares the inner products with the sum of cosines of the distance.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)

EPS = 0.01


# ---------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------

def kerple_bias(kernel, r1, r2, q_pos, k_pos, eps=EPS):
    """The bias [H, Tq, Tk] of the encoding (see the module doc)."""
    d = (k_pos[None, :] - q_pos[:, None]).abs().to(torch.float64)  # [Tq, Tk]
    a = r1.clamp(min=eps)[:, None, None]
    if kernel == "log":
        b = r2.clamp(min=eps)[:, None, None]
        return -a * torch.log(1 + b * d)
    b = r2.clamp(min=eps, max=2)[:, None, None]
    return -a * d.pow(b)


def paper_forward(kernel, bias_p, bias_a, seq_len, eps=EPS):
    """A transcription of the forward pass of ParallelKerpleLog / ParallelKerplePower
    (kernel 'power' with the learnable bias_p and bias_a, no weight kernel) on x = 0, for a
    square causal span; bias_p, bias_a are [H, 1, 1]. Returns the bias [H, T, T] (its lower
    triangle is the paper's; the upper one is masked)."""
    diff = torch.tril(
        torch.arange(seq_len).view(seq_len, 1).repeat(1, seq_len)
        + torch.arange(0, -seq_len, -1)
    ).to(torch.float64)
    bias_p.data = bias_p.data.clamp(min=eps) if kernel == "log" else bias_p.data.clamp(min=eps, max=2)
    bias_a.data = bias_a.data.clamp(min=eps)
    if kernel == "log":
        return -bias_p * torch.log(1 + bias_a * diff)
    return -(diff.pow(bias_p)) * bias_a


def sandwich_bias(heads, d_bar, q_pos, k_pos):
    """The paper's construction: inner products of sinusoidal embeddings over the ratios."""
    w = 10000 ** (-2 * torch.arange(d_bar // 2, dtype=torch.float64) / d_bar)

    def emb(pos):
        a = pos.to(torch.float64)[:, None] * w[None, :]
        return torch.cat([a.sin(), a.cos()], dim=-1)

    s = emb(q_pos) @ emb(k_pos).T  # [Tq, Tk]
    ratio = torch.arange(1, heads + 1, dtype=torch.float64) * 8 / heads
    return s[None] / ratio[:, None, None]


def self_check():
    q, k = torch.arange(4, 9), torch.arange(0, 11)
    w = 10000 ** (-2 * torch.arange(64, dtype=torch.float64) / 128)
    cos_sum = torch.cos((k[None, :] - q[:, None]).to(torch.float64)[..., None] * w).sum(-1)
    ours = sandwich_bias(3, 128, q, k)
    for h in range(3):
        assert torch.allclose(ours[h], cos_sum / (8 * (h + 1) / 3), atol=1e-11, rtol=0), h
    g = torch.Generator().manual_seed(7)
    for kernel in ("log", "power"):
        h, t = 3, 7
        r1 = (torch.rand(h, generator=g) + 0.1).requires_grad_()
        r2 = (torch.rand(h, generator=g) * 1.5 + 0.1).requires_grad_()
        pos = torch.arange(t)
        ours = kerple_bias(kernel, r1, r2, pos, pos)
        if kernel == "log":
            bias_p, bias_a = r1.detach().clone()[:, None, None], r2.detach().clone()[:, None, None]
        else:
            bias_p, bias_a = r2.detach().clone()[:, None, None], r1.detach().clone()[:, None, None]
        bias_p.requires_grad_()
        bias_a.requires_grad_()
        paper = paper_forward(kernel, bias_p, bias_a, t)
        low = torch.tril(torch.ones(t, t, dtype=torch.bool))
        assert torch.allclose(ours[:, low], paper[:, low], atol=1e-12, rtol=0), kernel
        w = torch.randn(h, t, t, generator=g) * low
        (ours * w).sum().backward()
        (paper * w).sum().backward()
        g1, g2 = (bias_p.grad, bias_a.grad) if kernel == "log" else (bias_a.grad, bias_p.grad)
        assert torch.allclose(r1.grad, g1.view(-1), atol=1e-12), kernel
        assert torch.allclose(r2.grad, g2.view(-1), atol=1e-12), kernel
    print("kerple self-check: the encoding's bias and gradients are the paper's on a causal span;"
          " sandwich's inner products are its sums of cosines")


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def case_specs():
    # name -> (kernel, heads, q_start, tq, k_start, tk, out_of_range)
    return [
        ("log-self", ("log", 3, 0, 6, 0, 6, False)),
        ("log-cross", ("log", 2, 5, 3, 0, 9, False)),
        ("power-self", ("power", 3, 0, 6, 0, 6, False)),
        ("power-memory", ("power", 4, 8, 4, 2, 10, False)),
        ("power-clamped", ("power", 4, 0, 5, 0, 5, True)),
    ]


def build_case(name, c, seed):
    kernel, h, qs, tq, ks, tk, oor = c
    g = torch.Generator().manual_seed(seed)
    # In range, away from the bounds: r1 in [0.2, 2.2], r2 in [0.1, 1.1] (log) or [0.2, 1.9] (power).
    r1 = torch.rand(h, generator=g) * 2 + 0.2
    r2 = torch.rand(h, generator=g) + 0.1 if kernel == "log" else torch.rand(h, generator=g) * 1.7 + 0.2
    if oor:
        r1[0], r2[1], r2[2] = -0.3, 2.5, -0.2
    r1.requires_grad_()
    r2.requires_grad_()
    q_pos, k_pos = torch.arange(qs, qs + tq), torch.arange(ks, ks + tk)
    bias = kerple_bias(kernel, r1, r2, q_pos, k_pos)
    R = torch.randn(h, tq, tk, generator=g)
    (bias * R).sum().backward()
    if not oor:
        def loss_of(a, b):
            return ((kerple_bias(kernel, a, b, q_pos, k_pos) * R).sum(),)
        check_directional_fd(loss_of, [r1.detach(), r2.detach()], [r1.grad, r2.grad], 1e-6, name)
    else:
        assert r1.grad[0] == 0 and r2.grad[1] == 0 and r2.grad[2] == 0, name
    tensors = {"q_pos": q_pos, "k_pos": k_pos, "r1": r1.detach(), "r2": r2.detach(), "bias": bias.detach(),
               "R": R, "grad_r1": r1.grad, "grad_r2": r2.grad}
    meta = {"pos": "kerple-" + kernel, "heads": h, "q_start": qs, "k_start": ks, "eps": EPS}
    return tensors, meta


def sandwich_specs():
    # name -> (heads, d_bar, q_start, tq, k_start, tk)
    return [
        ("self", (4, 128, 0, 7, 0, 7)),
        ("cross", (3, 16, 5, 3, 0, 9)),
        ("memory", (6, 32, 40, 4, 30, 14)),
    ]


def build_sandwich_case(c):
    heads, d_bar, qs, tq, ks, tk = c
    q_pos, k_pos = torch.arange(qs, qs + tq), torch.arange(ks, ks + tk)
    tensors = {"q_pos": q_pos, "k_pos": k_pos, "bias": sandwich_bias(heads, d_bar, q_pos, k_pos)}
    meta = {"pos": "sandwich", "heads": heads, "q_start": qs, "k_start": ks, "sandwich_dim": d_bar}
    return tensors, meta


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    out = []
    for n, (name, c) in enumerate(case_specs()):
        tensors, meta = build_case(name, c, 300 + n)
        path = os.path.join(out_dir, f"kerple-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    for name, c in sandwich_specs():
        tensors, meta = build_sandwich_case(c)
        path = os.path.join(out_dir, f"kerple-sandwich-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
