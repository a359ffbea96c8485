package posenc_test

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestSandwichBiasByHand: d̄ = 4 (ω = 1, 1/100), 2 heads (ratios 4 and 8),
// queries at 5, 6 and keys at 3..6: bias = (cos d + cos(d/100)) / ρ_h.
func TestSandwichBiasByHand(t *testing.T) {
	q, k := []int{5, 6}, []int{3, 4, 5, 6}
	got := posenc.SandwichBias(2, 4, q, k)
	var want []float64
	for _, rho := range []float64{4, 8} {
		for _, qp := range q {
			for _, kp := range k {
				d := float64(kp - qp)
				want = append(want, (math.Cos(d)+math.Cos(d/100))/rho)
			}
		}
	}
	closeTo(t, "SandwichBias", got, want, 1e-15)
	for _, bad := range [][2]int{{0, 4}, {2, 0}, {2, 3}, {2, -2}} {
		if posenc.SandwichBias(bad[0], bad[1], q, k) != nil {
			t.Errorf("SandwichBias(heads %d, dim %d): want nil", bad[0], bad[1])
		}
	}
}

// TestSandwichShape: with the default d̄ = 128 the bias is a function of
// the distance only (the same for every pair at one distance, in any
// span), even in it, largest at distance 0 (d̄/2/ρ_h) and decreasing over
// the first 10 distances (it oscillates slightly beyond), for every head;
// heads differ only by their ratio.
func TestSandwichShape(t *testing.T) {
	const h = 4
	span := posenc.Span{QStart: 20, TQ: 5, KStart: 0, TK: 30}
	enc, err := posenc.New("sandwich", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), B: 1, H: h, DHead: 4, DModel: 4 * h, Span: span}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
	if err != nil {
		t.Fatal(err)
	}
	v := graph.ToFloat64s(bias.Value())
	byDist := map[int]float64{}
	for hh := 0; hh < h; hh++ {
		rho := 8 * float64(hh+1) / h
		for i := 0; i < span.TQ; i++ {
			for j := 0; j < span.TK; j++ {
				d := span.Rel(i, j)
				x := v[(hh*span.TQ+i)*span.TK+j] * rho // undo the ratio
				if w, ok := byDist[d]; ok && math.Abs(w-x) > 1e-9 {
					t.Fatalf("head %d: distance %d gives %v and %v", hh, d, w, x)
				}
				byDist[d] = x
			}
		}
	}
	if math.Abs(byDist[0]-64) > 1e-12 {
		t.Errorf("distance 0: %v, want d̄/2 = 64", byDist[0])
	}
	for d := 1; d <= 10; d++ {
		if d <= 9 && math.Abs(byDist[d]-byDist[-d]) > 1e-9 { // keys reach distance +9
			t.Errorf("distance ±%d: %v and %v", d, byDist[d], byDist[-d])
		}
		if byDist[-d] >= byDist[-d+1] {
			t.Errorf("distance %d: %v, not below distance %d's %v", -d, byDist[-d], -d+1, byDist[-d+1])
		}
	}
}

// TestSandwichErrors: a bad d̄ and a bad site are errors naming the
// encoding and the value.
func TestSandwichErrors(t *testing.T) {
	for _, dim := range []int{-2, 7} {
		if _, err := posenc.NewSandwich(dim); err == nil || !strings.Contains(err.Error(), "sandwich") || !strings.Contains(err.Error(), "dim") {
			t.Errorf("NewSandwich(%d): %v", dim, err)
		}
		if _, err := posenc.New("sandwich", posenc.Options{SandwichDim: dim}); err == nil {
			t.Errorf("New with SandwichDim %d: no error", dim)
		}
	}
	if d := (posenc.Options{}).Defaults().SandwichDim; d != 128 {
		t.Errorf("default SandwichDim %d, want 128", d)
	}
	enc, _ := posenc.New("sandwich", posenc.Options{})
	s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), H: 0, Span: posenc.Span{TQ: 2, TK: 2}}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), "sandwich") {
		t.Errorf("ScoreBias with 0 heads: %v", err)
	}
}
