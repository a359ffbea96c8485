package graph

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Test indexers of StreamAttention's table bias.

// relIndex is a T5-style bucket of the relative distance (kStart+j) -
// (qStart+i), clipped to ±maxDist: rows [0, 2*maxDist].
type relIndex struct{ maxDist, qStart, kStart int }

func (x relIndex) TileIndex(_, q0, q1, k0, k1 int, dst []int) (bool, error) {
	n := k1 - k0
	for i := q0; i < q1; i++ {
		for j := k0; j < k1; j++ {
			d := min(max(x.kStart+j-x.qStart-i, -x.maxDist), x.maxDist)
			dst[(i-q0)*n+j-k0] = d + x.maxDist
		}
	}
	return false, nil
}

// alibiIndex is ALiBi as a table over the distinct distances: row
// j - i + tq - 1 of a [tq+tk-1, H] table.
type alibiIndex struct{ tq int }

func (x alibiIndex) TileIndex(_, q0, q1, k0, k1 int, dst []int) (bool, error) {
	n := k1 - k0
	for i := q0; i < q1; i++ {
		for j := k0; j < k1; j++ {
			dst[(i-q0)*n+j-k0] = j - i + x.tq - 1
		}
	}
	return false, nil
}

// exampleIndex holds per-example rows [B, Tq, Tk] (a structural relation,
// as a posenc.TableBiaser's BiasIndex gives them).
type exampleIndex struct {
	ids    []int
	tq, tk int
}

func (x *exampleIndex) TileIndex(b, q0, q1, k0, k1 int, dst []int) (bool, error) {
	n := k1 - k0
	for i := q0; i < q1; i++ {
		copy(dst[(i-q0)*n:(i-q0+1)*n], x.ids[(b*x.tq+i)*x.tk+k0:(b*x.tq+i)*x.tk+k1])
	}
	return true, nil
}

// funcIndex adapts a function (identified per call in the op's hash).
type funcIndex func(b, q0, q1, k0, k1 int, dst []int) (bool, error)

func (f funcIndex) TileIndex(b, q0, q1, k0, k1 int, dst []int) (bool, error) {
	return f(b, q0, q1, k0, k1, dst)
}

// streamCase is one configuration of StreamAttention.
type streamCase struct {
	name             string
	b, h, tq, tk     int
	dh, dv           int
	scale            float64
	causal           bool
	qStart, kStart   int
	tileQ, tileK     int
	table            string              // "", "rel" [R, H], "rel1" [R, 1], "alibi" [Tq+Tk-1, H], "example" [R, 1] per example
	pad              func(b, j int) bool // nil: no key mask; false = padding
	split            bool                // [B, H, T, d] instead of merged
	probe            bool
	qStd, kStd, tStd float64
}

var streamCases = []streamCase{
	{name: "bidirectional", b: 2, h: 2, tq: 7, tk: 7, dh: 3, dv: 2, tileQ: 3, tileK: 4},
	{name: "causal-rel", b: 2, h: 2, tq: 9, tk: 9, dh: 3, dv: 3, causal: true, tileQ: 4, tileK: 4, table: "rel"},
	{name: "memory-alibi", b: 1, h: 2, tq: 5, tk: 11, dh: 2, dv: 3, causal: true, qStart: 6, tileQ: 2, tileK: 3, table: "alibi", scale: 0.7},
	{name: "cross-shared-table", b: 2, h: 3, tq: 6, tk: 4, dh: 2, dv: 2, qStart: 3, kStart: 10, tileQ: 4, tileK: 3, table: "rel1"},
	{name: "padding-example", b: 3, h: 2, tq: 6, tk: 6, dh: 2, dv: 2, causal: true, tileQ: 3, tileK: 2, table: "example",
		pad: func(b, j int) bool { return b != 1 && !(b == 2 && j >= 4) && !(b == 0 && j == 0) }},
	{name: "default-tiles-late-keys", b: 2, h: 1, tq: 5, tk: 4, dh: 3, dv: 2, causal: true, qStart: 0, kStart: 2, table: "rel"},
	{name: "split", b: 2, h: 2, tq: 6, tk: 8, dh: 2, dv: 3, causal: true, qStart: 2, tileQ: 4, tileK: 3, table: "rel", split: true},
}

