package graph

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// This file holds the relative terms of StreamAttention (StreamOpts.Terms):
// content-position products with a table looked up per tile, as Shaw et
// al. (2018), Transformer-XL (Dai et al. 2019) and DeBERTa (He et al. 2021)
// add them, computed tile by tile instead of through a [Tq, R] or [Tq, Tk]
// tensor.

// StreamTermKind says where a StreamTerm enters StreamAttention.
type StreamTermKind int

const (
	// QueryTerm adds (q_i + QBias_h)·Table_h[row(i, j)] to score_ij, before
	// the scale (Shaw's key embeddings, XL's (q+v)·R, DeBERTa's c2p).
	QueryTerm StreamTermKind = iota + 1
	// KeyTerm adds k_j·Table_h[row(i, j)] to score_ij, before the scale
	// (DeBERTa's p2c; XL's u·k with a one-row table).
	KeyTerm
	// ValueTerm adds Σ_j p_ij Table_h[row(i, j)] to out_i, p being the
	// attention probabilities (Shaw's value embeddings).
	ValueTerm
)

func (k StreamTermKind) String() string {
	switch k {
	case QueryTerm:
		return "query"
	case KeyTerm:
		return "key"
	case ValueTerm:
		return "value"
	}
	return fmt.Sprintf("StreamTermKind(%d)", int(k))
}

// StreamTerm is one relative term of StreamAttention.
//
// Table is a node [R, H*w] (head h reads columns h*w:(h+1)*w) or [R, w]
// (one table shared by the heads) of q's dtype, w being the head width of
// q and k (dh) for query and key terms and of v (dv) for value terms. Index
// gives the table row of every (query, key) pair of a tile, as the
// TileIndexer of the score bias (see TileIndexer for its contract); rows
// outside [0, R) make the run fail. QBias, allowed only on a QueryTerm, is
// nil or a node [H*dh] added to every query of head h (columns
// h*dh:(h+1)*dh) before the product with the table (Transformer-XL's v).
//
// Per tile of ni queries and nj keys the op takes the span [lo, hi] of the
// tile's rows and computes one product of the tile's queries (or keys)
// [ni|nj, w] with Table_h[lo:hi+1]ᵀ, then gathers each pair's entry (the
// tile-local form of the "skewing" of Huang et al. 2018); value terms sum
// the tile's probabilities per row into W [ni, hi-lo+1] and add
// W·Table_h[lo:hi+1]. The work is therefore proportional to the span of
// rows in a tile, at most ni+nj-1 for a row that depends on the distance
// j-i (Shaw, XL, DeBERTa's buckets) and bounded by the table otherwise.
type StreamTerm struct {
	Kind  StreamTermKind
	Table *G.Node
	QBias *G.Node
	Index TileIndexer
}

// streamTermCfg is a StreamTerm as the ops keep it.
type streamTermCfg struct {
	kind       StreamTermKind
	rows, cols int // table [rows, cols]
	w          int // head width: cols = w (shared) or H*w
	bias       bool
	index      TileIndexer
	indexID    string
}

// hoff is the column of head h's first entry in a table row.
func (t *streamTermCfg) hoff(h int) int {
	if t.cols == t.w {
		return 0
	}
	return h * t.w
}

func (t *streamTermCfg) String() string {
	s := fmt.Sprintf("%v[%d %d]/%d index=%s", t.kind, t.rows, t.cols, t.w, t.indexID)
	if t.bias {
		s += "+qbias"
	}
	return s
}

