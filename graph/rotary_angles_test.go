package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// refRotaryAngles rotates x [..., T, D] by angles [..., T, half] (broadcast
// over x's leading axes) element by element, with the pairs listed
// explicitly.
func refRotaryAngles(x []float64, xs tensor.Shape, ang []float64, half int, interleaved bool) []float64 {
	d := xs[len(xs)-1]
	arows := len(ang) / half
	y := append([]float64(nil), x...)
	for r := 0; r < len(x)/d; r++ {
		for p := 0; p < half; p++ {
			a, b := p, p+half
			if interleaved {
				a, b = 2*p, 2*p+1
			}
			phi := ang[(r%arows)*half+p]
			c, s := math.Cos(phi), math.Sin(phi)
			y[r*d+a] = x[r*d+a]*c - x[r*d+b]*s
			y[r*d+b] = x[r*d+b]*c + x[r*d+a]*s
		}
	}
	return y
}

var rotaryAnglesCases = []struct {
	name    string
	x, ang  []int
	pairing RotaryPairing
}{
	{"shared angles, interleaved", []int{2, 3, 4, 6}, []int{4, 3}, RotaryInterleaved},
	{"shared angles, half", []int{2, 3, 4, 6}, []int{4, 3}, RotaryHalf},
	{"per head, interleaved", []int{2, 3, 5, 4}, []int{3, 5, 2}, RotaryInterleaved},
	{"per head, half, partial", []int{2, 2, 3, 8}, []int{2, 3, 3}, RotaryHalf},
	{"per example and head", []int{2, 2, 3, 4}, []int{2, 2, 3, 2}, RotaryInterleaved},
	{"rank 2, partial interleaved", []int{5, 6}, []int{5, 1}, RotaryInterleaved},
}

// TestRotaryAnglesForwardAndGrad checks the output against the
// element-by-element reference and the gradients w.r.t. x and the angles
// against central differences (float64).
func TestRotaryAnglesForwardAndGrad(t *testing.T) {
	for ci, c := range rotaryAnglesCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(ci + 1)))
			g := G.NewGraph()
			xv := randDense(rng, tensor.Float64, 1, c.x...)
			av := randDense(rng, tensor.Float64, 2, c.ang...)
			x, a := input(g, "x", xv), input(g, "angles", av)
			y := must(t)(RotaryAngles(x, a, c.pairing))
			if !y.Shape().Eq(tensor.Shape(c.x)) {
				t.Fatalf("shape %v, want %v", y.Shape(), c.x)
			}
			loss := projLoss(t, rng, y, "w")
			run(t, g)
			want := refRotaryAngles(ToFloat64s(xv), tensor.Shape(c.x), ToFloat64s(av), c.ang[len(c.ang)-1], c.pairing == RotaryInterleaved)
			checkClose(t, "RotaryAngles", ToFloat64s(y.Value()), want, 1e-14, 1e-14)
			gradCheck(t, g, loss, x, a)
		})
	}
}

// TestRotaryAnglesSecondOrder: the gradient w.r.t. x is itself a
// RotaryAngles, so a loss of it (here its square, as in a gradient penalty)
// is differentiable w.r.t. x.
func TestRotaryAnglesSecondOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	g := G.NewGraph()
	gv := input(g, "g", randDense(rng, tensor.Float64, 1, 2, 3, 4))
	a := input(g, "angles", randDense(rng, tensor.Float64, 1, 3, 2))
	inv := must(t)(rotaryAngles(gv, a, RotaryInterleaved, true)) // what SymDiff builds for dx
	loss := projLoss(t, rng, inv, "w")
	run(t, g)
	neg := ToFloat64s(a.Value())
	for i := range neg {
		neg[i] = -neg[i]
	}
	checkClose(t, "inverse rotation", ToFloat64s(inv.Value()), refRotaryAngles(ToFloat64s(gv.Value()), tensor.Shape{2, 3, 4}, neg, 2, true), 1e-14, 1e-14)
	gradCheck(t, g, loss, gv, a)
}

