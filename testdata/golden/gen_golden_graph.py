#!/usr/bin/python3
"""Golden vectors for the graph position encodings of package posenc (issue #14).

Run with Debian's python (torch 1.13), from the repository root:

    /usr/bin/python3 testdata/golden/gen_golden_graph.py            # self-check, then write
    /usr/bin/python3 testdata/golden/gen_golden_graph.py --check-only

gen_golden.py calls ``generate(out_dir)``, which runs the self-check and writes one
``graph-<case>.safetensors`` per case (float64, fixed seeds, same bytes every run).

The references follow microsoft/Graphormer (graphormer/modules/graphormer_layers.py:
GraphAttnBias, GraphNodeFeature; graphormer/data/collator.py; algos.pyx floyd_warshall) and
Dwivedi et al. 2020's benchmarking-gnns (embedding_lap_pos_enc). Every case is a padded batch
of B = 2 small undirected graphs of different sizes (N = largest graph):

    graph 0: 5 nodes, path 0-1-2-3 and isolated node 4 (distance 3, unreachable pairs)
    graph 1: 4 nodes, star 0-{1,2,3} plus edge 1-2 (degree 3 at node 0), one padding node

Tensors common to the cases:

* ``rel`` [B, N, N] (int64): the spatial relations the Go side receives (graphdata's
  convention): min(d, max_dist) for a reachable pair, max_dist+1 for an unreachable pair and for
  every pair with a padding node.
* ``valid`` [B, N] (int64): 1 for real nodes, 0 for padding.

Cases
-----
graph-spatial: Graphormer's spatial encoding. ``table`` [max_dist+2, H] is the learnable bias
table (row r = relation r). The reference is GraphAttnBias's
``spatial_pos_encoder(spatial_pos).permute(0, 3, 1, 2)`` with Graphormer's indexing:
an nn.Embedding(num_spatial, H, padding_idx=0) indexed by spatial_pos = relation + 1 (row 0 is
the padding row, zero; the Go table is its weight minus row 0). ``bias`` [B, H, N, N],
``R`` [B, H, N, N], ``grad_table`` = d sum(bias * R) / d table.

graph-spatial-virtual: the same with Graphormer's graph token: bias [B, H, N+1, N+1] built as
GraphAttnBias does: zeros, spatial bias added to [:, :, 1:, 1:], and
graph_token_virtual_distance t [H] added to column 0 of rows 1: and to all of row 0. The Go
side gets the relations with a virtual node (posenc.WithVirtualNode: token 0, relation
max_dist+2) and a table of max_dist+3 rows = cat(spatial rows, t); ``table`` is that
concatenation and ``grad_table`` its gradient.

graph-centrality: Graphormer's centrality encoding. ``x`` [B, N, d] the node inputs; the
reference is GraphNodeFeature's
``x + in_degree_encoder(in_degree) + out_degree_encoder(out_degree)`` with the collator's
indexing (degree + 1, 0 = padding, padding_idx=0) and out_degree = in_degree (undirected), the
degrees from the adjacency matrix (adj.sum(1)), clipped to ``max_degree`` (an addition: Graphormer
does not clip). The Go encoding has one table ``table`` [max_degree+1, d] = (in + out)[1:] and
derives the degrees from ``rel`` (count of relation 1). Padding nodes get 0 in Graphormer and
row 0 (degree 0) in Go: ``out`` is compared on valid nodes only, and ``R`` is zero on padding
nodes (a masked loss), so the gradients ``grad_x`` and ``grad_table`` (the in-degree table's
gradient, equal to the out-degree table's) agree everywhere.

graph-laplacian: Laplacian PE (Dwivedi & Bresson 2020). ``lap`` [B, N, K] the first K
nontrivial eigenvectors of each graph's symmetric normalised Laplacian (numpy eigh, ascending
eigenvalues, EigVec[:, 1:K+1] as benchmarking-gnns), signs flipped at random per eigenvector as
in their training loop, zero for padding and for missing columns. ``out = x + lap @ w + b`` with
``w`` [K, d] = nn.Linear(K, d).weight.T and ``b`` [d]; ``R``, ``grad_x``, ``grad_w``,
``grad_b``, ``grad_lap``.

Metadata: ``heads``, ``max_dist``, ``num_rel``, ``max_degree``, ``k``.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import module_main, write_case  # noqa: E402

torch.set_default_dtype(torch.float64)

UNREACHABLE = 510  # Graphormer's algos.floyd_warshall value for unreachable pairs

GRAPHS = [
    (5, [(0, 1), (1, 2), (2, 3)]),
    (4, [(0, 1), (0, 2), (0, 3), (1, 2)]),
]


# ---------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------

def adjacency(n, edges):
    a = torch.zeros(n, n, dtype=torch.long)
    for u, v in edges:
        a[u, v] = a[v, u] = 1
    return a


def floyd_warshall(adj):
    """Shortest hop distances as Graphormer's algos.floyd_warshall: 0 on the diagonal,
    UNREACHABLE for pairs without a path."""
    n = adj.shape[0]
    d = np.full((n, n), UNREACHABLE, dtype=np.int64)
    for i in range(n):
        d[i, i] = 0
    a = adj.numpy()
    d[(a == 1)] = 1
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if d[i, k] + d[k, j] < d[i, j]:
                    d[i, j] = d[i, k] + d[k, j]
    return torch.from_numpy(d)


def relations(dist, max_dist):
    """graphdata's spatial relations: distances clipped to max_dist, unreachable max_dist+1."""
    rel = dist.clamp(max=max_dist)
    rel[dist >= UNREACHABLE] = max_dist + 1
    return rel


