package graph

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Tests of the fused ops (Linear, AttentionProbs, AttentionOutput,
// SplitHeads, MergeHeads): a float64 gradient check each, and values and
// gradients equal to the unfused graphs they replace (built from Gorgonia's
// Mul, BatchedMatMul and Transpose and this package's Reshape, Scale,
// BroadcastAdd and MaskedSoftmax).

// gradsOf runs g once with gradients of loss with respect to wrt and
// returns the values of outs and the gradients, as float64.
func gradsOf(t *testing.T, g *G.ExprGraph, loss *G.Node, outs, wrt G.Nodes) (vals, grads [][]float64) {
	t.Helper()
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, n := range outs {
		vals = append(vals, valueFloat64s(n.Value()))
	}
	for _, n := range wrt {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, valueFloat64s(gv))
	}
	return vals, grads
}

// compareAll fails the test where a and b differ.
func compareAll(t *testing.T, what string, a, b [][]float64, atol, rtol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d tensors", what, len(a), len(b))
	}
	for i := range a {
		checkClose(t, fmt.Sprintf("%s[%d]", what, i), a[i], b[i], atol, rtol)
	}
}

// unfusedLinear is G.Mul on the flattened input plus a broadcast bias.
func unfusedLinear(t *testing.T, x, w, b *G.Node) *G.Node {
	t.Helper()
	xs := x.Shape()
	n := xs.TotalSize() / xs[len(xs)-1]
	x2 := must(t)(Reshape(x, n, xs[len(xs)-1]))
	y := must(t)(G.Mul(x2, w))
	if b != nil {
		y = must(t)(BroadcastAdd(y, b))
	}
	ys := xs.Clone()
	ys[len(ys)-1] = w.Shape()[1]
	return must(t)(Reshape(y, ys...))
}

func TestLinearMatchesUnfused(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, bias := range []bool{true, false} {
			for _, xs := range []tensor.Shape{{7, 5}, {2, 3, 5}} {
				rng := rand.New(rand.NewSource(3))
				xv, wv, bv := randDense(rng, dt, 1, xs...), randDense(rng, dt, 1, 5, 4), randDense(rng, dt, 1, 4)
				build := func(fused bool) ([][]float64, [][]float64) {
					g := G.NewGraph()
					x, w := input(g, "x", xv), input(g, "w", wv)
					var b *G.Node
					wrt := G.Nodes{x, w}
					if bias {
						b = input(g, "b", bv)
						wrt = append(wrt, b)
					}
					var y *G.Node
					if fused {
						y = must(t)(Linear(x, w, b))
					} else {
						y = unfusedLinear(t, x, w, b)
					}
					loss := projLoss(t, rand.New(rand.NewSource(9)), y, "proj")
					return gradsOf(t, g, loss, G.Nodes{y}, wrt)
				}
				fv, fg := build(true)
				uv, ug := build(false)
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				what := fmt.Sprintf("Linear %v x%v bias=%v", dt, xs, bias)
				compareAll(t, what+" values", fv, uv, tol, tol)
				compareAll(t, what+" grads", fg, ug, tol, tol)
			}
		}
	}
}

func TestLinearGradCheck(t *testing.T) {
	for _, bias := range []bool{true, false} {
		rng := rand.New(rand.NewSource(4))
		g := G.NewGraph()
		x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 5))
		w := input(g, "w", randDense(rng, tensor.Float64, 1, 5, 4))
		wrt := G.Nodes{x, w}
		var b *G.Node
		if bias {
			b = input(g, "b", randDense(rng, tensor.Float64, 1, 4))
			wrt = append(wrt, b)
		}
		y := must(t)(Linear(x, w, b))
		gradCheck(t, g, projLoss(t, rng, y, "proj"), wrt...)
	}
}

// TestLinearSecondOrder checks the gradient ops' own derivatives: the loss
// sum(v * d(loss0)/dx) with loss0 = sum(u * Linear(x, w, b)) is
// differentiated with respect to w, through linearGradX.
func TestLinearSecondOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 6, 5))
	w := input(g, "w", randDense(rng, tensor.Float64, 1, 5, 4))
	dy := input(g, "dy", randDense(rng, tensor.Float64, 1, 6, 4))
	dx := must(t)(G.ApplyOp(&linearOp{kind: linGradX, x: tensor.Shape{6, 5}, in: 5, out: 4}, dy, w))
	dw := must(t)(G.ApplyOp(&linearOp{kind: linGradW, x: tensor.Shape{6, 5}, in: 5, out: 4}, x, dy))
	l1 := projLoss(t, rng, dx, "p1")
	l2 := projLoss(t, rng, dw, "p2")
	gradCheck(t, g, must(t)(G.Add(l1, l2)), x, w, dy)
}

func TestLinearErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 3, 5))
	w := input(g, "w", randDense(rng, tensor.Float64, 1, 4, 2))
	w32 := input(g, "w32", randDense(rng, tensor.Float32, 1, 5, 2))
	b3 := input(g, "b3", randDense(rng, tensor.Float64, 1, 3))
	w52 := input(g, "w52", randDense(rng, tensor.Float64, 1, 5, 2))
	for _, c := range []struct {
		x, w, b *G.Node
	}{{x, w, nil}, {x, w32, nil}, {x, w52, b3}} {
		if _, err := Linear(c.x, c.w, c.b); err == nil {
			t.Errorf("Linear(%v, %v): no error", c.x.Shape(), c.w.Shape())
		}
	}
}

// attnCase is one configuration of AttentionProbs.
type attnCase struct {
	b, h, tq, tk, dh int
	merged           bool
	terms            bool
	bias             tensor.Shape // nil: none
	mask             string       // "", "causal", "padding"
	scale            float64
}

func attnCases() []attnCase {
	return []attnCase{
		{b: 2, h: 3, tq: 4, tk: 4, dh: 5, merged: true, mask: "causal"},
		{b: 2, h: 3, tq: 4, tk: 4, dh: 5, merged: false, mask: "causal", bias: tensor.Shape{3, 4, 4}},
		{b: 2, h: 2, tq: 3, tk: 5, dh: 4, merged: true, terms: true, bias: tensor.Shape{1, 3, 5}, mask: "padding", scale: 0.3},
		{b: 1, h: 2, tq: 5, tk: 5, dh: 3, merged: false, terms: true, mask: "causal", scale: 0.7},
		{b: 2, h: 2, tq: 3, tk: 6, dh: 4, merged: true},
	}
}

// masks: causal [1, 1, Tq, Tk] (query i may see keys j <= i + Tk - Tq), or
// padding [B, 1, 1, Tk] with the last key of batch element 0 blocked and,
// for element 1, everything blocked (a fully masked row).
func attnMask(c attnCase, dt tensor.Dtype) *tensor.Dense {
	switch c.mask {
	case "causal":
		m := make([]float64, c.tq*c.tk)
		for i := 0; i < c.tq; i++ {
			for j := 0; j < c.tk; j++ {
				if j <= i+c.tk-c.tq {
					m[i*c.tk+j] = 1
				}
			}
		}
		return fromFloat64(dt, tensor.Shape{1, 1, c.tq, c.tk}, m)
	case "padding":
		m := make([]float64, c.b*c.tk)
		for j := 0; j < c.tk-1; j++ {
			m[j] = 1
		}
		return fromFloat64(dt, tensor.Shape{c.b, 1, 1, c.tk}, m)
	}
	return nil
}

// buildAttn builds AttentionProbs (fused) or the unfused chain for c and
// returns probs and the nodes to differentiate.
func buildAttn(t *testing.T, c attnCase, dt tensor.Dtype, fused bool, seed int64) (*G.ExprGraph, *G.Node, G.Nodes) {
	return buildAttnWith(t, c, dt, fused, seed, nil)
}