// streamData are the values of a case, drawn in float64 from a seeded RNG.
type streamData struct {
	q, k, v, tab []float64
	keyMask      []bool
	index        TileIndexer
	r, hc        int
}

func (c streamCase) data(seed int64) streamData {
	rng := rand.New(rand.NewSource(seed))
	norm := func(n int, std float64) []float64 {
		if std == 0 {
			std = 1
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64() * std
		}
		return x
	}
	d := streamData{q: norm(c.b*c.tq*c.h*c.dh, c.qStd), k: norm(c.b*c.tk*c.h*c.dh, c.kStd), v: norm(c.b*c.tk*c.h*c.dv, 1)}
	switch c.table {
	case "rel", "rel1":
		const maxDist = 3
		d.index, d.r, d.hc = relIndex{maxDist: maxDist, qStart: c.qStart, kStart: c.kStart}, 2*maxDist+1, c.h
		if c.table == "rel1" {
			d.hc = 1
		}
	case "alibi":
		d.index, d.r, d.hc = alibiIndex{tq: c.tq}, c.tq+c.tk-1, c.h
	case "example":
		ids := make([]int, c.b*c.tq*c.tk)
		for i := range ids {
			ids[i] = rng.Intn(5)
		}
		d.index, d.r, d.hc = &exampleIndex{ids: ids, tq: c.tq, tk: c.tk}, 5, 1
	}
	if d.r > 0 {
		d.tab = norm(d.r*d.hc, c.tStd)
	}
	if c.pad != nil {
		d.keyMask = make([]bool, c.b*c.tk)
		for b := 0; b < c.b; b++ {
			for j := 0; j < c.tk; j++ {
				d.keyMask[b*c.tk+j] = c.pad(b, j)
			}
		}
	}
	return d
}

// layout returns the [B, T, H*d] or [B, H, T, d] data of a merged
// [B, T, H*d] slice.
func (c streamCase) layout(x []float64, t, d int) (tensor.Shape, []float64) {
	if !c.split {
		return tensor.Shape{c.b, t, c.h * d}, x
	}
	y := make([]float64, len(x))
	for b := 0; b < c.b; b++ {
		for i := 0; i < t; i++ {
			for h := 0; h < c.h; h++ {
				copy(y[((b*c.h+h)*t+i)*d:((b*c.h+h)*t+i+1)*d], x[(b*t+i)*c.h*d+h*d:(b*t+i)*c.h*d+(h+1)*d])
			}
		}
	}
	return tensor.Shape{c.b, c.h, t, d}, y
}

// inputs adds the case's q, k, v and (if any) bias table to g in dtype
// dt and returns them and the list of them.
func (c streamCase) inputs(g *G.ExprGraph, dt tensor.Dtype, d streamData) (q, k, v, tab *G.Node, wrt G.Nodes) {
	node := func(name string, x []float64, t, w int) *G.Node {
		s, y := c.layout(x, t, w)
		return input(g, name, fromFloat64(dt, s, y))
	}
	q, k, v = node("q", d.q, c.tq, c.dh), node("k", d.k, c.tk, c.dh), node("v", d.v, c.tk, c.dv)
	wrt = G.Nodes{q, k, v}
	if d.r > 0 {
		tab = input(g, "table", fromFloat64(dt, tensor.Shape{d.r, d.hc}, d.tab))
		wrt = append(wrt, tab)
	}
	return q, k, v, tab, wrt
}

// build adds the case's attention to g in dtype dt, streamed or (ref)
// through AttentionProbs, TableBias and AttentionOutput, and returns the
// output and the nodes q, k, v[, table].
func (c streamCase) build(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, d streamData, ref bool, probe *AttentionProbe) (*G.Node, G.Nodes) {
	t.Helper()
	q, k, v, tab, wrt := c.inputs(g, dt, d)
	if !ref {
		out, err := StreamAttention(q, k, v, StreamOpts{Heads: c.h, Scale: c.scale, Causal: c.causal, QStart: c.qStart, KStart: c.kStart,
			KeyMask: d.keyMask, Table: tab, Index: d.index, TileQ: c.tileQ, TileK: c.tileK, Probe: probe})
		if err != nil {
			t.Fatal(err)
		}
		return out, wrt
	}
	o := AttentionOpts{Heads: c.h, Scale: c.scale, Probe: probe}
	c.refBiasMask(t, g, dt, d, tab, &o)
	p := must(t)(AttentionProbs(q, k, o))
	return must(t)(AttentionOutput(p, v, !c.split)), wrt
}

