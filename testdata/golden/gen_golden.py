#!/usr/bin/python3
"""Golden test vectors for the Go position-encoding library (packages layers, posenc).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden.py

It first runs a Go-free self-check (brute-force per-element implementations of every
encoding compared with the vectorised ones, bucket functions compared with transcriptions of
the reference code, a safetensors round trip, directional finite differences of the loss),
then writes one ``<case>.safetensors`` file per case, plus ``tables.safetensors`` (bucket and
slope tables over wide ranges), into the directory of this script. Everything is float64.
Options: ``--check-only`` (self-check, write nothing), ``--out DIR``.

Reference model (every convention a Go implementation must follow)
------------------------------------------------------------------
Byte-level causal LM, float64 throughout, no dropout::

    x      = tok_emb[ids]                       (+ PE for sinusoidal / learned)   [B, T, d]
    for i in 0..layers-1:                       (pre-LayerNorm blocks)
        x  = x + Attn_i(LN1_i(x))
        x  = x + FFN_i(LN2_i(x))
    x      = LN_f(x)
    logits = x.reshape(B*T, d) @ head/w         (no bias)                         [B*T, V]
    loss   = mean_n CE(logits[n], targets[n])   (log-softmax, mean over B*T)      [1]

* Linear layers are ``y = x @ W + b`` with ``W`` stored ``[in, out]`` (the Go layout; every
  tensor in the files uses it, gradients too).
* LayerNorm over the last axis: ``(x - mean) / sqrt(var + 1e-5) * gamma + beta`` with the
  biased (population) variance; eps 1e-5.
* FFN: ``Linear(d, ff) -> GELU tanh approximation -> Linear(ff, d)``,
  ``gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.
* Attention: separate q, k, v, o Linears with bias. Head h uses columns
  ``h*dh:(h+1)*dh`` of q, k, v; head outputs are concatenated in head order before wo.
  Per head::

      s[i,j] = q_i . k_j / sqrt(dh) + bias[h,i,j]     (encodings may change this; see below)
      s[i,j] = -inf where kpos_j > qpos_i             (causal mask, applied AFTER the bias)
      p      = softmax_j(s)
      out_i  = sum_j p[i,j] v_j                       (Shaw adds a value term)

* Positions: query i is at absolute position ``qpos_i = q_start + i``, key j at
  ``kpos_j = k_start + j``. The model is self-attention, so Tq = Tk = T; every golden case has
  q_start = k_start (0, except rope-offset with 5). Encodings that add to the token
  embeddings use position ``q_start + t`` for token t.

Position encodings (metadata ``pos``)
-------------------------------------
none
    Nothing.
sinusoidal (Vaswani et al. 2017), interleaved layout, added to the token embeddings::

    PE[p, 2i] = sin(p / 10000^(2i/d)),  PE[p, 2i+1] = cos(p / 10000^(2i/d)),  i < d/2
learned
    Parameter ``pos_emb`` [max_len, d]; ``x += pos_emb[q_start + t]``. max_len = 16 in the
    golden case (rows T..15 get zero gradient).
shaw (Shaw et al. 2018)
    Per layer ``block{i}/attn/shaw_k`` and ``block{i}/attn/shaw_v``, each [2K+1, dh], shared
    by all heads::

        idx[i,j] = clamp(kpos_j - qpos_i, -K, K) + K
        s[i,j]   = (q_i . k_j + q_i . shaw_k[idx[i,j]]) / sqrt(dh)
        out_i    = sum_j p[i,j] (v_j + shaw_v[idx[i,j]])
shaw-scalar
    Per layer ``block{i}/attn/shaw_bias`` [2K+1, H];
    ``s[i,j] = q_i . k_j / sqrt(dh) + shaw_bias[idx[i,j], h]`` (bias not scaled).
t5 (Raffel et al. 2020)
    One table ``t5_bias`` [N, H] shared by all layers;
    ``s[i,j] = q_i . k_j / sqrt(dh) + t5_bias[bucket(kpos_j - qpos_i), h]``. Unlike T5 itself
    we DO scale q.k by 1/sqrt(dh); the bias is added unscaled. Bucket (HF
    ``_relative_position_bucket``, computed in float64, rel = kpos - qpos)::

        bidirectional (metadata bidirectional=true, i.e. causal=false):
            nb = N/2; offset = nb if rel > 0 else 0; n = |rel|
        causal (bidirectional=false):
            nb = N;   offset = 0;                    n = max(-rel, 0)
        me = nb/2   (integer division)
        b  = n                                                   if n < me
           = min(me + trunc(log(n/me) / log(max_distance/me) * (nb - me)), nb - 1) otherwise
        bucket = offset + b
t5-alpha
    The t5 case with a learnable scalar ``t5_alpha`` of shape [1] (init 0.1, metadata alpha):
    ``s[i,j] = q_i . k_j / sqrt(dh) + t5_alpha * t5_bias[bucket, h]``.
xl (Dai et al. 2019)
    Per layer ``block{i}/attn/xl_wr`` [d, d] (no bias); shared by all layers ``xl_u`` [H, dh]
    and ``xl_v`` [H, dh] (the paper's u, v; r_w_bias, r_r_bias in the reference code)::

        dist[i,j] = qpos_i - kpos_j                      (may be negative; masked anyway)
        inv_freq  = 1 / 10000^(arange(0, d, 2) / d)      [d/2]
        R[dist]   = concat(sin(dist*inv_freq), cos(dist*inv_freq))   [d] (half-split layout)
        P[dist]   = R[dist] @ xl_wr, head h = columns h*dh:(h+1)*dh
        s[i,j]    = ((q_i + u_h) . k_j + (q_i + v_h) . P_h[dist[i,j]]) / sqrt(dh)
    computed directly by gathering on the distance matrix (no rel-shift trick). q is the
    projected query including bq.
xl-untied
    The xl case with Transformer-XL's ``untie_r`` (metadata untie_r=true; Hugging Face's
    TransfoXL default): u and v per layer, ``block{i}/attn/xl_u`` and ``block{i}/attn/xl_v``
    [H, dh], instead of the shared ``xl_u``, ``xl_v``; the formula is unchanged.
deberta (He et al. 2021; DeBERTa-v2/v3 as in HF ``modeling_deberta_v2``)
    One table ``deberta_rel`` [2*span, d] shared by all layers, span = bucket_size; no
    LayerNorm on the table (HF's norm_rel_ebd is not modelled), no absolute position input.
    The layer's own projections, biases included (HF's query_proj/key_proj on the table with
    share_att_key)::

        pos_key   = deberta_rel @ wk + bk  -> [2span, H, dh]
        pos_query = deberta_rel @ wq + bq  -> [2span, H, dh]
        lb(r)     = make_log_bucket_position(r, bucket_size, max_position)   (float64):
                    mid = bucket_size/2
                    lb(r) = r                                               if |r| <= mid
                          = sign(r) * (ceil(log(|r|/mid) / log((max_position-1)/mid)
                                            * (mid-1)) + mid)                otherwise
        c2p_idx[i,j] = clamp( lb(qpos_i - kpos_j) + span, 0, 2span-1)
        p2c_idx[i,j] = clamp(-lb(kpos_j - qpos_i) + span, 0, 2span-1)
        s[i,j] = (q_i . k_j + q_i . pos_key_h[c2p_idx[i,j]] + k_j . pos_query_h[p2c_idx[i,j]])
                 / sqrt(3 dh)
    This is HF's c2p gather along keys and p2c gather-then-transpose with
    ``p2c_pos = clamp(-r_pos + span)``, where HF's r_pos[j, i] is the relative position
    of key j "as a query" to query i; for the self-attention goldens (qpos = kpos) lb is odd,
    so p2c_idx == c2p_idx. Note the HF/official code sign differs from the paper's delta(j,i).
    All three terms share the scale 1/sqrt(3*dh) (scale_factor = 1 + |{c2p, p2c}|).
rope (Su et al. 2021)
    Applied to q and k (after projection and bias, per head) before the scores; positions
    qpos for q and kpos for k. rot = dh * rotary_fraction (even), dims rot..dh-1 untouched.
    ``theta_i = 1 / base^(2i/rot)``, i < rot/2, base 10000, angle = pos * theta_i::

        half        (HF Llama rotate_half): pairs (x_i, x_{i+rot/2})
        interleaved (GPT-J rotate_every_two): pairs (x_{2i}, x_{2i+1})
        (a, b) -> (a cos - b sin, b cos + a sin)
alibi (Press et al. 2022)
    No parameters; ``s[i,j] = q_i . k_j / sqrt(dh) - m_h * (qpos_i - kpos_j)`` (defined for
    all i, j; the causal mask then hides j > i). Slopes: n a power of two:
    ``m_h = 2^(-8(h+1)/n)``; otherwise the paper's get_slopes: the slopes of the closest lower
    power of two c, then every other slope of 2c (indices 0, 2, 4, ...), first n - c of them.
    Computed exactly as the paper's code (``start * ratio**i``).

Initialisation and data (the Go side reads values from the files; it need not reproduce
this): torch.Generator seeded with ``crc32(case name)``; parameters drawn in the order they
are declared (see ``param_specs``): weight matrices and embeddings (incl. tok_emb, head/w,
xl_wr) N(0, 0.3^2); biases and LayerNorm betas N(0, 0.1^2); LayerNorm gammas
1 + N(0, 0.1^2); position tables (pos_emb, shaw_*, t5_bias, xl_u, xl_v, deberta_rel)
N(0, 0.3^2); t5_alpha = 0.1. Then ids ~ U[0, V) [B, T], targets ~ U[0, V) [B*T].

File format (safetensors, own writer)
-------------------------------------
8-byte little-endian header length n, then n bytes of JSON (padded with spaces to a multiple
of 8), then the raw little-endian data of the tensors, contiguous, in name order. dtypes
"F64" and "I64". Tensors: every parameter under its Go name; ``ids`` I64 [B, T];
``targets`` I64 [B*T]; ``logits`` F64 [B*T, V]; ``loss`` F64 [1]; ``grad/<param>`` F64 (the
gradient of loss); ``aux/...`` intermediates for debugging (not parameters):

    every case    aux/block0_probs [B, H, T, T]  block 0's attention probabilities (masked = 0)
    sinusoidal    aux/pe [T, d]                  PE rows of positions q_start + t
    shaw(-scalar) aux/idx I64 [T, T]             idx[i, j]
    shaw-scalar   aux/block0_bias [H, T, T]      block 0's shaw_bias[idx, h] (unmasked)
    t5, t5-alpha  aux/bucket I64 [T, T]; aux/bias [H, T, T] (unmasked, alpha included)
    xl            aux/dist I64 [T, T] (qpos_i - kpos_j); aux/R [T, T, d] (R[dist[i, j]])
    deberta       aux/rel I64 [T, T] (lb(qpos_i - kpos_j)); aux/c2p_idx, aux/p2c_idx I64 [T, T]
    rope          aux/cos, aux/sin [T, rot/2]    cos/sin(pos_t * theta_i) (q_start = k_start)
    alibi         aux/slopes [H]; aux/bias [H, T, T] (unmasked)
``__metadata__`` holds strings only: case, pos, causal, bidirectional, d, heads, head_dim,
layers, ff, vocab, B, T, q_start, k_start, seed, ln_eps, plus the encoding's options (K,
num_buckets, max_distance, bucket_size, max_position, pairing, rotary_fraction, rot_dim,
base, max_len, alpha). Booleans are "true"/"false", numbers decimal (Go strconv parses them).
"""

import argparse
import importlib
import json
import math
import os
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

LN_EPS = 1e-5
STD_WEIGHT = 0.3
STD_BIAS = 0.1
STD_TABLE = 0.3

BASE_CONFIG = dict(vocab=256, d=32, heads=4, layers=2, ff=64, B=2, T=8,
                   causal=True, q_start=0, k_start=0)

# Modules of the reference implementations of the encodings beyond a line
# (testdata/golden/gen_golden_<group>.py), each with generate(out_dir) -> [(path, size)]: the 2-D
# encodings of image patches, the graph and syntax-tree encodings, then the later 1-D encodings
# (KERPLE and Sandwich, FIRE and the dynamic position bias, xPos with Llama 3's and YaRN's options,
# CoPE, and the encodings on real-valued positions).
MODULES_2D = ["gen_golden_abs", "gen_golden_rel", "gen_golden_rope", "gen_golden_cpe", "gen_golden_graph",
              "gen_golden_tree", "gen_golden_kerple", "gen_golden_fire", "gen_golden_xpos", "gen_golden_cope",
              "gen_golden_real"]

# (case name, overrides of BASE_CONFIG plus encoding options). "pos" names the encoding.
CASES = [
    ("none", dict(pos="none")),
    ("sinusoidal", dict(pos="sinusoidal", base=10000)),
    ("learned", dict(pos="learned", max_len=16)),
    ("shaw", dict(pos="shaw", K=3)),
    ("shaw-scalar", dict(pos="shaw-scalar", K=3)),
    ("t5", dict(pos="t5", num_buckets=8, max_distance=16)),
    ("t5-bidir", dict(pos="t5", num_buckets=8, max_distance=16, causal=False)),
    ("t5-alpha", dict(pos="t5-alpha", num_buckets=8, max_distance=16, alpha=0.1)),
    ("xl", dict(pos="xl", base=10000)),
    ("xl-untied", dict(pos="xl", base=10000, untie_r=True)),
    ("deberta", dict(pos="deberta", bucket_size=4, max_position=16)),
    # Several log buckets and the clamp of the index (|rel| >= max_position), in both
    # directions (bidirectional attention), T = 16.
    ("deberta-log", dict(pos="deberta", bucket_size=8, max_position=10, T=16, causal=False)),
    ("rope-half", dict(pos="rope", pairing="half", rotary_fraction=1.0, base=10000)),
    ("rope-interleaved", dict(pos="rope", pairing="interleaved", rotary_fraction=1.0,
                              base=10000)),
    ("rope-partial", dict(pos="rope", pairing="half", rotary_fraction=0.5, base=10000)),
    ("rope-offset", dict(pos="rope", pairing="half", rotary_fraction=1.0, base=10000,
                         q_start=5, k_start=5)),
    ("alibi", dict(pos="alibi")),
    ("alibi-6h", dict(pos="alibi", heads=6, d=24)),
]


# ---------------------------------------------------------------------------------------
# Reference-code transcriptions (bucket and slope rules), vectorised, float64.
# ---------------------------------------------------------------------------------------

