package graph

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// copeCase is one configuration of StreamCoPE (its streamCase has no
// table; causal is forced).
type copeCase struct {
	streamCase
	npos       int
	gate, term float64 // CoPEOpts (0: defaults)
	embStd     float64 // 0: 1
	nanQ       bool    // a NaN in q (a run error)
}

var copeCases = []copeCase{
	{streamCase: streamCase{name: "square", b: 2, h: 2, tq: 9, tk: 9, dh: 3, dv: 2, tileQ: 4, tileK: 3, qStd: 2, kStd: 2}, npos: 3},
	{streamCase: streamCase{name: "unclamped", b: 1, h: 2, tq: 7, tk: 7, dh: 4, dv: 3, tileQ: 3, tileK: 2}, npos: 10},
	{streamCase: streamCase{name: "memory", b: 2, h: 1, tq: 5, tk: 12, qStart: 7, dh: 3, dv: 3, tileQ: 2, tileK: 5}, npos: 4, term: 1},
	{streamCase: streamCase{name: "padding", b: 3, h: 2, tq: 8, tk: 8, dh: 2, dv: 2, tileQ: 3, tileK: 2,
		scale: 0.6,
		pad:   func(b, j int) bool { return b != 1 && !(b == 2 && j >= 5) && !(b == 0 && j%3 == 1) }}, npos: 5, gate: 0.8},
	{streamCase: streamCase{name: "split-late-keys", b: 2, h: 2, tq: 6, tk: 5, kStart: 2, dh: 2, dv: 3, tileQ: 4, tileK: 3, split: true}, npos: 2},
	{streamCase: streamCase{name: "one-position", b: 1, h: 2, tq: 6, tk: 6, dh: 2, dv: 2, tileQ: 2, tileK: 2}, npos: 1},
	{streamCase: streamCase{name: "default-tiles", b: 1, h: 2, tq: 11, tk: 11, dh: 3, dv: 2}, npos: 6},
}

// build adds the case's attention to g in dtype dt, streamed or (ref) as
// posenc.CoPE's materialised path: CoPEPositions, CoPEInterp, Scale,
// AttentionProbs with the terms and AttentionOutput. It returns the output
// and q, k, v, emb.
func (c copeCase) build(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, seed int64, ref bool, probe *AttentionProbe) (*G.Node, G.Nodes) {
	t.Helper()
	c.causal = true
	d := c.data(seed)
	if c.nanQ {
		d.q[len(d.q)-1] = math.NaN()
	}
	node := func(name string, x []float64, tt, w int) *G.Node {
		s, y := c.layout(x, tt, w)
		return input(g, name, fromFloat64(dt, s, y))
	}
	q, k, v := node("q", d.q, c.tq, c.dh), node("k", d.k, c.tk, c.dh), node("v", d.v, c.tk, c.dv)
	rng := rand.New(rand.NewSource(seed + 100))
	ev := make([]float64, c.dh*c.npos)
	for i := range ev {
		ev[i] = rng.NormFloat64() * max(c.embStd, 1)
	}
	emb := input(g, "emb", fromFloat64(dt, tensor.Shape{c.dh, c.npos}, ev))
	wrt := G.Nodes{q, k, v, emb}
	so := StreamOpts{Heads: c.h, Scale: c.scale, Causal: true, QStart: c.qStart, KStart: c.kStart, KeyMask: d.keyMask,
		TileQ: c.tileQ, TileK: c.tileK, Probe: probe}
	if !ref {
		return must(t)(StreamCoPE(q, k, v, emb, so, CoPEOpts{GateScale: c.gate, TermScale: c.term})), wrt
	}
	gate, term, scale := c.gate, c.term, c.scale
	if gate == 0 {
		gate = 1 / math.Sqrt(float64(c.dh))
	}
	if term == 0 {
		term = math.Sqrt(float64(c.dh))
	}
	qs, ks := q, k
	if !c.split {
		qs, ks = must(t)(SplitHeads(q, c.h)), must(t)(SplitHeads(k, c.h))
	}
	bh := c.b * c.h
	logits := must(t)(G.BatchedMatMul(must(t)(Reshape(qs, bh, c.tq, c.dh)), must(t)(Reshape(ks, bh, c.tk, c.dh)), false, true))
	pos := must(t)(Reshape(must(t)(CoPEPositions(logits, c.qStart, c.kStart, gate)), bh*c.tq, c.tk))
	z := must(t)(G.BatchedMatMul(must(t)(Reshape(qs, 1, bh*c.tq, c.dh)), must(t)(Reshape(emb, 1, c.dh, c.npos))))
	o := must(t)(CoPEInterp(must(t)(Reshape(z, bh*c.tq, c.npos)), pos))
	terms := must(t)(Reshape(must(t)(Scale(o, term)), c.b, c.h, c.tq, c.tk))
	m := make([]float64, c.b*c.tq*c.tk)
	for b := 0; b < c.b; b++ {
		for i := 0; i < c.tq; i++ {
			for j := 0; j < c.tk; j++ {
				if (d.keyMask == nil || d.keyMask[b*c.tk+j]) && c.kStart+j <= c.qStart+i {
					m[(b*c.tq+i)*c.tk+j] = 1
				}
			}
		}
	}
	mask := input(g, "mask", fromFloat64(dt, tensor.Shape{c.b, 1, c.tq, c.tk}, m))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.dh))
	}
	p := must(t)(AttentionProbs(qs, ks, AttentionOpts{Heads: c.h, Scale: scale, Terms: terms, Mask: mask, Probe: probe}))
	return must(t)(AttentionOutput(p, v, !c.split)), wrt
}

