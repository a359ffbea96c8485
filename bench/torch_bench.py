#!/usr/bin/python3
"""PyTorch side of the side-by-side training benchmark (see bench/README.md).

Run with Debian's python (torch 1.13), not the pyenv python3. The Go command
`go run ./bench` starts this script and talks to it over stdin/stdout, one JSON
object per line; it can also be run alone:

    /usr/bin/python3 bench/torch_bench.py --self-check
    /usr/bin/python3 bench/torch_bench.py --pos rope --threads 1 --steps 20

The model is the reference model of testdata/golden/gen_golden.py (same
parameter names, shapes and conventions for every encoding) in float32, written
the way a PyTorch user would write it: F.layer_norm, F.gelu(approximate="tanh"),
F.cross_entropy, masked_fill + softmax, and the same algorithm per encoding as
the Go code (e.g. Transformer-XL's projected table over the 2T-1 distinct
distances, then a gather; Shaw's q.shaw_k^T then a gather, and a scatter-add of
the probabilities for the value term). --self-check compares it, in float64,
with gen_golden's reference forward (loss and every gradient to 1e-10).

One training step = batch sampling, zero_grad, forward, backward,
clip_grad_norm_(1.0), AdamW (lr 2e-3, betas (0.9, 0.99), eps 1e-8, weight decay
0.01 on weight matrices and embeddings), as the Go trainer's TrainStep.
"""

import argparse
import ctypes
import ctypes.util
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "golden"))
import gen_golden as ref  # noqa: E402  (sets the default dtype to float64)

torch.set_default_dtype(torch.float32)

# Encoding options: the Go defaults (posenc.Options.Defaults).
DEFAULT_OPTS = dict(K=16, num_buckets=32, max_distance=128, bucket_size=32, max_position=128,
                    base=10000, pairing="half", rotary_fraction=1.0, max_len=64)

# ---------------------------------------------------------------------------------------
# Threads: ATen's intra-op pool and OpenBLAS's own pool (torch's sgemm is OpenBLAS).
# ---------------------------------------------------------------------------------------

_openblas = None


def _load_openblas():
    global _openblas
    if _openblas is not None:
        return _openblas
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas") or "", "libblas.so.3"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_set_num_threads
            _openblas = lib
            return lib
        except (OSError, AttributeError):
            continue
    _openblas = False
    return False


def set_threads(n, blas=None):
    """ATen's intra-op threads n and OpenBLAS's threads (default n)."""
    torch.set_num_threads(n)
    lib = _load_openblas()
    if lib:
        lib.openblas_set_num_threads(ctypes.c_int(blas or n))


def blas_info():
    lib = _load_openblas()
    if not lib:
        return "unknown BLAS"
    try:
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return "OpenBLAS (" + lib.openblas_get_corename().decode() + ")"
    except AttributeError:
        return "OpenBLAS"


# ---------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------

def decays(name):
    """Go's decay rule: weight matrices of Linears and the token embedding."""
    if name in ("tok_emb", "head/w"):
        return True
    last = name.rsplit("/", 1)[-1]
    return last in ("wq", "wk", "wv", "wo", "w1", "w2")