// TestRotaryAnglesMatchesRotary: with constant angles, RotaryAngles equals
// Rotary with the table of their cos and sin, forward and in the gradient
// w.r.t. x.
func TestRotaryAnglesMatchesRotary(t *testing.T) {
	for _, pr := range []RotaryPairing{RotaryHalf, RotaryInterleaved} {
		rng := rand.New(rand.NewSource(3))
		const tt, half = 5, 3
		ang := randDense(rng, tensor.Float64, 2, tt, half)
		cos, sin := make([]float64, tt*half), make([]float64, tt*half)
		for i, v := range ToFloat64s(ang) {
			sin[i], cos[i] = math.Sincos(v)
		}
		tab, err := NewRotaryTable(tt, half, cos, sin)
		if err != nil {
			t.Fatal(err)
		}
		xv := randDense(rng, tensor.Float64, 1, 2, 2, tt, 8)
		wv := randDense(rng, tensor.Float64, 1, 2, 2, tt, 8)
		var outs, grads [][]float64
		for k := 0; k < 2; k++ {
			g := G.NewGraph()
			x := input(g, "x", xv.Clone().(*tensor.Dense))
			var y *G.Node
			if k == 0 {
				y = must(t)(Rotary(x, tab, pr))
			} else {
				y = must(t)(RotaryAngles(x, input(g, "angles", ang), pr))
			}
			loss := must(t)(G.Sum(must(t)(BroadcastMul(y, input(g, "w", wv)))))
			v, gr := gradsOf(t, g, loss, G.Nodes{y}, G.Nodes{x})
			outs, grads = append(outs, v[0]), append(grads, gr[0])
		}
		checkClose(t, pr.String()+" output", outs[1], outs[0], 1e-14, 1e-14)
		checkClose(t, pr.String()+" dx", grads[1], grads[0], 1e-14, 1e-14)
	}
}

// TestRotaryAnglesFloat32: a float32 graph gives the float64 outputs and
// gradients (w.r.t. x and the angles) to float32 precision.
func TestRotaryAnglesFloat32(t *testing.T) {
	for ci, c := range rotaryAnglesCases {
		t.Run(c.name, func(t *testing.T) {
			var res [2][][]float64
			for k, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				rng := rand.New(rand.NewSource(int64(40 + ci)))
				g := G.NewGraph()
				x := input(g, "x", randDense(rng, dt, 1, c.x...))
				a := input(g, "angles", randDense(rng, dt, 2, c.ang...))
				y := must(t)(RotaryAngles(x, a, c.pairing))
				loss := projLoss(t, rng, y, "w")
				v, gr := gradsOf(t, g, loss, G.Nodes{y}, G.Nodes{x, a})
				res[k] = append(v, gr...)
			}
			compareAll(t, "float32 vs float64", res[1], res[0], 1e-5, 1e-4)
		})
	}
}

func TestRotaryAnglesErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4, 6))
	ok := input(g, "ok", randDense(rng, tensor.Float64, 1, 4, 3))
	x32 := input(g, "x32", randDense(rng, tensor.Float32, 1, 2, 3, 4, 6))
	ids := intInput(g, "ids", []int{1, 2, 3}, 3)
	ang := func(name string, shape ...int) *G.Node {
		return input(g, name, randDense(rng, tensor.Float64, 1, shape...))
	}
	cases := []struct {
		name string
		f    func() (*G.Node, error)
		want string
	}{
		{"wrong T", func() (*G.Node, error) { return RotaryAngles(x, ang("a1", 5, 3), RotaryHalf) }, "axis 0 of angles (5)"},
		{"too many pairs", func() (*G.Node, error) { return RotaryAngles(x, ang("a2", 4, 4), RotaryHalf) }, "2*Half <= D = 6"},
		{"wrong heads", func() (*G.Node, error) { return RotaryAngles(x, ang("a3", 2, 4, 3), RotaryHalf) }, "axis 1 of x (3)"},
		{"rank 1 angles", func() (*G.Node, error) { return RotaryAngles(x, ang("a4", 3), RotaryHalf) }, "rank 2 to rank(x)"},
		{"angles of higher rank", func() (*G.Node, error) { return RotaryAngles(ok, ang("a5", 1, 4, 3), RotaryHalf) }, "rank 2 to rank(x)"},
		{"bad pairing", func() (*G.Node, error) { return RotaryAngles(x, ok, RotaryPairing(7)) }, "pairing"},
		{"int x", func() (*G.Node, error) { return RotaryAngles(ids, ok, RotaryHalf) }, "dtype"},
		{"nil angles", func() (*G.Node, error) { return RotaryAngles(x, nil, RotaryHalf) }, "angles is nil"},
		{"mixed dtypes", func() (*G.Node, error) { return RotaryAngles(x32, ok, RotaryHalf) }, "float32"},
	}
	for _, c := range cases {
		if _, err := c.f(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "RotaryAngles") {
			t.Errorf("%s: error %v, want one naming RotaryAngles and containing %q", c.name, err, c.want)
		}
	}
}

// The threaded paths of RotaryAngles (rows of x) and of its angle gradient
// (rows of angles, each summing its broadcast rows in a fixed order) are
// checked bitwise against one thread by TestThreadedKernelsMatchSerial.
func init() {
	threadCases = append(threadCases, threadCase{"RotaryAngles", true, 4,
		func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
			const b, h, tt, half = 2, 4, 128, 16
			x := input(g, "x", randDense(rng, dt, 1, b, h, tt, 2*half))
			a := input(g, "angles", randDense(rng, dt, 2, h, tt, half))
			return must(t)(RotaryAngles(x, a, RotaryInterleaved)), G.Nodes{x, a}
		}})
}
