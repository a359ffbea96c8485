#!/usr/bin/python3
"""Golden vectors for xpos, rope-llama3 and rope-yarn's options (package posenc, issue #15).

Run with Debian's python (torch 1.13), from the repository root::

    /usr/bin/python3 testdata/golden/gen_golden_xpos.py [--out DIR] [--check-only]

``generate(out_dir)`` (called by gen_golden.py) runs the self-check below, then writes
``xpos-<case>.safetensors`` files and returns ``[(path, size), ...]``. Everything is float64
and seeded, so the bytes are the same on every run.

The computation of every case is the QK hook of one attention call
(posenc.QKTransformer.TransformQK) at a causal span::

    q [B, H, TQ, dh], k [B, H, TK, dh]     random N(0, 1)
    query i at position q_start + i, key j at k_start + j
    q_out, k_out = rotated (and scaled) q and k
    loss = sum(q_out * wq) + sum(k_out * wk),  wq, wk random N(0, 1)

Files hold q, k, wq, wk, q_out, k_out, grad/q, grad/k. Metadata (strings): case, pos, B, H,
dh, q_start, tq, k_start, tk, base, pairing, fraction, and the options of the encoding:
scale, train_len (RopeScale, RopeTrainLen), xpos_scale_base, llama3_low, llama3_high,
yarn_attention_factor, yarn_mscale, yarn_mscale_all_dim, yarn_no_truncate ("0" or "1").

References, written from the papers and checked against the authors' / HF's code:

xpos (Sun et al. 2022, "A Length-Extrapolatable Transformer"; torchscale
component/xpos_relative_position.py, XPOS): over rot = fraction*dh rotary dims (rounded down
to even), theta_p = base^(-2p/rot), zeta_p = (2p + 0.4 rot)/(1.4 rot), gamma = scale base;
with N = max(q_start+TQ, k_start+TK) and c = ceil(N/2) (torchscale's min_pos =
-(length+offset)//2)::

    q: cos, sin of pos*theta_p, both times zeta_p^((pos - c)/gamma)
    k: cos, sin of pos*theta_p, both divided by zeta_p^((pos - c)/gamma)

The self-check compares this with ``ts_xpos``, a float64 transcription of torchscale's XPOS
forward (interleaved pairs, rotate_every_two), for self-attention (offset 0) and for one
decoding step (q of length 1 at offset N-1 against N keys), to 1e-12.

rope-llama3 (HF transformers modeling_rope_utils._compute_llama3_parameters): factor s,
low/high frequency factors, original length L; wavelength w = 2 pi/theta:
theta if w < L/high, theta/s if w > L/low, else (1-sm) theta/s + sm theta with
sm = (L/w - low)/(high - low). No attention factor. The self-check compares it with a
per-element Python loop.

rope-yarn (HF _compute_yarn_parameters): find_correction_range with truncate (floor/ceil, or
none), clamped to [0, rot-1], hi += 0.001 if equal; ramp r = clamp((p - lo)/(hi - lo), 0, 1);
theta' = theta/s r + theta (1 - r); attention factor = attention_factor if given, else
get_mscale(s, mscale)/get_mscale(s, mscale_all_dim) if both given, else get_mscale(s),
get_mscale(s, m) = 0.1 m ln s + 1 (1 if s <= 1); cos and sin times the factor.

Pairings: "half" is HF's rotate_half (pairs (p, p + rot/2)), "interleaved" torchscale's
rotate_every_two (pairs (2p, 2p+1)); dims rot..dh-1 pass unchanged.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import check_directional_fd, module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)


# --- torchscale's XPOS, transcribed in float64 (the self-check's reference) ---

def ts_fixed_pos_embedding(x):
    seq_len, dim = x.shape
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(0, seq_len, dtype=torch.float64), inv_freq).to(x)
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


def ts_rotate_every_two(x):
    x1 = x[:, :, ::2]
    x2 = x[:, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def ts_duplicate_interleave(m):
    dim0 = m.shape[0]
    return m.view(-1, 1).repeat(1, 2).view(dim0, -1)


def ts_apply_rotary_pos_emb(x, sin, cos, scale=1):
    sin, cos = map(lambda t: ts_duplicate_interleave(t * scale), (sin, cos))
    return (x * cos) + (ts_rotate_every_two(x) * sin)


def ts_xpos(x, head_dim, scale_base, offset=0, downscale=False):
    """XPOS(head_dim, scale_base).forward(x, offset, downscale); x [B*H, length, head_dim]."""
    zeta = (torch.arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim)
    length = x.shape[1]
    min_pos = -(length + offset) // 2
    max_pos = length + offset + min_pos
    scale = zeta ** torch.arange(min_pos, max_pos, 1).to(zeta).div(scale_base)[:, None]
    sin, cos = ts_fixed_pos_embedding(scale)
    if scale.shape[0] > length:
        scale, sin, cos = scale[-length:], sin[-length:], cos[-length:]
    if downscale:
        scale = 1 / scale
    return ts_apply_rotary_pos_emb(x, sin, cos, scale)


# --- the references with explicit positions ---

def rotate(x, pos, theta, mult, pairing):
    """x [B, H, T, dh] rotated at positions pos [T] by angles pos*theta [T, rot/2], cos and sin
    times mult [T, rot/2] (or a scalar)."""
    rot = 2 * theta.shape[0]
    ang = pos[:, None].to(torch.float64) * theta[None, :]
    c, s = torch.cos(ang) * mult, torch.sin(ang) * mult
    h = rot // 2
    if pairing == "half":
        a, b = x[..., :h], x[..., h:rot]
        out = torch.cat([a * c - b * s, b * c + a * s], dim=-1)
    else:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        out = torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)
    return torch.cat([out, x[..., rot:]], dim=-1)


def rot_dims(dh, fraction):
    return int(math.floor(fraction * dh + 1e-9)) & ~1


def plain_theta(rot, base):
    return 1.0 / base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)


def llama3_theta(rot, base, s, L, low, high):
    inv_freq = plain_theta(rot, base)
    low_wl, high_wl = L / low, L / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_wl, inv_freq / s, inv_freq)
    smooth = (L / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / s + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def yarn_theta(rot, base, s, L, beta_fast, beta_slow, truncate, attention_factor, mscale, mscale_all_dim):
    def get_mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)
        else:
            attention_factor = get_mscale(s)

    def corr_dim(n_rot):
        return (rot * math.log(L / (n_rot * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, rot - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(rot // 2, dtype=torch.float64) - lo) / (hi - lo), 0, 1)
    th = plain_theta(rot, base)
    return th / s * ramp + th * (1 - ramp), attention_factor


def forward(c, q, k):
    """Rotated q, k of case c (a dict of the metadata's values)."""
    dh = q.shape[-1]
    rot = rot_dims(dh, c["fraction"])
    qpos = torch.arange(c["q_start"], c["q_start"] + q.shape[2])
    kpos = torch.arange(c["k_start"], c["k_start"] + k.shape[2])
    if c["pos"] == "xpos":
        th = plain_theta(rot, c["base"])
        zeta = (torch.arange(0, rot, 2, dtype=torch.float64) + 0.4 * rot) / (1.4 * rot)
        n = max(c["q_start"] + q.shape[2], c["k_start"] + k.shape[2])
        centre = (n + 1) // 2
        g = c["xpos_scale_base"]
        sq = zeta[None, :] ** ((qpos - centre).to(torch.float64)[:, None] / g)
        sk = 1 / zeta[None, :] ** ((kpos - centre).to(torch.float64)[:, None] / g)
        return rotate(q, qpos, th, sq, c["pairing"]), rotate(k, kpos, th, sk, c["pairing"])
    if c["pos"] == "rope-llama3":
        th, attn = llama3_theta(rot, c["base"], c["scale"], c["train_len"], c["llama3_low"], c["llama3_high"]), 1.0
    else:
        th, attn = yarn_theta(rot, c["base"], c["scale"], c["train_len"], 32, 1, not c["yarn_no_truncate"],
                              c["yarn_attention_factor"] or None, c["yarn_mscale"], c["yarn_mscale_all_dim"])
    return rotate(q, qpos, th, attn, c["pairing"]), rotate(k, kpos, th, attn, c["pairing"])


DEFAULTS = dict(B=2, H=2, dh=8, q_start=0, k_start=0, base=10000.0, pairing="half", fraction=1.0, scale=1.0,
                train_len=64, xpos_scale_base=512.0, llama3_low=1.0, llama3_high=4.0, yarn_attention_factor=0.0,
                yarn_mscale=0.0, yarn_mscale_all_dim=0.0, yarn_no_truncate=0)

# (case, overrides): tq, tk always given
CASES = [
    ("self", dict(pos="xpos", tq=7, tk=7, pairing="interleaved", xpos_scale_base=16.0)),
    ("offset-half", dict(pos="xpos", q_start=9, tq=3, k_start=4, tk=8, fraction=0.75, xpos_scale_base=8.0)),
    ("decode", dict(pos="xpos", q_start=10, tq=1, k_start=0, tk=11, pairing="interleaved", base=100.0,
                    xpos_scale_base=4.0)),
    ("llama3", dict(pos="rope-llama3", dh=16, q_start=20, tq=4, k_start=12, tk=12, base=500.0, scale=4.0,
                    train_len=32)),
    ("llama3-factors", dict(pos="rope-llama3", dh=16, q_start=3, tq=5, k_start=0, tk=8, base=10000.0, scale=8.0,
                            train_len=64, llama3_low=0.5, llama3_high=2.0, pairing="interleaved")),
    ("yarn-mscale", dict(pos="rope-yarn", dh=16, q_start=30, tq=3, k_start=25, tk=8, base=500.0, scale=4.0,
                         train_len=16, yarn_mscale=1.0, yarn_mscale_all_dim=0.5)),
    ("yarn-notrunc", dict(pos="rope-yarn", dh=16, q_start=30, tq=3, k_start=25, tk=8, base=500.0, scale=3.0,
                          train_len=16, yarn_no_truncate=1, yarn_attention_factor=1.3)),
    ("yarn-default", dict(pos="rope-yarn", dh=16, q_start=30, tq=3, k_start=25, tk=8, base=500.0, scale=4.0,
                          train_len=16, fraction=0.5)),
]


def case_dict(ov):
    c = dict(DEFAULTS)
    c.update(ov)
    return c


def self_check():
    g = torch.Generator().manual_seed(41)
    B, H, dh, N, gamma = 2, 2, 8, 9, 16.0
    q, k = torch.randn(B, H, N, dh, generator=g), torch.randn(B, H, N, dh, generator=g)
    c = case_dict(dict(pos="xpos", tq=N, tk=N, pairing="interleaved", xpos_scale_base=gamma))
    qo, ko = forward(c, q, k)
    tq = ts_xpos(q.reshape(B * H, N, dh), dh, gamma).reshape(B, H, N, dh)
    tk = ts_xpos(k.reshape(B * H, N, dh), dh, gamma, downscale=True).reshape(B, H, N, dh)
    assert torch.allclose(qo, tq, rtol=0, atol=1e-12) and torch.allclose(ko, tk, rtol=0, atol=1e-12), "xpos self"
    # one decoding step: torchscale's query offset N-1, keys from 0
    c = case_dict(dict(pos="xpos", q_start=N - 1, tq=1, tk=N, pairing="interleaved", xpos_scale_base=gamma))
    qo, ko = forward(c, q[:, :, -1:], k)
    tq = ts_xpos(q[:, :, -1:].reshape(B * H, 1, dh), dh, gamma, offset=N - 1).reshape(B, H, 1, dh)
    assert torch.allclose(qo, tq, rtol=0, atol=1e-12) and torch.allclose(ko, tk, rtol=0, atol=1e-12), "xpos decode"
    # llama3 against a per-element loop
    for (rot, base, s, L, lo, hi) in [(16, 500.0, 4.0, 32, 1.0, 4.0), (16, 10000.0, 8.0, 64, 0.5, 2.0)]:
        th = llama3_theta(rot, base, s, L, lo, hi)
        for p in range(rot // 2):
            t0 = base ** (-2 * p / rot)
            w = 2 * math.pi / t0
            if w < L / hi:
                want = t0
            elif w > L / lo:
                want = t0 / s
            else:
                sm = (L / w - lo) / (hi - lo)
                want = (1 - sm) * t0 / s + sm * t0
            assert abs(th[p].item() - want) < 1e-15 * max(1, want), ("llama3", p)
    # the pairings against a per-element rotation
    x = torch.randn(1, 1, 2, 6, generator=g)
    th = torch.tensor([0.7, 0.2])
    pos = torch.tensor([3, 5])
    for pairing, pairs in [("half", [(0, 2), (1, 3)]), ("interleaved", [(0, 1), (2, 3)])]:
        out = rotate(x, pos, th, 1.0, pairing)
        for t in range(2):
            for p, (a, b) in enumerate(pairs):
                ang = pos[t].item() * th[p].item()
                xa, xb = x[0, 0, t, a].item(), x[0, 0, t, b].item()
                assert abs(out[0, 0, t, a].item() - (xa * math.cos(ang) - xb * math.sin(ang))) < 1e-12
                assert abs(out[0, 0, t, b].item() - (xb * math.cos(ang) + xa * math.sin(ang))) < 1e-12
            assert torch.equal(out[0, 0, t, 4:], x[0, 0, t, 4:])
    # autograd against a finite difference, one case of each encoding
    for name, ov in CASES[1:4] + CASES[5:6]:
        c = case_dict(ov)
        q = torch.randn(c["B"], c["H"], c["tq"], c["dh"], generator=g)
        k = torch.randn(c["B"], c["H"], c["tk"], c["dh"], generator=g)
        wq, wk = torch.randn(q.shape, generator=g), torch.randn(k.shape, generator=g)

        def loss_of(q, k):
            qo, ko = forward(c, q, k)
            return ((qo * wq).sum() + (ko * wk).sum(),)

        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        grads = torch.autograd.grad(loss_of(qq, kk)[0], [qq, kk])
        check_directional_fd(loss_of, [q, k], grads, 1e-7, name)


def generate(out_dir):
    """Self-checks, then writes every xpos-* case into out_dir. Returns [(path, size)]."""
    self_check()
    written = []
    for i, (case, ov) in enumerate(CASES):
        c = case_dict(ov)
        g = torch.Generator().manual_seed(4000 + i)
        B, H, dh, tq, tk = c["B"], c["H"], c["dh"], c["tq"], c["tk"]
        t = {"q": torch.randn(B, H, tq, dh, generator=g), "k": torch.randn(B, H, tk, dh, generator=g),
             "wq": torch.randn(B, H, tq, dh, generator=g), "wk": torch.randn(B, H, tk, dh, generator=g)}
        q, k = t["q"].clone().requires_grad_(), t["k"].clone().requires_grad_()
        qo, ko = forward(c, q, k)
        loss = (qo * t["wq"]).sum() + (ko * t["wk"]).sum()
        gq, gk = torch.autograd.grad(loss, [q, k])
        out = dict(t)
        out.update({"q_out": qo.detach(), "k_out": ko.detach(), "grad/q": gq, "grad/k": gk})
        meta = {kk: (repr(v) if isinstance(v, float) else v) for kk, v in c.items()}
        meta["case"] = case
        path = os.path.join(out_dir, f"xpos-{case}.safetensors")
        written.append(write_case(path, out, meta))
    return written


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