// refBiasMask sets o's Bias (TableBias of tab, nil without) and Mask (the
// causal and key masks) for the materialised reference of the case.
func (c streamCase) refBiasMask(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, d streamData, tab *G.Node, o *AttentionOpts) {
	t.Helper()
	if d.r > 0 {
		ids := make([]int, c.b*c.tq*c.tk)
		for b := 0; b < c.b; b++ {
			if _, err := d.index.TileIndex(b, 0, c.tq, 0, c.tk, ids[b*c.tq*c.tk:(b+1)*c.tq*c.tk]); err != nil {
				t.Fatal(err)
			}
		}
		o.Bias = must(t)(TableBias(tab, intInput(g, "ids", ids, c.b, c.tq, c.tk)))
	}
	if c.causal || d.keyMask != nil {
		m := make([]float64, c.b*c.tq*c.tk)
		for b := 0; b < c.b; b++ {
			for i := 0; i < c.tq; i++ {
				for j := 0; j < c.tk; j++ {
					if (d.keyMask == nil || d.keyMask[b*c.tk+j]) && (!c.causal || c.kStart+j <= c.qStart+i) {
						m[(b*c.tq+i)*c.tk+j] = 1
					}
				}
			}
		}
		o.Mask = input(g, "mask", fromFloat64(dt, tensor.Shape{c.b, 1, c.tq, c.tk}, m))
	}
}

// streamRun returns the case's output and the gradients of sum(out * w)
// with respect to q, k, v[, table] (w fixed by the seed), as float64.
func streamRun(t testing.TB, c streamCase, dt tensor.Dtype, ref bool) [][]float64 {
	t.Helper()
	return runWithGrads(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) { return c.build(t, g, dt, c.data(1), ref, nil) })
}

// runWithGrads builds a graph with build, and returns its output and the
// gradients of sum(out * w) with respect to the nodes build returns (w
// fixed by a seed), as float64.
func runWithGrads(t testing.TB, build func(g *G.ExprGraph) (*G.Node, G.Nodes)) [][]float64 {
	t.Helper()
	g := G.NewGraph()
	out, wrt := build(g)
	loss := projLoss(t, rand.New(rand.NewSource(2)), out, "w")
	grads, err := G.Grad(loss, wrt...)
	if err != nil {
		t.Fatal(err)
	}
	run(t, g)
	res := [][]float64{ToFloat64s(out.Value())}
	for _, gr := range grads {
		res = append(res, ToFloat64s(gr.Value()))
	}
	return res
}

var streamWhat = []string{"out", "dq", "dk", "dv", "dtable"}

// TestStreamAttentionMatchesMaterialised compares StreamAttention's output
// and gradients with AttentionProbs + TableBias + AttentionOutput on the
// same inputs: to 1e-12 in float64 and 1e-5 in float32.
func TestStreamAttentionMatchesMaterialised(t *testing.T) {
	for _, c := range streamCases {
		checkMatchesMaterialised(t, c.name, streamWhat, func(t testing.TB, dt tensor.Dtype, ref bool) [][]float64 { return streamRun(t, c, dt, ref) })
	}
}

// checkMatchesMaterialised compares, in subtests name/dtype, the results
// of run streamed with those of run materialised (ref), in float64 to
// 1e-12 and in float32 to 1e-5; what names the results (else "result i").
func checkMatchesMaterialised(t *testing.T, name string, what []string, run func(t testing.TB, dt tensor.Dtype, ref bool) [][]float64) {
	t.Helper()
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(name+"/"+dt.String(), func(t *testing.T) {
			got, want := run(t, dt, false), run(t, dt, true)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			if len(got) != len(want) {
				t.Fatalf("%d results, want %d", len(got), len(want))
			}
			for i := range want {
				name := "result " + strconv.Itoa(i)
				if i < len(what) {
					name = what[i]
				}
				checkClose(t, name, got[i], want[i], tol, tol)
			}
		})
	}
}

