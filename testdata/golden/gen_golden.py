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
    print(f"total {total / 1024:.0f} KiB in {args.out}, {time.time() - t0:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
