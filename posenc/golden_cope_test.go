package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGoldenCoPE matches cope's score terms with the PyTorch reference of
// testdata/golden/gen_golden_cope.py (the paper's appendix code, float64):
// the terms of one causal attention call (self, clamped positions, a memory
// span with keys after some queries, CopeDivide) and the gradients of a
// fixed random linear functional of them w.r.t. q, k and the table.
func TestGoldenCoPE(t *testing.T) {
	for _, name := range []string{"self", "clamp", "memory", "divide"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "cope-"+name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, h, dh, npos := atoi("B"), atoi("H"), atoi("dh"), atoi("npos")
			span := posenc.Span{QStart: atoi("q_start"), TQ: atoi("tq"), KStart: atoi("k_start"), TK: atoi("tk")}
			terms, grads := copeTermsAndGrads(t, posenc.Options{CopeNPos: npos, CopeDivide: atoi("divide") == 1},
				span, b, h, dh, gc.floats["q"], gc.floats["k"], gc.floats["emb"], gc.floats["w"])
			closeTo(t, name+" terms", terms, gc.floats["terms"], 1e-5)
			closeTo(t, name+" grad/q", grads[0], gc.floats["grad/q"], 1e-5)
			closeTo(t, name+" grad/k", grads[1], gc.floats["grad/k"], 1e-5)
			closeTo(t, name+" grad/emb", grads[2], gc.floats["grad/emb"], 1e-5)
		})
	}
}

// copeTermsAndGrads builds cope's ScoreTerms at a causal site of the span in
// float64 from q [b, h, TQ, dh], k [b, h, TK, dh] and the table emb
// [dh, npos] (nil: the zero init), and returns the terms and the gradients
// of sum(terms ⊙ w) w.r.t. q, k and the table.
func copeTermsAndGrads(t *testing.T, o posenc.Options, span posenc.Span, b, h, dh int, q, k, emb, w []float64) ([]float64, [][]float64) {
	t.Helper()
	enc, err := posenc.New(posenc.CoPEName, o)
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	mk := func(n string, data []float64, shape ...int) *G.Node {
		if len(data) != tensor.Shape(shape).TotalSize() {
			t.Fatalf("%s has %d values, want shape %v", n, len(data), shape)
		}
		return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(n),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(shape), data)))
	}
	qn, kn := mk("q", q, b, h, span.TQ, dh), mk("k", k, b, h, span.TK, dh)
	s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: h * dh, Span: span, Causal: true}
	terms, err := enc.(posenc.ScoreTermer).ScoreTerms(s, qn, kn)
	if err != nil {
		t.Fatal(err)
	}
	if emb != nil {
		if err := p.Set("block0/attn/cope_emb", emb); err != nil {
			t.Fatal(err)
		}
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(terms, mk("w", w, b, h, span.TQ, span.TK)))))
	wrt := append(G.Nodes{qn, kn}, p.Nodes(g)...)
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	var grads [][]float64
	for _, n := range wrt {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, graph.ToFloat64s(gv))
	}
	return graph.ToFloat64s(terms.Value()), grads
}