class Model:
    """The reference LM for one encoding, every parameter a leaf tensor named as in Go."""

    def __init__(self, cfg, dtype=torch.float32, seed=1):
        self.cfg = cfg
        self.dtype = dtype
        self.enc = ref.make_encoding(cfg)
        self.pos = cfg["pos"]
        self.H, self.d = cfg["heads"], cfg["d"]
        self.dh = self.d // self.H
        self.specs = ref.param_specs(cfg, self.enc)
        gen = torch.Generator().manual_seed(seed)
        self.P = {}
        for name, shape, kind in self.specs:
            if kind == "gain":
                t = torch.ones(shape, dtype=dtype)
            elif kind in ("bias",):
                t = torch.zeros(shape, dtype=dtype)
            elif kind == "alpha":
                t = torch.full(shape, 0.1, dtype=dtype)
            else:
                t = (torch.randn(shape, generator=gen, dtype=torch.float64) * 0.02).to(dtype)
            self.P[name] = t.requires_grad_(True)
        self._cache = {}

    def params(self):
        return [self.P[n] for n, _, _ in self.specs]

    def cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    # Position-encoding pieces, cached per length (as Go caches its tables).

    def causal_mask(self, T):
        return self.cached(("mask", T), lambda: torch.ones(T, T, dtype=torch.bool).triu(1))

    def embed(self, x, T):
        if self.pos == "sinusoidal":
            pe = self.cached(("pe", T), lambda: ref.sinusoid_table(torch.arange(T), self.d, self.cfg["base"]).to(self.dtype))
            return x + pe
        if self.pos == "learned":
            return x + self.P["pos_emb"][:T]
        return x

    def rotate(self, q, k, T):
        if self.pos != "rope":
            return q, k
        rot = self.enc.rot()

        def tables():
            cos, sin = ref.rope_cos_sin(torch.arange(T), rot, self.cfg["base"])
            return cos.to(self.dtype), sin.to(self.dtype)
        cos, sin = self.cached(("rope", T), tables)

        def apply(x):
            xr, xp = x[..., :rot], x[..., rot:]
            a, b = xr[..., :rot // 2], xr[..., rot // 2:]
            out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
            return torch.cat([out, xp], dim=-1) if xp.shape[-1] else out
        return apply(q), apply(k)

    def scores(self, layer, q, k, T):
        """Scaled scores plus bias, before the mask: [B, H, T, T]."""
        a = f"block{layer}/attn/"
        pos, dh = self.pos, self.dh
        B = q.shape[0]
        if pos == "shaw":
            K = self.cfg["K"]
            idx = self.cached(("shaw", T), lambda: ref.shaw_index(torch.arange(T), torch.arange(T), K))
            m = q @ self.P[a + "shaw_k"].t()                                   # [B, H, T, 2K+1]
            rel = torch.gather(m, -1, idx.expand(B, self.H, T, T))
            return (q @ k.transpose(-1, -2) + rel) / math.sqrt(dh)
        if pos == "xl":
            n = 2 * T - 1

            def table():
                dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]      # qpos - kpos
                R = ref.xl_r(torch.arange(-(T - 1), T), self.d, self.cfg["base"]).to(self.dtype)
                return R, (dist + (T - 1))
            R, idx = self.cached(("xl", T), table)
            Pm = (R @ self.P[a + "xl_wr"]).reshape(n, self.H, dh).permute(1, 0, 2)   # [H, n, dh]
            u = self.P["xl_u"][None, :, None, :]
            v = self.P["xl_v"][None, :, None, :]
            ac = (q + u) @ k.transpose(-1, -2)
            m = (q + v) @ Pm.transpose(-1, -2)[None]                          # [B, H, T, n]
            bd = torch.gather(m, -1, idx.expand(B, self.H, T, T))
            return (ac + bd) / math.sqrt(dh)
        if pos == "deberta":
            span = self.cfg["bucket_size"]
            _, c2p_idx, p2c_idx = self.cached(("deberta", T), lambda: self.enc.indices(torch.arange(T), torch.arange(T)))
            rel = self.P["deberta_rel"]
            pk = (rel @ self.P[a + "wk"] + self.P[a + "bk"]).reshape(2 * span, self.H, dh).permute(1, 0, 2)
            pq = (rel @ self.P[a + "wq"] + self.P[a + "bq"]).reshape(2 * span, self.H, dh).permute(1, 0, 2)
            c2p = torch.gather(q @ pk.transpose(-1, -2)[None], -1, c2p_idx.expand(B, self.H, T, T))
            p2c = torch.gather(k @ pq.transpose(-1, -2)[None], -1, p2c_idx.expand(B, self.H, T, T)).transpose(-1, -2)
            return (q @ k.transpose(-1, -2) + c2p + p2c) / math.sqrt(3 * dh)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        if pos == "t5":
            def bucket():
                rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
                return ref.t5_relative_position_bucket(rel, not self.cfg["causal"], self.cfg["num_buckets"], self.cfg["max_distance"])
            b = self.cached(("t5", T), bucket)
            s = s + self.P["t5_bias"][b].permute(2, 0, 1)
        elif pos == "alibi":
            bias = self.cached(("alibi", T), lambda: self.enc.bias(None, layer, torch.arange(T), torch.arange(T)).to(self.dtype))
            s = s + bias
        elif pos == "shaw-scalar":
            idx = self.cached(("shaw", T), lambda: ref.shaw_index(torch.arange(T), torch.arange(T), self.cfg["K"]))
            s = s + self.P[a + "shaw_bias"][idx].permute(2, 0, 1)        # [H, T, T], not scaled
        return s

    def values(self, layer, probs, v, T):
        out = probs @ v
        if self.pos == "shaw":
            K = self.cfg["K"]
            a = f"block{layer}/attn/"
            idx = self.cached(("shaw", T), lambda: ref.shaw_index(torch.arange(T), torch.arange(T), K))
            B = probs.shape[0]
            pr = torch.zeros(B, self.H, T, 2 * K + 1, dtype=probs.dtype).scatter_add_(-1, idx.expand(B, self.H, T, T), probs)
            out = out + pr @ self.P[a + "shaw_v"]
        return out

    def forward(self, ids, targets):
        P, H, d, dh = self.P, self.H, self.d, self.dh
        B, T = ids.shape
        eps = ref.LN_EPS
        x = self.embed(P["tok_emb"][ids], T)
        mask = self.causal_mask(T)
        for i in range(self.cfg["layers"]):
            b = f"block{i}/"
            a = b + "attn/"
            h = F.layer_norm(x, (d,), P[b + "ln1/gamma"], P[b + "ln1/beta"], eps)
            q = F.linear(h, P[a + "wq"].t(), P[a + "bq"]).view(B, T, H, dh).transpose(1, 2)
            k = F.linear(h, P[a + "wk"].t(), P[a + "bk"]).view(B, T, H, dh).transpose(1, 2)
            v = F.linear(h, P[a + "wv"].t(), P[a + "bv"]).view(B, T, H, dh).transpose(1, 2)
            q, k = self.rotate(q, k, T)
            s = self.scores(i, q, k, T)
            if self.cfg["causal"]:
                s = s.masked_fill(mask, float("-inf"))
            probs = torch.softmax(s, dim=-1)
            o = self.values(i, probs, v, T).transpose(1, 2).reshape(B, T, d)
            x = x + F.linear(o, P[a + "wo"].t(), P[a + "bo"])
            h = F.layer_norm(x, (d,), P[b + "ln2/gamma"], P[b + "ln2/beta"], eps)
            h = F.gelu(F.linear(h, P[b + "ffn/w1"].t(), P[b + "ffn/b1"]), approximate="tanh")
            x = x + F.linear(h, P[b + "ffn/w2"].t(), P[b + "ffn/b2"])
        x = F.layer_norm(x, (d,), P["ln_f/gamma"], P["ln_f/beta"], eps)
        logits = x.reshape(B * T, d) @ P["head/w"]
        return logits, F.cross_entropy(logits, targets)


