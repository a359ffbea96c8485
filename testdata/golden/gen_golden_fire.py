#!/usr/bin/python3
"""Golden vectors for the MLP score biases of package posenc: fire and dpb (issue #15).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_fire.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_fire.py --check-only

gen_golden.py calls ``generate(out_dir)``, which runs the self-check and writes one
``fire-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run).

Each file holds one attention call's score bias on a span (query i at q_start+i, key j at
k_start+j):

* the parameters under their Go names (``fire_c`` [1], ``fire_l_mult`` [1], ``fire_w<l>``
  [in, out], ``fire_b<l>`` [out]; ``dpb_w<l>``, ``dpb_b<l>``, ``dpb_ln<l>_g``, ``dpb_ln<l>_b``),
  random so that nothing is special;
* ``bias`` [H, Tq, Tk]: the score bias (ScoreBias);
* ``R`` [H, Tq, Tk] and ``grad_<param>`` for every parameter: the gradient of the linear
  functional ``L = sum(bias * R)`` by autograd (checked against a directional finite
  difference).

Metadata: ``pos`` (encoding name), ``heads``, ``q_start``, ``tq``, ``k_start``, ``tk`` and the
options (``fire_width``, ``fire_init_c``, ``fire_init_l``; ``dpb_width``, ``dpb_depth``,
``dpb_log_distance``, ``dpb_norm``).

Conventions (the Go encodings must follow them)
-----------------------------------------------
fire (Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
Transformers", appendix pseudo-code, class FIRE)::

    psi(x) = log(|c x| + 1);  L = |l_mult * init_L|
    bias[h, i, j] = mlp(psi(p_i - k_j) / (psi(max(p_i, L)) + 1e-6))[h]
    mlp(x) = relu(x W0 + b0) W1 + b1

with p_i, k_j the absolute positions (the pseudo-code's positions[:, None] -
positions[None, :] for q_start = k_start = 0). The self-check compares with a transcription of
the pseudo-code's forward (nn.Sequential of nn.Linear, ReLU, nn.Linear) at q_start = k_start = 0.

dpb (x-transformers' DynamicPositionBias; CrossFormer, Wang et al. 2021)::

    r = p_i - k_j;  x = sign(r) log(|r| + 1) if log_distance else r
    h = silu(norm(x W0 + b0)); h = silu(norm(h Wl + bl)) for l = 1..depth-1
    bias[h, i, j] = (h W_depth + b_depth)[h]

norm is a LayerNorm (eps 1e-5) with gain and shift, or the identity. The self-check compares with
a transcription of x-transformers' forward (i == j, q_start = k_start = 0).
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)

FIRE_EPS = 1e-6


# ---------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------

def positions(q_start, tq, k_start, tk):
    return (torch.arange(q_start, q_start + tq, dtype=torch.float64),
            torch.arange(k_start, k_start + tk, dtype=torch.float64))


def mlp(x, params, name, depth, act, norm=False):
    """x [..., 1] through depth hidden layers and an output layer; weights [in, out]."""
    for l in range(depth + 1):
        x = x @ params[f"{name}_w{l}"] + params[f"{name}_b{l}"]
        if l == depth:
            break
        if norm:
            x = F.layer_norm(x, x.shape[-1:], params[f"{name}_ln{l}_g"], params[f"{name}_ln{l}_b"], 1e-5)
        x = act(x)
    return x


def fire_bias(params, q_start, tq, k_start, tk, init_l):
    qp, kp = positions(q_start, tq, k_start, tk)
    c = params["fire_c"]
    rel = qp[:, None] - kp[None, :]
    thr = torch.abs(params["fire_l_mult"] * init_l)
    norm = torch.max(qp, thr)[:, None]
    num = torch.log(torch.abs(c * rel) + 1)
    den = torch.log(torch.abs(c * norm) + 1) + FIRE_EPS
    out = mlp((num / den)[..., None], params, "fire", 1, torch.relu)  # Tq, Tk, H
    return out.permute(2, 0, 1)


def dpb_bias(params, q_start, tq, k_start, tk, depth, log_distance, norm):
    qp, kp = positions(q_start, tq, k_start, tk)
    rel = qp[:, None] - kp[None, :]
    if log_distance:
        rel = torch.sign(rel) * torch.log(rel.abs() + 1)
    out = mlp(rel[..., None], params, "dpb", depth, F.silu, norm)
    return out.permute(2, 0, 1)


# Transcriptions of the references' own modules (self-check only).

class PaperFIRE(torch.nn.Module):
    """The FIRE class of the paper's appendix pseudo-code."""

    def __init__(self, num_heads=12, mlp_width=32, init_c=0.1, init_L=512., eps=1e-6):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(1, mlp_width), torch.nn.ReLU(),
                                       torch.nn.Linear(mlp_width, num_heads))
        self.c = torch.nn.Parameter(torch.tensor(init_c))
        self.init_L = torch.nn.Parameter(torch.tensor(init_L), requires_grad=False)
        self.L_multiplier = torch.nn.Parameter(torch.tensor(1.0))
        self.eps = eps

    def forward(self, x):
        seq_length = x.size(2)
        positions = torch.arange(seq_length, dtype=torch.float64)
        rel_distance = positions[:, None] - positions[None, :]
        threshold = torch.abs(self.L_multiplier * self.init_L)
        pos_normalizer = torch.max(positions, threshold)
        pos_normalizer = pos_normalizer[:, None]
        rel_distance = torch.log(torch.abs(self.c * rel_distance) + 1)
        pos_normalizer = torch.log(torch.abs(self.c * pos_normalizer) + 1) + self.eps
        normalized_distance = rel_distance / pos_normalizer
        fire_bias = self.mlp(normalized_distance.unsqueeze(-1))
        fire_bias = fire_bias.unsqueeze(0).permute(0, 3, 1, 2)
        return x + fire_bias


