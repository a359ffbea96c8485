package posenc_test

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestT5BucketHand checks T5Bucket against values worked out by hand from
// HF's _relative_position_bucket (rel = key - query; n the distance that is
// bucketed, me the number of exact buckets, nb the buckets per direction):
//
//	large(n) = me + trunc(ln(n/me) / ln(maxDistance/me) * (nb - me)), clamped to nb-1
func TestT5BucketHand(t *testing.T) {
	type row struct{ rel, want int }
	cases := []struct {
		n, md int
		bidir bool
		rows  []row
	}{
		// Causal, N=32, md=128: nb=32, me=16, n = max(-rel, 0).
		{32, 128, false, []row{
			{1000, 0}, {1, 0}, // future keys share bucket 0 with rel 0
			{0, 0}, {-1, 1}, {-15, 15}, // exact range ends at n = me-1 = 15
			{-16, 16},  // 16 + trunc(ln(16/16)/ln 8 * 16) = 16 + 0
			{-20, 17},  // ln 1.25 / ln 8 = 0.22314/2.07944 = 0.10731; *16 = 1.717 -> 16+1
			{-32, 21},  // ln 2 / ln 8 = 1/3; *16 = 5.333 -> 16+5
			{-64, 26},  // ln 4 / ln 8 = 2/3; *16 = 10.667 -> 16+10
			{-127, 31}, // ln 7.9375 / ln 8 = 2.07159/2.07944 = 0.99623; *16 = 15.94 -> 16+15
			{-128, 31}, // 16 + 16 = 32, clamped to nb-1 = 31
			{-1000, 31},
		}},
		// Bidirectional, N=32, md=128: nb=16, me=8, offset 16 if rel > 0, n = |rel|.
		{32, 128, true, []row{
			{0, 0}, {-1, 1}, {1, 17}, {-7, 7}, {7, 23}, // exact range n < 8
			{-8, 8}, {8, 24}, // 8 + trunc(ln 1 / ln 16 * 8) = 8
			{-15, 9},  // ln 1.875 / ln 16 = 0.62861/2.77259 = 0.22672; *8 = 1.814 -> 8+1
			{-16, 10}, // ln 2 / ln 16 = 1/4; *8 = 2 exactly -> 8+2
			{16, 26},  // 16 + 10
			{-20, 10}, // ln 2.5 / ln 16 = 0.91629/2.77259 = 0.33048; *8 = 2.644 -> 8+2
			{-64, 14}, // ln 8 / ln 16 = 3/4; *8 = 6 -> 8+6
			{64, 30},
			{-127, 15}, // ln 15.875 / ln 16 = 0.99717; *8 = 7.977 -> 8+7
			{-128, 15}, // 8 + 8 = 16, clamped to 15
			{128, 31}, {-1000, 15}, {1000, 31},
		}},
		// Causal, N=8, md=16: nb=8, me=4.
		{8, 16, false, []row{
			{5, 0}, {0, 0}, {-3, 3},
			{-4, 4},   // 4 + 0
			{-5, 4},   // ln 1.25 / ln 4 = 0.16096; *4 = 0.644 -> 4+0
			{-6, 5},   // ln 1.5 / ln 4 = 0.29248; *4 = 1.170 -> 4+1
			{-8, 6},   // ln 2 / ln 4 = 1/2; *4 = 2 -> 4+2
			{-15, 7},  // ln 3.75 / ln 4 = 0.95345; *4 = 3.814 -> 4+3
			{-16, 7},  // 4 + 4 = 8, clamped to 7
			{-100, 7}, // beyond max_distance
		}},
		// Bidirectional, N=8, md=16: nb=4, me=2, offset 4 if rel > 0.
		{8, 16, true, []row{
			{0, 0}, {-1, 1}, {1, 5},
			{-2, 2}, {2, 6}, // 2 + trunc(ln 1 / ln 8 * 2) = 2
			{-5, 2},                                  // ln 2.5 / ln 8 = 0.44064; *2 = 0.881 -> 2+0
			{-6, 3},                                  // ln 3 / ln 8 = 0.52832; *2 = 1.057 -> 2+1
			{6, 7},                                   // 4 + 3
			{-15, 3},                                 // ln 7.5 / ln 8 = 0.96896; *2 = 1.938 -> 2+1
			{-16, 3}, {16, 7}, {-1000, 3}, {1000, 7}, // 2 + 2 = 4, clamped to 3
		}},
	}
	for _, c := range cases {
		for _, r := range c.rows {
			if got := posenc.T5Bucket(r.rel, c.bidir, c.n, c.md); got != r.want {
				t.Errorf("T5Bucket(%d, bidirectional=%v, %d, %d) = %d, want %d", r.rel, c.bidir, c.n, c.md, got, r.want)
			}
		}
	}
}