// checkStreamTerms validates the terms of StreamAttention against the
// layouts of q and v and returns their configurations and input nodes
// (each term's table, then its QBias if any).
func checkStreamTerms(name string, terms []StreamTerm, q *G.Node, ql, vl headLayout) ([]streamTermCfg, G.Nodes, error) {
	var cfgs []streamTermCfg
	var nodes G.Nodes
	for i, st := range terms {
		what := fmt.Sprintf("term %d (%v)", i, st.Kind)
		w := ql.cols
		switch st.Kind {
		case QueryTerm, KeyTerm:
		case ValueTerm:
			w = vl.cols
		default:
			return nil, nil, errors.Errorf("graph: %s: term %d has kind %v, want QueryTerm, KeyTerm or ValueTerm", name, i, st.Kind)
		}
		if st.Table == nil {
			return nil, nil, errors.Errorf("graph: %s: %s has no Table", name, what)
		}
		if err := checkFloatNode(name, what+" table", st.Table); err != nil {
			return nil, nil, err
		}
		ts := st.Table.Shape()
		if ts.Dims() != 2 || ts[0] < 1 || (ts[1] != ql.h*w && ts[1] != w) {
			return nil, nil, errors.Errorf("graph: %s: %s table %v must be [R, %d] (per head) or [R, %d] (shared)", name, what, ts, ql.h*w, w)
		}
		if st.Table.Dtype() != q.Dtype() {
			return nil, nil, errors.Errorf("graph: %s: %s table dtype %v differs from q's %v", name, what, st.Table.Dtype(), q.Dtype())
		}
		if st.Index == nil {
			return nil, nil, errors.Errorf("graph: %s: %s table %v needs an Index (TileIndexer)", name, what, ts)
		}
		c := streamTermCfg{kind: st.Kind, rows: ts[0], cols: ts[1], w: w, index: st.Index, indexID: indexerID(st.Index)}
		nodes = append(nodes, st.Table)
		if st.QBias != nil {
			if st.Kind != QueryTerm {
				return nil, nil, errors.Errorf("graph: %s: %s has a QBias; only a QueryTerm takes one", name, what)
			}
			if err := checkFloatNode(name, what+" qbias", st.QBias); err != nil {
				return nil, nil, err
			}
			if bs := st.QBias.Shape(); bs.Dims() != 1 || bs[0] != ql.h*ql.cols {
				return nil, nil, errors.Errorf("graph: %s: %s qbias %v must be [H*dh] = [%d]", name, what, bs, ql.h*ql.cols)
			}
			if st.QBias.Dtype() != q.Dtype() {
				return nil, nil, errors.Errorf("graph: %s: %s qbias dtype %v differs from q's %v", name, what, st.QBias.Dtype(), q.Dtype())
			}
			c.bias = true
			nodes = append(nodes, st.QBias)
		}
		cfgs = append(cfgs, c)
	}
	return cfgs, nodes, nil
}

// hasScoreTerms reports whether a term adds to the scores.
func (c *streamCfg) hasScoreTerms() bool {
	for _, t := range c.terms {
		if t.kind != ValueTerm {
			return true
		}
	}
	return false
}

// termTile is one term's rows in the current tile: idx [ni*nj] and the
// span [lo, lo+n) that holds them.
type termTile struct {
	idx   []int
	lo, n int
}

// queryProducts are a query term's products of one head's queries of a
// block (with the term's QBias) with the table rows lo, ..., lo+n-1 of the
// last tile, [ni, n], kept for the next tile of the same queries: the key
// tiles of a block move along the distances, so a tile's span of rows
// overlaps the previous one's (a distance index: TileQ-1 of its
// TileQ+TileK-1 rows) and only the new rows need a product.
type queryProducts[T float] struct {
	g, next   []T
	lo, n     int
	b, i0, i1 int
	alpha     T
	valid     bool
}

// loadTermIndex fills term x's rows of the tile, checks them and sets the
// span.
func (t *streamTile[T]) loadTermIndex(x int) error {
	tc, tt := &t.c.terms[x], &t.terms[x]
	ni, nj := t.i1-t.i0, t.j1-t.j0
	idx := tt.idx[:ni*nj]
	if _, err := tc.index.TileIndex(t.b, t.i0, t.i1, t.j0, t.j1, idx); err != nil {
		return errors.Wrapf(err, "graph: StreamAttention: index of term %d (%v), batch element %d, queries [%d, %d), keys [%d, %d)", x, tc.kind, t.b, t.i0, t.i1, t.j0, t.j1)
	}
	lo, hi := idx[0], idx[0]
	for p, r := range idx {
		if uint(r) >= uint(tc.rows) {
			return errors.Errorf("graph: StreamAttention: term %d (%v) table row %d (batch element %d, query %d, key %d) is outside the table's %d rows",
				x, tc.kind, r, t.b, t.i0+p/nj, t.j0+p%nj, tc.rows)
		}
		lo, hi = min(lo, r), max(hi, r)
	}
	tt.lo, tt.n = lo, hi-lo+1
	return nil
}

// growT returns (*p)[:n] zeroed, growing *p if needed.
func growT[T float](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n)
	}
	s := (*p)[:n]
	clear(s)
	return s
}

// termTab returns head h's rows [lo, lo+n) of term x's table (leading
// dimension tc.cols).
func (t *streamTile[T]) termTab(x, h int) []T {
	tc, tt := &t.c.terms[x], &t.terms[x]
	return t.in.tt[x][tt.lo*tc.cols+tc.hoff(h):]
}