// buildAttnWith is buildAttn with a probe on the fused op.
func buildAttnWith(t *testing.T, c attnCase, dt tensor.Dtype, fused bool, seed int64, probe *AttentionProbe) (*G.ExprGraph, *G.Node, G.Nodes) {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	d := c.h * c.dh
	qs, ks := tensor.Shape{c.b, c.h, c.tq, c.dh}, tensor.Shape{c.b, c.h, c.tk, c.dh}
	if c.merged {
		qs, ks = tensor.Shape{c.b, c.tq, d}, tensor.Shape{c.b, c.tk, d}
	}
	q, k := input(g, "q", randDense(rng, dt, 1, qs...)), input(g, "k", randDense(rng, dt, 1, ks...))
	wrt := G.Nodes{q, k}
	var terms, bias, mask *G.Node
	if c.terms {
		terms = input(g, "terms", randDense(rng, dt, 1, c.b, c.h, c.tq, c.tk))
		wrt = append(wrt, terms)
	}
	if c.bias != nil {
		bias = input(g, "bias", randDense(rng, dt, 1, c.bias...))
		wrt = append(wrt, bias)
	}
	if mv := attnMask(c, dt); mv != nil {
		mask = input(g, "mask", mv)
	}
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.dh))
	}
	if fused {
		p := must(t)(AttentionProbs(q, k, AttentionOpts{Heads: c.h, Scale: c.scale, Terms: terms, Bias: bias, Mask: mask, Probe: probe}))
		return g, p, wrt
	}
	q4, k4 := q, k
	if c.merged {
		q4 = must(t)(G.Transpose(must(t)(Reshape(q, c.b, c.tq, c.h, c.dh)), 0, 2, 1, 3))
		k4 = must(t)(G.Transpose(must(t)(Reshape(k, c.b, c.tk, c.h, c.dh)), 0, 2, 1, 3))
	}
	s := must(t)(G.BatchedMatMul(must(t)(Reshape(q4, c.b*c.h, c.tq, c.dh)), must(t)(Reshape(k4, c.b*c.h, c.tk, c.dh)), false, true))
	s = must(t)(Reshape(s, c.b, c.h, c.tq, c.tk))
	if terms != nil {
		s = must(t)(Add(s, terms))
	}
	s = must(t)(Scale(s, scale))
	if bias != nil {
		s = must(t)(BroadcastAdd(s, bias))
	}
	return g, must(t)(MaskedSoftmax(s, mask)), wrt
}

func TestAttentionProbsMatchesUnfused(t *testing.T) {
	for ci, c := range attnCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			run := func(fused bool) ([][]float64, [][]float64) {
				g, p, wrt := buildAttn(t, c, dt, fused, int64(10+ci))
				loss := projLoss(t, rand.New(rand.NewSource(99)), p, "proj")
				return gradsOf(t, g, loss, G.Nodes{p}, wrt)
			}
			fv, fg := run(true)
			uv, ug := run(false)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 2e-5
			}
			what := fmt.Sprintf("AttentionProbs case %d %v", ci, dt)
			compareAll(t, what+" probs", fv, uv, tol, tol)
			compareAll(t, what+" grads", fg, ug, tol, tol)
		}
	}
}

func TestAttentionProbsGradCheck(t *testing.T) {
	for ci, c := range attnCases() {
		g, p, wrt := buildAttn(t, c, tensor.Float64, true, int64(20+ci))
		loss := projLoss(t, rand.New(rand.NewSource(98)), p, "proj")
		if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1}); err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
	}
}

func TestAttentionProbsFullyMaskedRow(t *testing.T) {
	// case 2 blocks every key of batch element 1: its rows are exactly 0
	c := attnCases()[2]
	g, p, _ := buildAttn(t, c, tensor.Float32, true, 1)
	run(t, g)
	v := valueFloat64s(p.Value())
	per := c.h * c.tq * c.tk
	for i, x := range v[per:] {
		if x != 0 {
			t.Fatalf("element %d of the fully masked batch element is %v", per+i, x)
		}
	}
	for i, x := range v[:per] {
		if (i%c.tk == c.tk-1) != (x == 0) {
			t.Fatalf("element %d = %v: the blocked last key must be exactly 0, the others positive", i, x)
		}
	}
}

func TestAttentionProbsErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	g := G.NewGraph()
	q := input(g, "q", randDense(rng, tensor.Float64, 1, 2, 4, 6))
	k := input(g, "k", randDense(rng, tensor.Float64, 1, 2, 5, 6))
	k4 := input(g, "k4", randDense(rng, tensor.Float64, 1, 2, 3, 5, 2))
	bad := input(g, "bad", randDense(rng, tensor.Float64, 1, 2, 4, 5))
	for i, f := range []func() error{
		func() error { _, err := AttentionProbs(q, k, AttentionOpts{Heads: 4}); return err },             // 4 does not divide 6
		func() error { _, err := AttentionProbs(q, k4, AttentionOpts{Heads: 3}); return err },            // ranks differ
		func() error { _, err := AttentionProbs(q, k, AttentionOpts{Heads: 3, Bias: bad}); return err },  // bias does not broadcast
		func() error { _, err := AttentionProbs(q, k, AttentionOpts{Heads: 3, Terms: bad}); return err }, // terms shape
		func() error { _, err := AttentionOutput(bad, k, true); return err },                             // probs rank
		func() error { _, err := SplitHeads(q, 4); return err },                                          // heads
	} {
		if f() == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}

