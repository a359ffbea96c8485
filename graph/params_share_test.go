package graph

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestParamsShared checks that two graphs built from one store see one tensor,
// through a TapeMachine with dual values, and that in-place updates are seen.
func TestParamsShared(t *testing.T) {
	p := NewParams(tensor.Float64, 1)
	var outs []float64
	for run := 0; run < 2; run++ {
		g := G.NewGraph()
		w, err := p.Node(g, "w", tensor.Shape{2}, Ones, true)
		if err != nil {
			t.Fatal(err)
		}
		s := G.Must(G.Sum(G.Must(G.Square(w))))
		if _, err := G.Grad(s, w); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g, G.BindDualValues(w))
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, s.Value().Data().(float64))
		gv, _ := w.Grad()
		if got := gv.Data().([]float64)[0]; got != 2*p.Value("w").Data().([]float64)[0] {
			t.Fatalf("grad %v", got)
		}
		p.Value("w").Data().([]float64)[0] = 3
		m.Reset()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, s.Value().Data().(float64))
		p.Value("w").Data().([]float64)[0] = 1
		m.Close()
	}
	want := []float64{2, 10, 2, 10}
	for i := range want {
		if outs[i] != want[i] {
			t.Fatalf("outs %v want %v", outs, want)
		}
	}
}

// TestParamsTwoStoresClash: two stores used in one graph must not both
// create a parameter of one name (Gorgonia would merge the two input nodes
// into one): the second gets an error naming both stores and the parameter,
// and is left unchanged. Distinct names in one graph are fine, as is one
// name in two graphs.
func TestParamsTwoStoresClash(t *testing.T) {
	g := G.NewGraph()
	a := NewParams(tensor.Float64, 1).SetName("model")
	b := NewParams(tensor.Float64, 2).SetName("probe")
	if _, err := a.Node(g, "w", tensor.Shape{2, 3}, Ones, true); err != nil {
		t.Fatal(err)
	}
	_, err := b.Node(g, "w", tensor.Shape{2, 3}, Zeros, true)
	if err == nil {
		t.Fatal("two stores created parameter w in one graph without an error")
	}
	for _, want := range []string{`"w"`, "model", "probe"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	if len(b.Names()) != 0 || len(g.ByName("w")) != 1 {
		t.Fatalf("failed Node changed the store (%v) or the graph (%d nodes w)", b.Names(), len(g.ByName("w")))
	}
	// a plain input node of the name clashes too (default store names)
	c := NewParams(tensor.Float64, 3)
	G.NewTensor(g, tensor.Float64, 1, G.WithShape(4), G.WithName("x"))
	if _, err := c.Node(g, "x", tensor.Shape{4}, Zeros, false); err == nil || !strings.Contains(err.Error(), c.Name()) {
		t.Fatalf("parameter over an input node of the same name: %v", err)
	}
	// distinct names in one graph, and the same name in another graph
	if _, err := b.Node(g, "probe/w", tensor.Shape{2, 3}, Zeros, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Node(G.NewGraph(), "w", tensor.Shape{2, 3}, Zeros, true); err != nil {
		t.Fatal(err)
	}
	// the same store asking again gets its node
	n1, _ := a.Node(g, "w", tensor.Shape{2, 3}, Ones, true)
	n2, err := a.Node(g, "w", tensor.Shape{2, 3}, Ones, true)
	if err != nil || n1 != n2 {
		t.Fatalf("same store, same name: %v, %p vs %p", err, n1, n2)
	}
}

// TestRandomize: every parameter gets std·N(0,1) draws in the order of
// Names, the same for float32 and float64 stores (to float32 rounding) and
// for the same seed.
func TestRandomize(t *testing.T) {
	build := func(dt tensor.Dtype) *Params {
		p := NewParams(dt, 1)
		g := G.NewGraph()
		for _, n := range []string{"a", "b"} {
			if _, err := p.Node(g, n, tensor.Shape{2, 3}, Zeros, false); err != nil {
				t.Fatal(err)
			}
		}
		p.Randomize(rand.New(rand.NewSource(3)), 0.5)
		return p
	}
	p64, p32 := build(tensor.Float64), build(tensor.Float32)
	rng := rand.New(rand.NewSource(3))
	for _, n := range []string{"a", "b"} {
		for i, x := range p64.Float64s(n) {
			if want := rng.NormFloat64() * 0.5; x != want {
				t.Fatalf("%s[%d] = %v, want %v", n, i, x, want)
			}
			if y := p32.Float64s(n)[i]; y != float64(float32(x)) {
				t.Fatalf("float32 %s[%d] = %v, want %v", n, i, y, float32(x))
			}
		}
	}
}
