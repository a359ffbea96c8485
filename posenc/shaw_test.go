package posenc_test

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestShawIndex checks ShawIndex against matrices written out by hand:
// idx[i, j] = clamp((KStart+j) - (QStart+i), -K, K) + K.
func TestShawIndex(t *testing.T) {
	cases := []struct {
		name string
		span posenc.Span
		k    int
		want [][]int
	}{
		{"self K=2 clips beyond distance 2", posenc.Span{TQ: 5, TK: 5}, 2, [][]int{
			{2, 3, 4, 4, 4},
			{1, 2, 3, 4, 4},
			{0, 1, 2, 3, 4},
			{0, 0, 1, 2, 3},
			{0, 0, 0, 1, 2},
		}},
		// queries at 3, 4; keys at 0..4: rel = j - 3 - i, row 0: -3..1, row 1: -4..0
		{"tq<tk, query offset, K=1", posenc.Span{QStart: 3, TQ: 2, KStart: 0, TK: 5}, 1, [][]int{
			{0, 0, 0, 1, 2},
			{0, 0, 0, 0, 1},
		}},
		// queries at 0..3; keys at 5, 6: rel = 5 + j - i
		{"tq>tk, keys ahead, K=3", posenc.Span{QStart: 0, TQ: 4, KStart: 5, TK: 2}, 3, [][]int{
			{6, 6},
			{6, 6},
			{6, 6},
			{5, 6},
		}},
		// queries at 10..12, memory keys at 7..12: rel = j - 3 - i, row 0: -3..2
		{"memory offset, K=2", posenc.Span{QStart: 10, TQ: 3, KStart: 7, TK: 6}, 2, [][]int{
			{0, 0, 1, 2, 3, 4},
			{0, 0, 0, 1, 2, 3},
			{0, 0, 0, 0, 1, 2},
		}},
		{"K=0: one shared row", posenc.Span{TQ: 2, TK: 3}, 0, [][]int{{0, 0, 0}, {0, 0, 0}}},
	}
	for _, c := range cases {
		got := posenc.ShawIndex(c.span, c.k)
		var flat []int
		for _, r := range c.want {
			flat = append(flat, r...)
		}
		if fmt.Sprint(got) != fmt.Sprint(flat) {
			t.Errorf("%s: ShawIndex = %v, want %v", c.name, got, flat)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("ShawIndex with negative K did not panic")
			}
		}()
		posenc.ShawIndex(posenc.Span{TQ: 1, TK: 1}, -1)
	}()
}

// shawRandNode returns an input node of g with N(0, 1) entries.
func shawRandNode(g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype, name string, shape ...int) (*G.Node, []float64) {
	d := make([]float64, tensor.Shape(shape).TotalSize())
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	v := graph.FromFloat64s(dt, tensor.Shape(shape), d)
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v)), d
}