def padded_batch(max_dist):
    """rel [B, N, N] (padding pairs unreachable), valid [B, N], in_degree [B, N] (collator:
    degree + 1, 0 for padding)."""
    n = max(g[0] for g in GRAPHS)
    b = len(GRAPHS)
    rel = torch.full((b, n, n), max_dist + 1, dtype=torch.long)
    valid = torch.zeros(b, n, dtype=torch.long)
    in_degree = torch.zeros(b, n, dtype=torch.long)
    for i, (gn, edges) in enumerate(GRAPHS):
        adj = adjacency(gn, edges)
        rel[i, :gn, :gn] = relations(floyd_warshall(adj), max_dist)
        valid[i, :gn] = 1
        in_degree[i, :gn] = adj.sum(1) + 1  # pad_1d_unsqueeze: x + 1, pad id 0
    return rel, valid, in_degree


def spatial_bias(encoder, rel):
    """GraphAttnBias's spatial term: spatial_pos = rel + 1 (collator's + 1, 0 = padding)."""
    spatial_pos = rel + 1
    return encoder(spatial_pos).permute(0, 3, 1, 2)


def spatial_bias_virtual(encoder, virtual, rel, heads):
    """GraphAttnBias.forward without edge terms and with a zero attn_bias: [B, H, N+1, N+1]."""
    b, n, _ = rel.shape
    attn_bias = torch.zeros(b, n + 1, n + 1)
    graph_attn_bias = attn_bias.clone().unsqueeze(1).repeat(1, heads, 1, 1)
    graph_attn_bias[:, :, 1:, 1:] = graph_attn_bias[:, :, 1:, 1:] + spatial_bias(encoder, rel)
    t = virtual.weight.view(1, heads, 1)
    graph_attn_bias[:, :, 1:, 0] = graph_attn_bias[:, :, 1:, 0] + t
    graph_attn_bias[:, :, 0, :] = graph_attn_bias[:, :, 0, :] + t
    return graph_attn_bias + attn_bias.unsqueeze(1)


def laplacian_pe(n, edges, k):
    """Symmetric normalised Laplacian eigenvectors 1..k (ascending), zero-padded to k columns."""
    a = adjacency(n, edges).numpy().astype(np.float64)
    deg = a.sum(1)
    dinv = np.where(deg > 0, 1 / np.sqrt(np.maximum(deg, 1)), 0.0)
    lap = np.eye(n) - dinv[:, None] * a * dinv[None, :]
    vals, vecs = np.linalg.eigh(lap)
    pe = np.zeros((n, k))
    m = min(k, n - 1)
    pe[:, :m] = vecs[:, 1:m + 1]
    return torch.from_numpy(pe)


# ---------------------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------------------