def t5_relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket; relative_position = kpos - qpos (LongTensor).

    Identical to HF except that the log is taken in float64 (HF: float32).
    """
    relative_buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.to(torch.float64) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def make_log_bucket_position(relative_pos, bucket_size, max_position):
    """HF modeling_deberta_v2.make_log_bucket_position (float64), returns LongTensor."""
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where(
        (relative_pos < mid) & (relative_pos > -mid),
        torch.tensor(mid - 1).type_as(relative_pos),
        torch.abs(relative_pos),
    )
    log_pos = torch.ceil(
        torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)
    ) + mid
    bucket_pos = torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)
    return bucket_pos.to(torch.long)


def alibi_get_slopes(n):
    """The ALiBi paper's get_slopes (ofirpress/attention_with_linear_biases)."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + alibi_get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])


# ---------------------------------------------------------------------------------------
# Encodings (vectorised). Shapes: q, k, v [B, H, T, dh]; qpos [Tq], kpos [Tk] LongTensors.
# ---------------------------------------------------------------------------------------

class Encoding:
    """Base: no position information. Subclasses override the hooks they need.

    Hooks: embed (added to token embeddings), rotate (q, k transform), bias ([H, Tq, Tk]
    additive, content-free, unscaled), scores (full scaled score [B, H, Tq, Tk] before the
    mask), values (probs @ v plus value terms), aux (debug intermediates for the file).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.d = cfg["d"]
        self.H = cfg["heads"]
        self.dh = self.d // self.H

    # Parameters: list of (name, shape, kind); kind in weight/bias/gain/table/alpha.
    def global_params(self):
        return []

    def layer_params(self, i):
        return []

    def embed(self, P, pos):
        return None

    def rotate(self, q, k, qpos, kpos):
        return q, k

    def bias(self, P, layer, qpos, kpos):
        return None

    def scores(self, P, layer, q, k, qpos, kpos):
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        b = self.bias(P, layer, qpos, kpos)
        if b is not None:
            s = s + b
        return s

    def values(self, P, layer, probs, v, qpos, kpos):
        return probs @ v

    def aux(self, P, qpos, kpos):
        return {}

    def meta(self):
        return {}


class NoneEnc(Encoding):
    pass


def sinusoid_table(pos, d, base):
    """[len(pos), d] interleaved: PE[p,2i] = sin(p/base^(2i/d)), PE[p,2i+1] = cos(...)."""
    div = torch.pow(torch.tensor(float(base)), torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] / div[None, :]
    pe = torch.zeros(len(pos), d)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe


class Sinusoidal(Encoding):
    def embed(self, P, pos):
        return sinusoid_table(pos, self.d, self.cfg["base"])

    def aux(self, P, qpos, kpos):
        return {"aux/pe": sinusoid_table(qpos, self.d, self.cfg["base"])}

    def meta(self):
        return {"base": self.cfg["base"]}


class Learned(Encoding):
    def global_params(self):
        return [("pos_emb", [self.cfg["max_len"], self.d], "table")]

    def embed(self, P, pos):
        return P["pos_emb"][pos]

    def meta(self):
        return {"max_len": self.cfg["max_len"]}


def shaw_index(qpos, kpos, K):
    return torch.clamp(kpos[None, :] - qpos[:, None], -K, K) + K


class Shaw(Encoding):
    def layer_params(self, i):
        K = self.cfg["K"]
        return [(f"block{i}/attn/shaw_k", [2 * K + 1, self.dh], "table"),
                (f"block{i}/attn/shaw_v", [2 * K + 1, self.dh], "table")]

    def scores(self, P, layer, q, k, qpos, kpos):
        idx = shaw_index(qpos, kpos, self.cfg["K"])
        rk = P[f"block{layer}/attn/shaw_k"][idx]                    # [Tq, Tk, dh]
        s = q @ k.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", q, rk)
        return s / math.sqrt(self.dh)

    def values(self, P, layer, probs, v, qpos, kpos):
        idx = shaw_index(qpos, kpos, self.cfg["K"])
        rv = P[f"block{layer}/attn/shaw_v"][idx]                    # [Tq, Tk, dh]
        return probs @ v + torch.einsum("bhij,ijd->bhid", probs, rv)

    def aux(self, P, qpos, kpos):
        return {"aux/idx": shaw_index(qpos, kpos, self.cfg["K"])}

    def meta(self):
        return {"K": self.cfg["K"]}


class ShawScalar(Shaw):
    def layer_params(self, i):
        K = self.cfg["K"]
        return [(f"block{i}/attn/shaw_bias", [2 * K + 1, self.H], "table")]

    def bias(self, P, layer, qpos, kpos):
        idx = shaw_index(qpos, kpos, self.cfg["K"])
        return P[f"block{layer}/attn/shaw_bias"][idx].permute(2, 0, 1)   # [H, Tq, Tk]

    scores = Encoding.scores
    values = Encoding.values

    def aux(self, P, qpos, kpos):
        return {"aux/idx": shaw_index(qpos, kpos, self.cfg["K"]),
                "aux/block0_bias": self.bias(P, 0, qpos, kpos)}


class T5(Encoding):
    def __init__(self, cfg, learn_alpha=False):
        super().__init__(cfg)
        self.learn_alpha = learn_alpha

    def global_params(self):
        ps = [("t5_bias", [self.cfg["num_buckets"], self.H], "table")]
        if self.learn_alpha:
            ps.append(("t5_alpha", [1], "alpha"))
        return ps

    def buckets(self, qpos, kpos):
        rel = kpos[None, :] - qpos[:, None]
        return t5_relative_position_bucket(rel, not self.cfg["causal"],
                                           self.cfg["num_buckets"], self.cfg["max_distance"])

    def bias(self, P, layer, qpos, kpos):
        b = P["t5_bias"][self.buckets(qpos, kpos)].permute(2, 0, 1)    # [H, Tq, Tk]
        if self.learn_alpha:
            b = P["t5_alpha"] * b
        return b

    def aux(self, P, qpos, kpos):
        return {"aux/bucket": self.buckets(qpos, kpos), "aux/bias": self.bias(P, 0, qpos, kpos)}

    def meta(self):
        m = {"num_buckets": self.cfg["num_buckets"], "max_distance": self.cfg["max_distance"]}
        if self.learn_alpha:
            m["alpha"] = self.cfg["alpha"]
        return m


def xl_r(dist, d, base):
    """[*dist.shape, d]: concat(sin(dist*inv_freq), cos(dist*inv_freq)) (Transformer-XL)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = dist.to(torch.float64)[..., None] * inv_freq
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)


class XL(Encoding):
    def untied(self):
        return bool(self.cfg.get("untie_r", False))

    def uv_names(self, i):
        """Names of u and v in layer i: per layer with untie_r, shared otherwise."""
        if self.untied():
            return f"block{i}/attn/xl_u", f"block{i}/attn/xl_v"
        return "xl_u", "xl_v"

    def global_params(self):
        if self.untied():
            return []
        return [("xl_u", [self.H, self.dh], "table"), ("xl_v", [self.H, self.dh], "table")]

    def layer_params(self, i):
        ps = [(f"block{i}/attn/xl_wr", [self.d, self.d], "weight")]
        if self.untied():
            un, vn = self.uv_names(i)
            ps += [(un, [self.H, self.dh], "table"), (vn, [self.H, self.dh], "table")]
        return ps

    def scores(self, P, layer, q, k, qpos, kpos):
        dist = qpos[:, None] - kpos[None, :]
        R = xl_r(dist, self.d, self.cfg["base"])                          # [Tq, Tk, d]
        Pm = (R @ P[f"block{layer}/attn/xl_wr"]).reshape(len(qpos), len(kpos), self.H, self.dh)
        un, vn = self.uv_names(layer)
        u = P[un][None, :, None, :]
        v = P[vn][None, :, None, :]
        ac = (q + u) @ k.transpose(-1, -2)
        bd = torch.einsum("bhic,ijhc->bhij", q + v, Pm)
        return (ac + bd) / math.sqrt(self.dh)

    def aux(self, P, qpos, kpos):
        dist = qpos[:, None] - kpos[None, :]
        return {"aux/dist": dist, "aux/R": xl_r(dist, self.d, self.cfg["base"])}

    def meta(self):
        m = {"base": self.cfg["base"]}
        if self.untied():
            m["untie_r"] = True
        return m


class DeBERTa(Encoding):
    def global_params(self):
        return [("deberta_rel", [2 * self.cfg["bucket_size"], self.d], "table")]

    def indices(self, qpos, kpos):
        bs, mp = self.cfg["bucket_size"], self.cfg["max_position"]
        span = bs
        rel = make_log_bucket_position(qpos[:, None] - kpos[None, :], bs, mp)      # [Tq, Tk]
        r_pos = make_log_bucket_position(kpos[:, None] - qpos[None, :], bs, mp)    # [Tk, Tq]
        c2p = torch.clamp(rel + span, 0, 2 * span - 1)                              # [Tq, Tk]
        p2c = torch.clamp(-r_pos + span, 0, 2 * span - 1)                           # [Tk, Tq]
        return rel, c2p, p2c

    def scores(self, P, layer, q, k, qpos, kpos):
        span = self.cfg["bucket_size"]
        B, H, Tq, dh = q.shape
        Tk = k.shape[2]
        table = P["deberta_rel"]
        pos_key = (table @ P[f"block{layer}/attn/wk"] + P[f"block{layer}/attn/bk"])
        pos_query = (table @ P[f"block{layer}/attn/wq"] + P[f"block{layer}/attn/bq"])
        pos_key = pos_key.reshape(2 * span, H, dh).permute(1, 0, 2)       # [H, 2span, dh]
        pos_query = pos_query.reshape(2 * span, H, dh).permute(1, 0, 2)
        _, c2p_pos, p2c_pos = self.indices(qpos, kpos)
        c2c = q @ k.transpose(-1, -2)
        c2p = q @ pos_key.transpose(-1, -2)[None]                          # [B, H, Tq, 2span]
        c2p = torch.gather(c2p, -1, c2p_pos.expand(B, H, Tq, Tk))
        p2c = k @ pos_query.transpose(-1, -2)[None]                        # [B, H, Tk, 2span]
        p2c = torch.gather(p2c, -1, p2c_pos.expand(B, H, Tk, Tq)).transpose(-1, -2)
        return (c2c + c2p + p2c) / math.sqrt(3 * dh)

    def aux(self, P, qpos, kpos):
        rel, c2p, p2c = self.indices(qpos, kpos)
        return {"aux/rel": rel, "aux/c2p_idx": c2p, "aux/p2c_idx": p2c.t().contiguous()}

    def meta(self):
        return {"bucket_size": self.cfg["bucket_size"],
                "max_position": self.cfg["max_position"]}