// TestShawTermsDirect compares Shaw's key and value terms with direct loops
//
//	key[b,h,i,j] = sum_c q[b,h,i,c] shaw_k[idx_ij, c]
//	val[b,h,i,c] = sum_j p[b,h,i,j] shaw_v[idx_ij, c]
//
// on tiny cases (self, Tq != Tk with offsets), float64 and float32, and
// gradient-checks both terms w.r.t. q, p and the tables.
func TestShawTermsDirect(t *testing.T) {
	const b, h, dh, k = 2, 2, 3, 1
	r := 2*k + 1
	spans := []posenc.Span{{TQ: 3, TK: 3}, {QStart: 4, TQ: 2, KStart: 0, TK: 5}, {QStart: 0, TQ: 4, KStart: 1, TK: 2}}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for si, span := range spans {
			name := fmt.Sprintf("%v/span%d", dt, si)
			enc, err := posenc.New("shaw", posenc.Options{ShawK: k})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(int64(si)))
			g := G.NewGraph()
			p := graph.NewParams(dt, 1)
			site := &posenc.Site{G: g, Params: p, Layer: 1, Prefix: "block1/attn", B: b, H: h, DHead: dh, DModel: h * dh, Span: span}
			tq, tk := span.TQ, span.TK
			q, qd := shawRandNode(g, rng, dt, "q", b, h, tq, dh)
			pr, pd := shawRandNode(g, rng, dt, "p", b, h, tq, tk)
			key, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			val, err := enc.(posenc.ValueTermer).ValueTerms(site, pr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !key.Shape().Eq(tensor.Shape{b, h, tq, tk}) || !val.Shape().Eq(tensor.Shape{b, h, tq, dh}) {
				t.Fatalf("%s: key %v, value %v", name, key.Shape(), val.Shape())
			}
			for _, tn := range []string{"block1/attn/shaw_k", "block1/attn/shaw_v"} {
				info, ok := p.Info(tn)
				if !ok || !info.Shape.Eq(tensor.Shape{r, dh}) || info.Decay {
					t.Fatalf("%s: parameter %s: %+v (exists %v), want [%d, %d], no decay", name, tn, info, ok, r, dh)
				}
			}
			kTab, vTab := make([]float64, r*dh), make([]float64, r*dh)
			for i := range kTab {
				kTab[i], vTab[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			if err := p.Set("block1/attn/shaw_k", kTab); err != nil {
				t.Fatal(err)
			}
			if err := p.Set("block1/attn/shaw_v", vTab); err != nil {
				t.Fatal(err)
			}
			t5Run(t, g)
			gotK, gotV := graph.ToFloat64s(key.Value()), graph.ToFloat64s(val.Value())
			tol := 1e-14
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			for bh := 0; bh < b*h; bh++ {
				for i := 0; i < tq; i++ {
					for j := 0; j < tk; j++ {
						rel := span.KStart + j - span.QStart - i
						row := min(max(rel, -k), k) + k
						var want float64
						for c := 0; c < dh; c++ {
							want += qd[(bh*tq+i)*dh+c] * kTab[row*dh+c]
						}
						if got := gotK[(bh*tq+i)*tk+j]; math.Abs(got-want) > tol {
							t.Fatalf("%s: key term [%d, %d, %d] = %v, want %v", name, bh, i, j, got, want)
						}
					}
					for c := 0; c < dh; c++ {
						var want float64
						for j := 0; j < tk; j++ {
							rel := span.KStart + j - span.QStart - i
							row := min(max(rel, -k), k) + k
							want += pd[(bh*tq+i)*tk+j] * vTab[row*dh+c]
						}
						if got := gotV[(bh*tq+i)*dh+c]; math.Abs(got-want) > tol {
							t.Fatalf("%s: value term [%d, %d, %d] = %v, want %v", name, bh, i, c, got, want)
						}
					}
				}
			}
			if dt != tensor.Float64 {
				continue
			}
			w1, _ := shawRandNode(g, rng, dt, "w1", b, h, tq, tk)
			w2, _ := shawRandNode(g, rng, dt, "w2", b, h, tq, dh)
			loss := G.Must(G.Add(G.Must(G.Sum(G.Must(G.HadamardProd(key, w1)))), G.Must(G.Sum(G.Must(G.HadamardProd(val, w2))))))
			wrt := append(G.Nodes{q, pr}, p.Nodes(g)...)
			if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{Seed: 1}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
}

// TestShawScalarBias compares shaw-scalar's bias with a direct loop, with and
// without Alpha, and checks its parameters.
func TestShawScalarBias(t *testing.T) {
	const h, k = 3, 2
	r := 2*k + 1
	for _, alpha := range []bool{false, true} {
		for _, causal := range []bool{true, false} {
			span := posenc.Span{QStart: 6, TQ: 3, KStart: 2, TK: 7}
			enc, err := posenc.New("shaw-scalar", posenc.Options{ShawK: k, Alpha: alpha})
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			site := t5Site(g, p, 1, h, span, causal)
			bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site)
			if err != nil {
				t.Fatal(err)
			}
			if !bias.Shape().Eq(tensor.Shape{h, span.TQ, span.TK}) {
				t.Fatalf("bias %v", bias.Shape())
			}
			rng := rand.New(rand.NewSource(7))
			tab := make([]float64, r*h)
			for i := range tab {
				tab[i] = rng.NormFloat64()
			}
			if err := p.Set("block1/attn/shaw_bias", tab); err != nil {
				t.Fatal(err)
			}
			a := 1.0
			if alpha {
				if got := p.Float64s("block1/attn/shaw_alpha"); len(got) != 1 || got[0] != 0.1 {
					t.Fatalf("shaw_alpha = %v, want [0.1]", got)
				}
				a = 2.5
				if err := p.Set("block1/attn/shaw_alpha", []float64{a}); err != nil {
					t.Fatal(err)
				}
			} else if p.Value("block1/attn/shaw_alpha") != nil {
				t.Fatal("shaw_alpha exists without Alpha")
			}
			t5Run(t, g)
			got := graph.ToFloat64s(bias.Value())
			for hh := 0; hh < h; hh++ {
				for i := 0; i < span.TQ; i++ {
					for j := 0; j < span.TK; j++ {
						row := min(max(span.Rel(i, j), -k), k) + k
						want := a * tab[row*h+hh]
						if v := got[(hh*span.TQ+i)*span.TK+j]; math.Abs(v-want) > 1e-15 {
							t.Fatalf("alpha=%v: bias[%d, %d, %d] = %v, want %v", alpha, hh, i, j, v, want)
						}
					}
				}
			}
		}
	}
}

// TestShawAlpha: the LM gradient check with the per-layer learnable scale of
// shaw-scalar and of shaw's key terms; shaw's value tables are unchanged.
func TestShawAlpha(t *testing.T) {
	o := posenc.Options{ShawK: 2, Alpha: true}
	checkLMGrad(t, "shaw-scalar", o, true, 0, "block0/attn/shaw_bias", "block0/attn/shaw_alpha", "block1/attn/shaw_alpha")
	checkLMGrad(t, "shaw-scalar", o, false, 2, "block0/attn/shaw_bias", "block0/attn/shaw_alpha", "block1/attn/shaw_alpha")

	checkLMGrad(t, "shaw", o, true, 0, "block0/attn/shaw_k", "block0/attn/shaw_k_alpha", "block1/attn/shaw_k_alpha")

	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM("shaw", o, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{1, 3}, make([]int, 3))); err != nil {
		t.Fatal(err)
	}
	var alphas []string
	for _, n := range p.Names() {
		if strings.Contains(n, "alpha") {
			alphas = append(alphas, n)
		}
	}
	if want := []string{"block0/attn/shaw_k_alpha", "block1/attn/shaw_k_alpha"}; !slices.Equal(alphas, want) {
		t.Fatalf("shaw with Alpha created alphas %v, want %v", alphas, want)
	}
	for _, n := range []string{"block0/attn/shaw_k", "block0/attn/shaw_v", "block1/attn/shaw_k", "block1/attn/shaw_v"} {
		if info, ok := p.Info(n); !ok || !info.Shape.Eq(tensor.Shape{5, 4}) {
			t.Fatalf("%s: %+v (exists %v), want [5, 4]", n, info, ok)
		}
	}
}

func TestShawErrors(t *testing.T) {
	for _, name := range []string{"shaw", "shaw-scalar"} {
		if _, err := posenc.New(name, posenc.Options{ShawK: -1}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with K = -1: error %v", name, err)
		}
		if _, err := posenc.New(name, posenc.Options{InitStd: -1}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with negative init std: error %v", name, err)
		}
	}
	enc, err := posenc.New("shaw", posenc.Options{ShawK: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	rng := rand.New(rand.NewSource(1))
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 3, DModel: 6, Span: posenc.Span{TQ: 2, TK: 4}}
	q, _ := shawRandNode(g, rng, tensor.Float64, "q", 1, 2, 3, 3) // TQ 3, not 2
	if _, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, nil); err == nil || !strings.Contains(err.Error(), "shaw") {
		t.Errorf("q of the wrong shape: error %v", err)
	}
	pr, _ := shawRandNode(g, rng, tensor.Float64, "p", 1, 2, 2, 3) // TK 3, not 4
	if _, err := enc.(posenc.ValueTermer).ValueTerms(site, pr); err == nil || !strings.Contains(err.Error(), "shaw") {
		t.Errorf("probs of the wrong shape: error %v", err)
	}
}
