package graph

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestCausalMask(t *testing.T) {
	for _, c := range []struct {
		tq, tk, qStart, kStart int
		want                   []float64
	}{
		{3, 3, 0, 0, []float64{
			1, 0, 0,
			1, 1, 0,
			1, 1, 1}},
		// Two new queries after three cached keys: positions 3, 4 see keys 0..3, 0..4.
		{2, 5, 3, 0, []float64{
			1, 1, 1, 1, 0,
			1, 1, 1, 1, 1}},
		// Keys start later than queries: query 0 sees nothing.
		{2, 2, 0, 1, []float64{
			0, 0,
			1, 0}},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			m := CausalMask(dt, c.tq, c.tk, c.qStart, c.kStart)
			if m.Dtype() != dt || !m.Shape().Eq(tensor.Shape{c.tq, c.tk}) {
				t.Fatalf("%+v: %v %v", c, m.Dtype(), m.Shape())
			}
			checkClose(t, "causal", ToFloat64s(m), c.want, 0, 0)
		}
	}
}

func TestPaddingMask(t *testing.T) {
	m := PaddingMask(tensor.Float32, [][]bool{{true, false, true}, {false, false, true}})
	if !m.Shape().Eq(tensor.Shape{2, 1, 1, 3}) || m.Dtype() != tensor.Float32 {
		t.Fatalf("%v %v", m.Shape(), m.Dtype())
	}
	checkClose(t, "padding", ToFloat64s(m), []float64{1, 0, 1, 0, 0, 1}, 0, 0)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "row 1") {
			t.Errorf("ragged rows: panic %v", r)
		}
	}()
	PaddingMask(tensor.Float64, [][]bool{{true}, {true, true}})
}

func TestCombineMasks(t *testing.T) {
	causal := reshaped(CausalMask(tensor.Float64, 2, 3, 1, 0), 1, 1, 2, 3)
	pad := PaddingMask(tensor.Float64, [][]bool{{true, true, false}, {false, true, true}})
	heads := fromFloat64(tensor.Float64, tensor.Shape{1, 2, 1, 1}, []float64{1, 0})
	c, err := CombineMasks(causal, pad)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Shape().Eq(tensor.Shape{2, 1, 2, 3}) {
		t.Fatalf("shape %v", c.Shape())
	}
	checkClose(t, "causal*padding", ToFloat64s(c), []float64{
		1, 1, 0,
		1, 1, 0,
		0, 1, 0,
		0, 1, 1,
	}, 0, 0)
	// Symmetric, and a head axis broadcast from the other side.
	c2, err := CombineMasks(pad, causal)
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "padding*causal", ToFloat64s(c2), ToFloat64s(c), 0, 0)
	c3, err := CombineMasks(c, heads)
	if err != nil {
		t.Fatal(err)
	}
	if !c3.Shape().Eq(tensor.Shape{2, 2, 2, 3}) {
		t.Fatalf("shape %v", c3.Shape())
	}
	want := append(append(append(append([]float64{}, ToFloat64s(c)[:6]...), make([]float64, 6)...), ToFloat64s(c)[6:]...), make([]float64, 6)...)
	checkClose(t, "with heads", ToFloat64s(c3), want, 0, 0)

	for _, bad := range []struct {
		a, b *tensor.Dense
		want string
	}{
		{causal, CausalMask(tensor.Float64, 2, 3, 0, 0), "rank 4"},
		{causal, reshaped(CausalMask(tensor.Float64, 3, 3, 0, 0), 1, 1, 3, 3), "(1, 1, 2, 3)"},
		{causal, PaddingMask(tensor.Float32, [][]bool{{true, true, true}}), "float32"},
	} {
		if _, err := CombineMasks(bad.a, bad.b); err == nil || !strings.Contains(err.Error(), "CombineMasks") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want one containing %q", err, bad.want)
		}
	}
}

// TestMaskNode checks the reshape of a rank-2 mask, its use in
// MaskedSoftmax and rebinding the node with G.Let to another mask.
func TestMaskNode(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	g := G.NewGraph()
	xv := randDense(rng, tensor.Float64, 1, 2, 1, 3, 3)
	x := input(g, "x", xv)
	causal := CausalMask(tensor.Float64, 3, 3, 0, 0)
	mn := MaskNode(g, causal, "mask")
	if !mn.Shape().Eq(tensor.Shape{1, 1, 3, 3}) || mn.Dtype() != tensor.Float64 || mn.Name() != "mask" {
		t.Fatalf("mask node %v %v %q", mn.Shape(), mn.Dtype(), mn.Name())
	}
	if !causal.Shape().Eq(tensor.Shape{3, 3}) {
		t.Fatalf("MaskNode reshaped its argument to %v", causal.Shape())
	}
	y := must(t)(MaskedSoftmax(x, mn))
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := refMaskedSoftmax(ToFloat64s(xv), xv.Shape(), ToFloat64s(causal), tensor.Shape{1, 1, 3, 3})
	checkClose(t, "causal", valueFloat64s(y.Value()), want, 1e-15, 1e-12)

	// Rebind to a padding-style mask of the node's shape.
	other := fromFloat64(tensor.Float64, tensor.Shape{1, 1, 3, 3}, []float64{0, 1, 1, 1, 0, 1, 1, 1, 0})
	if err := G.Let(mn, other); err != nil {
		t.Fatal(err)
	}
	m.Reset()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	want = refMaskedSoftmax(ToFloat64s(xv), xv.Shape(), ToFloat64s(other), tensor.Shape{1, 1, 3, 3})
	checkClose(t, "after Let", valueFloat64s(y.Value()), want, 1e-15, 1e-12)

	// Rank 3 is right-aligned to [1, H, tq, tk].
	m3 := MaskNode(g, fromFloat64(tensor.Float32, tensor.Shape{2, 1, 3}, make([]float64, 6)), "")
	if !m3.Shape().Eq(tensor.Shape{1, 2, 1, 3}) || m3.Dtype() != tensor.Float32 {
		t.Fatalf("rank-3 mask node %v %v", m3.Shape(), m3.Dtype())
	}

	// Masks of equal shape, named alike or unnamed, stay distinct nodes.
	a := MaskNode(g, CausalMask(tensor.Float64, 3, 3, 0, 0), "mask")
	b := MaskNode(g, CausalMask(tensor.Float64, 3, 3, 1, 0), "")
	c := MaskNode(g, CausalMask(tensor.Float64, 3, 3, 2, 0), "")
	names := map[string]bool{mn.Name(): true}
	for _, n := range []*G.Node{a, b, c} {
		if n == mn || names[n.Name()] {
			t.Fatalf("mask node %q merged with an earlier one", n.Name())
		}
		names[n.Name()] = true
	}
	if c.Value().Data().([]float64)[2] != 1 {
		t.Fatalf("third mask holds %v", c.Value().Data())
	}
}