def self_check():
    # distances of the fixed graphs, per element
    d0 = floyd_warshall(adjacency(*GRAPHS[0]))
    assert d0[0, 3] == 3 and d0[3, 0] == 3 and d0[0, 4] == UNREACHABLE and d0[4, 4] == 0
    d1 = floyd_warshall(adjacency(*GRAPHS[1]))
    assert d1[1, 3] == 2 and d1[1, 2] == 1 and d1.max() == 2
    rel, valid, indeg = padded_batch(2)
    assert rel[0, 0, 3] == 2 and rel[0, 0, 4] == 3 and rel[1, 4, 4] == 3 and rel[1, 0, 4] == 3
    assert indeg[1].tolist() == [4, 3, 3, 2, 0] and valid[1].tolist() == [1, 1, 1, 1, 0]
    # degree = count of relation 1 per row, on valid rows
    assert torch.equal(((rel == 1).sum(-1) + 1) * valid, indeg)
    # spatial bias per element, and the virtual-node bias against the relation view
    gen = torch.Generator().manual_seed(5)
    enc = nn.Embedding(5, 3, padding_idx=0)
    virt = nn.Embedding(1, 3)
    with torch.no_grad():
        enc.weight.copy_(torch.randn(5, 3, generator=gen))
        enc.weight[0] = 0
        virt.weight.copy_(torch.randn(1, 3, generator=gen))
    sb = spatial_bias(enc, rel)
    vb = spatial_bias_virtual(enc, virt, rel, 3)
    table = torch.cat([enc.weight[1:], virt.weight])
    b, n, _ = rel.shape
    for e in range(b):
        for h in range(3):
            for i in range(n + 1):
                for j in range(n + 1):
                    if i > 0 and j > 0:
                        assert sb[e, h, i - 1, j - 1] == enc.weight[rel[e, i - 1, j - 1] + 1, h]
                        r = rel[e, i - 1, j - 1]
                    else:
                        r = 4  # the virtual relation max_dist + 2
                    assert abs(vb[e, h, i, j] - table[r, h]) < 1e-15, (e, h, i, j)
    # Laplacian eigenvectors: orthonormal and of L
    pe = laplacian_pe(*GRAPHS[1], 3)
    assert torch.allclose(pe.T @ pe, torch.eye(3), atol=1e-12)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

def check_fd(name, f, params, grads, gen):
    """Directional finite difference of the scalar f() w.r.t. params (f is at most quadratic)."""
    us = [torch.randn(p.shape, generator=gen) for p in params]
    with torch.no_grad():
        for p, u in zip(params, us):
            p.add_(1e-4 * u)
        fp = f()
        for p, u in zip(params, us):
            p.sub_(2e-4 * u)
        fm = f()
        for p, u in zip(params, us):
            p.add_(1e-4 * u)
    fd = (fp - fm) / 2e-4
    an = sum((g * u).sum() for g, u in zip(grads, us))
    assert abs(fd - an) < 1e-7 * (1 + abs(an)), (name, float(fd), float(an))


def case_spatial(virtual, seed):
    gen = torch.Generator().manual_seed(seed)
    heads, max_dist = 3, 2
    rel, valid, _ = padded_batch(max_dist)
    enc = nn.Embedding(max_dist + 3, heads, padding_idx=0)  # + 1 padding row
    virt = nn.Embedding(1, heads)
    with torch.no_grad():
        enc.weight.copy_(torch.randn(enc.weight.shape, generator=gen))
        enc.weight[0] = 0
        virt.weight.copy_(torch.randn(virt.weight.shape, generator=gen))

    def fwd():
        if virtual:
            return spatial_bias_virtual(enc, virt, rel, heads)
        return spatial_bias(enc, rel)

    bias = fwd()
    R = torch.randn(bias.shape, generator=gen)
    (bias * R).sum().backward()
    assert torch.all(enc.weight.grad[0] == 0)
    table, grad = enc.weight[1:].detach(), enc.weight.grad[1:]
    if virtual:
        table = torch.cat([table, virt.weight.detach()])
        grad = torch.cat([grad, virt.weight.grad])
    check_fd("spatial", lambda: (fwd() * R).sum(), [enc.weight, virt.weight],
             [enc.weight.grad, virt.weight.grad if virtual else torch.zeros_like(virt.weight)], gen)
    num_rel = max_dist + 2 + (1 if virtual else 0)
    tensors = {"rel": rel, "valid": valid, "table": table, "bias": bias.detach(), "R": R, "grad_table": grad}
    meta = {"heads": heads, "max_dist": max_dist, "num_rel": num_rel}
    return tensors, meta


