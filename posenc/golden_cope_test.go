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
			g, terms, wrt := copeGraph(t, posenc.Options{CopeNPos: npos, CopeDivide: atoi("divide") == 1},
				span, b, h, dh, gc.floats["q"], gc.floats["k"], gc.floats["emb"])
			golden := map[string]string{"q": "grad/q", "k": "grad/k", "block0/attn/cope_emb": "grad/emb"}
			checkBiasGolden(t, g, terms, wrt, gc.floats["w"], gc.floats["terms"], func(n string) []float64 { return gc.floats[golden[n]] })
		})
	}
}

// copeGraph builds cope's ScoreTerms at a causal site of the span, prefix
// "block0/attn", in a float64 graph from q [b, h, TQ, dh], k [b, h, TK, dh]
// and the table emb [dh, npos], and returns the graph, the terms and the
// nodes q, k and the table.
func copeGraph(t *testing.T, o posenc.Options, span posenc.Span, b, h, dh int, q, k, emb []float64) (*G.ExprGraph, *G.Node, G.Nodes) {
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
	if err := p.Set("block0/attn/cope_emb", emb); err != nil {
		t.Fatal(err)
	}
	return g, terms, append(G.Nodes{qn, kn}, p.Nodes(g)...)
}