def encoding_opts(o):
    """The options of every encoding this script implements, from o."""
    return {"none": {}, "sinusoidal": {"base": o["base"]}, "learned": {"max_len": o["max_len"]},
           "shaw": {"K": o["K"]}, "shaw-scalar": {"K": o["K"]}, "t5": {"num_buckets": o["num_buckets"], "max_distance": o["max_distance"]},
           "xl": {"base": o["base"]}, "deberta": {"bucket_size": o["bucket_size"], "max_position": o["max_position"]},
           "rope": {"pairing": o["pairing"], "rotary_fraction": o["rotary_fraction"], "base": o["base"]},
           "alibi": {}}


ENCODINGS = list(encoding_opts(DEFAULT_OPTS))


def make_cfg(pos, B, T, d, heads, layers, ff, vocab=256, opts=None):
    o = dict(DEFAULT_OPTS)
    o.update(opts or {})
    enc = encoding_opts(o)
    if pos not in enc:
        raise ValueError(f"unknown encoding {pos!r} (valid: {', '.join(enc)})")
    cfg = dict(vocab=vocab, d=d, heads=heads, layers=layers, ff=ff, B=B, T=T, causal=True,
               q_start=0, k_start=0, pos=pos)
    cfg.update(enc[pos])
    return cfg


