package graph

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// zeroIndex maps every pair to row 0 (XL's u·k as a key term of one row).
type zeroIndex struct{}

func (zeroIndex) TileIndex(_, q0, q1, k0, k1 int, dst []int) (bool, error) {
	clear(dst)
	return false, nil
}

// termSpec is one relative term of a test case: its kind, table ("rel":
// clipped relative distance, 7 rows; "dist": every distance, Tq+Tk-1
// rows; "zero": one row), shared by the heads or not, with a QBias or not.
type termSpec struct {
	kind   StreamTermKind
	table  string
	shared bool
	bias   bool
}

// termCase is a streamCase with relative terms.
type termCase struct {
	streamCase
	terms []termSpec
}

var termCases = []termCase{
	{streamCase{name: "shaw", b: 2, h: 2, tq: 9, tk: 9, dh: 3, dv: 2, causal: true, tileQ: 4, tileK: 3},
		[]termSpec{{QueryTerm, "rel", true, false}, {ValueTerm, "rel", true, false}}},
	{streamCase{name: "xl-memory", b: 2, h: 2, tq: 5, tk: 11, dh: 2, dv: 3, causal: true, qStart: 6, tileQ: 2, tileK: 4, scale: 0.6},
		[]termSpec{{QueryTerm, "dist", false, true}, {KeyTerm, "zero", false, false}}},
	{streamCase{name: "deberta-bidirectional-padding", b: 3, h: 2, tq: 7, tk: 7, dh: 2, dv: 2, tileQ: 3, tileK: 4, table: "rel1",
		pad: func(b, j int) bool { return b != 1 && !(b == 2 && j >= 4) }},
		[]termSpec{{QueryTerm, "rel", false, false}, {KeyTerm, "rel", false, false}}},
	{streamCase{name: "cross-split-all", b: 2, h: 2, tq: 6, tk: 8, dh: 2, dv: 3, qStart: 3, kStart: 1, tileQ: 4, tileK: 3, split: true},
		[]termSpec{{QueryTerm, "rel", true, true}, {KeyTerm, "dist", true, false}, {ValueTerm, "dist", false, false}, {ValueTerm, "zero", true, false}}},
}

// termData are the tables, biases and indexers of a case's terms.
type termData struct {
	tabs, biases [][]float64
	rows, cols   []int
	index        []TileIndexer
}

func (c termCase) termData(seed int64) termData {
	rng := rand.New(rand.NewSource(seed))
	var d termData
	for _, ts := range c.terms {
		var ix TileIndexer
		var r int
		switch ts.table {
		case "rel":
			ix, r = relIndex{maxDist: 3, qStart: c.qStart, kStart: c.kStart}, 7
		case "dist":
			ix, r = alibiIndex{tq: c.tq}, c.tq+c.tk-1
		case "zero":
			ix, r = zeroIndex{}, 1
		}
		w := c.dh
		if ts.kind == ValueTerm {
			w = c.dv
		}
		cols := w
		if !ts.shared {
			cols = c.h * w
		}
		tab := make([]float64, r*cols)
		for i := range tab {
			tab[i] = rng.NormFloat64()
		}
		var bias []float64
		if ts.bias {
			bias = make([]float64, c.h*c.dh)
			for i := range bias {
				bias[i] = rng.NormFloat64()
			}
		}
		d.tabs, d.biases = append(d.tabs, tab), append(d.biases, bias)
		d.rows, d.cols, d.index = append(d.rows, r), append(d.cols, cols), append(d.index, ix)
	}
	return d
}

// perHead returns a table node [R, H*w] (or [R, w] shared) as [H, R, w].
func perHead(t testing.TB, tab *G.Node, h, w int, shared bool) *G.Node {
	r := tab.Shape()[0]
	if shared {
		parts := make(G.Nodes, h)
		for i := range parts {
			parts[i] = must(t)(Reshape(tab, 1, r, w))
		}
		if h == 1 {
			return parts[0]
		}
		return must(t)(G.Concat(0, parts...))
	}
	return must(t)(G.Transpose(must(t)(Reshape(tab, r, h, w)), 1, 0, 2))
}