// copeRun returns the case's output and the gradients of sum(out * w)
// with respect to q, k, v and emb, as float64.
func copeRun(t testing.TB, c copeCase, dt tensor.Dtype, ref bool) [][]float64 {
	t.Helper()
	return runWithGrads(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) { return c.build(t, g, dt, 1, ref, nil) })
}

var copeWhat = []string{"out", "dq", "dk", "dv", "demb"}

// TestStreamCoPEMatchesMaterialised compares StreamCoPE's output and
// gradients with the materialised CoPE attention: 1e-12 in float64, 1e-5
// in float32.
func TestStreamCoPEMatchesMaterialised(t *testing.T) {
	for _, c := range copeCases {
		checkMatchesMaterialised(t, c.name, copeWhat, func(t testing.TB, dt tensor.Dtype, ref bool) [][]float64 { return copeRun(t, c, dt, ref) })
	}
}

// TestStreamCoPEGradCheck checks the gradients of q, k, v and emb against
// central differences (float64).
func TestStreamCoPEGradCheck(t *testing.T) {
	for _, c := range copeCases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			out, wrt := c.build(t, g, tensor.Float64, 3, false, nil)
			loss := projLoss(t, rand.New(rand.NewSource(4)), out, "w")
			if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1, MaxPerNode: 40}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStreamCoPEThreads: the output and gradients are bitwise equal at 1
// and 2 threads, on inputs that take the threaded path, and so are the
// probe's statistics.
func TestStreamCoPEThreads(t *testing.T) {
	defer SetThreads(Threads())
	c := copeCase{streamCase: streamCase{name: "threads", b: 1, h: 3, tq: 70, tk: 70, dh: 8, dv: 8, tileQ: 16, tileK: 32,
		pad: func(b, j int) bool { return j < 50 || j%2 == 0 }}, npos: 12}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		var res [2][][]float64
		var stats [2][]HeadStats
		for r, n := range []int{1, 2} {
			SetThreads(n)
			before := threadedRuns.Load()
			res[r] = copeRun(t, c, dt, false)
			if d := threadedRuns.Load() - before; n == 2 && d < 2 {
				t.Fatalf("%v: %d threaded runs, want the forward and the backward threaded", dt, d)
			}
			stats[r], _ = c.probed(t, dt, 7, false)
		}
		for i := range res[0] {
			checkClose(t, copeWhat[i], res[1][i], res[0][i], 0, 0)
		}
		for h := range stats[0] {
			if stats[0][h] != stats[1][h] {
				t.Fatalf("%v head %d: probe at 1 thread %+v, at 2 %+v", dt, h, stats[0][h], stats[1][h])
			}
		}
	}
}