// buildOut builds AttentionOutput or the unfused probs·v (BatchedMatMul,
// Transpose, Reshape) for probs [B, H, Tq, Tk] and v merged or split.
func buildOut(t *testing.T, dt tensor.Dtype, vMerged, merge, fused bool) (*G.ExprGraph, *G.Node, G.Nodes) {
	const b, h, tq, tk, dh = 2, 3, 4, 5, 2
	rng := rand.New(rand.NewSource(31))
	g := G.NewGraph()
	p := input(g, "probs", randDense(rng, dt, 1, b, h, tq, tk))
	vs := tensor.Shape{b, h, tk, dh}
	if vMerged {
		vs = tensor.Shape{b, tk, h * dh}
	}
	v := input(g, "v", randDense(rng, dt, 1, vs...))
	if fused {
		return g, must(t)(AttentionOutput(p, v, merge)), G.Nodes{p, v}
	}
	v4 := v
	if vMerged {
		v4 = must(t)(G.Transpose(must(t)(Reshape(v, b, tk, h, dh)), 0, 2, 1, 3))
	}
	o := must(t)(G.BatchedMatMul(must(t)(Reshape(p, b*h, tq, tk)), must(t)(Reshape(v4, b*h, tk, dh))))
	o = must(t)(Reshape(o, b, h, tq, dh))
	if merge {
		o = must(t)(Reshape(must(t)(G.Transpose(o, 0, 2, 1, 3)), b, tq, h*dh))
	}
	return g, o, G.Nodes{p, v}
}

func TestAttentionOutputMatchesUnfused(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, vm := range []bool{true, false} {
			for _, merge := range []bool{true, false} {
				run := func(fused bool) ([][]float64, [][]float64) {
					g, o, wrt := buildOut(t, dt, vm, merge, fused)
					return gradsOf(t, g, projLoss(t, rand.New(rand.NewSource(5)), o, "proj"), G.Nodes{o}, wrt)
				}
				fv, fg := run(true)
				uv, ug := run(false)
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				what := fmt.Sprintf("AttentionOutput %v vMerged=%v merge=%v", dt, vm, merge)
				compareAll(t, what+" values", fv, uv, tol, tol)
				compareAll(t, what+" grads", fg, ug, tol, tol)
			}
		}
	}
}

func TestAttentionOutputGradCheck(t *testing.T) {
	for _, vm := range []bool{true, false} {
		for _, merge := range []bool{true, false} {
			g, o, wrt := buildOut(t, tensor.Float64, vm, merge, true)
			gradCheck(t, g, projLoss(t, rand.New(rand.NewSource(6)), o, "proj"), wrt...)
		}
	}
}

// TestHeadMatMulTransposed checks the derivatives of headMatMul with
// transposed operands (the gradient products of AttentionOutput and
// AttentionProbs, which are differentiable themselves): dP = alpha dO·vᵀ
// and dV = alpha Pᵀ·dO, with v and dO in the merged layout.
func TestHeadMatMulTransposed(t *testing.T) {
	const b, h, tq, tk, dh = 2, 2, 3, 4, 5
	rng := rand.New(rand.NewSource(8))
	g := G.NewGraph()
	p := input(g, "p", randDense(rng, tensor.Float64, 1, b, h, tq, tk))
	v := input(g, "v", randDense(rng, tensor.Float64, 1, b, tk, h*dh))
	do := input(g, "do", randDense(rng, tensor.Float64, 1, b, tq, h*dh))
	pl := headLayout{b: b, h: h, rows: tq, cols: tk}
	vl := headLayout{merged: true, b: b, h: h, rows: tk, cols: dh}
	ol := headLayout{merged: true, b: b, h: h, rows: tq, cols: dh}
	dp := must(t)(headMatMul(do, v, ol, vl, pl, false, true, 0.7))
	dv := must(t)(headMatMul(p, do, pl, ol, vl, true, false, 1.3))
	l := must(t)(G.Add(projLoss(t, rng, dp, "p1"), projLoss(t, rng, dv, "p2")))
	gradCheck(t, g, l, p, v, do)
}

