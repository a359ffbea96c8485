package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type maskCase struct {
	name string
	x    tensor.Shape
	mask *tensor.Dense // float64, or nil
}

// reshaped returns a copy of m with the given shape.
func reshaped(m *tensor.Dense, shape ...int) *tensor.Dense {
	return fromFloat64(m.Dtype(), tensor.Shape(shape), ToFloat64s(m))
}

func mustCombine(a, b *tensor.Dense) *tensor.Dense {
	c, err := CombineMasks(a, b)
	if err != nil {
		panic(err)
	}
	return c
}

// maskCases are MaskedSoftmax inputs: no mask, causal masks (with offsets,
// and with leading rows that see nothing), key padding with a fully padded
// sequence, their combination, and a mask broadcast along the last axis.
func maskCases() []maskCase {
	f := tensor.Float64
	causal := reshaped(CausalMask(f, 4, 4, 0, 0), 1, 1, 4, 4)
	pad := PaddingMask(f, [][]bool{{true, true, false, true}, {false, false, false, false}})
	return []maskCase{
		{"none", tensor.Shape{2, 3, 5}, nil},
		{"causal", tensor.Shape{2, 2, 4, 4}, causal},
		{"causalOffset", tensor.Shape{2, 1, 3, 5}, reshaped(CausalMask(f, 3, 5, 2, 0), 1, 1, 3, 5)},
		{"causalEmptyRows", tensor.Shape{1, 2, 4, 4}, reshaped(CausalMask(f, 4, 4, 0, 2), 1, 1, 4, 4)},
		{"padding", tensor.Shape{2, 2, 3, 4}, pad},
		{"causal+padding", tensor.Shape{2, 2, 4, 4}, mustCombine(causal, pad)},
		{"perHead", tensor.Shape{2, 3, 2, 4}, fromFloat64(f, tensor.Shape{1, 3, 1, 4}, []float64{1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1})},
		{"wholeRows", tensor.Shape{3, 4}, fromFloat64(f, tensor.Shape{3, 1}, []float64{1, 0, 1})},
	}
}

// refMaskedSoftmax is a direct implementation: every element's mask entry is
// found by clamping its multi-index into the mask's shape.
func refMaskedSoftmax(x []float64, xs tensor.Shape, mask []float64, ms tensor.Shape) []float64 {
	n := xs[len(xs)-1]
	y := make([]float64, len(x))
	allowed := func(k int) bool {
		if mask == nil {
			return true
		}
		idx := unravel(k, xs)
		mk := 0
		for ax, i := range idx {
			if ms[ax] == 1 {
				i = 0
			}
			mk = mk*ms[ax] + i
		}
		return mask[mk] != 0
	}
	for r := 0; r < len(x)/n; r++ {
		var s float64
		for j := 0; j < n; j++ {
			if allowed(r*n + j) {
				s += math.Exp(x[r*n+j])
			}
		}
		for j := 0; j < n; j++ {
			if allowed(r*n + j) {
				y[r*n+j] = math.Exp(x[r*n+j]) / s
			}
		}
	}
	return y
}

func TestMaskedSoftmaxValues(t *testing.T) {
	for i, mc := range maskCases() {
		t.Run(mc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(i)))
			g := G.NewGraph()
			xv := randDense(rng, tensor.Float64, 2, mc.x...)
			x := input(g, "x", xv)
			var m *G.Node
			var md []float64
			var ms tensor.Shape
			if mc.mask != nil {
				m = input(g, "mask", mc.mask)
				md, ms = ToFloat64s(mc.mask), mc.mask.Shape()
			}
			y := must(t)(MaskedSoftmax(x, m))
			run(t, g)
			got := valueFloat64s(y.Value())
			want := refMaskedSoftmax(ToFloat64s(xv), mc.x, md, ms)
			checkClose(t, "y", got, want, 1e-15, 1e-12)
			for k, v := range got {
				if want[k] == 0 && v != 0 {
					t.Fatalf("blocked element %d = %v, want exactly 0", k, v)
				}
			}
		})
	}
}

