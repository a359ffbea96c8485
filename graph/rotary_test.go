package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// randTable returns a rotary table of t positions and half pairs holding
// a·cos and a·sin of random angles.
func randTable(t testing.TB, rng *rand.Rand, tt, half int, a float64) *RotaryTable {
	t.Helper()
	c, s := make([]float64, tt*half), make([]float64, tt*half)
	for i := range c {
		ang := rng.Float64() * 2 * math.Pi
		c[i], s[i] = a*math.Cos(ang), a*math.Sin(ang)
	}
	tab, err := NewRotaryTable(tt, half, c, s)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// refRotary rotates x [..., T, D] element by element, written independently
// of the kernel: the pairs are listed explicitly for each pairing.
func refRotary(x []float64, shape tensor.Shape, tab *RotaryTable, interleaved bool) []float64 {
	d, tt, h := shape[len(shape)-1], shape[len(shape)-2], tab.Half
	y := append([]float64(nil), x...)
	for r := 0; r < len(x)/d; r++ {
		t := r % tt
		for p := 0; p < h; p++ {
			a, b := p, p+h
			if interleaved {
				a, b = 2*p, 2*p+1
			}
			c, s := tab.Cos[t*h+p], tab.Sin[t*h+p]
			y[r*d+a] = x[r*d+a]*c - x[r*d+b]*s
			y[r*d+b] = x[r*d+b]*c + x[r*d+a]*s
		}
	}
	return y
}

func TestRotaryForwardAndGrad(t *testing.T) {
	cases := []struct {
		name     string
		shape    []int
		half     int
		pairing  RotaryPairing
		scale    float64
		dtype    tensor.Dtype
		gradFlag bool
	}{
		{"half full", []int{2, 3, 4, 6}, 3, RotaryHalf, 1, tensor.Float64, true},
		{"interleaved full", []int{2, 3, 4, 6}, 3, RotaryInterleaved, 1, tensor.Float64, true},
		{"half partial", []int{2, 2, 5, 8}, 2, RotaryHalf, 1, tensor.Float64, true},
		{"interleaved partial", []int{1, 2, 5, 8}, 2, RotaryInterleaved, 1, tensor.Float64, true},
		{"scaled (YaRN factor)", []int{3, 5, 4}, 2, RotaryHalf, 1.3, tensor.Float64, true},
		{"rank 2", []int{4, 6}, 1, RotaryInterleaved, 1, tensor.Float64, true},
		{"float32", []int{2, 2, 3, 4}, 2, RotaryHalf, 1, tensor.Float32, false},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(ci + 1)))
			tt := c.shape[len(c.shape)-2]
			tab := randTable(t, rng, tt, c.half, c.scale)
			g := G.NewGraph()
			xv := randDense(rng, c.dtype, 1, c.shape...)
			x := input(g, "x", xv)
			y := must(t)(Rotary(x, tab, c.pairing))
			if !y.Shape().Eq(tensor.Shape(c.shape)) {
				t.Fatalf("shape %v, want %v", y.Shape(), c.shape)
			}
			var loss *G.Node
			if c.gradFlag {
				loss = projLoss(t, rng, y, "w")
			}
			run(t, g)
			want := refRotary(ToFloat64s(xv), tensor.Shape(c.shape), tab, c.pairing == RotaryInterleaved)
			tol := 1e-14
			if c.dtype == tensor.Float32 {
				tol = 1e-5
			}
			checkClose(t, "Rotary", ToFloat64s(y.Value()), want, tol, tol)
			if c.gradFlag {
				gradCheck(t, g, loss, x)
			}
		})
	}
}

