package graph

import (
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// randDense returns a tensor of dtype dt and the given shape with N(0, std²)
// entries from rng (drawn in float64, then converted).
func randDense(rng *rand.Rand, dt tensor.Dtype, std float64, shape ...int) *tensor.Dense {
	s := tensor.Shape(shape)
	data := make([]float64, s.TotalSize())
	for i := range data {
		data[i] = rng.NormFloat64() * std
	}
	return fromFloat64(dt, s, data)
}

// input returns an input node of g bound to v.
func input(g *G.ExprGraph, name string, v *tensor.Dense) *G.Node {
	return G.NewTensor(g, v.Dtype(), v.Dims(), G.WithShape(v.Shape()...), G.WithName(name), G.WithValue(v))
}

// intInput returns a tensor.Int input node of g holding data with the given
// shape.
func intInput(g *G.ExprGraph, name string, data []int, shape ...int) *G.Node {
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]int(nil), data...)))
	return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
}

// projLoss returns sum(out * w) for a fixed random w of out's shape, a scalar
// whose gradient with respect to out is w (so every output element matters
// with a different weight).
func projLoss(t testing.TB, rng *rand.Rand, out *G.Node, name string) *G.Node {
	t.Helper()
	if out.IsScalar() {
		return out
	}
	w := input(out.Graph(), name, randDense(rng, out.Dtype(), 1, out.Shape()...))
	p, err := BroadcastMul(out, w)
	if err != nil {
		t.Fatal(err)
	}
	s, err := G.Sum(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs g forward once with a fresh TapeMachine.
func run(t testing.TB, g *G.ExprGraph) {
	t.Helper()
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
}

// must returns a function that returns its node, failing the test on err:
// must(t)(LayerNorm(x, g, b, eps)).
func must(t testing.TB) func(*G.Node, error) *G.Node {
	return func(n *G.Node, err error) *G.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// closeTo reports whether got and want agree to atol + rtol*|want|
// elementwise, and the first index that does not.
func closeTo(got, want []float64, atol, rtol float64) (int, bool) {
	if len(got) != len(want) {
		return -1, false
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= atol+rtol*math.Abs(want[i])) {
			return i, false
		}
	}
	return 0, true
}

// checkClose fails the test if got and want differ.
func checkClose(t testing.TB, what string, got, want []float64, atol, rtol float64) {
	t.Helper()
	if i, ok := closeTo(got, want, atol, rtol); !ok {
		if i < 0 {
			t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
		}
		t.Fatalf("%s: element %d = %v, want %v (atol %g, rtol %g)", what, i, got[i], want[i], atol, rtol)
	}
}

// gradCheck runs GradCheck with the package's test tolerances and fails the
// test on error.
func gradCheck(t testing.TB, g *G.ExprGraph, loss *G.Node, wrt ...*G.Node) {
	t.Helper()
	if err := GradCheck(g, loss, wrt, GradCheckOpts{Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

// lowParallelMin sets parallelMinWork to 2^15 for the rest of the test, so
// that the small inputs of tests of the threaded kernels take the threaded
// path (the production threshold, 2^17, keeps them on one thread).
func lowParallelMin(t *testing.T) {
	t.Helper()
	old := parallelMinWork
	parallelMinWork = 1 << 15
	t.Cleanup(func() { parallelMinWork = old })
}