def rope_cos_sin(pos, rot, base):
    """[len(pos), rot/2] cos and sin of pos * theta_i, theta_i = 1/base^(2i/rot)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = pos.to(torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(ang), torch.sin(ang)


def rope_apply(x, pos, rot, pairing, base):
    cos, sin = rope_cos_sin(pos, rot, base)            # [T, rot/2]
    xr, xp = x[..., :rot], x[..., rot:]
    if pairing == "half":
        a, b = xr[..., :rot // 2], xr[..., rot // 2:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    elif pairing == "interleaved":
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    else:
        raise ValueError(pairing)
    return torch.cat([out, xp], dim=-1)


class RoPE(Encoding):
    def rot(self):
        r = int(round(self.dh * self.cfg["rotary_fraction"]))
        assert r % 2 == 0 and 0 < r <= self.dh
        return r

    def rotate(self, q, k, qpos, kpos):
        r, pr, base = self.rot(), self.cfg["pairing"], self.cfg["base"]
        return rope_apply(q, qpos, r, pr, base), rope_apply(k, kpos, r, pr, base)

    def aux(self, P, qpos, kpos):
        cos, sin = rope_cos_sin(qpos, self.rot(), self.cfg["base"])
        return {"aux/cos": cos, "aux/sin": sin}

    def meta(self):
        return {"pairing": self.cfg["pairing"], "rotary_fraction": self.cfg["rotary_fraction"],
                "rot_dim": self.rot(), "base": self.cfg["base"]}


class ALiBi(Encoding):
    def slopes(self):
        return torch.tensor(alibi_get_slopes(self.H))

    def bias(self, P, layer, qpos, kpos):
        dist = (qpos[:, None] - kpos[None, :]).to(torch.float64)
        return -self.slopes()[:, None, None] * dist[None]

    def aux(self, P, qpos, kpos):
        return {"aux/slopes": self.slopes(), "aux/bias": self.bias(P, 0, qpos, kpos)}


def make_encoding(cfg):
    pos = cfg["pos"]
    return {
        "none": lambda: NoneEnc(cfg),
        "sinusoidal": lambda: Sinusoidal(cfg),
        "learned": lambda: Learned(cfg),
        "shaw": lambda: Shaw(cfg),
        "shaw-scalar": lambda: ShawScalar(cfg),
        "t5": lambda: T5(cfg),
        "t5-alpha": lambda: T5(cfg, learn_alpha=True),
        "xl": lambda: XL(cfg),
        "deberta": lambda: DeBERTa(cfg),
        "rope": lambda: RoPE(cfg),
        "alibi": lambda: ALiBi(cfg),
    }[pos]()


# ---------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------

def param_specs(cfg, enc):
    """All parameters as (Go name, shape, kind), in initialisation order."""
    d, ff, V = cfg["d"], cfg["ff"], cfg["vocab"]
    ps = [("tok_emb", [V, d], "weight")]
    ps += enc.global_params()
    for i in range(cfg["layers"]):
        b = f"block{i}"
        ps += [(f"{b}/ln1/gamma", [d], "gain"), (f"{b}/ln1/beta", [d], "bias")]
        for n in ["q", "k", "v", "o"]:
            ps += [(f"{b}/attn/w{n}", [d, d], "weight"), (f"{b}/attn/b{n}", [d], "bias")]
        ps += enc.layer_params(i)
        ps += [(f"{b}/ln2/gamma", [d], "gain"), (f"{b}/ln2/beta", [d], "bias")]
        ps += [(f"{b}/ffn/w1", [d, ff], "weight"), (f"{b}/ffn/b1", [ff], "bias"),
               (f"{b}/ffn/w2", [ff, d], "weight"), (f"{b}/ffn/b2", [d], "bias")]
    ps += [("ln_f/gamma", [d], "gain"), ("ln_f/beta", [d], "bias"), ("head/w", [d, V], "weight")]
    return ps


def init_params(specs, gen, alpha=0.1):
    P = {}
    for name, shape, kind in specs:
        if kind == "weight":
            t = torch.randn(shape, generator=gen) * STD_WEIGHT
        elif kind == "bias":
            t = torch.randn(shape, generator=gen) * STD_BIAS
        elif kind == "gain":
            t = 1.0 + torch.randn(shape, generator=gen) * STD_BIAS
        elif kind == "table":
            t = torch.randn(shape, generator=gen) * STD_TABLE
        elif kind == "alpha":
            t = torch.full(shape, float(alpha))
        else:
            raise ValueError(kind)
        P[name] = t.requires_grad_(True)
    return P


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + LN_EPS) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def split_heads(x, H):
    B, T, d = x.shape
    return x.reshape(B, T, H, d // H).permute(0, 2, 1, 3)


def project_qkv(P, layer, xq, xkv, H):
    a = f"block{layer}/attn/"
    q = split_heads(xq @ P[a + "wq"] + P[a + "bq"], H)
    k = split_heads(xkv @ P[a + "wk"] + P[a + "bk"], H)
    v = split_heads(xkv @ P[a + "wv"] + P[a + "bv"], H)
    return q, k, v


def attention_core(enc, P, layer, q, k, v, qpos, kpos, causal):
    """Per-head attention without the output projection: returns out [B,H,Tq,dh], probs."""
    q, k = enc.rotate(q, k, qpos, kpos)
    s = enc.scores(P, layer, q, k, qpos, kpos)
    if causal:
        s = s.masked_fill(kpos[None, :] > qpos[:, None], float("-inf"))
    probs = torch.softmax(s, dim=-1)
    return enc.values(P, layer, probs, v, qpos, kpos), probs


def attention(enc, P, layer, xq, xkv, qpos, kpos, causal):
    q, k, v = project_qkv(P, layer, xq, xkv, enc.H)
    out, probs = attention_core(enc, P, layer, q, k, v, qpos, kpos, causal)
    B, H, Tq, dh = out.shape
    out = out.permute(0, 2, 1, 3).reshape(B, Tq, H * dh)
    a = f"block{layer}/attn/"
    return out @ P[a + "wo"] + P[a + "bo"], probs


def forward(cfg, enc, P, ids, targets):
    B, T = ids.shape
    qpos = cfg["q_start"] + torch.arange(T)
    kpos = cfg["k_start"] + torch.arange(T)
    x = P["tok_emb"][ids]
    pe = enc.embed(P, qpos)
    if pe is not None:
        x = x + pe[None]
    probs0 = None
    for i in range(cfg["layers"]):
        b = f"block{i}"
        h = layer_norm(x, P[f"{b}/ln1/gamma"], P[f"{b}/ln1/beta"])
        a, probs = attention(enc, P, i, h, h, qpos, kpos, cfg["causal"])
        if i == 0:
            probs0 = probs
        x = x + a
        h = layer_norm(x, P[f"{b}/ln2/gamma"], P[f"{b}/ln2/beta"])
        x = x + gelu_tanh(h @ P[f"{b}/ffn/w1"] + P[f"{b}/ffn/b1"]) @ P[f"{b}/ffn/w2"] \
            + P[f"{b}/ffn/b2"]
    x = layer_norm(x, P["ln_f/gamma"], P["ln_f/beta"])
    logits = x.reshape(B * T, -1) @ P["head/w"]
    logp = torch.log_softmax(logits, dim=-1)
    loss = -logp[torch.arange(B * T), targets].mean()
    return logits, loss, probs0


# ---------------------------------------------------------------------------------------
# safetensors writer / reader
# ---------------------------------------------------------------------------------------

_DT = {"F64": ("<f8", 8), "I64": ("<i8", 8)}


def write_safetensors(path, tensors, metadata):
    """tensors: name -> torch tensor (float64 or int64). metadata: str -> str."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype == torch.float64:
            dt = "F64"
        elif t.dtype == torch.int64:
            dt = "I64"
        else:
            raise TypeError(f"{name}: dtype {t.dtype}")
        raw = t.numpy().astype(_DT[dt][0]).tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """Returns (dict name -> numpy array, metadata). Validates offsets like the Go reader."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values())
    data = buf[8 + n:]
    out, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        s, e = info["data_offsets"]
        assert s == end, (name, s, end)
        np_dt, size = _DT[info["dtype"]]
        assert e - s == size * int(np.prod(info["shape"], dtype=np.int64)), name
        out[name] = np.frombuffer(data[s:e], dtype=np_dt).reshape(info["shape"])
        end = e
    assert end == len(data), "trailing bytes"
    return out, meta


# ---------------------------------------------------------------------------------------
# Brute force (per element, plain Python floats) for the self-check
# ---------------------------------------------------------------------------------------

def bf_t5_bucket(rel, N, max_distance, bidirectional):
    if bidirectional:
        nb = N // 2
        off = nb if rel > 0 else 0
        n = abs(rel)
    else:
        nb, off, n = N, 0, max(-rel, 0)
    me = nb // 2
    if n < me:
        return off + n
    return off + min(me + int(math.log(n / me) / math.log(max_distance / me) * (nb - me)), nb - 1)


def bf_log_bucket(rel, bucket_size, max_position):
    mid = bucket_size // 2
    if abs(rel) <= mid:
        return rel
    lp = math.ceil(math.log(abs(rel) / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    return lp if rel > 0 else -lp


def bf_slopes(n):
    if n & (n - 1) == 0:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    c = 1
    while c * 2 < n:
        c *= 2
    return bf_slopes(c) + [bf_slopes(2 * c)[2 * t] for t in range(n - c)]


def bf_rope(vec, pos, rot, pairing, base):
    out = list(vec)
    for i in range(rot // 2):
        ang = pos * (1.0 / base ** (2.0 * i / rot))
        c, s = math.cos(ang), math.sin(ang)
        ia, ib = (i, i + rot // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        a, b = vec[ia], vec[ib]
        out[ia] = a * c - b * s
        out[ib] = b * c + a * s
    return out


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def row_matmul(row, W, cols):
    """(row @ W)[cols] with W a nested list [in][out]."""
    return [sum(row[c] * W[c][o] for c in range(len(row))) for o in cols]


def bf_attention(cfg, P, layer, q, k, v, qpos, kpos, causal):
    """Brute-force per-element attention from the docstring formulas; returns [B][H][Tq][dh]."""
    pos = cfg["pos"]
    H = cfg["heads"]
    d = cfg["d"]
    dh = d // H
    L = {n: t.detach().tolist() for n, t in P.items()}
    a = f"block{layer}/attn/"
    q, k, v = q.tolist(), k.tolist(), v.tolist()
    qpos, kpos = qpos.tolist(), kpos.tolist()
    B, Tq, Tk = len(q), len(qpos), len(kpos)
    out = [[[[0.0] * dh for _ in range(Tq)] for _ in range(H)] for _ in range(B)]
    for b in range(B):
        for h in range(H):
            cols = list(range(h * dh, (h + 1) * dh))
            for i in range(Tq):
                qp = qpos[i]
                qi = q[b][h][i]
                if pos == "rope":
                    rot = int(round(dh * cfg["rotary_fraction"]))
                    qi = bf_rope(qi, qp, rot, cfg["pairing"], cfg["base"])
                sc = []
                for j in range(Tk):
                    kp = kpos[j]
                    kj = k[b][h][j]
                    if pos == "rope":
                        kj = bf_rope(kj, kp, rot, cfg["pairing"], cfg["base"])
                    s = dot(qi, kj) / math.sqrt(dh)
                    if pos in ("shaw", "shaw-scalar"):
                        K = cfg["K"]
                        r = min(max(kp - qp, -K), K) + K
                        if pos == "shaw":
                            s += dot(qi, L[a + "shaw_k"][r]) / math.sqrt(dh)
                        else:
                            s += L[a + "shaw_bias"][r][h]
                    elif pos in ("t5", "t5-alpha"):
                        bk = bf_t5_bucket(kp - qp, cfg["num_buckets"], cfg["max_distance"],
                                          not causal)
                        alpha = L["t5_alpha"][0] if pos == "t5-alpha" else 1.0
                        s += alpha * L["t5_bias"][bk][h]
                    elif pos == "alibi":
                        s += -bf_slopes(H)[h] * (qp - kp)
                    elif pos == "xl":
                        dist = qp - kp
                        freqs = [1.0 / cfg["base"] ** (c / d) for c in range(0, d, 2)]
                        R = [math.sin(dist * f) for f in freqs] + [math.cos(dist * f) for f in freqs]
                        Ph = row_matmul(R, L[a + "xl_wr"], cols)
                        un, vn = ((a + "xl_u", a + "xl_v") if cfg.get("untie_r")
                                  else ("xl_u", "xl_v"))
                        u, vv = L[un][h], L[vn][h]
                        s = (dot([x + y for x, y in zip(qi, u)], kj)
                             + dot([x + y for x, y in zip(qi, vv)], Ph)) / math.sqrt(dh)
                    elif pos == "deberta":
                        span, bs, mp = cfg["bucket_size"], cfg["bucket_size"], cfg["max_position"]
                        ic = min(max(bf_log_bucket(qp - kp, bs, mp) + span, 0), 2 * span - 1)
                        ip = min(max(-bf_log_bucket(kp - qp, bs, mp) + span, 0), 2 * span - 1)
                        pk = [x + y for x, y in zip(row_matmul(L["deberta_rel"][ic], L[a + "wk"], cols),
                                                    [L[a + "bk"][c] for c in cols])]
                        pq = [x + y for x, y in zip(row_matmul(L["deberta_rel"][ip], L[a + "wq"], cols),
                                                    [L[a + "bq"][c] for c in cols])]
                        s = (dot(qi, kj) + dot(qi, pk) + dot(kj, pq)) / math.sqrt(3 * dh)
                    if causal and kp > qp:
                        s = float("-inf")
                    sc.append(s)
                m = max(sc)
                e = [math.exp(x - m) for x in sc]
                z = sum(e)
                p = [x / z for x in e]
                for j in range(Tk):
                    vj = v[b][h][j]
                    if pos == "shaw":
                        K = cfg["K"]
                        r = min(max(kpos[j] - qp, -K), K) + K
                        vj = [x + y for x, y in zip(vj, L[a + "shaw_v"][r])]
                    for c in range(dh):
                        out[b][h][i][c] += p[j] * vj[c]
    return torch.tensor(out)


# ---------------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------------

def check_close(name, got, want, tol=1e-12):
    err = (got - want).abs().max().item()
    scale = max(1.0, want.abs().max().item())
    if not err <= tol * scale:
        raise AssertionError(f"self-check {name}: max abs err {err:.3e} (tol {tol * scale:.1e})")


def self_check():
    t0 = time.time()
    # Bucket rules: transcription of reference code vs brute force, wide ranges.
    rel = torch.arange(-300, 301)
    for N, md in [(8, 16), (32, 128), (16, 20), (4, 8), (4, 5)]:
        for bidir in (False, True):
            got = t5_relative_position_bucket(rel, bidir, N, md)
            want = torch.tensor([bf_t5_bucket(r, N, md, bidir) for r in rel.tolist()])
            assert torch.equal(got, want), ("t5 bucket", N, md, bidir)
    # Hand-checked values: causal N=8 md=16: n = 0..3 exact, 4,5 -> 4, 6,7 -> 5, 8..11 -> 6,
    # n >= 12 -> 7 (12/4 >= 4^(3/4)); n = 8 sits exactly on a boundary (log 2 / log 4 * 4 = 2).
    hand = t5_relative_position_bucket(-torch.arange(0, 20), False, 8, 16).tolist()
    assert hand == [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7], hand
    for bs, mp in [(4, 16), (8, 10), (8, 16), (256, 512), (2, 8), (32, 64)]:
        got = make_log_bucket_position(rel, bs, mp)
        want = torch.tensor([bf_log_bucket(r, bs, mp) for r in rel.tolist()])
        assert torch.equal(got, want), ("deberta bucket", bs, mp)
        assert torch.equal(got, -make_log_bucket_position(-rel, bs, mp)), "lb not odd"
    hand = make_log_bucket_position(torch.arange(0, 12), 8, 10).tolist()
    assert hand == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 8, 8], hand
    for n in range(1, 33):
        got = alibi_get_slopes(n)
        want = bf_slopes(n)
        assert len(got) == n and all(abs(x - y) <= 4e-15 * y for x, y in zip(got, want)), n
    assert alibi_get_slopes(6) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    # Sinusoidal table vs brute force.
    pos = torch.arange(0, 40)
    pe = sinusoid_table(pos, 10, 10000)
    for p in range(40):
        for i in range(5):
            w = 1.0 / 10000 ** (2 * i / 10)
            assert abs(pe[p, 2 * i] - math.sin(p * w)) < 1e-12
            assert abs(pe[p, 2 * i + 1] - math.cos(p * w)) < 1e-12
    # Primitive ops vs torch's.
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 5, 6, generator=g)
    ga, be = torch.randn(6, generator=g), torch.randn(6, generator=g)
    check_close("layer_norm", layer_norm(x, ga, be), F.layer_norm(x, (6,), ga, be, LN_EPS))
    check_close("gelu", gelu_tanh(x), F.gelu(x, approximate="tanh"))
    lg, tg = torch.randn(7, 11, generator=g), torch.randint(0, 11, (7,), generator=g)
    check_close("cross_entropy",
                -torch.log_softmax(lg, -1)[torch.arange(7), tg].mean(), F.cross_entropy(lg, tg))

    # Attention: vectorised vs brute force on tiny cases, for every encoding, with
    # self-attention positions and with Tq != Tk, q_start != k_start (large distances so
    # clipping/log buckets/clamps all occur), causal and not.
    tiny = dict(vocab=11, d=8, heads=2, layers=1, ff=16)
    variants = [dict(pos="none"), dict(pos="sinusoidal", base=10000),
                dict(pos="learned", max_len=30),
                dict(pos="shaw", K=2), dict(pos="shaw-scalar", K=2),
                dict(pos="t5", num_buckets=8, max_distance=16),
                dict(pos="t5-alpha", num_buckets=8, max_distance=16, alpha=0.1),
                dict(pos="xl", base=10000),
                dict(pos="deberta", bucket_size=4, max_position=16),
                dict(pos="deberta", bucket_size=8, max_position=10),
                dict(pos="rope", pairing="half", rotary_fraction=1.0, base=10000),
                dict(pos="rope", pairing="interleaved", rotary_fraction=1.0, base=10000),
                dict(pos="rope", pairing="half", rotary_fraction=0.5, base=10000),
                dict(pos="rope", pairing="interleaved", rotary_fraction=0.5, base=10000),
                dict(pos="alibi"), dict(pos="alibi", heads=3, d=9),
                dict(pos="xl", base=10000, untie_r=True)]
    geoms = [(4, 4, 0, 0), (3, 21, 17, 0), (5, 5, 3, 3)]   # (Tq, Tk, q_start, k_start)
    n_checked = 0
    for vi, var in enumerate(variants):
        for causal in (True, False):
            if var["pos"] == "alibi" and not causal:
                continue
            cfg = dict(tiny, causal=causal, **var)
            enc = make_encoding(cfg)
            gen = torch.Generator().manual_seed(100 + vi)
            P = init_params(param_specs(cfg, enc), gen, cfg.get("alpha", 0.1))
            for Tq, Tk, qs, ks in geoms:
                qpos, kpos = qs + torch.arange(Tq), ks + torch.arange(Tk)
                if causal and kpos[0] > qpos[0]:
                    continue
                xq = torch.randn(2, Tq, cfg["d"], generator=gen)
                xkv = torch.randn(2, Tk, cfg["d"], generator=gen)
                with torch.no_grad():
                    q, k, v = project_qkv(P, 0, xq, xkv, enc.H)
                    got, probs = attention_core(enc, P, 0, q, k, v, qpos, kpos, causal)
                    want = bf_attention(cfg, P, 0, q, k, v, qpos, kpos, causal)
                check_close(f"attention {var} causal={causal} geom={(Tq, Tk, qs, ks)}", got, want)
                n_checked += 1
    # Per-encoding spot facts (catch convention slips the brute force could share).
    cfg = dict(tiny, causal=True, pos="rope", pairing="half", rotary_fraction=1.0, base=10000)
    enc = make_encoding(cfg)
    qv = torch.randn(1, 1, 1, 4, generator=g)
    rq, _ = enc.rotate(qv, qv, torch.tensor([1]), torch.tensor([1]))
    a, b = qv[0, 0, 0, 0].item(), qv[0, 0, 0, 2].item()   # pair (x0, x2), theta0 = 1
    assert abs(rq[0, 0, 0, 0].item() - (a * math.cos(1) - b * math.sin(1))) < 1e-14
    assert abs(rq[0, 0, 0, 2].item() - (b * math.cos(1) + a * math.sin(1))) < 1e-14
    # RoPE: scores depend only on qpos - kpos.
    for pairing in ("half", "interleaved"):
        cfg = dict(tiny, pos="rope", pairing=pairing, rotary_fraction=1.0, base=10000)
        enc = make_encoding(cfg)
        qq, kk = torch.randn(1, 2, 3, 4, generator=g), torch.randn(1, 2, 3, 4, generator=g)
        s1 = torch.matmul(*[t if n == 0 else t.transpose(-1, -2) for n, t in
                            enumerate(enc.rotate(qq, kk, torch.arange(3), torch.arange(3)))])
        s2 = torch.matmul(*[t if n == 0 else t.transpose(-1, -2) for n, t in
                            enumerate(enc.rotate(qq, kk, 9 + torch.arange(3), 9 + torch.arange(3)))])
        check_close("rope relative " + pairing, s1, s2, 1e-12)
    # Safetensors round trip (including an I64 and a 0-d tensor).
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gen_golden_roundtrip.safetensors")
    ts = {"a": torch.randn(3, 5, generator=g), "b/c": torch.arange(-4, 3),
          "s": torch.tensor(2.5), "z": torch.randn(1, generator=g)}
    write_safetensors(tmp, ts, {"k": "v", "n": 3})
    back, meta = read_safetensors(tmp)
    assert meta == {"k": "v", "n": "3"}
    for name, t in ts.items():
        assert np.array_equal(back[name], t.numpy()) and back[name].shape == tuple(t.shape), name
    with open(tmp, "rb") as f:
        (hn,) = struct.unpack("<Q", f.read(8))
    assert hn % 8 == 0
    os.remove(tmp)
    print(f"self-check ok: {n_checked} brute-force attention comparisons, "
          f"{time.time() - t0:.1f}s", flush=True)


# ---------------------------------------------------------------------------------------
# Golden generation
# ---------------------------------------------------------------------------------------

def fmt(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def generate_case(name, overrides, out_dir):
    cfg = dict(BASE_CONFIG)
    cfg.update(overrides)
    enc = make_encoding(cfg)
    assert cfg["d"] % cfg["heads"] == 0
    if cfg["pos"] == "learned":
        assert cfg["q_start"] + cfg["T"] <= cfg["max_len"]
    seed = zlib.crc32(name.encode("utf-8")) % (2 ** 31)
    gen = torch.Generator().manual_seed(seed)
    specs = param_specs(cfg, enc)
    P = init_params(specs, gen, cfg.get("alpha", 0.1))
    B, T, V = cfg["B"], cfg["T"], cfg["vocab"]
    ids = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B * T,), generator=gen)

    logits, loss, probs0 = forward(cfg, enc, P, ids, targets)
    loss.backward()

    # Directional finite difference of the loss along a random direction.
    dgen = torch.Generator().manual_seed(seed + 1)
    dirs = {n: torch.randn(P[n].shape, generator=dgen) for n, _, _ in specs}
    norm = math.sqrt(sum((t ** 2).sum().item() for t in dirs.values()))
    dirs = {n: t / norm for n, t in dirs.items()}      # unit direction
    eps = 1e-5
    with torch.no_grad():
        def loss_at(sign):
            Q = {n: P[n] + sign * eps * dirs[n] for n in P}
            return forward(cfg, enc, Q, ids, targets)[1].item()
        fd = (loss_at(1) - loss_at(-1)) / (2 * eps)
    an = sum((P[n].grad * dirs[n]).sum().item() for n in P)
    assert abs(fd - an) <= 1e-8 + 1e-6 * abs(an), (name, fd, an)

    tensors = {}
    for n, shape, _ in specs:
        assert list(P[n].shape) == shape
        tensors[n] = P[n].detach()
        tensors["grad/" + n] = P[n].grad.detach()
    tensors["ids"] = ids
    tensors["targets"] = targets
    tensors["logits"] = logits.detach()
    tensors["loss"] = loss.detach().reshape(1)
    qpos = cfg["q_start"] + torch.arange(T)
    kpos = cfg["k_start"] + torch.arange(T)
    tensors["aux/block0_probs"] = probs0.detach()
    for k, v in enc.aux(P, qpos, kpos).items():
        tensors[k] = v.detach()

    meta = {"case": name, "pos": cfg["pos"], "causal": cfg["causal"],
            "bidirectional": not cfg["causal"], "d": cfg["d"], "heads": cfg["heads"],
            "head_dim": cfg["d"] // cfg["heads"], "layers": cfg["layers"], "ff": cfg["ff"],
            "vocab": V, "B": B, "T": T, "q_start": cfg["q_start"], "k_start": cfg["k_start"],
            "seed": seed, "ln_eps": LN_EPS}
    meta.update(enc.meta())
    meta = {k: fmt(v) for k, v in meta.items()}
    path = os.path.join(out_dir, name + ".safetensors")
    write_safetensors(path, tensors, meta)

    # Read back and compare bit-for-bit.
    back, bmeta = read_safetensors(path)
    assert bmeta == meta
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert np.array_equal(back[k], v.numpy()), k
    return path, loss.item(), os.path.getsize(path), fd, an


def write_tables(out_dir):
    """tables.safetensors: bucket functions and ALiBi slopes over wide ranges."""
    rel = torch.arange(-600, 601)
    ts = {"rel": rel}
    for N, md in [(8, 16), (32, 128)]:
        for bidir in (False, True):
            tag = f"t5_bucket/N{N}_md{md}_" + ("bidir" if bidir else "causal")
            ts[tag] = t5_relative_position_bucket(rel, bidir, N, md)
    for bs, mp in [(4, 16), (8, 10), (256, 512)]:
        ts[f"deberta_log_bucket/bs{bs}_mp{mp}"] = make_log_bucket_position(rel, bs, mp)
    for n in range(1, 17):
        ts[f"alibi_slopes/n{n}"] = torch.tensor(alibi_get_slopes(n))
    meta = {"note": "rel = kpos - qpos for t5_bucket/*, rel = qpos - kpos for "
                    "deberta_log_bucket/* (values lb(rel)); alibi_slopes/n<heads>"}
    path = os.path.join(out_dir, "tables.safetensors")
    write_safetensors(path, ts, meta)
    back, _ = read_safetensors(path)
    for k, v in ts.items():
        assert np.array_equal(back[k], v.numpy()), k
    return path, os.path.getsize(path)


def write_case(path, tensors, meta):
    """Writes one golden case of a module (gen_golden_<group>.py), reads it back and checks that
    every tensor's bytes and the metadata survived; returns (path, size)."""
    write_safetensors(path, tensors, meta)
    back, bmeta = read_safetensors(path)
    for k, v in tensors.items():
        assert back[k].tobytes() == v.detach().contiguous().numpy().tobytes(), (path, k)
    assert bmeta == {k: str(v) for k, v in meta.items()}, path
    return path, os.path.getsize(path)