class Runner:
    """A model, its optimizer and a random byte corpus for one configuration."""

    def __init__(self, cfg, seed=1, corpus_len=1 << 16):
        self.cfg = cfg
        self.model = Model(cfg, seed=seed)
        decay = [p for n, p in self.model.P.items() if decays(n)]
        rest = [p for n, p in self.model.P.items() if not decays(n)]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=2e-3, betas=(0.9, 0.99), eps=1e-8)
        g = torch.Generator().manual_seed(seed)
        self.corpus = torch.randint(0, cfg["vocab"], (corpus_len,), generator=g)
        self.gen = g

    def batch(self):
        B, T = self.cfg["B"], self.cfg["T"]
        starts = torch.randint(0, len(self.corpus) - T - 1, (B,), generator=self.gen)
        win = torch.stack([self.corpus[s:s + T + 1] for s in starts.tolist()])
        return win[:, :-1], win[:, 1:].reshape(-1)

    def step(self):
        ids, tg = self.batch()
        self.opt.zero_grad(set_to_none=True)
        _, loss = self.model.forward(ids, tg)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.params(), 1.0)
        self.opt.step()
        return loss.item(), float(norm)

    def time_steps(self, warmup, steps):
        for _ in range(warmup):
            self.step()
        times = []
        loss = 0.0
        for _ in range(steps):
            t0 = time.perf_counter()
            loss, _ = self.step()
            times.append(time.perf_counter() - t0)
        return times, loss


# ---------------------------------------------------------------------------------------
# Decoding with a key/value cache (go run ./bench -decode)
# ---------------------------------------------------------------------------------------

DECODE_ENCODINGS = ["none", "rope", "alibi", "t5", "xl"]