// build adds the case to g, streamed or (ref) materialised with RelScores,
// GatherRel, ScatterRel, AttentionProbs and AttentionOutput, and returns
// the output and the inputs q, k, v[, table], then each term's table [and
// QBias].
func (c termCase) build(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, d streamData, td termData, ref bool) (*G.Node, G.Nodes) {
	t.Helper()
	q, k, v, tab, wrt := c.inputs(g, dt, d)
	var terms []StreamTerm
	for x, ts := range c.terms {
		st := StreamTerm{Kind: ts.kind, Index: td.index[x],
			Table: input(g, "term_table"+string(rune('0'+x)), fromFloat64(dt, tensor.Shape{td.rows[x], td.cols[x]}, td.tabs[x]))}
		wrt = append(wrt, st.Table)
		if ts.bias {
			st.QBias = input(g, "term_bias"+string(rune('0'+x)), fromFloat64(dt, tensor.Shape{c.h * c.dh}, td.biases[x]))
			wrt = append(wrt, st.QBias)
		}
		terms = append(terms, st)
	}
	if !ref {
		out, err := StreamAttention(q, k, v, StreamOpts{Heads: c.h, Scale: c.scale, Causal: c.causal, QStart: c.qStart, KStart: c.kStart,
			KeyMask: d.keyMask, Table: tab, Index: d.index, Terms: terms, TileQ: c.tileQ, TileK: c.tileK})
		if err != nil {
			t.Fatal(err)
		}
		return out, wrt
	}
	qs, ks := q, k
	if !c.split {
		qs, ks = must(t)(SplitHeads(q, c.h)), must(t)(SplitHeads(k, c.h))
	}
	ids := func(ix TileIndexer) []int {
		x := make([]int, c.tq*c.tk)
		if _, err := ix.TileIndex(0, 0, c.tq, 0, c.tk, x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	o := AttentionOpts{Heads: c.h, Scale: c.scale}
	for x, ts := range c.terms {
		st := terms[x]
		switch ts.kind {
		case QueryTerm:
			qq := qs
			if st.QBias != nil {
				qq = must(t)(BroadcastAdd(qs, must(t)(Reshape(st.QBias, 1, c.h, 1, c.dh))))
			}
			m := must(t)(RelScores(qq, perHead(t, st.Table, c.h, c.dh, ts.shared))) // [B, H, Tq, R]
			term := must(t)(GatherRel(m, ids(st.Index), c.tq, c.tk))
			if o.Terms == nil {
				o.Terms = term
			} else {
				o.Terms = must(t)(Add(o.Terms, term))
			}
		case KeyTerm:
			m := must(t)(RelScores(ks, perHead(t, st.Table, c.h, c.dh, ts.shared))) // [B, H, Tk, R]
			fwd := ids(st.Index)
			tr := make([]int, len(fwd))
			for i := 0; i < c.tq; i++ {
				for j := 0; j < c.tk; j++ {
					tr[j*c.tq+i] = fwd[i*c.tk+j]
				}
			}
			term := must(t)(TransposeLast2(must(t)(GatherRel(m, tr, c.tk, c.tq))))
			if o.Terms == nil {
				o.Terms = term
			} else {
				o.Terms = must(t)(Add(o.Terms, term))
			}
		}
	}
	c.refBiasMask(t, g, dt, d, tab, &o)
	p := must(t)(AttentionProbs(q, k, o))
	out := must(t)(AttentionOutput(p, v, false)) // [B, H, Tq, dv]
	for x, ts := range c.terms {
		if ts.kind != ValueTerm {
			continue
		}
		tb, r := terms[x].Table, td.rows[x]
		sc := must(t)(ScatterRel(p, ids(terms[x].Index), c.tq, c.tk, r)) // [B, H, Tq, R]
		// per head: [H, B*Tq, R] · [H, R, dv]
		sh := must(t)(Reshape(must(t)(G.Transpose(sc, 1, 0, 2, 3)), c.h, c.b*c.tq, r))
		prod := must(t)(G.BatchedMatMul(sh, perHead(t, tb, c.h, c.dv, ts.shared)))             // [H, B*Tq, dv]
		term := must(t)(G.Transpose(must(t)(Reshape(prod, c.h, c.b, c.tq, c.dv)), 1, 0, 2, 3)) // [B, H, Tq, dv]
		out = must(t)(Add(out, term))
	}
	if !c.split {
		out = must(t)(MergeHeads(out))
	}
	return out, wrt
}

// termRun returns the case's output and the gradients of sum(out * w)
// with respect to every input, as float64.
func termRun(t testing.TB, c termCase, dt tensor.Dtype, ref bool) [][]float64 {
	t.Helper()
	return runWithGrads(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) { return c.build(t, g, dt, c.data(1), c.termData(5), ref) })
}

// TestStreamTermsMatchMaterialised: with relative query, key and value
// terms (per head or shared, with a query bias, with and without a table
// bias, padding, offsets, split heads) StreamAttention's output and the
// gradients of every input equal the materialised attention's (RelScores,
// GatherRel, ScatterRel, AttentionProbs, AttentionOutput) to 1e-12 in
// float64 and 1e-5 in float32.
func TestStreamTermsMatchMaterialised(t *testing.T) {
	for _, c := range termCases {
		checkMatchesMaterialised(t, c.name, nil, func(t testing.TB, dt tensor.Dtype, ref bool) [][]float64 { return termRun(t, c, dt, ref) })
	}
}

// TestStreamTermsGradCheck checks the gradients of q, k, v, the bias
// table and every term's table and query bias against central
// differences (float64).
func TestStreamTermsGradCheck(t *testing.T) {
	for _, c := range termCases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			out, wrt := c.build(t, g, tensor.Float64, c.data(3), c.termData(7), false)
			loss := projLoss(t, rand.New(rand.NewSource(4)), out, "w")
			if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1, MaxPerNode: 40}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStreamTermsThreads: with terms, the output and gradients are
// bitwise equal at 1 and 2 threads on inputs that take the threaded path.
func TestStreamTermsThreads(t *testing.T) {
	c := termCase{streamCase{name: "threads", b: 2, h: 3, tq: 70, tk: 70, dh: 8, dv: 8, causal: true, tileQ: 16, tileK: 32},
		[]termSpec{{QueryTerm, "dist", false, true}, {KeyTerm, "rel", false, false}, {ValueTerm, "rel", true, false}}}
	checkStreamThreads(t, func(dt tensor.Dtype) [][]float64 { return termRun(t, c, dt, false) })
}

// TestStreamTermsErrors: bad terms are errors at build time naming the
// term and the problem; a row outside a term's table fails the run.
func TestStreamTermsErrors(t *testing.T) {
	g := G.NewGraph()
	mk := func(name string, dt tensor.Dtype, s ...int) *G.Node {
		return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name), G.WithInit(G.Zeroes()))
	}
	q, k, v := mk("q", tensor.Float64, 2, 3, 4), mk("k", tensor.Float64, 2, 5, 4), mk("v", tensor.Float64, 2, 5, 6)
	tab, tabV, tab32 := mk("tab", tensor.Float64, 7, 2), mk("tabv", tensor.Float64, 7, 3), mk("tab32", tensor.Float32, 7, 4)
	bias, bias3 := mk("bias", tensor.Float64, 4), mk("bias3", tensor.Float64, 3)
	ix := relIndex{maxDist: 3}
	for _, c := range []struct {
		name string
		term StreamTerm
		want string
	}{
		{"kind", StreamTerm{Table: tab, Index: ix}, "kind StreamTermKind(0)"},
		{"no table", StreamTerm{Kind: QueryTerm, Index: ix}, "term 0 (query) has no Table"},
		{"no index", StreamTerm{Kind: KeyTerm, Table: tab}, "needs an Index"},
		{"width", StreamTerm{Kind: QueryTerm, Table: tabV, Index: ix}, "must be [R, 4] (per head) or [R, 2] (shared)"},
		{"value width", StreamTerm{Kind: ValueTerm, Table: tab, Index: ix}, "must be [R, 6] (per head) or [R, 3] (shared)"},
		{"dtype", StreamTerm{Kind: QueryTerm, Table: tab32, Index: ix}, "dtype float32 differs"},
		{"bias on key", StreamTerm{Kind: KeyTerm, Table: tab, QBias: bias, Index: ix}, "only a QueryTerm takes one"},
		{"bias shape", StreamTerm{Kind: QueryTerm, Table: tab, QBias: bias3, Index: ix}, "qbias (3) must be [H*dh] = [4]"},
	} {
		_, err := StreamAttention(q, k, v, StreamOpts{Heads: 2, Terms: []StreamTerm{c.term}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// a row outside the table fails the run, naming the term
	g2 := G.NewGraph()
	in := func(name string, s ...int) *G.Node {
		return G.NewTensor(g2, tensor.Float64, len(s), G.WithShape(s...), G.WithName(name), G.WithInit(G.Ones()))
	}
	small := in("small", 3, 2)
	out, err := StreamAttention(in("q", 2, 3, 4), in("k", 2, 5, 4), in("v", 2, 5, 6),
		StreamOpts{Heads: 2, Terms: []StreamTerm{{Kind: QueryTerm, Table: small, Index: ix}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = out
	m := G.NewTapeMachine(g2)
	defer m.Close()
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "term 0 (query) table row") {
		t.Fatalf("rows outside the term's table: error %v, want one naming the term's row", err)
	}
}

// TestStreamTermsScratch: with terms indexed by the distance (XL's rows
// over every distance of the span, 2T-1 of them), the work space of both
// passes (one thread) is the same at two lengths, at least the fixed part
// fwdScratch/bwdScratch and below T².
func TestStreamTermsScratch(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	var fwd, bwd []streamScratch
	for _, n := range []int{40, 130} {
		c := termCase{streamCase{name: "scratch", b: 1, h: 2, tq: n, tk: n, dh: 4, dv: 4, causal: true, tileQ: 8, tileK: 16},
			[]termSpec{{QueryTerm, "dist", false, true}, {KeyTerm, "zero", false, false}, {ValueTerm, "dist", true, false}}}
		op, gop := runStreamOps(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) {
			return c.build(t, g, tensor.Float32, c.data(1), c.termData(2), false)
		})
		f, b := op.scratch, gop.scratch
		if min := op.fwdScratch(); f.Floats < min.Floats || f.Ints != min.Ints || f.F64 != min.F64 {
			t.Fatalf("T=%d: forward allocated %+v, fixed part %+v", n, f, min)
		}
		if n > 100 && (f.Floats+f.Ints+f.F64 >= n*n || b.Floats+b.Ints >= n*n) {
			t.Fatalf("T=%d: work space forward %+v, backward %+v is not below T²", n, f, b)
		}
		b.F64 = 0 // the gradients' accumulators [H, R, w] grow with R
		fwd, bwd = append(fwd, f), append(bwd, b)
	}
	if fwd[0] != fwd[1] || bwd[0] != bwd[1] {
		t.Fatalf("work space depends on T: forward %+v, backward %+v", fwd, bwd)
	}
}
