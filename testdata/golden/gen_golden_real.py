#!/usr/bin/python3
"""Golden vectors for the encodings of package posenc on real-valued positions (issue #15).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_real.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_real.py --check-only

gen_golden.py may call ``generate(out_dir)``, which runs the self-check and writes one
``real-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run).

Every case is one attention call whose queries and keys sit at real times (posenc.NewReal):
``q_times`` [B, Tq] and ``k_times`` [B, Tk] (B = 1: shared by the batch), with metadata ``pos``
(encoding name), ``heads``, ``batch``, ``tq``, ``tk``, ``causal`` and the encoding's options.

Score biases (alibi, kerple-log, kerple-power, fire, dpb): ``bias`` [B, H, Tq, Tk] for B > 1,
[H, Tq, Tk] for B = 1; ``R`` of the same shape; the parameters under their Go names and
``grad_<param>``, the gradient of ``L = sum(bias * R)`` by autograd (checked against a
directional finite difference). The times are host data: no gradient flows to them.

RoPE (rope, rope-pi): inputs ``q`` [B', H, Tq, dh] and ``k`` [B', H, Tk, dh] (B' = 2 when the
times are shared), the rotated ``q_rot``, ``k_rot``, ``Rq``, ``Rk`` and ``grad_q``, ``grad_k``, the
gradients of ``L = sum(q_rot * Rq) + sum(k_rot * Rk)``.

Conventions, written from the papers with the time t in place of the integer position
(d = t_k - t_q, key minus query)
-----------------------------------------------------------------------------------------
alibi (Press et al. 2022), slopes m_h of the paper's get_slopes::

    causal:         bias[b, h, i, j] = -m_h (t_q[b, i] - t_k[b, j])
    bidirectional:  bias[b, h, i, j] = -m_h |t_q[b, i] - t_k[b, j]|

kerple (Chi et al. 2022), r1, r2 clamped to >= eps, the power's r2 to <= 2::

    log:    bias = -r1_h log(1 + r2_h |d|)        power:  bias = -r1_h |d| ** r2_h

fire (Li et al. 2023, appendix pseudo-code), with the query's time for its position::

    bias = mlp(psi(|d|) / (psi(max(t_q, L)) + 1e-6)),  psi(x) = log(|c| x + 1),  L = |l_mult init_L|

dpb (x-transformers' DynamicPositionBias) of r = t_q - t_k (query minus key)::

    x = sign(r) log(|r| + 1) if log_distance else r;  bias = mlp(x)

rope (Su et al. 2021): theta_p = base ** (-2p / rot), p < rot/2, rot = the even floor of
fraction * dh; query i of example b is rotated by t_q[b, i] / div * theta_p, key j by
t_k[b, j] / div * theta_p (div = the rope-pi scale, else 1); pairs (p, p + rot/2) ("half") or
(2p, 2p + 1) ("interleaved"); dims rot.. pass unchanged.

The self-check compares each reference at integer times 0..T-1 with the line-position
references of gen_golden.py / gen_golden_fire.py / gen_golden_kerple.py (alibi slopes, FIRE's
and dpb's biases, KERPLE's formula), and RoPE with a rotation matrix built entry by entry.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import alibi_get_slopes, check_directional_fd, module_main, write_case  # noqa: E402
import gen_golden_fire  # noqa: E402

torch.set_default_dtype(torch.float64)

FIRE_EPS = 1e-6


# ---------------------------------------------------------------------------------------
# References. qt [B, Tq], kt [B, Tk]; biases [B, H, Tq, Tk].
# ---------------------------------------------------------------------------------------

def alibi_bias(qt, kt, heads, causal):
    m = torch.tensor(alibi_get_slopes(heads))[None, :, None, None]
    d = qt[:, None, :, None] - kt[:, None, None, :]
    if not causal:
        d = d.abs()
    return -m * d


def kerple_bias(params, qt, kt, kernel, eps):
    d = (kt[:, None, None, :] - qt[:, None, :, None]).abs()
    r1 = torch.clamp(params["r1"], min=eps)[None, :, None, None]
    if kernel == "log":
        r2 = torch.clamp(params["r2"], min=eps)[None, :, None, None]
        return -r1 * torch.log(1 + r2 * d)
    r2 = torch.clamp(params["r2"], min=eps, max=2.0)[None, :, None, None]
    return -r1 * d ** r2


def fire_bias(params, qt, kt, init_l):
    c = params["fire_c"]
    rel = qt[:, :, None] - kt[:, None, :]                                      # B, Tq, Tk
    thr = torch.abs(params["fire_l_mult"] * init_l)
    norm = torch.max(qt, thr)[:, :, None]
    num = torch.log(torch.abs(c * rel) + 1)
    den = torch.log(torch.abs(c * norm) + 1) + FIRE_EPS
    out = gen_golden_fire.mlp((num / den)[..., None], params, "fire", 1, torch.relu)  # B, Tq, Tk, H
    return out.permute(0, 3, 1, 2)


def dpb_bias(params, qt, kt, depth, log_distance, norm):
    rel = qt[:, :, None] - kt[:, None, :]
    if log_distance:
        rel = torch.sign(rel) * torch.log(rel.abs() + 1)
    out = gen_golden_fire.mlp(rel[..., None], params, "dpb", depth, F.silu, norm)
    return out.permute(0, 3, 1, 2)


def rope_rotate(x, t, rot, pairing, base, div):
    """x [B, H, T, dh] rotated at times t [Bt, T] (Bt = 1 broadcasts)."""
    half = rot // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / rot)
    ang = (t / div)[:, None, :, None] * theta                                  # Bt, 1, T, half
    cos, sin = torch.cos(ang), torch.sin(ang)
    if pairing == "half":
        a_idx, b_idx = list(range(half)), list(range(half, rot))
    else:
        a_idx, b_idx = list(range(0, rot, 2)), list(range(1, rot, 2))
    a, b = x[..., a_idx], x[..., b_idx]
    out = x.clone()
    out[..., a_idx] = a * cos - b * sin
    out[..., b_idx] = b * cos + a * sin
    return out


def squeeze_shared(bias, batch):
    return bias[0] if batch == 1 else bias


# ---------------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------------

def self_check():
    gen = torch.Generator().manual_seed(3)
    t = torch.arange(6, dtype=torch.float64)[None]
    # ALiBi: integer times give -m (i - j).
    for h in (3, 4):
        m = torch.tensor(alibi_get_slopes(h))
        want = -m[:, None, None] * (t[0][:, None] - t[0][None, :])
        assert torch.allclose(alibi_bias(t, t, h, True)[0], want, atol=1e-15)
        assert torch.allclose(alibi_bias(t, t, h, False)[0], -want.abs(), atol=1e-15)
    # KERPLE: integer times give the formula of the line positions, entry by entry.
    r1, r2 = torch.tensor([0.7, 1.3]), torch.tensor([0.4, 1.7])
    for kernel in ("log", "power"):
        b = kerple_bias({"r1": r1, "r2": r2}, t, t, kernel, 0.01)[0]
        for h in range(2):
            for i in range(6):
                for j in range(6):
                    d = abs(i - j)
                    want = -r1[h] * (math.log(1 + r2[h] * d) if kernel == "log" else d ** r2[h])
                    assert abs(b[h, i, j] - want) < 1e-12, (kernel, h, i, j)
    # FIRE and dpb: integer times give gen_golden_fire's line references.
    fp = {"fire_c": torch.tensor([0.45]), "fire_l_mult": torch.tensor([1.1]),
          "fire_w0": torch.randn(1, 5, generator=gen), "fire_b0": torch.randn(5, generator=gen),
          "fire_w1": torch.randn(5, 3, generator=gen), "fire_b1": torch.randn(3, generator=gen)}
    assert torch.allclose(fire_bias(fp, t, t, 3.0)[0], gen_golden_fire.fire_bias(fp, 0, 6, 0, 6, 3.0), atol=1e-12)
    dp = {"dpb_w0": torch.randn(1, 4, generator=gen), "dpb_b0": torch.randn(4, generator=gen),
          "dpb_w1": torch.randn(4, 2, generator=gen), "dpb_b1": torch.randn(2, generator=gen),
          "dpb_ln0_g": torch.randn(4, generator=gen), "dpb_ln0_b": torch.randn(4, generator=gen)}
    for log_distance in (False, True):
        assert torch.allclose(dpb_bias(dp, t, t, 1, log_distance, True)[0],
                              gen_golden_fire.dpb_bias(dp, 0, 6, 0, 6, 1, log_distance, True), atol=1e-12)
    # RoPE: against an explicit rotation, entry by entry, at a real time.
    x = torch.randn(1, 1, 1, 6, generator=gen)
    for pairing in ("half", "interleaved"):
        tt = torch.tensor([[2.7]])
        got = rope_rotate(x, tt, 4, pairing, 10.0, 1.0)[0, 0, 0]
        want = x[0, 0, 0].clone()
        for p in range(2):
            a, b = (p, p + 2) if pairing == "half" else (2 * p, 2 * p + 1)
            phi = 2.7 * 10.0 ** (-2 * p / 4)
            want[a] = x[0, 0, 0, a] * math.cos(phi) - x[0, 0, 0, b] * math.sin(phi)
            want[b] = x[0, 0, 0, b] * math.cos(phi) + x[0, 0, 0, a] * math.sin(phi)
        assert torch.allclose(got, want, atol=1e-14), pairing


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def event_times(gen, batch, n):
    """Next-event times: sorted events e_0 < ... < e_n per example; keys at e_0..e_{n-1},
    queries at e_1..e_n."""
    gaps = 0.1 + 2 * torch.rand(batch, n, generator=gen)
    ev = torch.cat([torch.rand(batch, 1, generator=gen), gaps], dim=1).cumsum(dim=1)
    return ev[:, 1:].clone(), ev[:, :-1].clone()


def random_times(gen, batch, n, lo=0.0, hi=6.0):
    return lo + (hi - lo) * torch.rand(batch, n, generator=gen)


def case_specs():
    return [
        ("alibi-causal", dict(pos="alibi", heads=3, batch=2, tq=5, tk=5, causal=True, times="events")),
        ("alibi-cross", dict(pos="alibi", heads=6, batch=2, tq=3, tk=6, causal=False, times="random")),
        ("alibi-shared", dict(pos="alibi", heads=4, batch=1, tq=4, tk=4, causal=False, times="random")),
        ("kerple-log", dict(pos="kerple-log", heads=2, batch=2, tq=4, tk=5, causal=False, times="random", eps=0.01)),
        ("kerple-power", dict(pos="kerple-power", heads=3, batch=2, tq=5, tk=5, causal=True, times="events-tie",
                              eps=0.01)),
        ("fire", dict(pos="fire", heads=3, batch=2, tq=5, tk=5, causal=True, times="events",
                      fire_width=5, fire_init_c=0.1, fire_init_l=3.0, c=0.45, l_mult=1.1)),
        ("fire-cross", dict(pos="fire", heads=2, batch=1, tq=3, tk=6, causal=False, times="random",
                            fire_width=4, fire_init_c=0.1, fire_init_l=4.0, c=-0.3, l_mult=1.6)),
        ("dpb", dict(pos="dpb", heads=3, batch=2, tq=4, tk=4, causal=False, times="random",
                     dpb_width=4, dpb_depth=2, dpb_log_distance=False, dpb_norm=False)),
        ("dpb-log-norm", dict(pos="dpb", heads=2, batch=2, tq=5, tk=5, causal=True, times="events",
                              dpb_width=5, dpb_depth=1, dpb_log_distance=True, dpb_norm=True)),
        ("rope", dict(pos="rope", heads=2, batch=2, tq=5, tk=5, causal=True, times="events", dh=6,
                      rope_base=10000.0, rope_pairing="half", rope_fraction=1.0)),
        ("rope-interleaved-partial", dict(pos="rope", heads=2, batch=1, tq=3, tk=5, causal=False, times="random",
                                          dh=8, rope_base=100.0, rope_pairing="interleaved", rope_fraction=0.5)),
        ("rope-pi", dict(pos="rope-pi", heads=1, batch=2, tq=4, tk=4, causal=False, times="random", dh=4,
                         rope_base=10000.0, rope_pairing="half", rope_fraction=1.0, rope_scale=2.5)),
    ]


def make_times(gen, c):
    b, tq, tk = c["batch"], c["tq"], c["tk"]
    if c["times"].startswith("events"):
        qt, kt = event_times(gen, b, tq)
        if c["times"] == "events-tie":
            qt[:, 1] = kt[:, 1]  # a zero distance (the power kernel's 0 ** r2)
        return qt, kt
    return random_times(gen, b, tq, 0.0, 9.0), random_times(gen, b, tk, 0.0, 9.0)


def build_case(name, c, seed):
    gen = torch.Generator().manual_seed(seed)
    qt, kt = make_times(gen, c)
    h, b, tq, tk = c["heads"], c["batch"], c["tq"], c["tk"]
    pos = c["pos"]
    tensors = {"q_times": qt, "k_times": kt}
    meta = {k: v for k, v in c.items() if k not in ("c", "l_mult", "times")}

    if pos.startswith("rope"):
        dh = c["dh"]
        bx = 2
        q = torch.randn(bx, h, tq, dh, generator=gen)
        k = torch.randn(bx, h, tk, dh, generator=gen)
        Rq = torch.randn(bx, h, tq, dh, generator=gen)
        Rk = torch.randn(bx, h, tk, dh, generator=gen)
        rot = int(math.floor(c["rope_fraction"] * dh + 1e-9)) & ~1
        div = c.get("rope_scale", 1.0) if pos == "rope-pi" else 1.0

        def loss_of(q, k):
            q2 = rope_rotate(q, qt, rot, c["rope_pairing"], c["rope_base"], div)
            k2 = rope_rotate(k, kt, rot, c["rope_pairing"], c["rope_base"], div)
            return (q2 * Rq).sum() + (k2 * Rk).sum(), (q2, k2)

        vals = [q.clone().requires_grad_(True), k.clone().requires_grad_(True)]
        loss, (q2, k2) = loss_of(*vals)
        grads = torch.autograd.grad(loss, vals)
        check_directional_fd(loss_of, [v.detach() for v in vals], grads, 1e-6, name)
        tensors.update({"q": q, "k": k, "q_rot": q2.detach(), "k_rot": k2.detach(), "Rq": Rq, "Rk": Rk,
                        "grad_q": grads[0], "grad_k": grads[1]})
        return tensors, meta

    params = {}
    if pos == "alibi":
        pass
    elif pos.startswith("kerple"):
        params["r1"] = 0.2 + 1.5 * torch.rand(h, generator=gen)
        params["r2"] = 0.2 + 1.5 * torch.rand(h, generator=gen)
    elif pos == "fire":
        w = c["fire_width"]
        params["fire_c"] = torch.tensor([c["c"]])
        params["fire_l_mult"] = torch.tensor([c["l_mult"]])
        dims = [1, w, h]
        for l in range(2):
            params[f"fire_w{l}"] = torch.randn(dims[l], dims[l + 1], generator=gen)
            params[f"fire_b{l}"] = torch.randn(dims[l + 1], generator=gen)
    else:
        w, depth = c["dpb_width"], c["dpb_depth"]
        dims = [1] + [w] * depth + [h]
        for l in range(len(dims) - 1):
            params[f"dpb_w{l}"] = torch.randn(dims[l], dims[l + 1], generator=gen)
            params[f"dpb_b{l}"] = torch.randn(dims[l + 1], generator=gen)
            if c["dpb_norm"] and l < depth:
                params[f"dpb_ln{l}_g"] = 1 + 0.3 * torch.randn(w, generator=gen)
                params[f"dpb_ln{l}_b"] = 0.3 * torch.randn(w, generator=gen)
    shape = (h, tq, tk) if b == 1 else (b, h, tq, tk)
    R = torch.randn(*shape, generator=gen)
    names = sorted(params)

    def bias_of(p):
        if pos == "alibi":
            out = alibi_bias(qt, kt, h, c["causal"])
        elif pos.startswith("kerple"):
            out = kerple_bias(p, qt, kt, pos.split("-")[1], c["eps"])
        elif pos == "fire":
            out = fire_bias(p, qt, kt, c["fire_init_l"])
        else:
            out = dpb_bias(p, qt, kt, c["dpb_depth"], c["dpb_log_distance"], c["dpb_norm"])
        return squeeze_shared(out, b)

    tensors["R"] = R
    if not names:
        tensors["bias"] = bias_of({})
        return tensors, meta

    def loss_of(*vals):
        bias = bias_of(dict(zip(names, vals)))
        return (bias * R).sum(), bias

    vals = [params[n].clone().requires_grad_(True) for n in names]
    loss, bias = loss_of(*vals)
    grads = torch.autograd.grad(loss, vals)
    check_directional_fd(loss_of, [v.detach() for v in vals], grads, 1e-6, name)
    tensors["bias"] = bias.detach()
    for n, v, g in zip(names, vals, grads):
        tensors[n] = v.detach()
        tensors["grad_" + n] = g
    return tensors, meta


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    out = []
    for n, (name, c) in enumerate(case_specs()):
        tensors, meta = build_case(name, c, 1900 + n)
        path = os.path.join(out_dir, f"real-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