class Decoder:
    """The reference model decoding one token per step against its own cache of
    every block's keys and values, as layers.Decoder does: a window of ctx
    tokens, the cache holding ctx-1 keys (before any rotation) and values at
    positions 0..ctx-2, the new token at ctx-1; once full, the oldest entry is
    dropped at every step, and while it fills its empty slots are masked. The
    same work per step as the Go side: RoPE rotates the new query and every
    cached key at its cache position; ALiBi adds its bias row and T5 gathers
    its bucket row (both tables built once); XL adds u.k and the gathered
    (q+v).P_h row, with P = R.W_r computed once (the weights do not change
    while decoding; Go's XL.Memo). With full=True the cache starts full of
    random keys and values (a step's work does not depend on them)."""

    def __init__(self, cfg, ctx, model=None, full=True, seed=1):
        if cfg["pos"] not in DECODE_ENCODINGS:
            raise ValueError(f"decode: {cfg['pos']!r} not implemented here (valid: {', '.join(DECODE_ENCODINGS)})")
        self.m = model or Model(cfg, seed=seed)
        self.cfg, self.ctx = cfg, ctx
        m, H, dh, L, dt = self.m, self.m.H, self.m.dh, cfg["layers"], self.m.dtype
        qpos, kpos = torch.tensor([ctx - 1]), torch.arange(ctx)
        g = torch.Generator().manual_seed(seed + 1)
        self.filled = ctx - 1 if full else 0
        with torch.no_grad():
            new = (lambda: torch.randn(1, H, ctx - 1, dh, generator=g, dtype=dt)) if full else \
                (lambda: torch.zeros(1, H, ctx - 1, dh, dtype=dt))
            self.K = [new() for _ in range(L)]
            self.V = [new() for _ in range(L)]
            pos = cfg["pos"]
            if pos == "rope":
                self.rot = m.enc.rot()
                cos, sin = ref.rope_cos_sin(kpos, self.rot, cfg["base"])
                self.cos, self.sin = cos.to(dt), sin.to(dt)
            elif pos == "alibi":
                self.bias = m.enc.bias(None, 0, qpos, kpos).to(dt)                    # [H, 1, ctx]
            elif pos == "t5":
                self.buckets = m.enc.buckets(qpos, kpos)                              # [1, ctx]
            elif pos == "xl":
                R = ref.xl_r(torch.arange(ctx), m.d, cfg["base"]).to(dt)             # distances 0..ctx-1
                self.Pm = [(R @ m.P[f"block{i}/attn/xl_wr"]).reshape(ctx, H, dh).permute(1, 0, 2).contiguous()
                           for i in range(L)]                                         # [H, ctx, dh]
                self.idx = (qpos[:, None] - kpos[None, :]).expand(1, H, 1, ctx)      # row = qpos - kpos

    def rope(self, x, cos, sin):
        rot = self.rot
        xr, xp = x[..., :rot], x[..., rot:]
        a, b = xr[..., :rot // 2], xr[..., rot // 2:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        return torch.cat([out, xp], dim=-1) if xp.shape[-1] else out

    def step(self, token):
        """Logits [1, vocab] of the token after token."""
        m, P, cfg = self.m, self.m.P, self.cfg
        H, d, dh = m.H, m.d, m.dh
        eps, pos = ref.LN_EPS, cfg["pos"]
        empty = self.ctx - 1 - self.filled
        with torch.no_grad():
            x = P["tok_emb"][torch.tensor([[token]])]                                  # [1, 1, d]
            for i in range(cfg["layers"]):
                b = f"block{i}/"
                a = b + "attn/"
                h = F.layer_norm(x, (d,), P[b + "ln1/gamma"], P[b + "ln1/beta"], eps)
                q = F.linear(h, P[a + "wq"].t(), P[a + "bq"]).view(1, 1, H, dh).transpose(1, 2)
                k = F.linear(h, P[a + "wk"].t(), P[a + "bk"]).view(1, 1, H, dh).transpose(1, 2)
                v = F.linear(h, P[a + "wv"].t(), P[a + "bv"]).view(1, 1, H, dh).transpose(1, 2)
                K = torch.cat([self.K[i], k], dim=2)                                   # [1, H, ctx, dh]
                V = torch.cat([self.V[i], v], dim=2)
                self.K[i], self.V[i] = K[:, :, 1:], V[:, :, 1:]                         # slide
                if pos == "xl":
                    u = P["xl_u"][None, :, None, :]
                    vv = P["xl_v"][None, :, None, :]
                    mm = (q + vv) @ self.Pm[i].transpose(-1, -2)[None]                # [1, H, 1, ctx]
                    s = ((q + u) @ K.transpose(-1, -2) + torch.gather(mm, -1, self.idx)) / math.sqrt(dh)
                else:
                    if pos == "rope":
                        q = self.rope(q, self.cos[-1:], self.sin[-1:])
                        K = self.rope(K, self.cos, self.sin)
                    s = (q @ K.transpose(-1, -2)) / math.sqrt(dh)                      # [1, H, 1, ctx]
                    if pos == "alibi":
                        s = s + self.bias
                    elif pos == "t5":
                        s = s + P["t5_bias"][self.buckets].permute(2, 0, 1)
                if empty:
                    s[..., :empty] = float("-inf")
                probs = torch.softmax(s, dim=-1)
                o = (probs @ V).transpose(1, 2).reshape(1, 1, d)
                x = x + F.linear(o, P[a + "wo"].t(), P[a + "bo"])
                h = F.layer_norm(x, (d,), P[b + "ln2/gamma"], P[b + "ln2/beta"], eps)
                h = F.gelu(F.linear(h, P[b + "ffn/w1"].t(), P[b + "ffn/b1"]), approximate="tanh")
                x = x + F.linear(h, P[b + "ffn/w2"].t(), P[b + "ffn/b2"])
            x = F.layer_norm(x, (d,), P["ln_f/gamma"], P["ln_f/beta"], eps)
            self.filled = min(self.ctx - 1, self.filled + 1)
            return x.reshape(1, d) @ P["head/w"]                                       # [1, vocab]

    def time_steps(self, warmup, steps):
        for i in range(warmup):
            self.step(i % 256)
        times = []
        for i in range(steps):
            t0 = time.perf_counter()
            self.step(i % 256)
            times.append(time.perf_counter() - t0)
        return times


def decode_check(seed=2):
    """Every step of Decoder, from an empty cache, against the full forward pass
    (float64, tiny model, non-trivial weights): the logits of each position to
    1e-10, for every encoding of DECODE_ENCODINGS."""
    T = 7
    for pos in DECODE_ENCODINGS:
        cfg = make_cfg(pos, B=1, T=T, d=32, heads=4, layers=2, ff=64, opts=dict(num_buckets=8, max_distance=16))
        m = Model(cfg, dtype=torch.float64, seed=3)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in m.P.values():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
        ids = torch.randint(0, 256, (1, T), generator=g)
        with torch.no_grad():
            want, _ = m.forward(ids, torch.zeros(T, dtype=torch.long))               # [T, vocab]
        dec = Decoder(cfg, ctx=T, model=m, full=False)
        for t in range(T):
            got = dec.step(int(ids[0, t]))
            err = (got[0] - want[t]).abs().max().item()
            if err > 1e-10 * max(1.0, want[t].abs().max().item()):
                raise AssertionError(f"decode {pos}: step {t} differs from the forward pass by {err:.3e}")
    return "ok"


# ---------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------

def self_check():
    """Every encoding, float64, tiny config: loss and gradients vs gen_golden.forward."""
    for pos in ["none", "sinusoidal", "learned", "shaw", "shaw-scalar", "t5", "xl", "deberta", "rope", "alibi"]:
        opts = dict(K=3, num_buckets=8, max_distance=16, bucket_size=4, max_position=16, max_len=16)
        cfg = make_cfg(pos, B=2, T=8, d=32, heads=4, layers=2, ff=64, opts=opts)
        m = Model(cfg, dtype=torch.float64, seed=3)
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for p in m.P.values():   # non-trivial values everywhere
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
        ids = torch.randint(0, 256, (2, 8), generator=g)
        tg = torch.randint(0, 256, (16,), generator=g)
        _, loss = m.forward(ids, tg)
        grads = torch.autograd.grad(loss, m.params())
        Pr = {n: t.detach().clone().requires_grad_(True) for n, t in m.P.items()}
        _, rloss, _ = ref.forward(cfg, m.enc, Pr, ids, tg)
        rgrads = torch.autograd.grad(rloss, [Pr[n] for n, _, _ in m.specs])
        if abs(loss.item() - rloss.item()) > 1e-10:
            raise AssertionError(f"{pos}: loss {loss.item()} vs reference {rloss.item()}")
        for (n, _, _), a, b in zip(m.specs, grads, rgrads):
            err = (a - b).abs().max().item()
            if err > 1e-10 * max(1.0, b.abs().max().item()):
                raise AssertionError(f"{pos}: grad {n} differs from the reference by {err:.3e}")
    return "ok"


def read_f64_file(path):
    arrays, meta = ref.read_safetensors(path)
    return arrays, meta


def check_loss(req):
    """Loss and global gradient norm (float32) for parameters and a batch from the Go side."""
    cfg = make_cfg(req["pos"], req["B"], req["T"], req["d"], req["heads"], req["layers"], req["ff"],
                   opts=req.get("opts"))
    m = Model(cfg)
    arrays, _ = read_f64_file(req["file"])
    names = {n for n, _, _ in m.specs}
    missing = names - set(arrays)
    extra = {n for n in arrays if n not in names and n not in ("ids", "targets")}
    if missing or extra:
        return {"error": f"parameter sets differ: missing in Go file {sorted(missing)}, only in Go {sorted(extra)}"}
    with torch.no_grad():
        for n, p in m.P.items():
            a = torch.from_numpy(arrays[n].copy())
            if tuple(a.shape) != tuple(p.shape):
                return {"error": f"{n}: Go shape {tuple(a.shape)}, PyTorch {tuple(p.shape)}"}
            p.copy_(a.to(p.dtype))
    ids = torch.from_numpy(arrays["ids"].copy()).long()
    tg = torch.from_numpy(arrays["targets"].copy()).long()
    _, loss = m.forward(ids, tg)
    loss.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in m.params())).item()
    return {"loss": loss.item(), "grad_norm": norm}