class XDynamicPositionBias(torch.nn.Module):
    """x-transformers' DynamicPositionBias."""

    def __init__(self, dim, *, heads, depth, log_distance=False, norm=False):
        super().__init__()
        self.log_distance = log_distance
        self.mlp = torch.nn.ModuleList([])
        self.mlp.append(torch.nn.Sequential(torch.nn.Linear(1, dim),
                                            torch.nn.LayerNorm(dim) if norm else torch.nn.Identity(),
                                            torch.nn.SiLU()))
        for _ in range(depth - 1):
            self.mlp.append(torch.nn.Sequential(torch.nn.Linear(dim, dim),
                                                torch.nn.LayerNorm(dim) if norm else torch.nn.Identity(),
                                                torch.nn.SiLU()))
        self.mlp.append(torch.nn.Linear(dim, heads))

    def forward(self, i, j):
        assert i == j
        n = j
        seq_arange = torch.arange(n)
        context_arange = torch.arange(n)
        indices = seq_arange[:, None] - context_arange[None, :]
        indices += (n - 1)
        pos = torch.arange(-n + 1, n).double()
        pos = pos[:, None]
        if self.log_distance:
            pos = torch.sign(pos) * torch.log(pos.abs() + 1)
        for layer in self.mlp:
            pos = layer(pos)
        bias = pos[indices]
        return bias.permute(2, 0, 1)


def linears(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]


def norms(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.LayerNorm)]