// TestStreamAttentionGradCheck checks the gradients of q, k, v and the
// table against central differences (float64).
func TestStreamAttentionGradCheck(t *testing.T) {
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			out, wrt := c.build(t, g, tensor.Float64, c.data(3), false, nil)
			loss := projLoss(t, rand.New(rand.NewSource(4)), out, "w")
			if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1, MaxPerNode: 40}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStreamAttentionMaskedRows: a query with no allowed key (a fully
// padded batch element, queries before the first key of a causal
// attention) has a zero output and zero gradients, and nothing is NaN.
func TestStreamAttentionMaskedRows(t *testing.T) {
	for _, c := range streamCases {
		if c.pad == nil && c.kStart <= c.qStart {
			continue
		}
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			res := streamRun(t, c, dt, false)
			for i, x := range res {
				for _, y := range x {
					if math.IsNaN(y) || math.IsInf(y, 0) {
						t.Fatalf("%s %v: %s holds %v", c.name, dt, streamWhat[i], y)
					}
				}
			}
			d := c.data(1)
			out := res[0]
			for b := 0; b < c.b; b++ {
				for i := 0; i < c.tq; i++ {
					any := false
					for j := 0; j < c.tk; j++ {
						any = any || (d.keyMask == nil || d.keyMask[b*c.tk+j]) && (!c.causal || c.kStart+j <= c.qStart+i)
					}
					if any {
						continue
					}
					row := out[(b*c.tq+i)*c.h*c.dv : (b*c.tq+i+1)*c.h*c.dv]
					dq := res[1][(b*c.tq+i)*c.h*c.dh : (b*c.tq+i+1)*c.h*c.dh]
					for _, x := range append(append([]float64(nil), row...), dq...) {
						if x != 0 {
							t.Fatalf("%s %v: masked query %d of batch element %d: out %v, dq %v", c.name, dt, i, b, row, dq)
						}
					}
				}
			}
		}
	}
}

// TestStreamAttentionThreads: the output and gradients are bitwise equal
// at 1 and 2 threads, on inputs that take the threaded path.
func TestStreamAttentionThreads(t *testing.T) {
	c := streamCase{name: "threads", b: 2, h: 3, tq: 70, tk: 70, dh: 8, dv: 8, causal: true, tileQ: 16, tileK: 32, table: "rel1",
		pad: func(b, j int) bool { return b == 0 || j < 50 }}
	checkStreamThreads(t, func(dt tensor.Dtype) [][]float64 { return streamRun(t, c, dt, false) })
}

// checkStreamThreads fails unless run gives bitwise equal results at 1 and
// 2 threads in both dtypes and its forward and backward took the threaded
// path.
func checkStreamThreads(t *testing.T, run func(dt tensor.Dtype) [][]float64) {
	t.Helper()
	defer SetThreads(Threads())
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		SetThreads(1)
		one := run(dt)
		SetThreads(2)
		before := threadedRuns.Load()
		two := run(dt)
		if n := threadedRuns.Load() - before; n < 2 {
			t.Fatalf("%v: %d threaded runs, want the forward and the backward threaded", dt, n)
		}
		for i := range one {
			checkClose(t, "result "+string(rune('0'+i)), two[i], one[i], 0, 0)
		}
	}
}

// TestStreamAttentionScratch: the work space the op allocates per thread
// is what fwdScratch and bwdScratch say, and it depends on the tiles, not
// on the sequence lengths; the op keeps only the output, the log-sum-exp
// and the gradients.
func TestStreamAttentionScratch(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	var fwd, bwd []streamScratch
	for _, n := range []int{40, 130} {
		c := streamCase{name: "scratch", b: 2, h: 2, tq: n, tk: n + 3, dh: 4, dv: 3, causal: true, tileQ: 8, tileK: 16, table: "alibi"}
		op, gop := runStreamOps(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) {
			return c.build(t, g, tensor.Float32, c.data(1), false, nil)
		})
		if op.scratch != op.fwdScratch() {
			t.Fatalf("T=%d: forward allocated %+v, fwdScratch %+v", n, op.scratch, op.fwdScratch())
		}
		want := op.bwdScratch(c.h)          // one thread: every head
		want.F64 += c.h * (c.tq + c.tk - 1) // dtable per head
		if gop.scratch != want {
			t.Fatalf("T=%d: backward allocated %+v, want %+v", n, gop.scratch, want)
		}
		if s := op.fwdScratch(); s.Floats+s.Ints+s.F64 >= n*n {
			t.Fatalf("T=%d: forward work space %+v is not below Tq*Tk", n, s)
		}
		lse := op.lse.([]float32)
		if len(lse) != c.b*c.h*c.tq || !op.res.t.Shape().Eq(tensor.Shape{c.b, c.tq, c.h * c.dv}) {
			t.Fatalf("T=%d: kept lse %d, out %v", n, len(lse), op.res.t.Shape())
		}
		fwd, bwd = append(fwd, op.fwdScratch()), append(bwd, op.bwdScratch(c.h))
	}
	if fwd[0] != fwd[1] || bwd[0] != bwd[1] {
		t.Fatalf("work space depends on T: forward %+v, backward %+v", fwd, bwd)
	}
}