def check_directional_fd(loss_of, vals, grads, tol, label, seed=99, eps=1e-6):
    """Checks autograd's gradients grads of loss_of(*vals)[0] against a central finite difference
    along one random direction (seeded): |fd - an| < tol * (1 + |an|)."""
    g = torch.Generator().manual_seed(seed)
    dirs = [torch.randn(v.shape, generator=g) for v in vals]
    plus = loss_of(*[v + eps * u for v, u in zip(vals, dirs)])[0]
    minus = loss_of(*[v - eps * u for v, u in zip(vals, dirs)])[0]
    fd = ((plus - minus) / (2 * eps)).item()
    an = sum((gr * u).sum() for gr, u in zip(grads, dirs)).item()
    assert abs(fd - an) < tol * (1 + abs(an)), (label, fd, an)


def module_main(doc, generate, self_check):
    """The command line of a 2-D module (gen_golden_<group>.py): --check-only runs its
    self-check, else generate(out) writes its cases and each file's size is printed."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--check-only", action="store_true")
    args = ap.parse_args()
    if args.check_only:
        self_check()
        return 0
    for path, size in generate(args.out):
        print(f"{os.path.basename(path):36s} {size / 1024:6.1f} KiB")
    return 0


# ---------------------------------------------------------------------------------------
# Issue #34: two conventions of reference libraries, options of posenc (hook-level cases)
# ---------------------------------------------------------------------------------------
# rope2d-axis-order y-first: timm's axial 2-D RoPE (huggingface/pytorch-image-models at
# aa4b5850c1543fa488abf260f18390eda46cf85d, timm/layers/pos_embed_sincos.py), the rotation of
# EVA-02 (timm/models/eva.py: create_rope_embed('cat') -> RotaryEmbeddingCat(head_dim,
# in_pixels=False, feat_shape=grid), applied per head by apply_rot_embed_cat(q, rope) with the
# default half=False; patch dropout gathers the rows of kept patches with
# apply_keep_indices_nlc, then unsqueeze(1)). build_rotary_pos_embed stacks the meshgrid of
# (rows, cols) ('ij'): its sin/cos [T, dh] hold the row's dh/4 bands first, then the column's,
# each repeated twice (interleaved pairs, rot). Bands in its in_pixels=False mode:
# freq_bands(dh/4, temperature, step=1) = temperature^(-4k/dh), as rope-2d's base^(-4k/dh).
# So pair p < dh/4 of a head turns by row*theta_p and pair dh/4+k by col*theta_k: rope-2d with
# rope2d-axis-order y-first and rope2d-base = temperature.
#
# xpos-centre floor: x-transformers' xPos (lucidrains/x-transformers at
# 9252ed7838021ee61e6c5be0930b3a9a88efdf06, x_transformers/x_transformers.py, RotaryEmbedding
# with use_xpos=True: max_pos = t.max() + 1, power = (t - (max_pos // 2)) / scale_base, so
# c = floor(N/2); the queries times scale, the keys times scale ** -1 (Attention.forward)).
# Its rotation: interleaved pairs over rotary_emb_dim = dim_head // 2 dims (the default),
# inv_freq = base^(-2p/rot), zeta = (2p + 0.4 rot)/(1.4 rot): xpos with rope-pairing
# interleaved, rope-fraction 0.5, xpos-centre floor.
#
# The library code below is verbatim (TIMM_SOURCE, XT_SOURCE), run in a namespace of its own
# with the few names it imports (timm's ndgrid and _assert, x-transformers' exists and einops'
# rearrange for the five patterns it uses; x-transformers' autocast decorator is a no-op on the
# CPU). Omitted: timm's RotaryEmbeddingCat.get_batch_embeds, init_non_persistent_buffers and
# update_feat_shape (unused). The golden vectors are computed by that code in float64: timm's
# build_rotary_pos_embed with float64 bands and dtype (positions are small integers, exact in
# its float32 grid), x-transformers' RotaryEmbedding with its float32 inv_freq buffer replaced
# by the same formula in float64; the self-check compares both with the float32 originals.
#
# Cases (posenc/golden_conventions_test.go):
#   2d-rope-timm        rope-2d y-first, 3x4 raster grid (timm's feat_shape [3, 4]), base 10000
#   2d-rope-timm-cross  rope-2d y-first, 4x5 grid, 6 query and 9 key patches (kept patches of
#                       apply_keep_indices_nlc, random order), base 100, dh 12, H 3
#   xpos-xt-self        xpos floor, 7 positions (N odd: floor(7/2) = 3, ceil 4), dh 16, rot 8
#   xpos-xt-decode      xpos floor, one query at 10 against keys 0..10 (x-transformers' cached
#                       step: q takes freqs[:, -1:], the keys are rotated at every step)
# Files hold q, k, wq, wk, q_out, k_out, grad/q, grad/k (q_coords, k_coords I64 [T, 2] (row, col)
# for rope-2d), loss = sum(q_out * wq) + sum(k_out * wk).

TIMM_SOURCE = r'''
def freq_bands(
        num_bands: int,
        temperature: float = 10000.,
        step: int = 2,
        device: Optional[torch.device] = None,
) -> torch.Tensor:
    exp = torch.arange(0, num_bands, step, dtype=torch.int64, device=device).to(torch.float32) / num_bands
    bands = 1. / (temperature ** exp)
    return bands


def swap_shape_xy(seq: List[int]) -> List[int]:
    if len(seq) < 2:
        return seq
    return [seq[1], seq[0]] + list(seq[2:])


def build_fourier_pos_embed(
        feat_shape: List[int],
        bands: Optional[torch.Tensor] = None,
        num_bands: int = 64,
        max_res: int = 224,
        temperature: float = 10000.,
        linear_bands: bool = False,
        include_grid: bool = False,
        in_pixels: bool = True,
        ref_feat_shape: Optional[List[int]] = None,
        grid_offset: float = 0.,
        grid_indexing: str = 'ij',
        device: Optional[torch.device] = None,
        dtype: torch.dtype = torch.float32,
) -> List[torch.Tensor]:
    """

    Args:
        feat_shape: Feature shape for embedding.
        bands: Pre-calculated frequency bands.
        num_bands: Number of frequency bands (determines output dim).
        max_res: Maximum resolution for pixel based freq.
        temperature: Temperature for non-pixel freq.
        linear_bands: Linear band spacing for pixel based freq.
        include_grid: Include the spatial grid in output.
        in_pixels: Output in pixel freq.
        ref_feat_shape: Reference feature shape for resize / fine-tune.
        grid_offset: Constant offset to add to grid for non-pixel freq.
        grid_indexing: Indexing mode for meshgrid ('ij' or 'xy')
        dtype: Output dtype.
        device: Output device.

    Returns:

    """
    if bands is None:
        if in_pixels:
            bands = pixel_freq_bands(
                num_bands,
                float(max_res),
                linear_bands=linear_bands,
                device=device,
            )
        else:
            bands = freq_bands(
                num_bands,
                temperature=temperature,
                step=1,
                device=device,
            )
    else:
        if device is None:
            device = bands.device
        if dtype is None:
            dtype = bands.dtype

    if grid_indexing == 'xy':
        feat_shape = swap_shape_xy(feat_shape)
        if ref_feat_shape is not None:
            ref_feat_shape = swap_shape_xy(ref_feat_shape)

    if in_pixels:
        t = [
            torch.linspace(-1., 1., steps=s, device=device, dtype=torch.float32)
            for s in feat_shape
        ]
    else:
        t = [
            torch.arange(s, device=device, dtype=torch.int64).to(torch.float32) + grid_offset
            for s in feat_shape
        ]

    if ref_feat_shape is not None:
        # eva's scheme for resizing rope embeddings (ref shape = pretrain)
        t = [x / f * r for x, f, r in zip(t, feat_shape, ref_feat_shape)]

    grid = torch.stack(torch.meshgrid(t, indexing=grid_indexing), dim=-1)
    grid = grid.unsqueeze(-1)
    pos = grid * bands

    pos_sin, pos_cos = pos.sin().to(dtype=dtype), pos.cos().to(dtype=dtype)
    out = [grid, pos_sin, pos_cos] if include_grid else [pos_sin, pos_cos]
    return out


def rot(x):
    # x:   [ x0  x1  x2  x3  x4  x5]
    # out: [-x1  x0 -x3  x2 -x5  x4]
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def apply_rot_embed_cat(
        x: torch.Tensor,
        emb: torch.Tensor,
        half: bool = False
) -> torch.Tensor:
    sin_emb, cos_emb = emb.chunk(2, -1)
    # x: [..., D], eg [x0, x1, x2, x3, x4, x5]
    if half:
        # sin: [..., D], eg [sin0, sin1, sin2, sin0, sin1, sin2]
        # cos: [..., D], eg [cos0, cos1, cos2, cos0, cos1, cos2
        # rope_rotate_half(x), eg [-x3, -x4, -x5, x0, x1, x2]
        return x * cos_emb + rope_rotate_half(x) * sin_emb
    else:
        # sin: [..., D], eg [sin0, sin0, sin1, sin1, sin2, sin2]
        # cos: [..., D], eg [cos0, cos0, cos1, cos1, cos2, cos2]
        # rot(x), eg [-x1, x0, -x3, x2, -x5, x4]
        return x * cos_emb + rot(x) * sin_emb


def apply_keep_indices_nlc(
        x: torch.Tensor,
        pos_embed: torch.Tensor,
        keep_indices: torch.Tensor,
        pos_embed_has_batch: bool = False,
) -> torch.Tensor:
    """ Apply keep indices to different ROPE shapes

    Expected pos_embed shapes:
    * [seq_len, pos_embed_dim] --> output [batch_size, seq_len, pos_embed_dim]
    * [num_heads, seq_len, pos_embed_dim] --> output [batch_size, num_heads, seq_len, pos_embed_dim]
    * [depth, num_heads, seq_len, pos_embed_dim] --> output [batch_size, depth, num_heads, seq_len, pos_embed_dim]

    And all of the above with leading batch dimension already present if `pos_embed_has_batch == True`

    """
    if pos_embed_has_batch:
        # Pos embed already includes batch dim
        _assert(pos_embed.ndim >= 3, 'Incorrect number of dimensions')  # At least [batch, seq_len, pos_embed_dim]
    else:
        # Add batch dimension and expand to batch size
        _assert(pos_embed.ndim >= 2, 'Incorrect number of dimensions')  # At least [seq_len, pos_embed_dim]
        expand_shape = (x.shape[0],) + (-1,) * pos_embed.ndim
        pos_embed = pos_embed.unsqueeze(0).expand(expand_shape)

    # Reshape keep_indices to add singleton dims
    keep_shape = (keep_indices.shape[0],) + (1,) * (pos_embed.ndim - 3) + (keep_indices.shape[1], 1)
    keep_indices = keep_indices.view(keep_shape)

    # Expand all dims to match position embedding except the gather dim (second-last)
    keep_expand = list(pos_embed.shape)
    keep_expand[-2] = -1
    keep_indices = keep_indices.expand(keep_expand)

    return pos_embed.gather(-2, keep_indices)


def build_rotary_pos_embed(
        feat_shape: List[int],
        bands: Optional[torch.Tensor] = None,
        dim: int = 64,
        max_res: int = 224,
        temperature: float = 10000.,
        linear_bands: bool = False,
        in_pixels: bool = True,
        ref_feat_shape: Optional[List[int]] = None,
        grid_offset: float = 0.,
        grid_indexing: str = 'ij',
        device: Optional[torch.device] = None,
        dtype: torch.dtype = torch.float32,
):
    """

    Args:
        feat_shape: Spatial shape of the target tensor for embedding.
        bands: Optional pre-generated frequency bands
        dim: Output dimension of embedding tensor.
        max_res: Maximum resolution for pixel mode.
        temperature: Temperature (inv freq) for non-pixel mode
        linear_bands: Linearly (instead of log) spaced bands for pixel mode
        in_pixels: Pixel vs language (inv freq) mode.
        ref_feat_shape: Reference feature shape for resize / fine-tune.
        grid_offset: Constant offset to add to grid for non-pixel freq.
        grid_indexing: Indexing mode for meshgrid ('ij' or 'xy')
        device: Output device.
        dtype: Output dtype.

    Returns:

    """
    sin_emb, cos_emb = build_fourier_pos_embed(
        feat_shape,
        bands=bands,
        num_bands=dim // 4,
        max_res=max_res,
        temperature=temperature,
        linear_bands=linear_bands,
        in_pixels=in_pixels,
        ref_feat_shape=ref_feat_shape,
        grid_offset=grid_offset,
        grid_indexing=grid_indexing,
        device=device,
        dtype=dtype,
    )
    num_spatial_dim = 1
    # this would be much nicer as a .numel() call to torch.Size(), but torchscript sucks
    for x in feat_shape:
        num_spatial_dim *= x
    sin_emb = sin_emb.reshape(num_spatial_dim, -1).repeat_interleave(2, -1)
    cos_emb = cos_emb.reshape(num_spatial_dim, -1).repeat_interleave(2, -1)
    return sin_emb, cos_emb


class RotaryEmbeddingCat(nn.Module):
    """ Rotary position embedding w/ concatenatd sin & cos

    The following impl/resources were referenced for this impl:
    * https://github.com/lucidrains/vit-pytorch/blob/6f3a5fcf0bca1c5ec33a35ef48d97213709df4ba/vit_pytorch/rvt.py
    * https://blog.eleuther.ai/rotary-embeddings/
    """

    def __init__(
            self,
            dim: int,
            max_res: int = 224,
            temperature: float = 10000,
            in_pixels: bool = True,
            linear_bands: bool = False,
            feat_shape: Optional[List[int]] = None,
            ref_feat_shape: Optional[List[int]] = None,
            grid_offset: float = 0.,
            grid_indexing: str = 'ij',
            device=None,
            dtype=None,
    ):
        super().__init__()
        self.dim = dim
        self.max_res = max_res
        self.temperature = temperature
        self.in_pixels = in_pixels
        self.linear_bands = linear_bands
        self.feat_shape = feat_shape
        self.ref_feat_shape = ref_feat_shape
        self.grid_offset = grid_offset
        self.grid_indexing = grid_indexing

        # Track which mode we're in
        self._use_cached_embed = feat_shape is not None

        if feat_shape is None:
            # bands mode: cache bands, rebuild embeddings on each get_embed call
            bands_shape = (dim // 4,)
            self.register_buffer('bands', torch.empty(bands_shape, device=device, dtype=dtype), persistent=False)
            self.pos_embed = None
        else:
            # embed mode: cache full embeddings
            self.bands = None
            num_pos = 1
            for s in feat_shape:
                num_pos *= s
            emb_shape = (num_pos, dim * 2)  # concatenated sin & cos
            self.register_buffer('pos_embed', torch.empty(emb_shape, device=device, dtype=dtype), persistent=False)

        # TODO: skip init when on meta device when safe to do so
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialize parameters and buffers."""
        self._init_buffers()

    def _init_buffers(self) -> None:
        """Compute and fill non-persistent buffer values."""
        if not self._use_cached_embed:
            self.bands.copy_(self._compute_bands())
        else:
            self.pos_embed.copy_(self._get_pos_embed_values(self.feat_shape))

    def _compute_bands(self, device=None, dtype=None):
        """Compute frequency bands."""
        if self.in_pixels:
            bands = pixel_freq_bands(
                self.dim // 4,
                float(self.max_res),
                linear_bands=self.linear_bands,
            )
        else:
            bands = freq_bands(
                self.dim // 4,
                temperature=self.temperature,
                step=1,
            )
        return bands.to(device=device, dtype=dtype)

    def _get_pos_embed_values(self, feat_shape: List[int], device=None, dtype=torch.float32):
        embeds = build_rotary_pos_embed(
            feat_shape=feat_shape,
            dim=self.dim,
            max_res=self.max_res,
            temperature=self.temperature,
            linear_bands=self.linear_bands,
            in_pixels=self.in_pixels,
            ref_feat_shape=self.ref_feat_shape,
            grid_offset=self.grid_offset,
            grid_indexing=self.grid_indexing,
            device=device,
            dtype=dtype,
        )
        return torch.cat(embeds, -1)

    def init_non_persistent_buffers(self) -> None:
        """Initialize non-persistent buffers."""
        self._init_buffers()

    def update_feat_shape(self, feat_shape: List[int]):
        if self.feat_shape is not None and feat_shape != self.feat_shape:
            # only update if feat_shape was set and different from previous value
            assert self.pos_embed is not None
            self.pos_embed = self._get_pos_embed_values(
                feat_shape,
                device=self.pos_embed.device,
                dtype=self.pos_embed.dtype,
            )
            self.feat_shape = feat_shape

    def get_embed(self, shape: Optional[List[int]] = None):
        if shape is not None and self.bands is not None:
            # rebuild embeddings from cached bands every call, use if target shape changes
            embeds = build_rotary_pos_embed(
                shape,
                self.bands,
                in_pixels=self.in_pixels,
                ref_feat_shape=self.ref_feat_shape,
                grid_offset=self.grid_offset,
                grid_indexing=self.grid_indexing,
            )
            return torch.cat(embeds, -1)
        elif self.pos_embed is not None:
            return self.pos_embed
        else:
            assert False, "get_embed() requires pre-computed pos embed or valid shape w/ pre-computed bands"

    def forward(self, x):
        # assuming channel-first tensor where spatial dim are >= 2
        pos_embed = self.get_embed(x.shape[2:])
        return apply_rot_embed_cat(x, pos_embed)