func TestSplitMergeHeads(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	g := G.NewGraph()
	xv := randDense(rng, tensor.Float64, 1, 2, 3, 4*2)
	x := input(g, "x", xv)
	s := must(t)(SplitHeads(x, 4))
	ref := must(t)(G.Transpose(must(t)(Reshape(x, 2, 3, 4, 2)), 0, 2, 1, 3))
	m := must(t)(MergeHeads(s))
	run(t, g)
	checkClose(t, "SplitHeads", valueFloat64s(s.Value()), valueFloat64s(ref.Value()), 0, 0)
	checkClose(t, "MergeHeads(SplitHeads)", valueFloat64s(m.Value()), ToFloat64s(xv), 0, 0)
	if !s.Shape().Eq(tensor.Shape{2, 4, 3, 2}) || !m.Shape().Eq(tensor.Shape{2, 3, 8}) {
		t.Fatalf("shapes %v and %v", s.Shape(), m.Shape())
	}

	g = G.NewGraph()
	x = input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4*2))
	y := input(g, "y", randDense(rng, tensor.Float64, 1, 2, 4, 3, 2))
	l := must(t)(G.Add(projLoss(t, rng, must(t)(SplitHeads(x, 4)), "p1"), projLoss(t, rng, must(t)(MergeHeads(y)), "p2")))
	gradCheck(t, g, l, x, y)
}

// TestBuffersReused runs one graph twice with different inputs: the second
// run's outputs (written into the buffers of the first) must equal those of
// a fresh graph, and the buffer must be the same tensor.
func TestBuffersReused(t *testing.T) {
	c := attnCases()[2]
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		g, p, wrt := buildAttn(t, c, dt, true, 41)
		loss := projLoss(t, rand.New(rand.NewSource(1)), p, "proj")
		if _, err := G.Grad(loss, wrt...); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		first := p.Value()
		m.Reset()
		// new inputs: those of seed 42
		g2, p2, wrt2 := buildAttn(t, c, dt, true, 42)
		for i, n := range wrt {
			if err := G.Let(n, wrt2[i].Value()); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range wrt {
			zeroDualGrad(n)
		}
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		if p.Value() != first {
			t.Errorf("%v: the output tensor was not reused", dt)
		}
		loss2 := projLoss(t, rand.New(rand.NewSource(1)), p2, "proj")
		wv, wg := gradsOf(t, g2, loss2, G.Nodes{p2}, wrt2)
		var gg [][]float64
		for _, n := range wrt {
			gv, _ := n.Grad()
			gg = append(gg, valueFloat64s(gv))
		}
		compareAll(t, fmt.Sprintf("%v second run values", dt), [][]float64{valueFloat64s(p.Value())}, wv, 0, 0)
		compareAll(t, fmt.Sprintf("%v second run grads", dt), gg, wg, 0, 0)
		m.Close()
	}
}

// unfusedRelScores is posenc's xlRelScores: transpose x to [H, B, T, dh],
// one batched product per head with the table, transpose back.
func unfusedRelScores(t *testing.T, x, tab *G.Node) *G.Node {
	t.Helper()
	s, ts := x.Shape(), tab.Shape()
	b, h, tt, dh, r := s[0], s[1], s[2], s[3], ts[1]
	xt := must(t)(Reshape(must(t)(G.Transpose(x, 1, 0, 2, 3)), h, b*tt, dh))
	m := must(t)(G.BatchedMatMul(xt, tab, false, true))
	return must(t)(G.Transpose(must(t)(Reshape(m, h, b, tt, r)), 1, 0, 2, 3))
}

func TestRelScores(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		build := func(fused bool) ([][]float64, [][]float64) {
			rng := rand.New(rand.NewSource(51))
			g := G.NewGraph()
			x := input(g, "x", randDense(rng, dt, 1, 2, 3, 4, 5))
			tab := input(g, "tab", randDense(rng, dt, 1, 3, 7, 5))
			var o *G.Node
			if fused {
				o = must(t)(RelScores(x, tab))
			} else {
				o = unfusedRelScores(t, x, tab)
			}
			return gradsOf(t, g, projLoss(t, rand.New(rand.NewSource(3)), o, "proj"), G.Nodes{o}, G.Nodes{x, tab})
		}
		fv, fg := build(true)
		uv, ug := build(false)
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-5
		}
		compareAll(t, fmt.Sprintf("RelScores %v values", dt), fv, uv, tol, tol)
		compareAll(t, fmt.Sprintf("RelScores %v grads", dt), fg, ug, tol, tol)
	}
	rng := rand.New(rand.NewSource(52))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4, 5))
	tab := input(g, "tab", randDense(rng, tensor.Float64, 1, 3, 7, 5))
	gradCheck(t, g, projLoss(t, rng, must(t)(RelScores(x, tab)), "proj"), x, tab)
	if _, err := RelScores(x, input(g, "bad", randDense(rng, tensor.Float64, 1, 2, 7, 5))); err == nil {
		t.Error("RelScores with a table of 2 heads for x of 3: no error")
	}
}