// probed runs the case's forward pass (streamed or ref) with an armed probe
// and returns its statistics and the output.
func (c copeCase) probed(t *testing.T, dt tensor.Dtype, seed int64, ref bool) ([]HeadStats, []float64) {
	t.Helper()
	g := G.NewGraph()
	p := NewAttentionProbe()
	out, _ := c.build(t, g, dt, seed, ref, p)
	m := G.NewTapeMachine(g)
	defer m.Close()
	p.Arm()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	p.Disarm()
	return p.Stats(), ToFloat64s(out.Value())
}

// TestStreamCoPEProbe: an armed probe records the materialised path's
// statistics (to 1e-12) and does not change the output.
func TestStreamCoPEProbe(t *testing.T) {
	for _, c := range copeCases {
		t.Run(c.name, func(t *testing.T) {
			var stats [2][]HeadStats
			var outs [2][]float64
			for r, ref := range []bool{false, true} {
				stats[r], outs[r] = c.probed(t, tensor.Float64, 5, ref)
			}
			checkClose(t, "out", outs[0], outs[1], 1e-12, 1e-12)
			checkProbeStats(t, stats[0], stats[1], c.h)
		})
	}
}

// TestStreamCoPEErrors: bad inputs are errors at build time naming the
// problem; a NaN logit fails the run with an error naming the query.
func TestStreamCoPEErrors(t *testing.T) {
	g := G.NewGraph()
	mk := func(name string, dt tensor.Dtype, s ...int) *G.Node {
		return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name), G.WithInit(G.Zeroes()))
	}
	q, k, v := mk("q", tensor.Float64, 2, 3, 4), mk("k", tensor.Float64, 2, 5, 4), mk("v", tensor.Float64, 2, 5, 6)
	emb, emb32, embBad := mk("emb", tensor.Float64, 2, 5), mk("emb32", tensor.Float32, 2, 5), mk("embBad", tensor.Float64, 3, 5)
	emb3 := mk("emb3", tensor.Float64, 2, 5, 1)
	tab := mk("tab", tensor.Float64, 7, 2)
	ok := StreamOpts{Heads: 2, Causal: true}
	with := func(f func(o *StreamOpts)) StreamOpts { o := ok; f(&o); return o }
	for _, c := range []struct {
		name string
		emb  *G.Node
		o    StreamOpts
		co   CoPEOpts
		want string
	}{
		{"bidirectional", emb, StreamOpts{Heads: 2}, CoPEOpts{}, "causal attention only"},
		{"heads", emb, with(func(o *StreamOpts) { o.Heads = 3 }), CoPEOpts{}, "3 heads do not divide"},
		{"table", emb, with(func(o *StreamOpts) { o.Table = tab }), CoPEOpts{}, "no table bias"},
		{"nil emb", nil, ok, CoPEOpts{}, "emb is nil"},
		{"emb shape", embBad, ok, CoPEOpts{}, "emb (3, 5) must be [dh, P] = [2, P >= 1]"},
		{"emb rank", emb3, ok, CoPEOpts{}, "must be [dh, P]"},
		{"emb dtype", emb32, ok, CoPEOpts{}, "emb dtype float32 differs"},
		{"gate", emb, ok, CoPEOpts{GateScale: math.NaN()}, "must be finite"},
		{"term", emb, ok, CoPEOpts{TermScale: math.Inf(-1)}, "must be finite"},
		{"key mask", emb, with(func(o *StreamOpts) { o.KeyMask = make([]bool, 3) }), CoPEOpts{}, "key mask has 3 entries"},
		{"tiles", emb, with(func(o *StreamOpts) { o.TileK = -2 }), CoPEOpts{}, "tiles 0×-2"},
		{"scale", emb, with(func(o *StreamOpts) { o.Scale = math.NaN() }), CoPEOpts{}, "scale NaN"},
	} {
		_, err := StreamCoPE(q, k, v, c.emb, c.o, c.co)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	if _, err := StreamCoPE(q, mk("k2", tensor.Float64, 1, 5, 4), v, emb, ok, CoPEOpts{}); err == nil || !strings.Contains(err.Error(), "must agree") {
		t.Errorf("batch: error %v", err)
	}
	c := copeCase{streamCase: streamCase{name: "nan", b: 1, h: 1, tq: 4, tk: 4, dh: 2, dv: 2}, npos: 3, nanQ: true}
	g = G.NewGraph()
	c.build(t, g, tensor.Float64, 1, false, nil)
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "batch element 0, head 0, query 3 is not finite") {
		t.Errorf("NaN logit: run error %v", err)
	}
}

