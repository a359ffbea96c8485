package graph

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// refBroadcast computes a op b elementwise with b's index found by clamping
// a's multi-index into b's (right-aligned) shape.
func refBroadcast(a []float64, as tensor.Shape, b []float64, bs tensor.Shape, mul bool) []float64 {
	y := make([]float64, len(a))
	off := len(as) - len(bs)
	for k := range a {
		idx := unravel(k, as)
		bk := 0
		for ax, d := range bs {
			i := idx[off+ax]
			if d == 1 {
				i = 0
			}
			bk = bk*d + i
		}
		if mul {
			y[k] = a[k] * b[bk]
		} else {
			y[k] = a[k] + b[bk]
		}
	}
	return y
}

func TestBroadcastValues(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	for _, p := range broadcastPatterns() {
		for _, mul := range []bool{false, true} {
			g := G.NewGraph()
			av := randDense(rng, tensor.Float64, 1, p.a...)
			var b *G.Node
			var bd []float64
			if len(p.b) == 0 {
				x := rng.NormFloat64()
				b = G.NewScalar(g, tensor.Float64, G.WithName("b"), G.WithValue(x))
				bd = []float64{x}
			} else {
				bv := randDense(rng, tensor.Float64, 1, p.b...)
				b = input(g, "b", bv)
				bd = ToFloat64s(bv)
			}
			a := input(g, "a", av)
			var y *G.Node
			if mul {
				y = must(t)(BroadcastMul(a, b))
			} else {
				y = must(t)(BroadcastAdd(a, b))
			}
			if !y.Shape().Eq(p.a) {
				t.Fatalf("%v %v: output shape %v", p.a, p.b, y.Shape())
			}
			run(t, g)
			want := refBroadcast(ToFloat64s(av), p.a, bd, p.b, mul)
			checkClose(t, fmt.Sprintf("broadcast %v %v", p.a, p.b), valueFloat64s(y.Value()), want, 0, 0)
		}
	}
}

// TestBroadcastReduceHand checks the gradient of b on a small hand example:
// a [2, 3], b [1, 3] and [2, 1]; loss = sum(w * (a + b)).
func TestBroadcastReduceHand(t *testing.T) {
	for _, c := range []struct {
		b    tensor.Shape
		want []float64
	}{
		{tensor.Shape{1, 3}, []float64{1 + 4, 2 + 5, 3 + 6}},
		{tensor.Shape{2, 1}, []float64{1 + 2 + 3, 4 + 5 + 6}},
		{tensor.Shape{3}, []float64{1 + 4, 2 + 5, 3 + 6}},
		{tensor.Shape{1, 1}, []float64{21}},
	} {
		g := G.NewGraph()
		a := input(g, "a", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, make([]float64, 6)))
		b := input(g, "b", fromFloat64(tensor.Float64, c.b, make([]float64, c.b.TotalSize())))
		w := input(g, "w", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, []float64{1, 2, 3, 4, 5, 6}))
		loss := must(t)(G.Sum(must(t)(BroadcastMul(must(t)(BroadcastAdd(a, b)), w))))
		if _, err := G.Grad(loss, a, b); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g, G.BindDualValues(a, b))
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		gb, _ := b.Grad()
		ga, _ := a.Grad()
		checkClose(t, fmt.Sprintf("db %v", c.b), valueFloat64s(gb), c.want, 0, 0)
		checkClose(t, "da", valueFloat64s(ga), []float64{1, 2, 3, 4, 5, 6}, 0, 0)
		m.Close()
	}
}

func TestBroadcastErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	g := G.NewGraph()
	a := input(g, "a", randDense(rng, tensor.Float64, 1, 2, 3, 4))
	for _, c := range []struct {
		b    *G.Node
		want string
	}{
		{input(g, "b1", randDense(rng, tensor.Float64, 1, 1, 2, 3, 4)), "(1, 2, 3, 4)"},
		{input(g, "b2", randDense(rng, tensor.Float64, 1, 2, 4)), "(2, 4)"},
		{input(g, "b3", randDense(rng, tensor.Float64, 1, 3)), "(3)"},
		{input(g, "b4", randDense(rng, tensor.Float32, 1, 4)), "float32"},
	} {
		for _, f := range []func(a, b *G.Node) (*G.Node, error){BroadcastAdd, BroadcastMul} {
			_, err := f(a, c.b)
			if err == nil || !strings.Contains(err.Error(), "graph: Broadcast") || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(2, 3, 4)") {
				t.Errorf("b %v: error %v, want one naming the op, %q and a's shape", c.b.Shape(), err, c.want)
			}
		}
	}
	s := G.NewScalar(g, tensor.Float64, G.WithName("s"), G.WithValue(1.0))
	if _, err := BroadcastAdd(s, a); err == nil {
		t.Error("scalar a: no error")
	}
}
