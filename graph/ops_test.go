package graph

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// opCase builds one op on fresh inputs of dtype dt drawn from rng and returns
// its output and the differentiable inputs.
type opCase struct {
	name  string
	build func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (out *G.Node, wrt G.Nodes)
}

// opCases covers every op of the package in several shapes.
func opCases() []opCase {
	var cs []opCase
	for _, shape := range []tensor.Shape{{3, 5}, {2, 3, 4}, {2, 2, 3, 4}} {
		shape := shape
		cs = append(cs, opCase{fmt.Sprintf("LayerNorm%v", shape), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			d := shape[len(shape)-1]
			x := input(g, "x", randDense(rng, dt, 2, shape...))
			gm := input(g, "gamma", randDense(rng, dt, 1, d))
			bt := input(g, "beta", randDense(rng, dt, 1, d))
			return must(t)(LayerNorm(x, gm, bt, 1e-5)), G.Nodes{x, gm, bt}
		}})
	}
	for _, shape := range []tensor.Shape{{7}, {2, 3, 4}} {
		shape := shape
		cs = append(cs, opCase{fmt.Sprintf("GELU%v", shape), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := input(g, "x", randDense(rng, dt, 2, shape...))
			return must(t)(GELU(x)), G.Nodes{x}
		}})
	}
	for _, c := range []struct {
		axis int
		a, b tensor.Shape
	}{{0, tensor.Shape{2, 3}, tensor.Shape{1, 3}}, {1, tensor.Shape{2, 3}, tensor.Shape{2, 2}}, {1, tensor.Shape{2, 3, 4}, tensor.Shape{2, 1, 4}}, {2, tensor.Shape{2, 3, 4}, tensor.Shape{2, 3, 2}}, {0, tensor.Shape{1, 3, 2}, tensor.Shape{2, 3, 2}}} {
		c := c
		cs = append(cs, opCase{fmt.Sprintf("Concat%d%v%v", c.axis, c.a, c.b), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			a := input(g, "a", randDense(rng, dt, 1, c.a...))
			b := input(g, "b", randDense(rng, dt, 1, c.b...))
			return must(t)(Concat(c.axis, a, b)), G.Nodes{a, b}
		}})
	}
	for _, targets := range [][]int{{0, 3, 4, 1}, {2, -1, 4, -100}, {-1, -1, -1, -1}, {1, 1, 1, 1}} {
		targets := targets
		cs = append(cs, opCase{fmt.Sprintf("CrossEntropy%v", targets), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			logits := input(g, "logits", randDense(rng, dt, 2, len(targets), 5))
			tg := intInput(g, "targets", targets, len(targets))
			return must(t)(CrossEntropy(logits, tg)), G.Nodes{logits}
		}})
	}
	for _, ids := range []struct {
		data  []int
		shape []int
	}{{[]int{0, 2, 2, 5}, []int{4}}, {[]int{1, 1, 1, 3, 0, 1}, []int{2, 3}}, {[]int{4, 4, 4, 4}, []int{2, 1, 2}}} {
		ids := ids
		cs = append(cs, opCase{fmt.Sprintf("Embedding%v", ids.data), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			table := input(g, "table", randDense(rng, dt, 1, 6, 3))
			id := intInput(g, "ids", ids.data, ids.shape...)
			return must(t)(Embedding(table, id)), G.Nodes{table}
		}})
	}
	for _, mc := range maskCases() {
		mc := mc
		cs = append(cs, opCase{"MaskedSoftmax/" + mc.name, func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := input(g, "x", randDense(rng, dt, 2, mc.x...))
			var m *G.Node
			if mc.mask != nil {
				m = input(g, "mask", fromFloat64(dt, mc.mask.Shape(), ToFloat64s(mc.mask)))
			}
			return must(t)(MaskedSoftmax(x, m)), G.Nodes{x}
		}})
	}
	for _, p := range broadcastPatterns() {
		p := p
		for _, mul := range []bool{false, true} {
			mul := mul
			name := "BroadcastAdd"
			if mul {
				name = "BroadcastMul"
			}
			cs = append(cs, opCase{fmt.Sprintf("%s%v%v", name, p.a, p.b), func(t testing.TB, g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
				a := input(g, "a", randDense(rng, dt, 1, p.a...))
				var b *G.Node
				if len(p.b) == 0 {
					b = G.NewScalar(g, dt, G.WithName("b"), G.WithValue(scalarValue64(dt, rng.NormFloat64())))
				} else {
					b = input(g, "b", randDense(rng, dt, 1, p.b...))
				}
				if mul {
					return must(t)(BroadcastMul(a, b)), G.Nodes{a, b}
				}
				return must(t)(BroadcastAdd(a, b)), G.Nodes{a, b}
			}})
		}
	}
	return cs
}