'''

XT_SOURCE = r'''
class RotaryEmbedding(Module):
    def __init__(
        self,
        dim,
        use_xpos = False,
        scale_base = 512,
        interpolation_factor = 1.,
        base = 10000,
        base_rescale_factor = 1.
    ):
        super().__init__()
        # proposed by reddit user bloc97, to rescale rotary embeddings to longer sequence length without fine-tuning
        # has some connection to NTK literature
        # https://www.reddit.com/r/LocalLLaMA/comments/14lz7j5/ntkaware_scaled_rope_allows_llama_models_to_have/
        base *= base_rescale_factor ** (dim / (dim - 2))

        inv_freq = 1. / (base ** (arange(0, dim, 2).float() / dim))
        self.register_buffer('inv_freq', inv_freq)

        assert interpolation_factor >= 1.
        self.interpolation_factor = interpolation_factor

        if not use_xpos:
            self.register_buffer('scale', None)
            return

        scale = (arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)

        self.scale_base = scale_base
        self.register_buffer('scale', scale)

    def forward_from_seq_len(self, seq_len):
        device = self.inv_freq.device

        t = arange(seq_len, device = device)
        return self.forward(t)

    @autocast('cuda', enabled = False)
    def forward(self, t, offset = 0):
        max_pos = t.max() + 1

        if t.ndim == 1:
            t = rearrange(t, 'n -> 1 n')

        freqs = torch.einsum('b i , j -> b i j', t.type_as(self.inv_freq), self.inv_freq) / self.interpolation_factor
        freqs = stack((freqs, freqs), dim = -1)
        freqs = rearrange(freqs, '... d r -> ... (d r)')

        if not exists(self.scale):
            return freqs, 1.

        power = (t - (max_pos // 2)) / self.scale_base
        scale = self.scale ** rearrange(power, '... n -> ... n 1')
        scale = stack((scale, scale), dim = -1)
        scale = rearrange(scale, '... d r -> ... (d r)')

        return freqs, scale

def rotate_half(x):
    x = rearrange(x, '... (d r) -> ... d r', r = 2)
    x1, x2 = x.unbind(dim = -1)
    x = stack((-x2, x1), dim = -1)
    return rearrange(x, '... d r -> ... (d r)')

@autocast('cuda', enabled = False)
def apply_rotary_pos_emb(t, freqs, scale = 1):
    rot_dim, seq_len, orig_dtype = freqs.shape[-1], t.shape[-2], t.dtype

    freqs = freqs[:, -seq_len:, :]
    scale = scale[:, -seq_len:, :] if is_tensor(scale) else scale

    if t.ndim == 4 and freqs.ndim == 3:
        freqs = rearrange(freqs, 'b n d -> b 1 n d')

        if is_tensor(scale):
            scale = rearrange(scale, 'b n d -> b 1 n d')

    # partial rotary embeddings, Wang et al. GPT-J
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)
    out = cat((t, t_unrotated), dim = -1)

    return out.type(orig_dtype)
'''


def conv_timm_ns():
    """The namespace of TIMM_SOURCE: timm's functions and RotaryEmbeddingCat."""
    from typing import List, Optional, Tuple, Union

    def ndgrid(*tensors):  # timm/layers/grid.py
        return torch.meshgrid(*tensors, indexing='ij')

    def _assert(condition, message):  # timm/layers/trace_utils.py
        assert condition, message

    ns = dict(torch=torch, nn=torch.nn, math=math, List=List, Optional=Optional, Tuple=Tuple, Union=Union,
              ndgrid=ndgrid, _assert=_assert)
    exec(compile(TIMM_SOURCE, "timm/layers/pos_embed_sincos.py", "exec"), ns)
    return ns


def conv_xt_ns():
    """The namespace of XT_SOURCE: x-transformers' RotaryEmbedding and apply_rotary_pos_emb."""
    def rearrange(x, pattern, **axes):  # einops.rearrange, the patterns XT_SOURCE uses
        if pattern == 'n -> 1 n':
            return x.unsqueeze(0)
        if pattern == '... d r -> ... (d r)':
            return x.reshape(*x.shape[:-2], -1)
        if pattern == '... n -> ... n 1':
            return x.unsqueeze(-1)
        if pattern == '... (d r) -> ... d r':
            return x.reshape(*x.shape[:-1], -1, axes['r'])
        if pattern == 'b n d -> b 1 n d':
            assert x.ndim == 3
            return x.unsqueeze(1)
        raise ValueError(pattern)

    def autocast(*args, **kwargs):
        return lambda f: f

    ns = dict(torch=torch, Module=torch.nn.Module, arange=torch.arange, stack=torch.stack, cat=torch.cat,
              is_tensor=torch.is_tensor, exists=lambda v: v is not None, rearrange=rearrange, autocast=autocast)
    exec(compile(XT_SOURCE, "x_transformers/x_transformers.py", "exec"), ns)
    return ns


def conv_timm_bands(dh, temperature):
    """freq_bands(dh // 4, temperature, step=1) in float64."""
    nb = dh // 4
    return 1.0 / (temperature ** (torch.arange(0, nb, 1, dtype=torch.float64) / nb))


def conv_timm_embed(ns, rows, cols, dh, temperature, grid_indexing='ij'):
    """RotaryEmbeddingCat(dh, temperature, in_pixels=False).get_embed([rows, cols]) in float64:
    cat([sin, cos]) [rows*cols, 2*dh], raster order."""
    sin, cos = ns["build_rotary_pos_embed"]([rows, cols], bands=conv_timm_bands(dh, temperature), in_pixels=False,
                                            grid_indexing=grid_indexing, dtype=torch.float64)
    return torch.cat([sin, cos], -1)


def conv_timm_forward(ns, t, rows, cols, dh, base):
    """q_out, k_out, loss of rope-2d y-first: timm's rotation of the patches at t['q_coords'],
    t['k_coords'] (eva.py: apply_keep_indices_nlc of the kept patches, unsqueeze(1),
    apply_rot_embed_cat)."""
    emb = conv_timm_embed(ns, rows, cols, dh, base)
    out = []
    for x, coords in ((t["q"], t["q_coords"]), (t["k"], t["k_coords"])):
        keep = (coords[:, 0] * cols + coords[:, 1]).unsqueeze(0).expand(x.shape[0], -1)
        rope = ns["apply_keep_indices_nlc"](x, emb, keep).unsqueeze(1)  # [B, 1, T, 2*dh]
        out.append(ns["apply_rot_embed_cat"](x, rope))
    return out[0], out[1], (out[0] * t["wq"]).sum() + (out[1] * t["wk"]).sum()


def conv_xt_rotary(ns, rot, base, gamma):
    """x-transformers' RotaryEmbedding(rot, use_xpos=True, scale_base=gamma, base=base), inv_freq in
    float64."""
    re = ns["RotaryEmbedding"](rot, use_xpos=True, scale_base=gamma, base=base)
    re.inv_freq = 1. / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    return re


def conv_xt_forward(ns, c, q, k):
    """q_out, k_out of xpos floor: x-transformers' rotary_pos_emb = RotaryEmbedding(arange(N))
    (TransformerWrapper: pos = arange(seq_len), no memory), then Attention.forward's
    apply_rotary_pos_emb(q, freqs, scale) and apply_rotary_pos_emb(k, freqs, scale ** -1.);
    queries and keys end at position N - 1 (self-attention or a cached decoding step)."""
    rot = int(c["fraction"] * c["dh"])
    n = c["q_start"] + c["tq"]
    assert n == c["k_start"] + c["tk"] and c["k_start"] == 0
    freqs, scale = conv_xt_rotary(ns, rot, c["base"], c["xpos_scale_base"])(torch.arange(n))
    return ns["apply_rotary_pos_emb"](q, freqs, scale), ns["apply_rotary_pos_emb"](k, freqs, scale ** -1.)


def conv_bf_rotate(x, angle, mult=lambda t, p: 1.0, rot=None):
    """Per element (plain Python floats): interleaved pair p of x [B, H, T, dh] rotated by
    angle(t, p), cos and sin times mult(t, p); dims rot.. unchanged."""
    B, H, T, D = x.shape
    rot = D if rot is None else rot
    out = x.clone()
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for p in range(rot // 2):
                    phi, m = angle(t, p), mult(t, p)
                    a, bb = x[b, h, t, 2 * p].item(), x[b, h, t, 2 * p + 1].item()
                    out[b, h, t, 2 * p] = m * (a * math.cos(phi) - bb * math.sin(phi))
                    out[b, h, t, 2 * p + 1] = m * (bb * math.cos(phi) + a * math.sin(phi))
    return out


def conv_close(name, got, want, tol):
    err = ((got - want).abs() / (1 + want.abs())).max().item()
    assert err <= tol, f"{name}: max rel error {err} > {tol}"


def conv_raster(rows, cols):
    r = torch.arange(rows * cols)
    return torch.stack([r // cols, r % cols], dim=1)


def conv_self_check():
    """timm: the float64 tables against RotaryEmbeddingCat in float32; rows first with 'ij' and
    columns first with 'xy' against a per-element rotation; autograd against a central
    difference. x-transformers: inv_freq against its float32 buffer; the rotation against a
    per-element one with c = floor(N/2); scores equal to those of c = ceil(N/2), rotated q not
    (N odd); autograd against a central difference."""
    ts, xs = conv_timm_ns(), conv_xt_ns()
    g = torch.Generator().manual_seed(34)
    rows, cols, dh, temp = 3, 5, 8, 10000.0
    assert torch.allclose(conv_timm_bands(dh, temp), ts["freq_bands"](dh // 4, temp, step=1).double(),
                          rtol=1e-6, atol=0)
    ref = ts["RotaryEmbeddingCat"](dh, temperature=temp, in_pixels=False, feat_shape=[rows, cols]).get_embed()
    # (computed in float32 by _get_pos_embed_values, copied into a buffer of the default dtype)
    conv_close("timm embed vs RotaryEmbeddingCat (float32)", conv_timm_embed(ts, rows, cols, dh, temp),
               ref.double(), 1e-6)
    rc = conv_raster(rows, cols)
    th = conv_timm_bands(dh, temp).tolist()
    x = torch.randn(2, 2, rows * cols, dh, generator=g)
    for gi, first in (("ij", 0), ("xy", 1)):  # 'ij': the row first (y-first); 'xy': the column (x-first)
        emb = conv_timm_embed(ts, rows, cols, dh, temp, gi)

        def angle(t, p):
            a = rc[t, first].item() if p < dh // 4 else rc[t, 1 - first].item()
            return a * th[p % (dh // 4)]
        conv_close(f"timm {gi} vs per element", ts["apply_rot_embed_cat"](x, emb), conv_bf_rotate(x, angle), 1e-12)
    # the keep-indices path on the raster grid is the plain one
    t = {"q": x, "k": x[:, :, :4], "q_coords": rc, "k_coords": rc[[7, 0, 12, 3]],
         "wq": torch.randn(x.shape, generator=g), "wk": torch.randn(2, 2, 4, dh, generator=g)}
    qo, ko, _ = conv_timm_forward(ts, t, rows, cols, dh, temp)
    emb = conv_timm_embed(ts, rows, cols, dh, temp)
    conv_close("timm keep indices (q)", qo, ts["apply_rot_embed_cat"](x, emb), 0)
    conv_close("timm keep indices (k)", ko, ts["apply_rot_embed_cat"](x[:, :, :4], emb[[7, 0, 12, 3]]), 0)

    def timm_loss(q, k):
        return conv_timm_forward(ts, {**t, "q": q, "k": k}, rows, cols, dh, temp)[2:]
    qq, kk = x.clone().requires_grad_(), x[:, :, :4].clone().requires_grad_()
    check_directional_fd(timm_loss, [x, x[:, :, :4]], torch.autograd.grad(timm_loss(qq, kk)[0], [qq, kk]), 1e-7, "timm")
    # x-transformers
    rot, base, gamma, n = 8, 10000.0, 4.0, 7
    assert torch.allclose(conv_xt_rotary(xs, rot, base, gamma).inv_freq,
                          xs["RotaryEmbedding"](rot, use_xpos=True, scale_base=gamma, base=base).inv_freq.double(),
                          rtol=1e-6, atol=0)
    c = dict(dh=16, fraction=0.5, q_start=0, tq=n, k_start=0, tk=n, base=base, xpos_scale_base=gamma)
    q, k = torch.randn(2, 2, n, 16, generator=g), torch.randn(2, 2, n, 16, generator=g)
    qo, ko = conv_xt_forward(xs, c, q, k)
    zeta = [(2 * p + 0.4 * rot) / (1.4 * rot) for p in range(rot // 2)]
    inv = [base ** (-2 * p / rot) for p in range(rot // 2)]

    def ang(t, p):
        return t * inv[p]
    for centre, same in ((n // 2, True), ((n + 1) // 2, False)):
        bq = conv_bf_rotate(q, ang, lambda t, p: zeta[p] ** ((t - centre) / gamma), rot)
        bk = conv_bf_rotate(k, ang, lambda t, p: zeta[p] ** (-(t - centre) / gamma), rot)
        if same:
            conv_close("x-transformers xpos vs per element, floor(N/2)", qo, bq, 1e-12)
            conv_close("x-transformers xpos vs per element, floor(N/2) (k)", ko, bk, 1e-12)
        else:
            assert (qo - bq).abs().max().item() > 1e-3, "floor and ceil give the same rotated q"
            conv_close("scores: the centre cancels", qo @ ko.transpose(-1, -2), bq @ bk.transpose(-1, -2), 1e-12)
    cd = dict(c, q_start=n - 1, tq=1)
    qd, kd = conv_xt_forward(xs, cd, q[:, :, -1:], k)
    conv_close("x-transformers decoding step", qd, qo[:, :, -1:], 1e-15)
    conv_close("x-transformers decoding step (k)", kd, ko, 0)
    wq, wk = torch.randn(q.shape, generator=g), torch.randn(k.shape, generator=g)

    def xt_loss(q, k):
        a, b = conv_xt_forward(xs, c, q, k)
        return ((a * wq).sum() + (b * wk).sum(),)
    qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
    check_directional_fd(xt_loss, [q, k], torch.autograd.grad(xt_loss(qq, kk)[0], [qq, kk]), 1e-7, "x-transformers")


# (case, rows, cols, B, H, dh, base, TQ, TK (0: the raster grid, self-attention))
CONV_TIMM_CASES = [
    ("2d-rope-timm", 3, 4, 2, 2, 8, 10000.0, 0, 0),
    ("2d-rope-timm-cross", 4, 5, 2, 3, 12, 100.0, 6, 9),
]
# (case, overrides of dh, q_start, tq, k_start, tk, base, xpos_scale_base); B = H = 2, fraction 0.5
CONV_XT_CASES = [
    ("xpos-xt-self", dict(dh=16, q_start=0, tq=7, k_start=0, tk=7, base=10000.0, xpos_scale_base=8.0)),
    ("xpos-xt-decode", dict(dh=16, q_start=10, tq=1, k_start=0, tk=11, base=100.0, xpos_scale_base=4.0)),
]


def generate_conventions(out_dir):
    """Self-checks, then writes the cases of issue #34's conventions (timm's axis order of 2-D
    RoPE, x-transformers' xPos centre). Returns [(path, size)]."""
    conv_self_check()
    ts, xs = conv_timm_ns(), conv_xt_ns()
    written = []
    for i, (case, rows, cols, B, H, dh, base, TQ, TK) in enumerate(CONV_TIMM_CASES):
        g = torch.Generator().manual_seed(3400 + i)
        if TQ == 0:
            qc = kc = conv_raster(rows, cols)
        else:
            qc = conv_raster(rows, cols)[torch.randperm(rows * cols, generator=g)[:TQ]]
            kc = conv_raster(rows, cols)[torch.randperm(rows * cols, generator=g)[:TK]]
        tq, tk = qc.shape[0], kc.shape[0]
        t = {"q": torch.randn(B, H, tq, dh, generator=g), "k": torch.randn(B, H, tk, dh, generator=g),
             "wq": torch.randn(B, H, tq, dh, generator=g), "wk": torch.randn(B, H, tk, dh, generator=g),
             "q_coords": qc, "k_coords": kc}
        q, k = t["q"].clone().requires_grad_(), t["k"].clone().requires_grad_()
        qo, ko, loss = conv_timm_forward(ts, {**t, "q": q, "k": k}, rows, cols, dh, base)
        gq, gk = torch.autograd.grad(loss, [q, k])
        out = dict(t)
        out.update({"q_out": qo.detach(), "k_out": ko.detach(), "grad/q": gq, "grad/k": gk})
        meta = dict(case=case, pos="rope-2d", rope2d_axis_order="y-first", B=B, H=H, dh=dh, rows=rows, cols=cols,
                    base=repr(base), reference="timm build_rotary_pos_embed + apply_rot_embed_cat")
        written.append(write_case(os.path.join(out_dir, case + ".safetensors"), out, meta))
    for i, (case, ov) in enumerate(CONV_XT_CASES):
        c = dict(B=2, H=2, fraction=0.5, pairing="interleaved", xpos_centre="floor", **ov)
        g = torch.Generator().manual_seed(4400 + i)
        B, H, dh, tq, tk = c["B"], c["H"], c["dh"], c["tq"], c["tk"]
        t = {"q": torch.randn(B, H, tq, dh, generator=g), "k": torch.randn(B, H, tk, dh, generator=g),
             "wq": torch.randn(B, H, tq, dh, generator=g), "wk": torch.randn(B, H, tk, dh, generator=g)}
        q, k = t["q"].clone().requires_grad_(), t["k"].clone().requires_grad_()
        qo, ko = conv_xt_forward(xs, c, q, k)
        gq, gk = torch.autograd.grad((qo * t["wq"]).sum() + (ko * t["wk"]).sum(), [q, k])
        out = dict(t)
        out.update({"q_out": qo.detach(), "k_out": ko.detach(), "grad/q": gq, "grad/k": gk})
        meta = {kk: (repr(v) if isinstance(v, float) else v) for kk, v in c.items()}
        meta.update(case=case, pos="xpos", reference="x-transformers RotaryEmbedding(use_xpos=True)")
        written.append(write_case(os.path.join(out_dir, case + ".safetensors"), out, meta))
    return written


# ---------------------------------------------------------------------------------------
# Issue #34, point 1: timm's antialiased resampling of the learned 2-D table, its class token
# ---------------------------------------------------------------------------------------
# From huggingface/pytorch-image-models at aa4b5850c1543fa488abf260f18390eda46cf85d:
# timm/layers/pos_embed.py resample_abs_pos_embed (interpolation='bicubic', antialias=True by
# default; the prefix rows, num_prefix_tokens of them, are split off and put back unchanged) and
# timm/models/vision_transformer.py VisionTransformer._pos_embed (cls_token prepended; with
# no_embed_class=False the table has a row for it: concatenate, then add; with True: add, then
# concatenate; dynamic_img_size resamples the table to the input grid) and global_pool_nlc
# ('token': x[:, 0]; 'avg': the mean over x[:, num_prefix_tokens:]). TIMMVIT_SOURCE is that
# code verbatim, less the decorators (@torch.fx.wrap, @register_notrace_function); _pos_embed is
# a method of the stub TimmViTStub below. resample_abs_pos_embed casts the table to float32
# around F.interpolate; the golden vectors are computed by the same source with that one line
# ("posemb = posemb.float()") removed, in float64, and the self-check compares the two at 1e-6.
#
# PyTorch's antialiased kernel (aten/src/ATen/native/cpu/UpSampleKernel.cpp,
# HelperInterpBase::_compute_indices_min_size_weights_aa, torch 1.13): with s = in/out,
# support = n*s when s >= 1 (downsizing), else n (n = 1 bilinear, 2 bicubic); centre =
# s*(i + 0.5); taps xmin = max(int(centre - support + 0.5), 0) .. min(int(centre + support +
# 0.5), in) - 1; weights filter((j - centre + 0.5) / max(s, 1)) renormalised to sum 1; filter the
# triangle (bilinear) or Keys' cubic with a = -0.5 (bicubic; upsample_bicubic2d without
# antialias uses -0.75 and clamps the taps instead). timmvit_aa_weights is that, per element;
# the self-check compares it with F.interpolate(antialias=True) at 1e-12 over many sizes.
#
# Cases:
#   2d-learned-{bicubic,bilinear}-aa-*  hook-level, the format of gen_golden_abs.py (x, coords, w,
#       pos_emb_2d, out, aux/pe, grad/x, grad/pos_emb_2d; metadata resample = bicubic-aa, ...):
#       the table resampled by F.interpolate(antialias=True) (posenc/golden2d_abs_test.go)
#   vit-*  a tiny ViT (layers.ViT, layers/golden_vit_test.go): patches [B, T, P*P] (raster
#       order, as images.Patches) -> patch_embed (Linear) -> timm's _pos_embed -> pre-LN blocks
#       (this library's: gen_golden.py's attention without positions, bidirectional, GELU tanh,
#       LN eps 1e-5; timm's blocks use erf GELU and eps 1e-6) -> ln_f -> global_pool_nlc
#       ('token' or 'avg': ln_f before the mean, this library's order, not timm's fc_norm) ->
#       head (Linear with bias) -> mean cross-entropy. Parameters in the Go layout and names:
#       cls_token [1, d], pos_emb_2d [R*C, d], pos_emb_2d_cls [1, d] (timm's pos_embed row 0),
#       pos_emb [max_len, d] (1-D: timm's pos_embed = its rows 0..T), cpe/w [k*k, d], cpe/b [d];
#       every gradient (grad/<name>), logits, loss.

TIMMVIT_SOURCE = r'''
def resample_abs_pos_embed(
        posemb: torch.Tensor,
        new_size: List[int],
        old_size: Optional[List[int]] = None,
        num_prefix_tokens: int = 1,
        interpolation: str = 'bicubic',
        antialias: bool = True,
        verbose: bool = False,
):
    # sort out sizes, assume square if old size not provided
    num_pos_tokens = posemb.shape[1]
    num_new_tokens = new_size[0] * new_size[1] + num_prefix_tokens
    if num_new_tokens == num_pos_tokens and new_size[0] == new_size[1]:
        return posemb

    if old_size is None:
        hw = int(math.sqrt(num_pos_tokens - num_prefix_tokens))
        old_size = hw, hw

    if num_prefix_tokens:
        posemb_prefix, posemb = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    else:
        posemb_prefix, posemb = None, posemb

    # do the interpolation
    embed_dim = posemb.shape[-1]
    orig_dtype = posemb.dtype
    posemb = posemb.float()  # interpolate needs float32
    posemb = posemb.reshape(1, old_size[0], old_size[1], -1).permute(0, 3, 1, 2)
    posemb = F.interpolate(posemb, size=new_size, mode=interpolation, antialias=antialias)
    posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)
    posemb = posemb.to(orig_dtype)

    # add back extra (class, etc) prefix tokens
    if posemb_prefix is not None:
        posemb = torch.cat([posemb_prefix, posemb], dim=1)

    if not torch.jit.is_scripting() and verbose:
        _logger.info(f'Resized position embedding: {old_size} to {new_size}.')

    return posemb