// queryRows returns the tile's queries of head h with term x's QBias added
// (in t.qc) or, without one, q itself, and the leading dimension.
func (t *streamTile[T]) queryRows(x, h int) ([]T, int) {
	c := t.c
	qo := c.q.off(t.b, h) + t.i0*c.q.ld()
	if !c.terms[x].bias {
		return t.in.q[qo:], c.q.ld()
	}
	ni, dh := t.i1-t.i0, c.q.cols
	qc := t.qc[:ni*dh]
	bias := t.in.tb[x][h*dh : (h+1)*dh]
	for a := 0; a < ni; a++ {
		row := t.in.q[qo+a*c.q.ld() : qo+a*c.q.ld()+dh]
		for y, v := range row {
			qc[a*dh+y] = v + bias[y]
		}
	}
	return qc, dh
}

// scoreTerms adds alpha times the query and key terms of head h to dst
// [ni, nj] (the products are computed scaled by alpha, so that the scores
// take the terms in one pass).
func (t *streamTile[T]) scoreTerms(h int, dst []T, alpha T) {
	c := t.c
	ni, nj := t.i1-t.i0, t.j1-t.j0
	for x := range c.terms {
		tc, tt := &c.terms[x], &t.terms[x]
		idx := tt.idx[:ni*nj]
		switch tc.kind {
		case QueryTerm:
			g := t.queryProducts(x, h, alpha)
			gatherAddRows(dst, nj, idx, g, tileAddr{ldRow: tt.n, stride: 1, off: -tt.lo})
		case KeyTerm:
			ko := c.k.off(t.b, h) + t.j0*c.k.ld()
			g := growT(&t.g, nj*tt.n)
			gemmSerial(false, true, nj, tt.n, tc.w, alpha, t.in.k[ko:], c.k.ld(), t.termTab(x, h), tc.cols, 0, g, tt.n)
			gatherAddRows(dst, nj, idx, g, tileAddr{ldCol: tt.n, stride: 1, off: -tt.lo})
		}
	}
}

// queryProducts returns alpha times the products [ni, n] of the tile's
// queries of head h (with term x's QBias) with term x's table rows lo, ...,
// lo+n-1 (the tile's span), reusing the rows that the previous tile of the
// same queries, head and alpha computed (queryProducts) and computing the
// others.
func (t *streamTile[T]) queryProducts(x, h int, alpha T) []T {
	c, tc, tt := t.c, &t.c.terms[x], &t.terms[x]
	ni, n := t.i1-t.i0, tt.n
	pc := &t.qprod[x*c.q.h+h]
	if cap(pc.next) < ni*n {
		pc.next = make([]T, ni*n)
	}
	g := pc.next[:ni*n]
	ov0, ov1 := max(tt.lo, pc.lo), min(tt.lo+n, pc.lo+pc.n) // rows computed before
	if !pc.valid || pc.b != t.b || pc.i0 != t.i0 || pc.i1 != t.i1 || pc.alpha != alpha || ov0 >= ov1 {
		ov0, ov1 = tt.lo, tt.lo
	}
	for a := 0; a < ni && ov0 < ov1; a++ {
		copy(g[a*n+ov0-tt.lo:a*n+ov1-tt.lo], pc.g[a*pc.n+ov0-pc.lo:a*pc.n+ov1-pc.lo])
	}
	var q []T
	var ldq int
	for _, r := range [2][2]int{{tt.lo, ov0}, {ov1, tt.lo + n}} {
		if r[0] >= r[1] {
			continue
		}
		if q == nil {
			q, ldq = t.queryRows(x, h)
		}
		gemmSerial(false, true, ni, r[1]-r[0], tc.w, alpha, q, ldq, t.in.tt[x][r[0]*tc.cols+tc.hoff(h):], tc.cols, 0, g[r[0]-tt.lo:], n)
	}
	pc.g, pc.next = g, pc.g
	pc.lo, pc.n, pc.b, pc.i0, pc.i1, pc.alpha, pc.valid = tt.lo, n, t.b, t.i0, t.i1, alpha, true
	return g
}

// scatterRows sets W [m, n] (m = ni for by == 0, nj for by == 1) to the sum
// of p's entries per (query or key, row - lo) of term x.
func (t *streamTile[T]) scatterRows(x int, p []T, byKey bool) []T {
	ni, nj := t.i1-t.i0, t.j1-t.j0
	tt := &t.terms[x]
	m := ni
	if byKey {
		m = nj
	}
	w := growT(&t.w, m*tt.n)
	d := tileAddr{ldRow: tt.n, stride: 1, off: -tt.lo}
	if byKey {
		d.ldRow, d.ldCol = 0, tt.n
	}
	scatterAddRows(w, nj, tt.idx[:ni*nj], p, d)
	return w
}