// TestT5BucketGolden compares T5Bucket over rel in [-600, 600] with the
// PyTorch transcription of HF's bucket function (testdata/golden).
func TestT5BucketGolden(t *testing.T) {
	tabs := goldenTables(t)
	rel := tabs["rel"]
	if len(rel) != 1201 {
		t.Fatalf("tables: rel has %d entries", len(rel))
	}
	for _, c := range []struct{ n, md int }{{8, 16}, {32, 128}} {
		for _, bidir := range []bool{false, true} {
			mode := "causal"
			if bidir {
				mode = "bidir"
			}
			key := fmt.Sprintf("t5_bucket/N%d_md%d_%s", c.n, c.md, mode)
			want, ok := tabs[key]
			if !ok || len(want) != len(rel) {
				t.Fatalf("tables: %s missing or of length %d", key, len(want))
			}
			for i, r := range rel {
				if got := posenc.T5Bucket(r, bidir, c.n, c.md); got != want[i] {
					t.Fatalf("%s: T5Bucket(%d) = %d, PyTorch %d", key, r, got, want[i])
				}
			}
		}
	}
}

func TestT5BucketPanics(t *testing.T) {
	for _, c := range []struct {
		n, md int
		bidir bool
	}{{3, 16, true}, {1, 16, false}, {8, 2, true}, {8, 4, false}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("T5Bucket(-5, %v, %d, %d) did not panic", c.bidir, c.n, c.md)
				}
			}()
			posenc.T5Bucket(-5, c.bidir, c.n, c.md)
		}()
	}
}

// t5Site returns a site of g for a T5 or Shaw call.
func t5Site(g *G.ExprGraph, p *graph.Params, layer, h int, span posenc.Span, causal bool) *posenc.Site {
	return &posenc.Site{G: g, Params: p, Layer: layer, Prefix: fmt.Sprintf("block%d/attn", layer),
		B: 2, H: h, DHead: 3, DModel: 3 * h, Span: span, Causal: causal}
}

// t5Run runs g forward.
func t5Run(t *testing.T, g *G.ExprGraph) {
	t.Helper()
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
}