// TestKeyScores compares KeyScores with the element-wise product and sum
// it replaces (XL's u·k), values and gradients, and gradient-checks it.
func TestKeyScores(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, r := range []int{1, 3} {
			build := func(fused bool) ([][]float64, [][]float64) {
				rng := rand.New(rand.NewSource(54))
				g := G.NewGraph()
				x := input(g, "x", randDense(rng, dt, 1, 2, 3, 4, 5))
				tab := input(g, "tab", randDense(rng, dt, 1, 3, r, 5))
				var o *G.Node
				if fused {
					o = must(t)(KeyScores(tab, x))
				} else { // tab·xᵀ = (x·tabᵀ)ᵀ per head
					o = must(t)(TransposeLast2(unfusedRelScores(t, x, tab)))
				}
				return gradsOf(t, g, projLoss(t, rand.New(rand.NewSource(3)), o, "proj"), G.Nodes{o}, G.Nodes{x, tab})
			}
			fv, fg := build(true)
			uv, ug := build(false)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			compareAll(t, fmt.Sprintf("KeyScores %v R=%d values", dt, r), fv, uv, tol, tol)
			compareAll(t, fmt.Sprintf("KeyScores %v R=%d grads", dt, r), fg, ug, tol, tol)
		}
	}
	rng := rand.New(rand.NewSource(55))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4, 5))
	tab := input(g, "tab", randDense(rng, tensor.Float64, 1, 3, 1, 5))
	gradCheck(t, g, projLoss(t, rng, must(t)(KeyScores(tab, x)), "proj"), x, tab)
	if _, err := KeyScores(input(g, "bad", randDense(rng, tensor.Float64, 1, 2, 1, 5)), x); err == nil {
		t.Error("KeyScores with a table of 2 heads for x of 3: no error")
	}
}

// TestWriteTail checks that WriteTail writes the rows into the cache's
// last rows, in place, leaves the others, and refuses what does not fit.
func TestWriteTail(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		rng := rand.New(rand.NewSource(56))
		g := G.NewGraph()
		cv := randDense(rng, dt, 1, 2, 4, 3)
		before := ToFloat64s(cv)
		c := input(g, "cache", cv)
		x := input(g, "x", randDense(rng, dt, 1, 2, 1, 3))
		y := must(t)(WriteTail(c, x))
		run(t, g)
		got, xs := ToFloat64s(y.Value()), ToFloat64s(x.Value())
		for b := 0; b < 2; b++ {
			for r := 0; r < 4; r++ {
				for j := 0; j < 3; j++ {
					want := before[(b*4+r)*3+j]
					if r == 3 {
						want = xs[b*3+j]
					}
					if g := got[(b*4+r)*3+j]; g != want {
						t.Fatalf("%v: sequence %d row %d col %d = %v, want %v", dt, b, r, j, g, want)
					}
				}
			}
		}
		if ToFloat64s(cv)[3*3] != xs[0] {
			t.Fatalf("%v: the cache's own memory was not written", dt)
		}
	}
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(57))
	c := input(g, "cache", randDense(rng, tensor.Float64, 1, 2, 2, 3))
	if _, err := WriteTail(c, input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 3))); err == nil {
		t.Error("WriteTail of 3 rows into a cache of 2: no error")
	}
	if _, err := WriteTail(c, input(g, "y", randDense(rng, tensor.Float64, 1, 2, 1, 4))); err == nil {
		t.Error("WriteTail of width 4 into a cache of 3: no error")
	}
}

func TestTransposeLast2(t *testing.T) {
	rng := rand.New(rand.NewSource(53))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4, 5))
	y := must(t)(TransposeLast2(x))
	ref := must(t)(G.Transpose(x, 0, 1, 3, 2))
	run(t, g)
	if !y.Shape().Eq(tensor.Shape{2, 3, 5, 4}) {
		t.Fatalf("shape %v", y.Shape())
	}
	checkClose(t, "TransposeLast2", valueFloat64s(y.Value()), valueFloat64s(ref.Value()), 0, 0)
	g = G.NewGraph()
	x = input(g, "x", randDense(rng, tensor.Float64, 1, 3, 4, 5))
	gradCheck(t, g, projLoss(t, rng, must(t)(TransposeLast2(x)), "proj"), x)
}