// valueTermsFwd adds Σ_j p_ij Table_h[row(i, j)] of every value term to
// the tile's output rows out[oo + a*old] (p [ni, nj] unnormalised, as the
// value product).
func (t *streamTile[T]) valueTermsFwd(h int, p, out []T, old int) {
	c := t.c
	ni := t.i1 - t.i0
	for x := range c.terms {
		tc, tt := &c.terms[x], &t.terms[x]
		if tc.kind != ValueTerm {
			continue
		}
		w := t.scatterRows(x, p, false)
		gemmSerial(false, false, ni, tc.w, tt.n, 1, w, tt.n, t.termTab(x, h), tc.cols, 1, out, old)
	}
}

// termAcc are the float64 gradient accumulators of one term: the table
// per head [H][rows*w] and the QBias [H*dh].
type termAcc struct {
	tab  []float64
	bias []float64
}

// addTermRows adds scale*src [n, w] into acc rows [lo, lo+n) of head h.
func addTermRows[T float](acc []float64, tc *streamTermCfg, tt *termTile, h int, src []T, scale float64) {
	base := h*tc.rows*tc.w + tt.lo*tc.w
	for e, v := range src[:tt.n*tc.w] {
		acc[base+e] += scale * float64(v)
	}
}

// valueTermsBwd handles the value terms of head h in the backward pass:
// dp [ni, nj] += dO·Table_h[row]ᵀ and the tables' gradients += Wᵀ dO.
func (t *streamTile[T]) valueTermsBwd(h int, p, dp, do []T, old int, accs []termAcc) {
	c := t.c
	ni, nj := t.i1-t.i0, t.j1-t.j0
	for x := range c.terms {
		tc, tt := &c.terms[x], &t.terms[x]
		if tc.kind != ValueTerm {
			continue
		}
		g := growT(&t.g, max(ni, tt.n)*tc.w+ni*tt.n)
		gd, gt := g[:ni*tt.n], g[ni*tt.n:ni*tt.n+tt.n*tc.w]
		// dP += dO Table_hᵀ, gathered
		gemmSerial(false, true, ni, tt.n, tc.w, 1, do, old, t.termTab(x, h), tc.cols, 0, gd, tt.n)
		gatherAddRows(dp[:ni*nj], nj, tt.idx[:ni*nj], gd, tileAddr{ldRow: tt.n, stride: 1, off: -tt.lo})
		// dTable_h += Wᵀ dO
		w := t.scatterRows(x, p, false)
		gemmSerial(true, false, tt.n, tc.w, ni, 1, w, tt.n, do, old, 0, gt, tc.w)
		addTermRows(accs[x].tab, tc, tt, h, gt, 1)
	}
}

// scoreTermsBwd handles the query and key terms of head h in the backward
// pass, from dS [ni, nj] (the gradient of the scaled scores): dq, dk, the
// tables' and the QBias' gradients.
func (t *streamTile[T]) scoreTermsBwd(h int, ds, dq, dk []T, accs []termAcc) {
	c := t.c
	ni, nj := t.i1-t.i0, t.j1-t.j0
	scale := c.scale
	for x := range c.terms {
		tc, tt := &c.terms[x], &t.terms[x]
		if tc.kind == ValueTerm {
			continue
		}
		tab := t.termTab(x, h)
		byKey := tc.kind == KeyTerm
		m := ni
		if byKey {
			m = nj
		}
		w := t.scatterRows(x, ds, byKey)
		gt := growT(&t.g, tt.n*tc.w)
		if byKey {
			ko := c.k.off(t.b, h) + t.j0*c.k.ld()
			// dk += scale W Table_h, dTable_h += scale Wᵀ k
			gemmSerial(false, false, nj, tc.w, tt.n, T(scale), w, tt.n, tab, tc.cols, 1, dk[ko:], c.k.ld())
			gemmSerial(true, false, tt.n, tc.w, nj, 1, w, tt.n, t.in.k[ko:], c.k.ld(), 0, gt, tc.w)
		} else {
			qo := c.q.off(t.b, h) + t.i0*c.q.ld()
			gemmSerial(false, false, ni, tc.w, tt.n, T(scale), w, tt.n, tab, tc.cols, 1, dq[qo:], c.q.ld())
			a, lda := t.queryRows(x, h)
			gemmSerial(true, false, tt.n, tc.w, ni, 1, w, tt.n, a, lda, 0, gt, tc.w)
			if tc.bias { // dQBias_h += scale Σ_a (W Table_h)[a] = scale colsum(W)·Table_h
				b := accs[x].bias[h*tc.w : (h+1)*tc.w]
				for r := 0; r < tt.n; r++ {
					var cs float64
					for a := 0; a < m; a++ {
						cs += float64(w[a*tt.n+r])
					}
					if cs == 0 {
						continue
					}
					for y, v := range tab[r*tc.cols : r*tc.cols+tc.w] {
						b[y] += scale * cs * float64(v)
					}
				}
			}
		}
		addTermRows(accs[x].tab, tc, tt, h, gt, scale)
	}
}