// runStreamOps builds a graph with build, differentiates a projection of
// its output w.r.t. the nodes build returns, runs it and returns the
// forward and gradient ops of StreamAttention.
func runStreamOps(t *testing.T, build func(g *G.ExprGraph) (*G.Node, G.Nodes)) (*streamAttnOp, *streamGradOp) {
	t.Helper()
	g := G.NewGraph()
	out, wrt := build(g)
	loss := projLoss(t, rand.New(rand.NewSource(2)), out, "w")
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatal(err)
	}
	run(t, g)
	op := out.Op().(*streamAttnOp)
	var gop *streamGradOp
	for _, nd := range g.AllNodes() {
		if o, ok := nd.Op().(*streamGradOp); ok {
			gop = o
		}
	}
	if gop == nil {
		t.Fatal("no gradient op in the graph")
	}
	return op, gop
}

// TestStreamAttentionErrors: bad inputs are errors at build time naming
// the problem; a bad table row or an indexer error fails the run.
func TestStreamAttentionErrors(t *testing.T) {
	g := G.NewGraph()
	mk := func(name string, dt tensor.Dtype, s ...int) *G.Node {
		return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name), G.WithInit(G.Zeroes()))
	}
	q, k, v := mk("q", tensor.Float64, 2, 3, 4), mk("k", tensor.Float64, 2, 5, 4), mk("v", tensor.Float64, 2, 5, 6)
	tab, tab3 := mk("tab", tensor.Float64, 7, 2), mk("tab3", tensor.Float64, 7, 3)
	q32, k1 := mk("q32", tensor.Float32, 2, 3, 4), mk("k1", tensor.Float64, 1, 5, 4)
	ix := relIndex{maxDist: 3}
	for _, c := range []struct {
		name    string
		q, k, v *G.Node
		o       StreamOpts
		want    string
	}{
		{"heads", q, k, v, StreamOpts{Heads: 3}, "3 heads do not divide"},
		{"no heads", q, k, v, StreamOpts{}, "0 heads"},
		{"dtype", q32, k, v, StreamOpts{Heads: 2}, "differ in rank or dtype"},
		{"batch", q, k1, v, StreamOpts{Heads: 2}, "must agree"},
		{"nil v", q, k, nil, StreamOpts{Heads: 2}, "v is nil"},
		{"table without index", q, k, v, StreamOpts{Heads: 2, Table: tab}, "needs an Index"},
		{"index without table", q, k, v, StreamOpts{Heads: 2, Index: ix}, "without a Table"},
		{"table shape", q, k, v, StreamOpts{Heads: 2, Table: tab3, Index: ix}, "must be [R, 2] or [R, 1]"},
		{"key mask", q, k, v, StreamOpts{Heads: 2, KeyMask: make([]bool, 5)}, "key mask has 5 entries, want B*Tk = 2*5"},
		{"tiles", q, k, v, StreamOpts{Heads: 2, TileQ: -1}, "tiles -1×0"},
		{"scale", q, k, v, StreamOpts{Heads: 2, Scale: math.Inf(1)}, "scale +Inf"},
	} {
		_, err := StreamAttention(c.q, c.k, c.v, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	defer SetThreads(Threads())
	SetThreads(2)
	for _, c := range []struct {
		name string
		ix   TileIndexer
		want string
	}{
		{"row", relIndex{maxDist: 4}, "table row 7 (batch element 0, query 0, key 3) is outside the table's 7 rows"},
		{"indexer", funcIndex(func(int, int, int, int, int, []int) (bool, error) { return false, errors.New("no rows here") }), "no rows here"},
		// batch element 1 runs on the second thread
		{"panic", funcIndex(func(b, _, _, _, _ int, dst []int) (bool, error) { clear(dst); dst[b*len(dst)] = 0; return false, nil }),
			"panic in a task (the indexer's?): runtime error: index out of range"},
	} {
		g := G.NewGraph()
		d := fromFloat64(tensor.Float64, tensor.Shape{2, 64, 8}, make([]float64, 2*64*8))
		q, k, v := input(g, "q", d), input(g, "k", d.Clone().(*tensor.Dense)), input(g, "v", d.Clone().(*tensor.Dense))
		tab := input(g, "tab", fromFloat64(tensor.Float64, tensor.Shape{7, 2}, make([]float64, 14)))
		if _, err := StreamAttention(q, k, v, StreamOpts{Heads: 2, Table: tab, Index: c.ix, TileQ: 16, TileK: 16}); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		before := threadedRuns.Load()
		err := m.RunAll()
		if c.name == "panic" && threadedRuns.Load() == before {
			t.Errorf("panic: the run was not threaded")
		}
		m.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: run error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// TestStreamAttentionIdentity: calls that differ in anything that changes
// the result are distinct nodes (Gorgonia merges equal ones), equal calls
// are merged, and the gradient ops have no derivative.
func TestStreamAttentionIdentity(t *testing.T) {
	g := G.NewGraph()
	d := fromFloat64(tensor.Float64, tensor.Shape{1, 4, 4}, make([]float64, 16))
	q, k, v := input(g, "q", d), input(g, "k", d.Clone().(*tensor.Dense)), input(g, "v", d.Clone().(*tensor.Dense))
	tab := input(g, "tab", fromFloat64(tensor.Float64, tensor.Shape{7, 2}, make([]float64, 14)))
	ex1, ex2 := &exampleIndex{ids: make([]int, 16), tq: 4, tk: 4}, &exampleIndex{ids: make([]int, 16), tq: 4, tk: 4}
	fn := funcIndex(relIndex{maxDist: 3}.TileIndex)
	base := StreamOpts{Heads: 2, Table: tab, Index: relIndex{maxDist: 3}}
	vary := []func(o *StreamOpts){
		func(o *StreamOpts) { o.Scale = 0.3 },
		func(o *StreamOpts) { o.Causal = true },
		func(o *StreamOpts) { o.Causal, o.QStart = true, 1 },
		func(o *StreamOpts) { o.Causal, o.KStart = true, 1 },
		func(o *StreamOpts) { o.KeyMask = []bool{true, true, false, true} },
		func(o *StreamOpts) { o.KeyMask = []bool{true, false, true, true} },
		func(o *StreamOpts) { o.Index = relIndex{maxDist: 2} },
		func(o *StreamOpts) { o.Index = ex1 },
		func(o *StreamOpts) { o.Index = ex2 },
		func(o *StreamOpts) { o.Index = fn },
		func(o *StreamOpts) { o.Index = fn },
		func(o *StreamOpts) { o.Table, o.Index = nil, nil },
		func(o *StreamOpts) { o.TileQ = 2 },
		func(o *StreamOpts) { o.TileK = 3 },
		func(o *StreamOpts) { o.Heads = 1; o.Table = nil; o.Index = nil },
	}
	seen := map[*G.Node]int{}
	for i, f := range append([]func(*StreamOpts){func(*StreamOpts) {}}, vary...) {
		o := base
		f(&o)
		n := must(t)(StreamAttention(q, k, v, o))
		if j, ok := seen[n]; ok {
			t.Fatalf("variant %d was merged with variant %d: %v", i, j, n.Op())
		}
		seen[n] = i
	}
	o := base
	o.Probe = NewAttentionProbe()
	again := must(t)(StreamAttention(q, k, v, o))
	if seen[again] != 0 {
		t.Fatalf("an equal call (probe aside) was not merged: %v", again.Op())
	}
	o.Index = ex1
	if must(t)(StreamAttention(q, k, v, o)) != must(t)(StreamAttention(q, k, v, o)) {
		t.Fatal("two calls with the same indexer pointer were not merged")
	}
	loss := must(t)(G.Sum(again))
	if _, err := G.Grad(loss, q, k, v, tab); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nd := range g.AllNodes() {
		switch op := nd.Op().(type) {
		case *streamGradOp, *streamGradPartOp:
			n++
			if _, err := op.(G.SDOp).SymDiff(nil, nd, nd); err == nil || !strings.Contains(err.Error(), "no derivative") {
				t.Fatalf("%v: SymDiff error %v", op, err)
			}
		}
	}
	if n != 4 {
		t.Fatalf("%d gradient ops, want dq, dk, dv and dtable", n)
	}
}

// TestStreamAttentionProbe: an armed probe records the same statistics as
// AttentionProbs' probe on the same inputs, and does not change the
// output.
func TestStreamAttentionProbe(t *testing.T) {
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			var stats [2][]HeadStats
			var outs [2][]float64
			for r, ref := range []bool{false, true} {
				g := G.NewGraph()
				p := NewAttentionProbe()
				out, _ := c.build(t, g, tensor.Float64, c.data(5), ref, p)
				m := G.NewTapeMachine(g)
				p.Arm()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				p.Disarm()
				m.Close()
				stats[r], outs[r] = p.Stats(), ToFloat64s(out.Value())
			}
			checkClose(t, "out", outs[0], outs[1], 1e-12, 1e-12)
			checkProbeStats(t, stats[0], stats[1], c.h)
		})
	}
}