// scalarValue64 is x as a G scalar of dtype dt.
func scalarValue64(dt tensor.Dtype, x float64) G.Value {
	if dt == tensor.Float32 {
		return G.NewF32(float32(x))
	}
	return G.NewF64(x)
}

type bPattern struct{ a, b tensor.Shape }

// broadcastPatterns is every 4-D pattern of b against a = [2, 3, 4, 5] (each
// axis kept or broadcast, including Gorgonia's failing {1, 2} and {0, 2}),
// lower-rank b (right-aligned) and a scalar b, plus lower-rank a.
func broadcastPatterns() []bPattern {
	a := tensor.Shape{2, 3, 4, 5}
	var ps []bPattern
	for bits := 0; bits < 16; bits++ {
		b := a.Clone()
		for ax := 0; ax < 4; ax++ {
			if bits&(1<<ax) != 0 {
				b[ax] = 1
			}
		}
		ps = append(ps, bPattern{a, b})
	}
	ps = append(ps,
		bPattern{a, tensor.Shape{4, 5}},
		bPattern{a, tensor.Shape{5}},
		bPattern{a, tensor.Shape{3, 1, 5}},
		bPattern{a, tensor.Shape{}},
		bPattern{tensor.Shape{3, 4}, tensor.Shape{4}},
		bPattern{tensor.Shape{3, 4}, tensor.Shape{3, 1}},
		bPattern{tensor.Shape{6}, tensor.Shape{1}},
	)
	return ps
}

// TestOpsGradCheck gradient-checks every op through sum(out * w) for a fixed
// random w, with respect to every differentiable input.
func TestOpsGradCheck(t *testing.T) {
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(100 + i)))
			g := G.NewGraph()
			out, wrt := c.build(t, g, tensor.Float64, rng)
			loss := projLoss(t, rng, out, "w")
			gradCheck(t, g, loss, wrt...)
		})
	}
}

// TestOpsFloat32MatchesFloat64 runs every op forward in float32 and float64
// on the same inputs (rounded to float32) and compares the outputs.
func TestOpsFloat32MatchesFloat64(t *testing.T) {
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			var outs [2][]float64
			for k, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				rng := rand.New(rand.NewSource(int64(200 + i)))
				g := G.NewGraph()
				// Draw in float32 precision for both, so only the op's
				// arithmetic differs.
				out, _ := c.build(t, g, dt, rng)
				for _, n := range g.AllNodes() {
					if n.Op() == nil && n.Dtype() == tensor.Float64 {
						roundToFloat32(n.Value())
					}
				}
				run(t, g)
				if out.Dtype() != dt {
					t.Fatalf("output dtype %v, want %v", out.Dtype(), dt)
				}
				outs[k] = valueFloat64s(out.Value())
			}
			checkClose(t, "float32 vs float64", outs[0], outs[1], 1e-6, 1e-5)
		})
	}
}

// roundToFloat32 rounds a float64 value's elements to float32 precision in
// place.
func roundToFloat32(v G.Value) {
	switch x := v.(type) {
	case *tensor.Dense:
		d := x.Data().([]float64)
		for i, f := range d {
			d[i] = float64(float32(f))
		}
	case *G.F64:
		*x = G.F64(float32(*x))
	}
}