def case_centrality(seed):
    gen = torch.Generator().manual_seed(seed)
    d, max_dist, max_degree = 4, 2, 2
    rel, valid, in_degree = padded_batch(max_dist)
    # clip real nodes' degrees to max_degree (index max_degree + 1); padding stays 0
    in_degree = torch.where(in_degree > 0, in_degree.clamp(max=max_degree + 1), in_degree)
    out_degree = in_degree  # collator: out_degree=in_degree for undirected graphs
    ind = nn.Embedding(max_degree + 2, d, padding_idx=0)
    outd = nn.Embedding(max_degree + 2, d, padding_idx=0)
    with torch.no_grad():
        ind.weight.copy_(torch.randn(ind.weight.shape, generator=gen))
        outd.weight.copy_(torch.randn(outd.weight.shape, generator=gen))
        ind.weight[0] = 0
        outd.weight[0] = 0
    b, n = valid.shape
    x = torch.randn(b, n, d, generator=gen, requires_grad=True)

    def fwd():
        return x + ind(in_degree) + outd(out_degree)

    out = fwd()
    R = torch.randn(out.shape, generator=gen) * valid[:, :, None]
    (out * R).sum().backward()
    assert torch.equal(ind.weight.grad, outd.weight.grad)
    check_fd("centrality", lambda: (fwd() * R).sum(), [x, ind.weight, outd.weight],
             [x.grad, ind.weight.grad, outd.weight.grad], gen)
    table = (ind.weight + outd.weight)[1:].detach()
    tensors = {"rel": rel, "valid": valid, "x": x.detach(), "table": table, "out": out.detach(), "R": R,
               "grad_x": x.grad, "grad_table": ind.weight.grad[1:]}
    meta = {"max_dist": max_dist, "num_rel": max_dist + 2, "max_degree": max_degree, "d": d}
    return tensors, meta


def case_laplacian(seed):
    gen = torch.Generator().manual_seed(seed)
    d, k, max_dist = 4, 3, 2
    rel, valid, _ = padded_batch(max_dist)
    b, n = valid.shape
    lap = torch.zeros(b, n, k)
    for i, (gn, edges) in enumerate(GRAPHS):
        pe = laplacian_pe(gn, edges, k)
        # benchmarking-gnns training: sign_flip = rand(k); >= 0.5 -> 1, else -1
        flip = torch.rand(k, generator=gen)
        flip = torch.where(flip >= 0.5, 1.0, -1.0)
        lap[i, :gn] = pe * flip[None, :]
    lap.requires_grad_(True)
    proj = nn.Linear(k, d)
    with torch.no_grad():
        proj.weight.copy_(torch.randn(d, k, generator=gen))
        proj.bias.copy_(torch.randn(d, generator=gen))
    x = torch.randn(b, n, d, generator=gen, requires_grad=True)

    def fwd():
        return x + proj(lap)  # h = h + embedding_lap_pos_enc(lap_pos_enc)

    out = fwd()
    R = torch.randn(out.shape, generator=gen)
    (out * R).sum().backward()
    check_fd("laplacian", lambda: (fwd() * R).sum(), [x, lap, proj.weight, proj.bias],
             [x.grad, lap.grad, proj.weight.grad, proj.bias.grad], gen)
    tensors = {"rel": rel, "valid": valid, "x": x.detach(), "lap": lap.detach(),
               "w": proj.weight.detach().T.contiguous(), "b": proj.bias.detach(), "out": out.detach(), "R": R,
               "grad_x": x.grad, "grad_lap": lap.grad, "grad_w": proj.weight.grad.T.contiguous(),
               "grad_b": proj.bias.grad}
    return tensors, {"k": k, "d": d}


def generate(out_dir):
    """Self-check, then write every case; returns a list of (path, size)."""
    self_check()
    cases = [
        ("spatial", lambda: case_spatial(False, 301)),
        ("spatial-virtual", lambda: case_spatial(True, 302)),
        ("centrality", lambda: case_centrality(303)),
        ("laplacian", lambda: case_laplacian(304)),
    ]
    out = []
    for name, build in cases:
        tensors, meta = build()
        path = os.path.join(out_dir, f"graph-{name}.safetensors")
        out.append(write_case(path, tensors, meta))
    return out


if __name__ == "__main__":
    sys.exit(module_main(__doc__, generate, self_check))