// TestMaskedSoftmaxFullyMaskedRow checks that a row with nothing allowed is
// all zeros with zero gradient, even when x holds huge, infinite or NaN
// values in blocked places, and that the other rows are unaffected.
func TestMaskedSoftmaxFullyMaskedRow(t *testing.T) {
	g := G.NewGraph()
	xv := fromFloat64(tensor.Float64, tensor.Shape{1, 1, 3, 3}, []float64{
		1, 2, 3,
		math.Inf(1), math.NaN(), 1e300,
		1000, 1001, math.Inf(1),
	})
	mv := fromFloat64(tensor.Float64, tensor.Shape{1, 1, 3, 3}, []float64{
		1, 0, 1,
		0, 0, 0,
		1, 1, 0,
	})
	x := input(g, "x", xv)
	y := must(t)(MaskedSoftmax(x, input(g, "mask", mv)))
	// The output gradient (w) is infinite at a blocked entry: it must not
	// leak into the row's other entries. (The loss itself is then NaN, as
	// 0 * Inf; only the gradient is checked.)
	wv := fromFloat64(tensor.Float64, tensor.Shape{1, 1, 3, 3}, []float64{1, 2, 3, 4, 5, 6, 7, 8, math.Inf(1)})
	loss := must(t)(G.Sum(must(t)(BroadcastMul(y, input(g, "w", wv)))))
	if _, err := G.Grad(loss, x); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(x))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := valueFloat64s(y.Value())
	e := 1 / (1 + math.E) // softmax of (1001 - 1000) pair
	want := []float64{1 / (1 + math.Exp(2)), 0, math.Exp(2) / (1 + math.Exp(2)), 0, 0, 0, e, 1 - e, 0}
	checkClose(t, "y", got, want, 1e-15, 1e-12)
	gv, err := x.Grad()
	if err != nil {
		t.Fatal(err)
	}
	dx := valueFloat64s(gv)
	for k := 3; k < 6; k++ {
		if dx[k] != 0 {
			t.Fatalf("dx of fully masked row = %v, want zeros", dx[3:6])
		}
	}
	for k, v := range dx {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("dx[%d] = %v", k, v)
		}
	}
	// Blocked entries get zero gradient too.
	if dx[1] != 0 || dx[8] != 0 {
		t.Fatalf("dx of blocked entries = %v, %v, want 0", dx[1], dx[8])
	}
	// Row 0: dy = (1, 2, 3) on the allowed (0, 2): dx = y * (dy - y.dy).
	p0, p2 := want[0], want[2]
	s := p0*1 + p2*3
	checkClose(t, "dx row 0", []float64{dx[0], dx[2]}, []float64{p0 * (1 - s), p2 * (3 - s)}, 1e-15, 1e-12)
}

// TestMaskedSoftmaxStable checks rows whose logits would overflow or
// underflow a naive exp.
func TestMaskedSoftmaxStable(t *testing.T) {
	g := G.NewGraph()
	xv := fromFloat64(tensor.Float64, tensor.Shape{2, 3}, []float64{1e4, 1e4 + 1, -1e4, -800, -801, -799})
	y := must(t)(MaskedSoftmax(input(g, "x", xv), nil))
	run(t, g)
	got := valueFloat64s(y.Value())
	a := 1 / (1 + math.E)
	den := 1 + math.Exp(-1) + math.Exp(-2)
	want := []float64{a, 1 - a, 0, math.Exp(-1) / den, math.Exp(-2) / den, 1 / den}
	checkClose(t, "y", got, want, 1e-15, 1e-12)
}

func TestMaskedSoftmaxErrors(t *testing.T) {
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(1))
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4))
	for _, c := range []struct {
		mask *G.Node
		want string
	}{
		{input(g, "m1", randDense(rng, tensor.Float64, 1, 3, 4)), "rank"},
		{input(g, "m2", randDense(rng, tensor.Float64, 1, 2, 2, 4)), "(2, 2, 4)"},
		{input(g, "m3", randDense(rng, tensor.Float32, 1, 1, 1, 4)), "dtype"},
		{intInput(g, "m4", make([]int, 4), 1, 1, 4), "dtype int"},
	} {
		_, err := MaskedSoftmax(x, c.mask)
		if err == nil || !strings.Contains(err.Error(), "MaskedSoftmax") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mask %v: error %v, want one naming MaskedSoftmax and %q", c.mask.Shape(), err, c.want)
		}
	}
	if _, err := MaskedSoftmax(nil, nil); err == nil {
		t.Error("nil x: no error")
	}
}
