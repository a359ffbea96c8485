package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// fireCase is a StreamAttention case with FIRE's bias: MLP width, alpha,
// InitL and the values of c and l_mult (the MLP's weights are random).
type fireCase struct {
	streamCase
	width     int
	alpha     bool
	initL     float64
	cv, lmult float64
	tie       bool // L = an integer query position: Gorgonia's ReLU kink, no central differences
}

var fireCases = []fireCase{
	{streamCase: streamCase{name: "causal", b: 2, h: 2, tq: 9, tk: 9, dh: 3, dv: 2, causal: true, tileQ: 4, tileK: 4}, width: 5, initL: 4, cv: 0.3, lmult: 1.13},
	{streamCase: streamCase{name: "memory-alpha", b: 1, h: 3, tq: 5, tk: 11, dh: 2, dv: 3, causal: true, qStart: 6, tileQ: 2, tileK: 3, scale: 0.7},
		width: 4, alpha: true, initL: 8, cv: -0.4, lmult: -0.93},
	{streamCase: streamCase{name: "bidirectional-padding", b: 3, h: 2, tq: 6, tk: 6, dh: 2, dv: 2, qStart: 1, tileQ: 3, tileK: 2,
		pad: func(b, j int) bool { return b != 1 && !(b == 2 && j >= 4) && !(b == 0 && j == 0) }}, width: 3, alpha: true, initL: 2.5, cv: 0.9, lmult: 1.3},
	{streamCase: streamCase{name: "split-default-tiles", b: 2, h: 2, tq: 6, tk: 8, dh: 2, dv: 3, causal: true, qStart: 2, split: true},
		width: 4, initL: 3, cv: 0.2, lmult: 1.21},
	{streamCase: streamCase{name: "one-tile-per-key", b: 1, h: 2, tq: 7, tk: 7, dh: 2, dv: 2, causal: true, tileQ: 1, tileK: 1},
		width: 3, initL: 3, cv: 0.5, lmult: 0.8},
	{streamCase: streamCase{name: "tie", b: 1, h: 2, tq: 8, tk: 8, dh: 2, dv: 2, causal: true, tileQ: 3, tileK: 5},
		width: 4, alpha: true, initL: 4, cv: 0.1, lmult: 1, tie: true},
}

// fireData are the values of FIRE's parameters, in fireCfg.shapes order.
func (c fireCase) fireData(seed int64) [][]float64 {
	rng := rand.New(rand.NewSource(seed))
	norm := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	d := [][]float64{{c.cv}, {c.lmult}, norm(c.width), norm(c.width), norm(c.width * c.h), norm(c.h)}
	if c.alpha {
		d = append(d, []float64{0.8})
	}
	return d
}

// build adds the case's attention to g, streamed with StreamOpts.FIRE or
// (ref) materialised: FIRE's bias on every pair built with Gorgonia's ops
// (as posenc.FIRE), looked up by TableBias; it returns the output and q,
// k, v, then FIRE's parameters.
func (c fireCase) build(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, d streamData, fd [][]float64, ref bool, probe *AttentionProbe) (*G.Node, G.Nodes) {
	t.Helper()
	q, k, v, _, wrt := c.inputs(g, dt, d)
	fc := fireCfg{width: c.width, heads: c.h, alpha: c.alpha}
	ps := make(G.Nodes, len(fd))
	for i, s := range fc.shapes() {
		ps[i] = input(g, "fire_"+fireParamNames[i], fromFloat64(dt, s, fd[i]))
	}
	wrt = append(wrt, ps...)
	fb := &FIREBias{C: ps[0], LMult: ps[1], W0: ps[2], B0: ps[3], W1: ps[4], B1: ps[5], InitL: c.initL, Eps: 1e-6}
	if c.alpha {
		fb.Alpha = ps[6]
	}
	if !ref {
		out, err := StreamAttention(q, k, v, StreamOpts{Heads: c.h, Scale: c.scale, Causal: c.causal, QStart: c.qStart, KStart: c.kStart,
			KeyMask: d.keyMask, FIRE: fb, TileQ: c.tileQ, TileK: c.tileK, Probe: probe})
		if err != nil {
			t.Fatal(err)
		}
		return out, wrt
	}
	o := AttentionOpts{Heads: c.h, Scale: c.scale, Probe: probe}
	c.refBiasMask(t, g, dt, d, nil, &o)
	o.Bias = c.refFire(t, g, dt, fb)
	p := must(t)(AttentionProbs(q, k, o))
	return must(t)(AttentionOutput(p, v, !c.split)), wrt
}

