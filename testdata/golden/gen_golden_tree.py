#!/usr/bin/python3
"""Golden vectors for the tree-relative bias of package posenc (TreeRel, issue #14).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_tree.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_tree.py --check-only

gen_golden.py calls ``generate(out_dir)``, which runs the self-check and writes one
``tree-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run).

Each file holds one causal attention call with a tree-relation bias over B random syntax
trees:

* ``parent`` [N], ``depth`` [N] (int64): one forest of random trees, node 0 the root of each
  example's tree (``roots`` [B] gives each example's root; parents precede children);
  ``byte_node`` [B, L] (int64): the innermost node of each byte of each example's window, in
  runs as in source code.
* ``rel`` [B, L, L] (int64): the relation id of every (query byte, key byte) pair:
  with a, b the two nodes and c their lowest common ancestor, up = depth[a] - depth[c],
  down = depth[b] - depth[c], ``rel = min(up, max_up) * (max_down + 1) + min(down, max_down)``
  (experiments/gocode's RelationID; row = query, column = key).
* ``table`` [(max_up+1)(max_down+1), H]: the learnable table ``<prefix>/tree_bias``, N(0, 1).
* ``bias`` [B, H, L, L]: ``table[rel].permute(0, 3, 1, 2)``, the hook's ScoreBias.
* ``q``, ``k``, ``v`` [B, H, L, dh]: random queries, keys and values.
* ``out`` [B, H, L, dh]: ``softmax(q k^T / sqrt(dh) + bias + causal mask) v`` (future keys at
  -inf).
* ``R_bias`` [B, H, L, L], ``R_out`` [B, H, L, dh]: the fixed random linear functional
  ``Lf = sum(bias * R_bias) + sum(out * R_out)``; ``grad_table``, ``grad_q``, ``grad_k``,
  ``grad_v``: its gradients by autograd.

Metadata: ``heads``, ``max_up``, ``max_down``.

The reference is written from the definition (Zügner et al. 2021's tree distances reduced to
the (up, down) steps through the lowest common ancestor, as issue #14 specifies; Shiv & Quirk
2019 encode positions by the same up/down steps): the LCA is found by intersecting the two
root paths as sets, not by the binary search of experiments/gocode, and the self-check compares
it with a third, per-step walk.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------

def root_path(parent, a):
    """Nodes from a up to its root, a first."""
    p = [a]
    while parent[p[-1]] >= 0:
        p.append(parent[p[-1]])
    return p


def up_down(parent, depth, a, b):
    """(up, down) from a to b through their lowest common ancestor (set intersection)."""
    common = set(root_path(parent, a)) & set(root_path(parent, b))
    assert common, ("different trees", a, b)
    c = max(common, key=lambda x: depth[x])
    return depth[a] - depth[c], depth[b] - depth[c]


def relation_id(up, down, max_up, max_down):
    return min(up, max_up) * (max_down + 1) + min(down, max_down)


def relations(parent, depth, nodes, max_up, max_down):
    """rel [L, L] of a window whose bytes have the given nodes."""
    n = len(nodes)
    rel = torch.zeros(n, n, dtype=torch.long)
    for i, a in enumerate(nodes):
        for j, b in enumerate(nodes):
            rel[i, j] = relation_id(*up_down(parent, depth, a, b), max_up, max_down)
    return rel


def tree_bias(table, rel):
    """bias [B, H, L, L] = table[rel[b, i, j], h]."""
    return table[rel].permute(0, 3, 1, 2).contiguous()


def attention(q, k, v, bias):
    dh = q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + bias
    lq, lk = scores.shape[-2:]
    future = torch.ones(lq, lk, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# ---------------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------------

def walk_up_down(parent, depth, a, b):
    """(up, down) by stepping the deeper node up until the two meet."""
    up = down = 0
    while a != b:
        if depth[a] >= depth[b]:
            a, up = parent[a], up + 1
        else:
            b, down = parent[b], down + 1
    return up, down


def self_check():
    gen = torch.Generator().manual_seed(5)
    parent, depth, _ = random_forest(gen, [40, 25])
    for a in range(len(parent)):
        for b in range(len(parent)):
            if root_path(parent, a)[-1] != root_path(parent, b)[-1]:
                continue
            assert up_down(parent, depth, a, b) == walk_up_down(parent, depth, a, b), (a, b)
    # ids: a bijection of the clipped pairs onto [0, (U+1)(D+1)), symmetric pairs swap
    for mu, md in [(0, 0), (2, 3), (4, 4)]:
        ids = {relation_id(u, d, mu, md) for u in range(mu + 3) for d in range(md + 3)}
        assert ids == set(range((mu + 1) * (md + 1))), (mu, md)
    nodes = [0, 3, 3, 7, 12, 7]
    rel = relations(parent, depth, nodes, 2, 3)
    for i, a in enumerate(nodes):
        for j, b in enumerate(nodes):
            u, d = walk_up_down(parent, depth, a, b)
            assert rel[i, j] == min(u, 2) * 4 + min(d, 3)
            if a == b:
                assert rel[i, j] == 0
    # bias gather per element; attention rows see only the past
    table = torch.randn(12, 3, generator=gen)
    r = torch.randint(0, 12, (2, 5, 5), generator=gen)
    b = tree_bias(table, r)
    for e in range(2):
        for h in range(3):
            for i in range(5):
                for j in range(5):
                    assert b[e, h, i, j] == table[r[e, i, j], h]
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen) for _ in range(3))
    out = attention(q, k, v, b)
    b2 = b.clone()
    b2[..., 0, 1:] += 100.0  # future keys of the first query: no effect
    assert torch.equal(out, attention(q, k, v, b2))
    assert torch.allclose(out[:, :, 0], v[:, :, 0], atol=1e-15)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def random_forest(gen, sizes):
    """One random tree per size, concatenated: parent (root -1, parents first), depth, roots."""
    parent, depth, roots = [], [], []
    for n in sizes:
        base = len(parent)
        roots.append(base)
        parent.append(-1)
        depth.append(0)
        for i in range(1, n):
            # prefer recent nodes as parents, so the trees are deep as syntax trees are
            lo = max(0, i - 6)
            p = base + lo + int(torch.randint(0, i - lo, (1,), generator=gen))
            parent.append(p)
            depth.append(depth[p] + 1)
    return parent, depth, roots


def window_nodes(gen, base, n, length):
    """length bytes of a tree of n nodes starting at base, in runs of one node."""
    out = []
    while len(out) < length:
        node = base + int(torch.randint(0, n, (1,), generator=gen))
        run = 1 + int(torch.randint(0, 4, (1,), generator=gen))
        out.extend([node] * run)
    return out[:length]


CASES = [
    # name, batch, length, heads, dh, max_up, max_down, tree sizes
    ("small", 2, 6, 2, 4, 2, 3, [12, 20]),
    ("default", 3, 9, 3, 4, 4, 4, [30, 18, 45]),
    ("clip0", 1, 7, 2, 2, 0, 1, [15]),
]


def build_case(name, batch, length, heads, dh, max_up, max_down, sizes, seed):
    gen = torch.Generator().manual_seed(seed)
    parent, depth, roots = random_forest(gen, sizes)
    byte_node = []
    rel = []
    for e in range(batch):
        nodes = window_nodes(gen, roots[e], sizes[e], length)
        byte_node.append(nodes)
        rel.append(relations(parent, depth, nodes, max_up, max_down))
    rel = torch.stack(rel)
    nrel = (max_up + 1) * (max_down + 1)
    table = torch.randn(nrel, heads, generator=gen).requires_grad_(True)
    q, k, v = (torch.randn(batch, heads, length, dh, generator=gen).requires_grad_(True) for _ in range(3))
    bias = tree_bias(table, rel)
    out = attention(q, k, v, bias)
    r_bias = torch.randn(bias.shape, generator=gen)
    r_out = torch.randn(out.shape, generator=gen)
    lf = (bias * r_bias).sum() + (out * r_out).sum()
    lf.backward()
    # directional finite difference on the table
    u = torch.randn(table.shape, generator=gen)
    with torch.no_grad():
        def f(t):
            bb = tree_bias(t, rel)
            return (bb * r_bias).sum() + (attention(q, k, v, bb) * r_out).sum()
        fd = (f(table + 1e-5 * u) - f(table - 1e-5 * u)) / 2e-5
    an = (table.grad * u).sum()
    assert abs(fd - an) < 1e-7 * (1 + abs(an)), (name, fd, an)
    tensors = {
        "parent": torch.tensor(parent, dtype=torch.long), "depth": torch.tensor(depth, dtype=torch.long),
        "roots": torch.tensor(roots, dtype=torch.long), "byte_node": torch.tensor(byte_node, dtype=torch.long),
        "rel": rel, "table": table.detach(), "bias": bias.detach(),
        "q": q.detach(), "k": k.detach(), "v": v.detach(), "out": out.detach(),
        "R_bias": r_bias, "R_out": r_out,
        "grad_table": table.grad, "grad_q": q.grad, "grad_k": k.grad, "grad_v": v.grad,
    }
    meta = {"heads": heads, "max_up": max_up, "max_down": max_down}
    return tensors, meta


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    out = []
    for n, (name, *spec) in enumerate(CASES):
        tensors, meta = build_case(name, *spec, seed=300 + n)
        path = os.path.join(out_dir, f"tree-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