# ---------------------------------------------------------------------------------------
# Server / CLI
# ---------------------------------------------------------------------------------------

def decode_report(req):
    """The PyTorch side of one -decode cell: per thread configuration, the
    times of steps single-token steps (after warmup) with a full cache."""
    cfg = make_cfg(req["pos"], 1, req["ctx"], req["d"], req["heads"], req["layers"], req["ff"], opts=req.get("opts"))
    dec = Decoder(cfg, req["ctx"])
    times = {}
    for conf in req["threads_list"]:
        aten, blas = (int(x) for x in conf.split("+"))
        set_threads(aten, blas)
        times[conf] = dec.time_steps(req.get("warmup", 0), req["steps"])
    return {"times": times}


def serve():
    runners = {}
    out = sys.stdout
    out.write(json.dumps({"ready": True, "torch": torch.__version__, "blas": blas_info()}) + "\n")
    out.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            cmd = req.get("cmd")
            if cmd == "quit":
                break
            if cmd == "check":
                resp = check_loss(req)
            elif cmd == "selfcheck":
                resp = {"selfcheck": self_check()}
            elif cmd == "decode":
                resp = decode_report(req)
            elif cmd == "run":
                key = (req["pos"], req["B"], req["T"], req["d"], req["heads"], req["layers"], req["ff"])
                if key not in runners:
                    cfg = make_cfg(req["pos"], req["B"], req["T"], req["d"], req["heads"], req["layers"],
                                   req["ff"], opts=req.get("opts"))
                    runners[key] = Runner(cfg)
                set_threads(req["threads"], req.get("blas_threads"))
                times, loss = runners[key].time_steps(req.get("warmup", 0), req["steps"])
                resp = {"times": times, "loss": loss}
            else:
                resp = {"error": f"unknown command {cmd!r}"}
        except Exception as e:  # reported to the Go side, which stops
            resp = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(resp) + "\n")
        out.flush()