// refFire is FIRE's bias [B, H, Tq, Tk] of every pair, from Gorgonia's ops.
func (c fireCase) refFire(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, fb *FIREBias) *G.Node {
	t.Helper()
	n := c.tq * c.tk
	dist, qpos, negq := make([]float64, n), make([]float64, n), make([]float64, n)
	ids := make([]int, c.b*n)
	for i := 0; i < c.tq; i++ {
		for j := 0; j < c.tk; j++ {
			p := float64(c.qStart + i)
			dist[i*c.tk+j], qpos[i*c.tk+j], negq[i*c.tk+j] = math.Abs(p-float64(c.kStart+j)), p, -p
		}
	}
	for x := range ids {
		ids[x] = x % n
	}
	cst := func(name string, v []float64) *G.Node {
		return input(g, name, fromFloat64(dt, tensor.Shape{len(v)}, v))
	}
	ac := must(t)(G.Abs(fb.C))
	thr := must(t)(BroadcastMul(must(t)(G.Abs(fb.LMult)), cst("init_l", []float64{fb.InitL})))
	num := must(t)(G.Log1p(must(t)(BroadcastMul(cst("dist", dist), ac))))
	mx := must(t)(G.Add(cst("qpos", qpos), must(t)(G.Rectify(must(t)(BroadcastAdd(cst("negq", negq), thr))))))
	den := must(t)(BroadcastAdd(must(t)(G.Log1p(must(t)(BroadcastMul(mx, ac)))), cst("eps", []float64{fb.Eps})))
	x := must(t)(Reshape(must(t)(G.HadamardDiv(num, den)), n, 1))
	hid := must(t)(G.Rectify(must(t)(Linear(x, fb.W0, fb.B0))))
	tab := must(t)(Linear(hid, fb.W1, fb.B1)) // [n, H]
	if fb.Alpha != nil {
		tab = must(t)(BroadcastMul(tab, fb.Alpha))
	}
	return must(t)(TableBias(tab, intInput(g, "fire_ids", ids, c.b, c.tq, c.tk)))
}

func fireRun(t testing.TB, c fireCase, dt tensor.Dtype, ref bool) [][]float64 {
	t.Helper()
	return runWithGrads(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) { return c.build(t, g, dt, c.data(1), c.fireData(5), ref, nil) })
}

var fireWhat = []string{"out", "dq", "dk", "dv", "dc", "dl_mult", "dw0", "db0", "dw1", "db1", "dalpha"}

// TestStreamFIREMatchesMaterialised: StreamAttention with FIRE's bias
// computed per tile equals the materialised attention with FIRE's bias on
// every pair (Gorgonia's ops, as posenc.FIRE) in the output and the
// gradients of q, k, v and every parameter, to 1e-12 in float64 and 1e-5
// in float32: several tile sizes, causal and bidirectional, a memory
// (QStart > KStart), key padding, split heads, alpha, negative c and
// l_mult, and the tie L = p.
func TestStreamFIREMatchesMaterialised(t *testing.T) {
	for _, c := range fireCases {
		checkMatchesMaterialised(t, c.name, fireWhat, func(t testing.TB, dt tensor.Dtype, ref bool) [][]float64 { return fireRun(t, c, dt, ref) })
	}
}