// TestRotaryTransposedInput feeds a transposed (view) input, as attention
// does with q [B, H, T, dh] after splitting heads.
func TestRotaryTransposedInput(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	tab := randTable(t, rng, 3, 2, 1)
	g := G.NewGraph()
	xv := randDense(rng, tensor.Float64, 1, 2, 3, 2, 4) // [B, T, H, dh]
	x := input(g, "x", xv)
	xt := must(t)(G.Transpose(x, 0, 2, 1, 3)) // [B, H, T, dh]
	y := must(t)(Rotary(xt, tab, RotaryHalf))
	loss := projLoss(t, rng, y, "w")
	run(t, g)
	// reference: transpose on the host
	src := ToFloat64s(xv)
	tr := make([]float64, len(src))
	for b := 0; b < 2; b++ {
		for tq := 0; tq < 3; tq++ {
			for h := 0; h < 2; h++ {
				for k := 0; k < 4; k++ {
					tr[((b*2+h)*3+tq)*4+k] = src[((b*3+tq)*2+h)*4+k]
				}
			}
		}
	}
	checkClose(t, "Rotary of a transposed input", ToFloat64s(y.Value()), refRotary(tr, tensor.Shape{2, 2, 3, 4}, tab, false), 1e-14, 1e-14)
	gradCheck(t, g, loss, x)
}

// TestRotaryDistinctTables: two rotations of the same input with different
// tables must stay two nodes (Gorgonia merges nodes with equal hashes).
func TestRotaryDistinctTables(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	t1, t2 := randTable(t, rng, 3, 2, 1), randTable(t, rng, 3, 2, 1)
	same, err := NewRotaryTable(3, 2, t1.Cos, t1.Sin)
	if err != nil {
		t.Fatal(err)
	}
	if same.ID() != t1.ID() || t1.ID() == t2.ID() {
		t.Fatalf("table ids: equal contents %x %x, different contents %x", t1.ID(), same.ID(), t2.ID())
	}
	g := G.NewGraph()
	xv := randDense(rng, tensor.Float64, 1, 3, 4)
	x := input(g, "x", xv)
	y1 := must(t)(Rotary(x, t1, RotaryHalf))
	y2 := must(t)(Rotary(x, t2, RotaryHalf))
	if y1 == y2 {
		t.Fatal("rotations with different tables were merged into one node")
	}
	run(t, g)
	checkClose(t, "first table", ToFloat64s(y1.Value()), refRotary(ToFloat64s(xv), tensor.Shape{3, 4}, t1, false), 1e-14, 0)
	checkClose(t, "second table", ToFloat64s(y2.Value()), refRotary(ToFloat64s(xv), tensor.Shape{3, 4}, t2, false), 1e-14, 0)
}

func TestRotaryErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	tab := randTable(t, rng, 3, 2, 1)
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3, 4))
	ids := intInput(g, "ids", []int{1, 2, 3}, 3)
	cases := []struct {
		name string
		f    func() (*G.Node, error)
		want string
	}{
		{"wrong T", func() (*G.Node, error) { return Rotary(x, randTable(t, rng, 4, 2, 1), RotaryHalf) }, "T = 4"},
		{"too few dims", func() (*G.Node, error) { return Rotary(x, randTable(t, rng, 3, 3, 1), RotaryHalf) }, "D >= 6"},
		{"nil table", func() (*G.Node, error) { return Rotary(x, nil, RotaryHalf) }, "nil table"},
		{"bad pairing", func() (*G.Node, error) { return Rotary(x, tab, RotaryPairing(7)) }, "pairing"},
		{"int input", func() (*G.Node, error) { return Rotary(ids, tab, RotaryHalf) }, "dtype"},
	}
	for _, c := range cases {
		if _, err := c.f(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Rotary") {
			t.Errorf("%s: error %v, want one naming Rotary and containing %q", c.name, err, c.want)
		}
	}
	if _, err := NewRotaryTable(2, 2, make([]float64, 4), make([]float64, 3)); err == nil {
		t.Error("NewRotaryTable accepted a short sin")
	}
	if _, err := NewRotaryTable(1, 1, []float64{math.NaN()}, []float64{0}); err == nil {
		t.Error("NewRotaryTable accepted NaN")
	}
}