// checkProbeStats fails unless the streamed probe statistics got and the
// materialised ones want both have heads heads and agree to 1e-12
// (relative to 1 + |want|; NaN matches NaN).
func checkProbeStats(t *testing.T, got, want []HeadStats, heads int) {
	t.Helper()
	if len(got) != heads || len(want) != heads {
		t.Fatalf("stats of %d and %d heads, want %d", len(got), len(want), heads)
	}
	f := func(s HeadStats) []float64 {
		return []float64{s.EntropyMean, s.EntropyMin, s.ScoreMax, s.ScoreMin, s.PosRMS, s.OneHot, float64(s.Rows)}
	}
	for h := range got {
		gv, wv := f(got[h]), f(want[h])
		for i := range gv {
			if !(math.Abs(gv[i]-wv[i]) <= 1e-12*(1+math.Abs(wv[i])) || math.IsNaN(gv[i]) && math.IsNaN(wv[i])) {
				t.Fatalf("head %d: stream %+v, materialised %+v", h, got[h], want[h])
			}
		}
	}
}

// TestZigzag: zigzag is a permutation of [0, n) pairing early and late
// blocks.
func TestZigzag(t *testing.T) {
	for n := 1; n < 12; n++ {
		seen := make([]bool, n)
		for x := 0; x < n; x++ {
			y := zigzag(x, n)
			if y < 0 || y >= n || seen[y] {
				t.Fatalf("n=%d: zigzag(%d) = %d repeats or is outside [0, n)", n, x, y)
			}
			seen[y] = true
		}
	}
	if got := []int{zigzag(0, 5), zigzag(1, 5), zigzag(2, 5), zigzag(3, 5), zigzag(4, 5)}; got[1] != 4 || got[2] != 1 || got[4] != 2 {
		t.Fatalf("zigzag over 5: %v, want [0 4 1 3 2]", got)
	}
}

// TestStreamAttentionProbeThreads: with several query blocks of one batch
// element on two threads, the probe's statistics are those of one thread
// (each task has its own accumulators; run under -race, the shared ones of
// an earlier version raced).
func TestStreamAttentionProbeThreads(t *testing.T) {
	defer SetThreads(Threads())
	c := streamCase{name: "threads", b: 1, h: 2, tq: 96, tk: 96, dh: 4, dv: 4, causal: true, tileQ: 8, tileK: 16, table: "alibi"}
	var stats [2][]HeadStats
	for r, threads := range []int{1, 2} {
		SetThreads(threads)
		g := G.NewGraph()
		p := NewAttentionProbe()
		c.build(t, g, tensor.Float64, c.data(7), false, p)
		m := G.NewTapeMachine(g)
		p.Arm()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		p.Disarm()
		m.Close()
		stats[r] = p.Stats()
	}
	for h := range stats[0] {
		if stats[0][h] != stats[1][h] {
			t.Fatalf("head %d: 1 thread %+v, 2 threads %+v", h, stats[0][h], stats[1][h])
		}
	}
}