// TestT5BiasValues compares ScoreBias with a direct loop over (h, i, j) in
// causal, bidirectional, cross (Tq != Tk) and offset spans, float32 and
// float64, with and without Alpha.
func TestT5BiasValues(t *testing.T) {
	const n, md, h = 8, 16, 3
	spans := []posenc.Span{
		{TQ: 5, TK: 5},
		{QStart: 20, TQ: 3, KStart: 0, TK: 23}, // far past, beyond max_distance
		{QStart: 0, TQ: 4, KStart: 2, TK: 2},   // keys ahead of some queries
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, alpha := range []bool{false, true} {
			for _, causal := range []bool{true, false} {
				for si, span := range spans {
					name := fmt.Sprintf("%v/alpha=%v/causal=%v/span%d", dt, alpha, causal, si)
					enc, err := posenc.New("t5", posenc.Options{T5Buckets: n, T5MaxDistance: md, Alpha: alpha})
					if err != nil {
						t.Fatal(err)
					}
					g := G.NewGraph()
					p := graph.NewParams(dt, 1)
					bias, err := enc.(posenc.ScoreBiaser).ScoreBias(t5Site(g, p, 0, h, span, causal))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if want := (tensor.Shape{h, span.TQ, span.TK}); !bias.Shape().Eq(want) {
						t.Fatalf("%s: bias %v, want %v", name, bias.Shape(), want)
					}
					rng := rand.New(rand.NewSource(int64(si)))
					tab := make([]float64, n*h)
					for k := range tab {
						tab[k] = rng.NormFloat64()
					}
					if err := p.Set("t5_bias", tab); err != nil {
						t.Fatal(err)
					}
					a := 1.0
					if alpha {
						init := posenc.AlphaInit
						if dt == tensor.Float32 {
							init = float64(float32(init))
						}
						if got := p.Float64s("t5_alpha"); len(got) != 1 || got[0] != init {
							t.Fatalf("%s: t5_alpha = %v, want [%v]", name, got, posenc.AlphaInit)
						}
						a = -1.7
						if err := p.Set("t5_alpha", []float64{a}); err != nil {
							t.Fatal(err)
						}
					} else if p.Value("t5_alpha") != nil {
						t.Fatalf("%s: t5_alpha exists without Alpha", name)
					}
					t5Run(t, g)
					got := graph.ToFloat64s(bias.Value())
					tol := 1e-15
					if dt == tensor.Float32 {
						tol = 1e-6
					}
					for hh := 0; hh < h; hh++ {
						for i := 0; i < span.TQ; i++ {
							for j := 0; j < span.TK; j++ {
								rel := span.KStart + j - span.QStart - i
								want := a * tab[posenc.T5Bucket(rel, !causal, n, md)*h+hh]
								if k := (hh*span.TQ+i)*span.TK + j; math.Abs(got[k]-want) > tol*(1+math.Abs(want)) {
									t.Fatalf("%s: bias[%d, %d, %d] = %v, want %v", name, hh, i, j, got[k], want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestT5OneNodePerForward: every layer of a forward pass gets the same bias
// node; another span, causality or graph gets another.
func TestT5OneNodePerForward(t *testing.T) {
	enc, err := posenc.New("t5", posenc.Options{T5Buckets: 8, T5MaxDistance: 16, Alpha: true})
	if err != nil {
		t.Fatal(err)
	}
	sb := enc.(posenc.ScoreBiaser)
	p := graph.NewParams(tensor.Float64, 1)
	g1, g2 := G.NewGraph(), G.NewGraph()
	span := posenc.Span{TQ: 4, TK: 4}
	bias := func(g *G.ExprGraph, layer int, span posenc.Span, causal bool) *G.Node {
		t.Helper()
		n, err := sb.ScoreBias(t5Site(g, p, layer, 2, span, causal))
		if err != nil {
			t.Fatal(err)
		}
		if n.Graph() != g {
			t.Fatalf("bias node of another graph returned")
		}
		return n
	}
	l0 := bias(g1, 0, span, true)
	if l1 := bias(g1, 1, span, true); l1 != l0 {
		t.Fatalf("layers 0 and 1 got different bias nodes %v and %v", l0, l1)
	}
	if o := bias(g1, 1, posenc.Span{QStart: 4, TQ: 4, KStart: 0, TK: 8}, true); o == l0 {
		t.Fatal("another span got the same node")
	}
	if o := bias(g1, 1, span, false); o == l0 {
		t.Fatal("bidirectional attention got the causal bias node")
	}
	if o := bias(g2, 0, span, true); o == l0 {
		t.Fatal("another graph got the same node")
	}
	if again := bias(g1, 0, span, true); again.Graph() != g1 {
		t.Fatal("going back to the first graph gave a node of another graph")
	}

	// In a 2-layer LM: one table node, one gather for the bias.
	g := G.NewGraph()
	lp := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, lp, tinyLM("t5", posenc.Options{T5Buckets: 8, T5MaxDistance: 16}, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{2, 5}, make([]int, 10))); err != nil {
		t.Fatal(err)
	}
	gathers, tables := 0, 0
	for _, n := range g.AllNodes() {
		if n.Op() != nil && strings.HasPrefix(n.Op().String(), "GatherRel") {
			gathers++
		}
		if n.Name() == "t5_bias" {
			tables++
		}
	}
	if gathers != 1 || tables != 1 {
		t.Fatalf("2-layer LM forward has %d GatherRel nodes and %d t5_bias nodes, want 1 and 1", gathers, tables)
	}
}

// TestT5Alpha gradient-checks the LM with the learnable scale (causal and
// bidirectional, with an offset) and checks that the scale starts at 0.1.
func TestT5Alpha(t *testing.T) {
	o := posenc.Options{T5Buckets: 8, T5MaxDistance: 16, Alpha: true}
	checkLMGrad(t, "t5", o, true, 0, "t5_bias", "t5_alpha")
	checkLMGrad(t, "t5", o, false, 3, "t5_bias", "t5_alpha")

	g := G.NewGraph()
	p := graph.NewParams(tensor.Float32, 1)
	lm, err := layers.NewLM(g, p, tinyLM("t5", o, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{1, 3}, make([]int, 3))); err != nil {
		t.Fatal(err)
	}
	info, ok := p.Info("t5_alpha")
	if !ok || !info.Shape.Eq(tensor.Shape{1}) || info.Decay {
		t.Fatalf("t5_alpha: %+v (exists %v), want shape [1], no decay", info, ok)
	}
	if got := p.Float64s("t5_alpha"); got[0] != float64(float32(0.1)) {
		t.Fatalf("t5_alpha init %v, want 0.1", got)
	}
	if info, _ := p.Info("t5_bias"); !info.Shape.Eq(tensor.Shape{8, 2}) {
		t.Fatalf("t5_bias shape %v, want [8, 2]", info.Shape)
	}
}

func TestT5Errors(t *testing.T) {
	for _, o := range []posenc.Options{
		{T5Buckets: 3, T5MaxDistance: 16},
		{T5Buckets: 8, T5MaxDistance: 4},
		{T5Buckets: 8, T5MaxDistance: 16, InitStd: -1},
	} {
		if _, err := posenc.New("t5", o); err == nil || !strings.Contains(err.Error(), "t5") {
			t.Errorf("New(t5, %+v): error %v", o, err)
		}
	}
	enc, err := posenc.New("t5", posenc.Options{T5Buckets: 8, T5MaxDistance: 16})
	if err != nil {
		t.Fatal(err)
	}
	sb := enc.(posenc.ScoreBiaser)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	if _, err := sb.ScoreBias(t5Site(g, p, 0, 2, posenc.Span{TQ: 3, TK: 3}, true)); err != nil {
		t.Fatal(err)
	}
	// the shared table exists with H = 2: another H is an error naming t5
	if _, err := sb.ScoreBias(t5Site(g, p, 0, 3, posenc.Span{TQ: 3, TK: 3}, true)); err == nil || !strings.Contains(err.Error(), "t5") {
		t.Fatalf("H mismatch: error %v", err)
	}
	if _, err := sb.ScoreBias(t5Site(g, p, 0, 2, posenc.Span{TQ: 0, TK: 3}, true)); err == nil || !strings.Contains(err.Error(), "t5") {
		t.Fatalf("empty span: error %v", err)
	}
}