// TestStreamCoPEIdentity: calls that differ in CoPE's options are distinct
// nodes, equal calls are merged, and the gradient ops have no derivative.
func TestStreamCoPEIdentity(t *testing.T) {
	g := G.NewGraph()
	d := fromFloat64(tensor.Float64, tensor.Shape{1, 4, 4}, make([]float64, 16))
	q, k, v := input(g, "q", d), input(g, "k", d.Clone().(*tensor.Dense)), input(g, "v", d.Clone().(*tensor.Dense))
	emb := input(g, "emb", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, make([]float64, 6)))
	emb2 := input(g, "emb2", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, make([]float64, 6)))
	o := StreamOpts{Heads: 2, Causal: true}
	seen := map[*G.Node]string{}
	for name, n := range map[string]*G.Node{
		"base":  must(t)(StreamCoPE(q, k, v, emb, o, CoPEOpts{})),
		"gate":  must(t)(StreamCoPE(q, k, v, emb, o, CoPEOpts{GateScale: 0.3})),
		"term":  must(t)(StreamCoPE(q, k, v, emb, o, CoPEOpts{TermScale: 1})),
		"emb2":  must(t)(StreamCoPE(q, k, v, emb2, o, CoPEOpts{})),
		"start": must(t)(StreamCoPE(q, k, v, emb, StreamOpts{Heads: 2, Causal: true, QStart: 1}, CoPEOpts{})),
	} {
		if other, ok := seen[n]; ok {
			t.Fatalf("%s was merged with %s", name, other)
		}
		seen[n] = name
	}
	a := must(t)(StreamCoPE(q, k, v, emb, StreamOpts{Heads: 2, Causal: true, Probe: NewAttentionProbe()}, CoPEOpts{}))
	if seen[a] != "base" {
		t.Fatalf("an equal call (probe aside) was not merged: %v", a.Op())
	}
	if _, err := G.Grad(must(t)(G.Sum(a)), q, k, v, emb); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nd := range g.AllNodes() {
		switch op := nd.Op().(type) {
		case *copeGradOp, *streamGradPartOp:
			n++
			if _, err := op.(G.SDOp).SymDiff(nil, nd, nd); err == nil || !strings.Contains(err.Error(), "no derivative") {
				t.Fatalf("%v: SymDiff error %v", op, err)
			}
		}
	}
	if n != 4 {
		t.Fatalf("%d gradient ops, want dq, dk, dv and demb", n)
	}
}

// TestFirstErrNamesOp: a panic in a task of a run becomes the run's error,
// naming the op (and the hint, if any), and later errors do not replace it.
func TestFirstErrNamesOp(t *testing.T) {
	for _, c := range []struct {
		fe   *firstErr
		want string
	}{
		{&firstErr{op: "StreamCoPE"}, "graph: StreamCoPE: panic in a task: boom"},
		{&firstErr{op: "StreamAttention", hint: "the indexer's?"}, "graph: StreamAttention: panic in a task (the indexer's?): boom"},
	} {
		func() {
			defer c.fe.recover()
			panic("boom")
		}()
		c.fe.set(errors.New("later"))
		if c.fe.err == nil || c.fe.err.Error() != c.want || !c.fe.bad.Load() {
			t.Errorf("error %v (bad %v), want %q", c.fe.err, c.fe.bad.Load(), c.want)
		}
	}
}