def self_check():
    gen = torch.Generator().manual_seed(7)
    # FIRE: the pseudo-code's module with random weights and parameters, T = 9, a threshold
    # that some positions pass.
    for init_l, c, lm in [(512.0, 0.1, 1.0), (4.0, 0.37, -0.83), (2.5, -0.2, 1.3)]:
        ref = PaperFIRE(num_heads=3, mlp_width=5, init_c=c, init_L=init_l)
        with torch.no_grad():
            ref.L_multiplier.fill_(lm)
            for m in linears(ref):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
        lin = linears(ref)
        params = {"fire_c": torch.tensor([c]), "fire_l_mult": torch.tensor([lm])}
        for l, m in enumerate(lin):
            params[f"fire_w{l}"] = m.weight.detach().t()
            params[f"fire_b{l}"] = m.bias.detach()
        want = ref(torch.zeros(1, 3, 9, 9))[0].detach()
        got = fire_bias(params, 0, 9, 0, 9, init_l)
        assert torch.allclose(got, want, atol=1e-12, rtol=0), (init_l, c, lm)
    # DPB: x-transformers' module, every option.
    for depth, log_distance, norm in [(1, False, False), (2, True, False), (3, False, True), (2, True, True)]:
        ref = XDynamicPositionBias(4, heads=3, depth=depth, log_distance=log_distance, norm=norm)
        with torch.no_grad():
            for m in linears(ref) + norms(ref):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
        params = {}
        for l, m in enumerate(linears(ref)):
            params[f"dpb_w{l}"] = m.weight.detach().t()
            params[f"dpb_b{l}"] = m.bias.detach()
        for l, m in enumerate(norms(ref)):
            params[f"dpb_ln{l}_g"] = m.weight.detach()
            params[f"dpb_ln{l}_b"] = m.bias.detach()
        want = ref(7, 7).detach()
        got = dpb_bias(params, 0, 7, 0, 7, depth, log_distance, norm)
        assert torch.allclose(got, want, atol=1e-12, rtol=0), (depth, log_distance, norm)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def case_specs():
    return [
        # FIRE: self-attention with a threshold inside the span (L = 3.3).
        ("fire", dict(pos="fire", heads=3, q_start=0, tq=7, k_start=0, tk=7,
                      fire_width=5, fire_init_c=0.1, fire_init_l=3.0, c=0.45, l_mult=1.1)),
        # FIRE: a segment attending to a memory (k_start < q_start), c < 0 (|c| is used).
        ("fire-cross", dict(pos="fire", heads=2, q_start=5, tq=3, k_start=1, tk=7,
                            fire_width=4, fire_init_c=0.1, fire_init_l=4.0, c=-0.3, l_mult=1.6)),
        # FIRE with the paper's defaults (L = 512 above every position).
        ("fire-default", dict(pos="fire", heads=2, q_start=0, tq=5, k_start=0, tk=5,
                              fire_width=32, fire_init_c=0.1, fire_init_l=512.0, c=0.1, l_mult=1.0)),
        ("dpb", dict(pos="dpb", heads=3, q_start=0, tq=6, k_start=0, tk=6,
                     dpb_width=4, dpb_depth=2, dpb_log_distance=False, dpb_norm=False)),
        ("dpb-log-norm", dict(pos="dpb", heads=2, q_start=4, tq=3, k_start=0, tk=6,
                              dpb_width=5, dpb_depth=1, dpb_log_distance=True, dpb_norm=True)),
        ("dpb-deep-cross", dict(pos="dpb", heads=2, q_start=2, tq=5, k_start=3, tk=4,
                                dpb_width=3, dpb_depth=3, dpb_log_distance=True, dpb_norm=False)),
    ]


def build_case(name, c, seed):
    gen = torch.Generator().manual_seed(seed)
    h, tq, tk = c["heads"], c["tq"], c["tk"]
    params = {}
    if c["pos"] == "fire":
        w = c["fire_width"]
        params["fire_c"] = torch.tensor([c["c"]])
        params["fire_l_mult"] = torch.tensor([c["l_mult"]])
        dims = [1, w, h]
        mname, depth = "fire", 1
    else:
        w, depth = c["dpb_width"], c["dpb_depth"]
        dims = [1] + [w] * depth + [h]
        mname = "dpb"
    for l in range(len(dims) - 1):
        params[f"{mname}_w{l}"] = torch.randn(dims[l], dims[l + 1], generator=gen)
        params[f"{mname}_b{l}"] = torch.randn(dims[l + 1], generator=gen)
        if mname == "dpb" and c["dpb_norm"] and l < depth:
            params[f"dpb_ln{l}_g"] = 1 + 0.3 * torch.randn(w, generator=gen)
            params[f"dpb_ln{l}_b"] = 0.3 * torch.randn(w, generator=gen)
    R = torch.randn(h, tq, tk, generator=gen)
    names = sorted(params)

    def loss_of(*vals):
        p = dict(zip(names, vals))
        if c["pos"] == "fire":
            b = fire_bias(p, c["q_start"], tq, c["k_start"], tk, c["fire_init_l"])
        else:
            b = dpb_bias(p, c["q_start"], tq, c["k_start"], tk, depth, c["dpb_log_distance"], c["dpb_norm"])
        return (b * R).sum(), b

    vals = [params[n].clone().requires_grad_(True) for n in names]
    loss, bias = loss_of(*vals)
    grads = torch.autograd.grad(loss, vals)
    check_directional_fd(loss_of, [v.detach() for v in vals], grads, 1e-6, name)
    tensors = {"bias": bias.detach(), "R": R}
    for n, v, g in zip(names, vals, grads):
        tensors[n] = v.detach()
        tensors["grad_" + n] = g
    meta = {k: v for k, v in c.items() if k not in ("c", "l_mult")}
    return tensors, meta


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    out = []
    for n, (name, c) in enumerate(case_specs()):
        tensors, meta = build_case(name, c, 1500 + n)
        path = os.path.join(out_dir, f"fire-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
