package posenc_test

import (
	"math/rand"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestXLMemo: with Memo (layers.Decoder's setting) the terms equal those
// without it exactly, for the score terms and the streamed tables, and the
// kept product follows a change of W_r between runs.
func TestXLMemo(t *testing.T) {
	const b, h, dh = 1, 2, 3
	d := h * dh
	span := posenc.Span{QStart: 6, TQ: 1, KStart: 0, TK: 7} // a decoding step
	rng := rand.New(rand.NewSource(3))
	p := graph.NewParams(tensor.Float64, 1)
	build := func(memo bool) (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		e := posenc.NewXL(0.02)
		e.Memo = memo
		q, _ := xlRandInput(g, rand.New(rand.NewSource(1)), "q", b, h, span.TQ, dh)
		k, _ := xlRandInput(g, rand.New(rand.NewSource(2)), "k", b, h, span.TK, dh)
		site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: d, Span: span, Causal: true}
		out, err := e.ScoreTerms(site, q, k)
		if err != nil {
			t.Fatal(err)
		}
		terms, err := e.StreamTerms(site)
		if err != nil {
			t.Fatal(err)
		}
		return g, out, terms[0].Table
	}
	g0, out0, tab0 := build(false)
	xlRandomizeParams(t, p, rng)
	g1, out1, tab1 := build(true)
	m0, m1 := G.NewTapeMachine(g0), G.NewTapeMachine(g1)
	defer m0.Close()
	defer m1.Close()
	var first []float64
	for run := 0; run < 3; run++ {
		if run == 2 { // new weights: the kept product must not be reused
			xlRandomizeParams(t, p, rng)
		}
		for _, m := range []G.VM{m0, m1} {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			m.Reset()
		}
		want, got := graph.ToFloat64s(out0.Value()), graph.ToFloat64s(out1.Value())
		if !slices.Equal(got, want) {
			t.Fatalf("run %d: terms with Memo %v, without %v", run, got, want)
		}
		if tw, tg := graph.ToFloat64s(tab0.Value()), graph.ToFloat64s(tab1.Value()); !slices.Equal(tg, tw) {
			t.Fatalf("run %d: streamed table with Memo %v, without %v", run, tg, tw)
		}
		switch run {
		case 0:
			first = want
		case 1:
			if !slices.Equal(want, first) {
				t.Fatalf("run 1 differs from run 0 with the same weights")
			}
		case 2:
			if slices.Equal(want, first) {
				t.Fatalf("run 2: new weights gave the same terms")
			}
		}
	}
}