// TestSingleOpsMatchUnfused compares LayerNorm, GELU and CrossEntropy (each
// one op with a hand-written gradient) with the same functions built from
// Gorgonia's elementwise ops and reductions, values and gradients, float64.
func TestSingleOpsMatchUnfused(t *testing.T) {
	const n, d = 6, 7
	c := func(g *G.ExprGraph, v float64) *G.Node { return G.NewConstant(v) }
	cases := []struct {
		name  string
		build func(t *testing.T, g *G.ExprGraph, fused bool) (*G.Node, G.Nodes)
	}{
		{"LayerNorm", func(t *testing.T, g *G.ExprGraph, fused bool) (*G.Node, G.Nodes) {
			rng := rand.New(rand.NewSource(61))
			x := input(g, "x", randDense(rng, tensor.Float64, 2, n, d))
			gm := input(g, "gamma", randDense(rng, tensor.Float64, 1, d))
			bt := input(g, "beta", randDense(rng, tensor.Float64, 1, d))
			if fused {
				return must(t)(LayerNorm(x, gm, bt, 1e-5)), G.Nodes{x, gm, bt}
			}
			negMean := must(t)(Reshape(must(t)(G.Neg(must(t)(G.Mean(x, 1)))), n, 1))
			xc := must(t)(BroadcastAdd(x, negMean))
			v := must(t)(G.Mean(must(t)(G.Square(xc)), 1)) // [n]
			rstd := must(t)(Reshape(must(t)(G.Inverse(must(t)(G.Sqrt(must(t)(G.Add(v, c(g, 1e-5))))))), n, 1))
			y := must(t)(BroadcastAdd(must(t)(BroadcastMul(must(t)(BroadcastMul(xc, rstd)), gm)), bt))
			return y, G.Nodes{x, gm, bt}
		}},
		{"GELU", func(t *testing.T, g *G.ExprGraph, fused bool) (*G.Node, G.Nodes) {
			x := input(g, "x", randDense(rand.New(rand.NewSource(62)), tensor.Float64, 2, n, d))
			if fused {
				return must(t)(GELU(x)), G.Nodes{x}
			}
			inner := must(t)(G.Add(x, must(t)(G.Mul(must(t)(G.Cube(x)), c(g, geluA)))))
			th := must(t)(G.Tanh(must(t)(G.Mul(inner, c(g, geluC)))))
			y := must(t)(G.HadamardProd(must(t)(G.Mul(x, c(g, 0.5))), must(t)(G.Add(th, c(g, 1)))))
			return y, G.Nodes{x}
		}},
		{"CrossEntropy", func(t *testing.T, g *G.ExprGraph, fused bool) (*G.Node, G.Nodes) {
			logits := input(g, "logits", randDense(rand.New(rand.NewSource(63)), tensor.Float64, 2, n, d))
			tg := []int{3, 0, 6, 2, 2, 5}
			if fused {
				return must(t)(CrossEntropy(logits, intInput(g, "targets", tg, n))), G.Nodes{logits}
			}
			onehot := make([]float64, n*d)
			for i, k := range tg {
				onehot[i*d+k] = 1
			}
			oh := input(g, "onehot", fromFloat64(tensor.Float64, tensor.Shape{n, d}, onehot))
			lse := must(t)(G.Log(must(t)(G.Sum(must(t)(G.Exp(logits)), 1)))) // [n]
			picked := must(t)(G.Sum(must(t)(G.HadamardProd(logits, oh)), 1)) // [n]
			return must(t)(G.Mean(must(t)(G.Sub(lse, picked)))), G.Nodes{logits}
		}},
	}
	for _, cs := range cases {
		run := func(fused bool) ([][]float64, [][]float64) {
			g := G.NewGraph()
			y, wrt := cs.build(t, g, fused)
			return gradsOf(t, g, projLoss(t, rand.New(rand.NewSource(64)), y, "proj"), G.Nodes{y}, wrt)
		}
		fv, fg := run(true)
		uv, ug := run(false)
		compareAll(t, cs.name+" values", fv, uv, 1e-12, 1e-10)
		compareAll(t, cs.name+" grads", fg, ug, 1e-12, 1e-9)
	}
}