def global_pool_nlc(
        x: torch.Tensor,
        pool_type: str = 'token',
        num_prefix_tokens: int = 1,
        reduce_include_prefix: bool = False,
):
    if not pool_type:
        return x

    if pool_type == 'token':
        x = x[:, 0]  # class token
    else:
        x = x if reduce_include_prefix else x[:, num_prefix_tokens:]
        if pool_type == 'avg':
            x = x.mean(dim=1)
        elif pool_type == 'avgmax':
            x = 0.5 * (x.amax(dim=1) + x.mean(dim=1))
        elif pool_type == 'max':
            x = x.amax(dim=1)
        else:
            assert not pool_type, f'Unknown pool type {pool_type}'

    return x


def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
    """Apply positional embedding to input."""
    to_cat = []
    if self.cls_token is not None:
        to_cat.append(self.cls_token.expand(x.shape[0], -1, -1))
    if self.reg_token is not None:
        to_cat.append(self.reg_token.expand(x.shape[0], -1, -1))

    if self.pos_embed is None:
        return torch.cat(to_cat + [x.view(x.shape[0], -1, x.shape[-1])], dim=1)

    if self.dynamic_img_size:
        B, H, W, C = x.shape
        prev_grid_size = self.patch_embed.grid_size
        pos_embed = resample_abs_pos_embed(
            self.pos_embed,
            new_size=(H, W),
            old_size=prev_grid_size,
            num_prefix_tokens=0 if self.no_embed_class else self.num_prefix_tokens,
        )
        x = x.view(B, -1, C)
    else:
        pos_embed = self.pos_embed

    if self.no_embed_class:
        # deit-3, updated JAX (big vision)
        # position embedding does not overlap with class token, add then concat
        x = x + pos_embed
        if to_cat:
            x = torch.cat(to_cat + [x], dim=1)
    else:
        # original timm, JAX, and deit vit impl
        # pos_embed has entry for class token, concat then add
        if to_cat:
            x = torch.cat(to_cat + [x], dim=1)
        x = x + pos_embed

    return self.pos_drop(x)