// TestStreamFIREGradCheck checks the gradients of q, k, v and every FIRE
// parameter against central differences (float64).
func TestStreamFIREGradCheck(t *testing.T) {
	for _, c := range fireCases {
		if c.tie {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			out, wrt := c.build(t, g, tensor.Float64, c.data(3), c.fireData(7), false, nil)
			loss := projLoss(t, rand.New(rand.NewSource(4)), out, "w")
			if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1, MaxPerNode: 40}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStreamFIREProbe: the probe of the streamed attention records the
// statistics of the materialised one, FIRE's bias as the position part.
func TestStreamFIREProbe(t *testing.T) {
	for _, c := range fireCases {
		t.Run(c.name, func(t *testing.T) {
			var stats [2][]HeadStats
			for r, ref := range []bool{false, true} {
				g := G.NewGraph()
				p := NewAttentionProbe()
				c.build(t, g, tensor.Float64, c.data(5), c.fireData(6), ref, p)
				m := G.NewTapeMachine(g)
				p.Arm()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				p.Disarm()
				m.Close()
				stats[r] = p.Stats()
			}
			checkProbeStats(t, stats[0], stats[1], c.h)
		})
	}
}

// TestStreamFIREThreads: bitwise equal results at 1 and 2 threads.
func TestStreamFIREThreads(t *testing.T) {
	c := fireCase{streamCase: streamCase{name: "threads", b: 2, h: 3, tq: 70, tk: 70, dh: 8, dv: 8, causal: true, tileQ: 16, tileK: 32,
		pad: func(b, j int) bool { return b == 0 || j < 50 }}, width: 8, alpha: true, initL: 20, cv: 0.1, lmult: 1.1}
	checkStreamThreads(t, func(dt tensor.Dtype) [][]float64 { return fireRun(t, c, dt, false) })
}

// TestStreamFIREScratch: the forward's work space is fwdScratch, with
// FIRE's tile buffers, whatever the sequence length.
func TestStreamFIREScratch(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	for _, n := range []int{20, 40} {
		c := fireCase{streamCase: streamCase{name: "scratch", b: 1, h: 2, tq: n, tk: n, dh: 4, dv: 3, causal: true, tileQ: 8, tileK: 16},
			width: 6, initL: 5, cv: 0.2, lmult: 1.1}
		op, gop := runStreamOps(t, func(g *G.ExprGraph) (*G.Node, G.Nodes) {
			return c.build(t, g, tensor.Float64, c.data(1), c.fireData(2), false, nil)
		})
		if op.scratch != op.fwdScratch() {
			t.Fatalf("T=%d: forward allocated %+v, fwdScratch %+v", n, op.scratch, op.fwdScratch())
		}
		want := gop.bwdScratch(c.h)
		want.F64 += c.h * (4 + 3*c.width)
		if gop.scratch != want {
			t.Fatalf("T=%d: backward allocated %+v, want %+v", n, gop.scratch, want)
		}
	}
}

// TestStreamFIREErrors: bad FIRE inputs are errors naming them.
func TestStreamFIREErrors(t *testing.T) {
	c := fireCases[0]
	for _, tc := range []struct {
		name, want string
		edit       func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts)
	}{
		{"nil w0", "W0", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) { fb.W0 = nil }},
		{"nil c", "FIRE's c is nil", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) { fb.C = nil }},
		{"w1 heads", "FIRE's w1", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) {
			fb.W1 = input(g, "w1bad", fromFloat64(tensor.Float64, tensor.Shape{c.width, c.h + 1}, make([]float64, c.width*(c.h+1))))
		}},
		{"dtype", "FIRE's b1", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) {
			fb.B1 = input(g, "b1f32", fromFloat64(tensor.Float32, tensor.Shape{c.h}, make([]float64, c.h)))
		}},
		{"negative InitL", "InitL", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) { fb.InitL = -1 }},
		{"NaN eps", "Eps", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) { fb.Eps = math.NaN() }},
		{"negative position", "positions >= 0", func(g *G.ExprGraph, fb *FIREBias, o *StreamOpts) { o.QStart = -1 }},
	} {
		g := G.NewGraph()
		q, k, v, _, _ := c.inputs(g, tensor.Float64, c.data(1))
		fc := fireCfg{width: c.width, heads: c.h}
		fd := c.fireData(1)
		ps := make(G.Nodes, len(fd))
		for i, s := range fc.shapes() {
			ps[i] = input(g, "fire_"+fireParamNames[i], fromFloat64(tensor.Float64, s, fd[i]))
		}
		fb := &FIREBias{C: ps[0], LMult: ps[1], W0: ps[2], B0: ps[3], W1: ps[4], B1: ps[5], InitL: 1, Eps: 1e-6}
		o := StreamOpts{Heads: c.h, Causal: true, FIRE: fb}
		tc.edit(g, fb, &o)
		_, err := StreamAttention(q, k, v, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