// TestOpsFloat32Gradients runs every op's gradient in float32 and float64 on
// the same inputs (rounded to float32) and compares the gradients, so the
// gradient ops are exercised in float32 too.
func TestOpsFloat32Gradients(t *testing.T) {
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			var grads [2][][]float64
			for k, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				rng := rand.New(rand.NewSource(int64(300 + i)))
				g := G.NewGraph()
				out, wrt := c.build(t, g, dt, rng)
				loss := projLoss(t, rng, out, "w")
				for _, n := range g.AllNodes() {
					if n.Op() == nil && n.Dtype() == tensor.Float64 {
						roundToFloat32(n.Value())
					}
				}
				if _, err := G.Grad(loss, wrt...); err != nil {
					t.Fatal(err)
				}
				m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				for _, n := range wrt {
					gv, err := n.Grad()
					if err != nil {
						t.Fatal(err)
					}
					if gv.Dtype() != dt {
						t.Fatalf("gradient of %v has dtype %v, want %v", n.Name(), gv.Dtype(), dt)
					}
					grads[k] = append(grads[k], valueFloat64s(gv))
				}
				m.Close()
			}
			for j := range grads[0] {
				checkClose(t, fmt.Sprintf("gradient %d float32 vs float64", j), grads[0][j], grads[1][j], 1e-5, 1e-4)
			}
		})
	}
}

// TestCopyFloat32s writes float32 values into float32 and float64 tensors.
func TestCopyFloat32s(t *testing.T) {
	x := []float32{1.5, -2, 0.25}
	d32 := tensor.New(tensor.WithShape(3), tensor.Of(tensor.Float32))
	d64 := tensor.New(tensor.WithShape(3), tensor.Of(tensor.Float64))
	CopyFloat32s(d32, x)
	CopyFloat32s(d64, x)
	if got := ToFloat64s(d32); got[0] != 1.5 || got[1] != -2 || got[2] != 0.25 {
		t.Fatalf("float32: %v", got)
	}
	if got := ToFloat64s(d64); got[0] != 1.5 || got[1] != -2 || got[2] != 0.25 {
		t.Fatalf("float64: %v", got)
	}
}

// TestConcatMatchesGorgonia compares Concat and its split-back with
// Gorgonia's G.Concat and G.Slice, and checks its errors.
func TestConcatMatchesGorgonia(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, axis := range []int{0, 1, 2} {
		g := G.NewGraph()
		sa, sb := tensor.Shape{2, 3, 4}, tensor.Shape{2, 3, 4}
		sb[axis] = 2
		a := input(g, "a", randDense(rng, tensor.Float64, 1, sa...))
		b := input(g, "b", randDense(rng, tensor.Float64, 1, sb...))
		ours := must(t)(Concat(axis, a, b))
		theirs := must(t)(G.Concat(axis, a, b))
		back := must(t)(ConcatSplit(ours, axis, sa[axis], sa[axis]+sb[axis]))
		run(t, g)
		checkClose(t, fmt.Sprintf("axis %d", axis), valueFloat64s(ours.Value()), valueFloat64s(theirs.Value()), 0, 0)
		checkClose(t, fmt.Sprintf("split axis %d", axis), valueFloat64s(back.Value()), valueFloat64s(b.Value()), 0, 0)
	}
	g := G.NewGraph()
	a := input(g, "a", randDense(rng, tensor.Float64, 1, 2, 3))
	b := input(g, "b", randDense(rng, tensor.Float64, 1, 3, 3))
	if _, err := Concat(1, a, b); err == nil || !strings.Contains(err.Error(), "differ outside axis 1") {
		t.Fatalf("Concat of [2 3] and [3 3] on axis 1: %v", err)
	}
	if _, err := Concat(2, a, b); err == nil || !strings.Contains(err.Error(), "axis 2") {
		t.Fatalf("Concat on axis 2 of rank 2: %v", err)
	}
	if _, err := ConcatSplit(a, 1, 2, 4); err == nil {
		t.Fatal("ConcatSplit past the end: no error")
	}
}