'''


def timmvit_ns(float64):
    """The namespace of TIMMVIT_SOURCE; with float64, resample_abs_pos_embed without its cast to
    float32 (the one line removed)."""
    from typing import List, Optional
    src = TIMMVIT_SOURCE
    if float64:
        line = "    posemb = posemb.float()  # interpolate needs float32\n"
        assert src.count(line) == 1
        src = src.replace(line, "")
    ns = dict(torch=torch, F=torch.nn.functional, math=math, List=List, Optional=Optional,
              _logger=None)
    exec(compile(src, "timm (pos_embed.py, vision_transformer.py)", "exec"), ns)
    return ns


class TimmViTStub:
    """The attributes of timm's VisionTransformer that _pos_embed reads."""

    class _PatchEmbed:
        def __init__(self, grid_size):
            self.grid_size = grid_size

    def __init__(self, cls_token, pos_embed, grid_size, no_embed_class, dynamic_img_size):
        self.cls_token = cls_token
        self.reg_token = None
        self.pos_embed = pos_embed
        self.patch_embed = TimmViTStub._PatchEmbed(grid_size)
        self.no_embed_class = no_embed_class
        self.dynamic_img_size = dynamic_img_size
        self.num_prefix_tokens = 1 if cls_token is not None else 0
        self.pos_drop = lambda x: x  # nn.Dropout(p=0.) at evaluation


def timmvit_filter(mode, x):
    x = abs(x)
    if mode == "bilinear":
        return 1.0 - x if x < 1.0 else 0.0
    a = -0.5
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def timmvit_aa_weights(mode, n_in, n_out):
    """Per element [n_out][n_in]: PyTorch's antialiased 1-D weights (align_corners=False, no
    scale factor), as _compute_indices_min_size_weights_aa."""
    n = 1 if mode == "bilinear" else 2
    scale = n_in / n_out
    support = n * scale if scale >= 1.0 else float(n)
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    W = [[0.0] * n_in for _ in range(n_out)]
    for i in range(n_out):
        centre = scale * (i + 0.5)
        xmin = max(int(centre - support + 0.5), 0)
        xmax = min(int(centre + support + 0.5), n_in)
        ws = [timmvit_filter(mode, (j - centre + 0.5) * invscale) for j in range(xmin, xmax)]
        total = sum(ws)
        for j, w in zip(range(xmin, xmax), ws):
            W[i][j] = w / total if total != 0.0 else w
    return W


def timmvit_bf_resample(table, R, C, rows, cols, mode):
    """Per element: the table [R*C, d] resampled with the antialiased weights, [rows*cols, d]."""
    Wr, Wc = timmvit_aa_weights(mode, R, rows), timmvit_aa_weights(mode, C, cols)
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


def timmvit_resample(ns, table, R, C, rows, cols, mode, prefix=None):
    """timm's resample_abs_pos_embed of the table [R*C, d] (and prefix rows [P, d]) to
    rows x cols: [P + rows*cols, d]."""
    posemb = table[None] if prefix is None else torch.cat([prefix, table])[None]
    npt = 0 if prefix is None else prefix.shape[0]
    return ns["resample_abs_pos_embed"](posemb, new_size=[rows, cols], old_size=[R, C],
                                        num_prefix_tokens=npt, interpolation=mode, antialias=True)[0]


# (case, table R, C, grid rows, cols, mode (bicubic or bilinear), d, B, shuffled coords (count or 0))
TIMMVIT_RESAMPLE_CASES = [
    ("learned-bicubic-aa-up", 4, 4, 7, 7, "bicubic", 5, 2, 0),
    ("learned-bicubic-aa-down", 4, 4, 3, 3, "bicubic", 5, 2, 0),
    ("learned-bicubic-aa-down2", 7, 6, 3, 2, "bicubic", 4, 2, 0),
    ("learned-bicubic-aa-mixed", 5, 3, 2, 7, "bicubic", 4, 2, 9),
    ("learned-bilinear-aa-down", 6, 5, 4, 3, "bilinear", 4, 2, 0),
    ("learned-bilinear-aa-up", 3, 4, 5, 7, "bilinear", 4, 2, 0),
]

TIMMVIT_BASE = dict(d=8, heads=2, layers=2, ff=12, patch=2, classes=3, B=2)
# (case, pos, pool ('token' or 'avg'), no_embed_class, table R, C, grid rows, cols, extra)
TIMMVIT_CASES = [
    ("vit-cls-learned2d-embed", "learned-2d", "token", False, 3, 3, 3, 3, {}),
    ("vit-cls-learned2d-noembed", "learned-2d", "token", True, 3, 3, 3, 3, {}),
    ("vit-cls-learned2d-embed-aa", "learned-2d", "token", False, 4, 4, 3, 3, {}),
    ("vit-cls-learned2d-noembed-aa", "learned-2d", "token", True, 3, 3, 4, 5, {}),
    ("vit-mean-learned2d-aa", "learned-2d", "avg", True, 3, 3, 2, 4, {}),
    ("vit-cls-learned-line", "learned", "token", False, 0, 0, 3, 3, {"max_len": 16}),
    ("vit-cls-sinusoidal2d", "sinusoidal-2d", "token", False, 3, 3, 3, 3, {"scale": 0.5}),
    ("vit-cls-cpe", "cpe", "token", True, 3, 3, 3, 3, {"kernel": 3}),
    ("vit-cls-none", "none", "token", False, 3, 3, 2, 3, {}),
]


def timmvit_sincos(rows, cols, d):
    """MAE's 2-D sin-cos table [rows*cols, d] (the column first; gen_golden_abs.sincos_2d)."""
    q = d // 4
    omega = 1.0 / 10000 ** (torch.arange(q, dtype=torch.float64) / q)
    idx = torch.arange(rows * cols)
    r = (idx // cols).to(torch.float64)[:, None] * omega
    c = (idx % cols).to(torch.float64)[:, None] * omega
    return torch.cat([torch.sin(c), torch.cos(c), torch.sin(r), torch.cos(r)], dim=1)


def timmvit_params(c, g):
    """Parameters (Go names and layout) of case c, random, and the names that are learnable."""
    d, ff, pd, k = c["d"], c["ff"], c["patch"] ** 2, c["classes"]
    P = {"patch_embed/w": torch.randn(pd, d, generator=g) * STD_WEIGHT,
         "patch_embed/b": torch.randn(d, generator=g) * STD_BIAS}
    if c["pool"] == "token":
        P["cls_token"] = torch.randn(1, d, generator=g) * STD_TABLE
    if c["pos"] == "learned-2d":
        P["pos_emb_2d"] = torch.randn(c["R"] * c["C"], d, generator=g) * STD_TABLE
        if c["pool"] == "token" and not c["no_embed_class"]:
            P["pos_emb_2d_cls"] = torch.randn(1, d, generator=g) * STD_TABLE
    if c["pos"] == "learned":
        P["pos_emb"] = torch.randn(c["max_len"], d, generator=g) * STD_TABLE
    if c["pos"] == "cpe":
        kk = c["kernel"]
        P["cpe/w"] = torch.randn(kk * kk, d, generator=g) * STD_WEIGHT
        P["cpe/b"] = torch.randn(d, generator=g) * STD_BIAS
    for i in range(c["layers"]):
        b = f"block{i}"
        P[f"{b}/ln1/gamma"] = 1.0 + torch.randn(d, generator=g) * STD_BIAS
        P[f"{b}/ln1/beta"] = torch.randn(d, generator=g) * STD_BIAS
        for n in "qkvo":
            P[f"{b}/attn/w{n}"] = torch.randn(d, d, generator=g) * STD_WEIGHT
            P[f"{b}/attn/b{n}"] = torch.randn(d, generator=g) * STD_BIAS
        P[f"{b}/ln2/gamma"] = 1.0 + torch.randn(d, generator=g) * STD_BIAS
        P[f"{b}/ln2/beta"] = torch.randn(d, generator=g) * STD_BIAS
        P[f"{b}/ffn/w1"] = torch.randn(d, ff, generator=g) * STD_WEIGHT
        P[f"{b}/ffn/b1"] = torch.randn(ff, generator=g) * STD_BIAS
        P[f"{b}/ffn/w2"] = torch.randn(ff, d, generator=g) * STD_WEIGHT
        P[f"{b}/ffn/b2"] = torch.randn(d, generator=g) * STD_BIAS
    P["ln_f/gamma"] = 1.0 + torch.randn(d, generator=g) * STD_BIAS
    P["ln_f/beta"] = torch.randn(d, generator=g) * STD_BIAS
    P["head/w"] = torch.randn(d, k, generator=g) * STD_WEIGHT
    P["head/b"] = torch.randn(k, generator=g) * STD_BIAS
    return P


def timmvit_pos_embed(c, P):
    """timm's pos_embed [1, embed_len, d] of case c from the Go parameters (None: no table)."""
    cls_row = c["pool"] == "token" and not c["no_embed_class"]
    if c["pos"] == "learned-2d":
        rows = [P["pos_emb_2d_cls"], P["pos_emb_2d"]] if cls_row else [P["pos_emb_2d"]]
        return torch.cat(rows)[None]
    if c["pos"] == "learned":  # the 1-D table over [cls, patches]: its rows 0..T
        n = c["rows"] * c["cols"] + (1 if cls_row else 0)
        return P["pos_emb"][:n][None]
    if c["pos"] == "sinusoidal-2d":  # MAE's get_2d_sincos_pos_embed(cls_token=True): a zero row first
        pe = c["scale"] * timmvit_sincos(c["R"], c["C"], c["d"])
        return (torch.cat([torch.zeros(1, c["d"]), pe]) if cls_row else pe)[None]
    return None


def timmvit_peg(x, rows, cols, w, b):
    """CPVT's PEG (Chu et al., Algorithm 1) with the class token: cls_token, feat_token = x[:, 0],
    x[:, 1:]; the depthwise conv of the patch grid plus itself; cls_token put back first. w, b in
    the Go layout (cpe/w [k*k, d], cpe/b [d])."""
    B, N, C = x.shape
    k = int(round(math.sqrt(w.shape[0])))
    weight = w.t().reshape(C, 1, k, k)
    cls_token, feat_token = x[:, 0], x[:, 1:]
    cnn_feat = feat_token.transpose(1, 2).reshape(B, C, rows, cols)
    x = F.conv2d(cnn_feat, weight, b, stride=1, padding=k // 2, groups=C) + cnn_feat
    x = x.flatten(2).transpose(1, 2)
    return torch.cat((cls_token.unsqueeze(1), x), dim=1)


def timmvit_forward(ns, c, P, patches, labels):
    """logits [B, classes] and the mean cross-entropy of case c (see the section's comment)."""
    B, T, _ = patches.shape
    rows, cols, d = c["rows"], c["cols"], c["d"]
    x = patches @ P["patch_embed/w"] + P["patch_embed/b"]  # [B, T, d]
    cls = P["cls_token"].reshape(1, 1, d) if c["pool"] == "token" else None
    pe = timmvit_pos_embed(c, P)
    dynamic = c["pos"] in ("learned-2d", "sinusoidal-2d") and (rows, cols) != (c["R"], c["C"])
    stub = TimmViTStub(cls, pe, (c["R"], c["C"]), c["no_embed_class"], dynamic)
    if dynamic:
        x = x.reshape(B, rows, cols, d)  # the NHWC patch grid of dynamic_img_size
    x = ns["_pos_embed"](stub, x)  # [B, prefix + T, d]
    enc = NoneEnc(dict(d=d, heads=c["heads"]))
    n = x.shape[1]
    pos = torch.arange(n)
    for i in range(c["layers"]):
        b = f"block{i}"
        h = layer_norm(x, P[f"{b}/ln1/gamma"], P[f"{b}/ln1/beta"])
        a, _ = attention(enc, P, i, h, h, pos, pos, False)
        x = x + a
        h = layer_norm(x, P[f"{b}/ln2/gamma"], P[f"{b}/ln2/beta"])
        x = x + gelu_tanh(h @ P[f"{b}/ffn/w1"] + P[f"{b}/ffn/b1"]) @ P[f"{b}/ffn/w2"] + P[f"{b}/ffn/b2"]
        if c["pos"] == "cpe" and i == 0:  # CPE after block 1
            x = timmvit_peg(x, rows, cols, P["cpe/w"], P["cpe/b"])
    x = layer_norm(x, P["ln_f/gamma"], P["ln_f/beta"])
    y = ns["global_pool_nlc"](x, pool_type=c["pool"], num_prefix_tokens=stub.num_prefix_tokens)
    logits = y @ P["head/w"] + P["head/b"]
    loss = -torch.log_softmax(logits, dim=-1)[torch.arange(B), labels].mean()
    return logits, loss


def timmvit_self_check():
    """The antialiased weights per element against F.interpolate(antialias=True); timm's
    resample_abs_pos_embed (float32 and the float64 variant) against them, with and without a
    prefix row; timm's _pos_embed against a by-hand concatenation for both no_embed_class values;
    the PEG with a class token against gen_golden_cpe's peg on the patch rows; autograd of a ViT
    case against a central difference."""
    ns32, ns64 = timmvit_ns(False), timmvit_ns(True)
    g = torch.Generator().manual_seed(3434)
    for mode in ("bicubic", "bilinear"):
        for n_in in range(1, 9):
            for n_out in range(1, 16):
                x = torch.randn(1, 2, n_in, 3, generator=g)
                got = F.interpolate(x, size=(n_out, 3), mode=mode, antialias=True, align_corners=False)
                W = torch.tensor(timmvit_aa_weights(mode, n_in, n_out))
                want = torch.einsum("ia,cab->cib", W, x[0])[None]
                err = (got - want).abs().max().item()
                assert err < 1e-12, (mode, n_in, n_out, err)
    # upsizing with antialias differs from the plain kernel (a = -0.5, renormalised borders)
    x = torch.randn(1, 1, 4, 4, generator=g)
    plain = F.interpolate(x, size=(7, 7), mode="bicubic", antialias=False, align_corners=False)
    aa = F.interpolate(x, size=(7, 7), mode="bicubic", antialias=True, align_corners=False)
    assert (plain - aa).abs().max().item() > 1e-3
    for case, R, C, rows, cols, mode, d, _, _ in TIMMVIT_RESAMPLE_CASES:
        table = torch.randn(R * C, d, generator=g)
        prefix = torch.randn(1, d, generator=g)
        want = timmvit_bf_resample(table, R, C, rows, cols, mode)
        got = timmvit_resample(ns64, table, R, C, rows, cols, mode)
        assert (got - want).abs().max().item() < 1e-12, case
        got = timmvit_resample(ns64, table, R, C, rows, cols, mode, prefix)
        assert torch.equal(got[:1], prefix) and (got[1:] - want).abs().max().item() < 1e-12, case
        got32 = timmvit_resample(ns32, table, R, C, rows, cols, mode, prefix)
        assert got32.dtype == torch.float64 and (got32[1:] - want).abs().max().item() < 1e-6, case
    # _pos_embed: both no_embed_class values, by hand
    cls, x, pe = torch.randn(1, 1, 4, generator=g), torch.randn(2, 6, 4, generator=g), torch.randn(1, 7, 4, generator=g)
    got = ns64["_pos_embed"](TimmViTStub(cls, pe, (2, 3), False, False), x)
    assert torch.equal(got, torch.cat([cls.expand(2, -1, -1), x], 1) + pe)
    got = ns64["_pos_embed"](TimmViTStub(cls, pe[:, 1:], (2, 3), True, False), x)
    assert torch.equal(got, torch.cat([cls.expand(2, -1, -1), x + pe[:, 1:]], 1))
    # the PEG leaves the class token alone and convolves the patches as gen_golden_cpe's peg
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_golden_cpe
    xs = torch.randn(2, 1 + 12, 4, generator=g)
    w, b = torch.randn(9, 4, generator=g), torch.randn(4, generator=g)
    got = timmvit_peg(xs, 3, 4, w, b)
    coords = torch.stack([torch.arange(12) // 4, torch.arange(12) % 4], dim=1)
    want = gen_golden_cpe.peg(xs[:, 1:], coords, 3, 4, w.t().reshape(4, 1, 3, 3), b)
    assert torch.equal(got[:, 0], xs[:, 0]) and (got[:, 1:] - want).abs().max().item() < 1e-12
    # autograd against a central difference, one case of each path
    for case in ("vit-cls-learned2d-embed-aa", "vit-cls-cpe", "vit-cls-learned-line"):
        c, P, patches, labels = timmvit_case(case)
        names = sorted(P)

        def loss_of(*vals):
            return (timmvit_forward(ns64, c, dict(zip(names, vals)), patches, labels)[1],)
        req = [P[n].clone().requires_grad_(True) for n in names]
        grads = torch.autograd.grad(loss_of(*req)[0], req)
        check_directional_fd(loss_of, [P[n] for n in names], grads, 1e-6, case)


def timmvit_case(name):
    """The configuration, parameters, patches and labels of ViT case name (seeded)."""
    i, (case, pos, pool, noemb, R, C, rows, cols, extra) = next(
        (i, t) for i, t in enumerate(TIMMVIT_CASES) if t[0] == name)
    c = dict(TIMMVIT_BASE, case=case, pos=pos, pool=pool, no_embed_class=noemb, R=R, C=C, rows=rows,
             cols=cols, **extra)
    g = torch.Generator().manual_seed(3500 + i)
    P = timmvit_params(c, g)
    patches = torch.randn(c["B"], rows * cols, c["patch"] ** 2, generator=g)
    labels = torch.randint(0, c["classes"], (c["B"],), generator=g)
    return c, P, patches, labels


def generate_timm_vit(out_dir):
    """Self-checks, then writes the cases of issue #34 point 1 (timm's antialiased resampling, the
    class token). Returns [(path, size)]."""
    timmvit_self_check()
    ns = timmvit_ns(True)
    written = []
    for i, (case, R, C, rows, cols, mode, d, B, shuffled) in enumerate(TIMMVIT_RESAMPLE_CASES):
        g = torch.Generator().manual_seed(3400 + 50 + i)
        cells = torch.arange(rows * cols)
        if shuffled:
            cells = torch.randperm(rows * cols, generator=g)[:shuffled]
        coords = torch.stack([cells // cols, cells % cols], dim=1).to(torch.int64)
        T = coords.shape[0]
        x, w = torch.randn(B, T, d, generator=g), torch.randn(B, T, d, generator=g)
        table = torch.randn(R * C, d, generator=g)

        def loss_of(xx, tab):
            pe = timmvit_resample(ns, tab, R, C, rows, cols, mode)
            out = xx + pe[coords[:, 0] * cols + coords[:, 1]]
            return (out * w).sum(), out, pe
        xr, tr = x.clone().requires_grad_(True), table.clone().requires_grad_(True)
        loss, out, pe = loss_of(xr, tr)
        gx, gt = torch.autograd.grad(loss, [xr, tr])
        check_directional_fd(loss_of, [x, table], [gx, gt], 1e-6, case)
        tensors = {"x": x, "w": w, "pos_emb_2d": table, "coords": coords, "out": out.detach(),
                   "aux/pe": pe.detach(), "grad/x": gx, "grad/pos_emb_2d": gt}
        meta = {"case": "2d-" + case, "pos": "learned-2d", "B": B, "T": T, "d": d, "rows": rows, "cols": cols,
                "table_rows": R, "table_cols": C, "resample": mode + "-aa",
                "reference": "timm resample_abs_pos_embed (antialias=True) in float64"}
        written.append(write_case(os.path.join(out_dir, f"2d-{case}.safetensors"), tensors, meta))
    for case, *_ in TIMMVIT_CASES:
        c, P, patches, labels = timmvit_case(case)
        names = sorted(P)
        req = {n: P[n].clone().requires_grad_(True) for n in names}
        logits, loss = timmvit_forward(ns, c, req, patches, labels)
        grads = torch.autograd.grad(loss, [req[n] for n in names])
        tensors = {"patches": patches, "labels": labels.to(torch.int64), "logits": logits.detach(),
                   "loss": loss.detach().reshape(1)}
        for n, gr in zip(names, grads):
            tensors[n] = P[n]
            tensors["grad/" + n] = gr
        meta = {k: (repr(v) if isinstance(v, float) else v) for k, v in c.items()}
        cls = c["pool"] == "token"
        meta.update(vit_pool="cls" if cls else "mean",
                    vit_cls_pos=("without" if c["no_embed_class"] else "with") if cls else "",
                    reference="timm VisionTransformer._pos_embed, global_pool_nlc, resample_abs_pos_embed")
        written.append(write_case(os.path.join(out_dir, case + ".safetensors"), tensors, meta))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--check-only", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    self_check()
    if args.check_only:
        return
    total = 0
    for name, ov in CASES:
        path, loss, size, fd, an = generate_case(name, ov, args.out)
        total += size
        print(f"{name:18s} loss {loss:.6f}  {size / 1024:7.1f} KiB  fd {fd:+.3e} vs {an:+.3e}",
              flush=True)
    path, size = write_tables(args.out)
    total += size
    print(f"{'tables':18s} {'':17s}{size / 1024:7.1f} KiB")
    # The encodings beyond the reference model's (issues #13-#15): one module per group, each
    # writing <group>-<case>.safetensors files of hook-level parity cases.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for mod in MODULES_2D:
        for path, size in importlib.import_module(mod).generate(args.out):
            total += size
            print(f"{os.path.basename(path):30s} {size / 1024:7.1f} KiB", flush=True)
    # Issue #34: timm's axis order of 2-D RoPE and x-transformers' xPos centre (posenc options).
    for path, size in generate_conventions(args.out):
        total += size
        print(f"{os.path.basename(path):30s} {size / 1024:7.1f} KiB", flush=True)
    # Issue #34, point 1: timm's antialiased resampling and class token (learned-2d, layers.ViT).
    for path, size in generate_timm_vit(args.out):
        total += size
        print(f"{os.path.basename(path):30s} {size / 1024:7.1f} KiB", flush=True)
    print(f"total {total / 1024:.0f} KiB in {args.out}, {time.time() - t0:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