def proc_status(field):
    """A kB field of /proc/self/status in bytes (0 if missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == field:
                    return int(v.split()[0]) * 1024
    except OSError:
        pass
    return 0


def eval_report(pos, B, T, threads_list, warmup, passes, mode="fwd"):
    """The PyTorch side of go run ./bench -eval (and of a -cost cell), in a
    fresh process: passes of B windows of T tokens, each a forward pass
    (torch.no_grad, loss included) with mode "fwd", or a training step
    (forward, backward, clipping, AdamW; Runner.step) with mode "train"; the
    pass times per thread configuration, the RSS before the model is built and
    the peak RSS (VmHWM, reset through clear_refs) from then on."""
    if mode not in ("fwd", "train"):
        raise ValueError(f"unknown mode {mode!r} (valid: fwd, train)")
    base = proc_status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    cfg = make_cfg(pos, B=B, T=T, d=128, heads=4, layers=2, ff=512, opts=dict(max_len=T))
    if mode == "train":
        r = Runner(cfg, corpus_len=max(1 << 16, 4 * (T + 1)))

        def one_pass():
            return r.step()[0]
    else:
        m = Model(cfg)
        g = torch.Generator().manual_seed(7)
        ids = torch.randint(0, 256, (B, T), generator=g)
        tg = torch.randint(0, 256, (B * T,), generator=g)

        def one_pass():
            with torch.no_grad():
                return m.forward(ids, tg)[1].item()
    times, loss = {}, 0.0
    for conf in threads_list.split(","):
        aten, blas = (int(x) for x in conf.split("+"))
        set_threads(aten, blas)
        for i in range(warmup + passes):
            t0 = time.perf_counter()
            loss = one_pass()
            if i >= warmup:
                times.setdefault(conf, []).append(time.perf_counter() - t0)
    return {"times": times, "base_rss": base, "peak_rss": proc_status("VmHWM"), "loss": loss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", action="store_true", help="JSON-lines server for go run ./bench")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--pos", default="none")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--eval", action="store_true", help="evaluation benchmark (one JSON line; used by go run ./bench -eval)")
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--threads-list", default="1+1,2+1")
    ap.add_argument("--mode", default="fwd", help="with --eval: fwd (forward passes) or train (training steps)")
    ap.add_argument("--encodings", action="store_true", help="print the encodings implemented here (a JSON list)")
    args = ap.parse_args()
    if args.encodings:
        print(json.dumps(ENCODINGS))
        return 0
    if args.eval:
        try:
            rep = eval_report(args.pos, args.B, args.T, args.threads_list, args.warmup, args.steps, args.mode)
        except Exception as e:  # reported to the Go side
            rep = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(rep))
        return 0
    if args.serve:
        return serve()
    if args.self_check:
        print("self-check:", self_check())
        print("decode check:", decode_check())
        return 0
    cfg = make_cfg(args.pos, B=32, T=64, d=128, heads=4, layers=2, ff=512)
    set_threads(args.threads)
    r = Runner(cfg)
    times, loss = r.time_steps(args.warmup, args.steps)
    print(f"{args.pos}: {args.threads} thread(s), median {statistics.median(times) * 1e3:.1f} ms/step, "
          f"loss {loss:.4f}, {blas_info()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
