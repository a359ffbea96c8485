#!/usr/bin/python3
"""Golden vectors for cope, contextual position encoding (package posenc, issue #15).

Run with Debian's python (torch 1.13), from the repository root::

    /usr/bin/python3 testdata/golden/gen_golden_cope.py [--out DIR] [--check-only]

``generate(out_dir)`` (called by gen_golden.py) runs the self-check below, then writes
``cope-<case>.safetensors`` files and returns ``[(path, size), ...]``. Everything is float64
and seeded, so the bytes are the same on every run.

The computation of every case is the score-term hook of one causal attention call
(posenc.ScoreTermer.ScoreTerms)::

    q [B, H, TQ, dh], k [B, H, TK, dh]     random N(0, 1)
    emb [dh, npos]                          the layer's table "block0/attn/cope_emb", random N(0, 1)
    query i at position q_start + i, key j at k_start + j; key j visible iff its position <= i's
    terms = sqrt(dh) * out   (out with divide = 1)
    loss  = sum(terms * w),  w random N(0, 1)

Files hold q, k, emb, w, terms, grad/q, grad/k, grad/emb. Metadata (strings): case, B, H, dh,
q_start, tq, k_start, tk, npos, divide ("0" or "1").

Reference, written from the paper (Golovneva, Wang, Weston, Sukhbaatar 2024, "Contextual
Position Encoding: Learning to Count What's Important", arXiv 2405.18719, appendix code) and
checked against the authors' code (facebookresearch/RAM, projects/cope/src/cope/
context_position.py, which multiplies the gates by the 0/1 attention mask instead of adding
-inf to the logits: the same gates)::

    attn_logits = q k^T / sqrt(dh), -inf where the key is not visible
    gates = sigmoid(attn_logits)
    pos = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)
    logits_int = q @ emb
    w = pos - floor(pos)
    out = logits_int.gather(-1, ceil(pos)) * w + logits_int.gather(-1, floor(pos)) * (1 - w)

The attention adds terms before multiplying by 1/sqrt(dh), so the scores get the paper's out
after the division (appendix code) or, with divide (the authors' code's default, without
--cope-nodiv), out / sqrt(dh). The self-check compares out with an element-by-element loop
(p_ij = sum of the visible gates g_ik for k = j..TK-1) and the gradients with a directional
finite difference.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)


def visible(c):
    """[TQ, TK] bool: key j visible from query i."""
    qp = torch.arange(c["tq"]) + c["q_start"]
    kp = torch.arange(c["tk"]) + c["k_start"]
    return kp[None, :] <= qp[:, None]


def cope_out(c, q, k, emb):
    """The paper's out [B, H, TQ, TK]."""
    dh = q.shape[-1]
    logits = q @ k.transpose(-1, -2) / math.sqrt(dh)
    logits = logits.masked_fill(~visible(c), float("-inf"))
    gates = torch.sigmoid(logits)
    pos = gates.flip(-1).cumsum(dim=-1).flip(-1)
    pos = pos.clamp(max=c["npos"] - 1)
    pos_ceil = pos.ceil().long()
    pos_floor = pos.floor().long()
    logits_int = q @ emb
    w = pos - pos_floor
    return logits_int.gather(-1, pos_ceil) * w + logits_int.gather(-1, pos_floor) * (1 - w)


def forward(c, q, k, emb):
    """The hook's terms."""
    out = cope_out(c, q, k, emb)
    if c["divide"]:
        return out
    return out * math.sqrt(q.shape[-1])


def loop_out(c, q, k, emb):
    """out element by element."""
    B, H, tq, dh = q.shape
    tk = k.shape[2]
    vis = visible(c)
    res = torch.zeros(B, H, tq, tk)
    for b in range(B):
        for h in range(H):
            for i in range(tq):
                z = [float(q[b, h, i] @ emb[:, n]) for n in range(c["npos"])]
                for j in range(tk):
                    p = 0.0
                    for kk in range(j, tk):
                        if vis[i, kk]:
                            p += 1 / (1 + math.exp(-float(q[b, h, i] @ k[b, h, kk]) / math.sqrt(dh)))
                    p = min(p, c["npos"] - 1)
                    lo, hi = math.floor(p), math.ceil(p)
                    res[b, h, i, j] = z[hi] * (p - lo) + z[lo] * (1 - (p - lo))
    return res


BASE = {"B": 2, "H": 2, "dh": 4, "q_start": 0, "tq": 6, "k_start": 0, "tk": 6, "npos": 64, "divide": 0}

# (case, overrides)
CASES = [
    ("self", {}),
    ("clamp", {"tq": 7, "tk": 7, "npos": 3}),
    ("memory", {"q_start": 5, "tq": 3, "k_start": 1, "tk": 7, "npos": 8}),
    ("divide", {"dh": 8, "H": 1, "tq": 5, "tk": 5, "npos": 4, "divide": 1}),
]


def case_dict(ov):
    c = dict(BASE)
    c.update(ov)
    return c


def inputs(c, seed):
    g = torch.Generator().manual_seed(seed)
    B, H, dh, tq, tk = c["B"], c["H"], c["dh"], c["tq"], c["tk"]
    return {"q": torch.randn(B, H, tq, dh, generator=g), "k": torch.randn(B, H, tk, dh, generator=g),
            "emb": torch.randn(dh, c["npos"], generator=g), "w": torch.randn(B, H, tq, tk, generator=g)}


def self_check():
    for i, (case, ov) in enumerate(CASES):
        c = case_dict(ov)
        t = inputs(c, 6000 + i)
        got = cope_out(c, t["q"], t["k"], t["emb"])
        want = loop_out(c, t["q"], t["k"], t["emb"])
        assert torch.allclose(got, want, atol=1e-12, rtol=1e-12), (case, (got - want).abs().max())
        vals = [t["q"].clone().requires_grad_(), t["k"].clone().requires_grad_(), t["emb"].clone().requires_grad_()]

        def loss_of(q, k, emb):
            return ((forward(c, q, k, emb) * t["w"]).sum(),)

        grads = torch.autograd.grad(loss_of(*vals)[0], vals)
        check_directional_fd(loss_of, [v.detach() for v in vals], grads, 1e-6, case)


def generate(out_dir):
    """Self-checks, then writes every cope-* case into out_dir. Returns [(path, size)]."""
    self_check()
    written = []
    for i, (case, ov) in enumerate(CASES):
        c = case_dict(ov)
        t = inputs(c, 6000 + i)
        q, k, emb = (t[n].clone().requires_grad_() for n in ("q", "k", "emb"))
        terms = forward(c, q, k, emb)
        loss = (terms * t["w"]).sum()
        gq, gk, ge = torch.autograd.grad(loss, [q, k, emb])
        out = dict(t)
        out.update({"terms": terms.detach(), "grad/q": gq, "grad/k": gk, "grad/emb": ge})
        meta = dict(c)
        meta["case"] = case
        path = os.path.join(out_dir, f"cope-{case}.safetensors")
        written.append(write_case(path, out, meta))
    return written


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
