package posenc_test

import (
	"slices"
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGoldenTree matches TreeRel with the PyTorch reference of
// testdata/golden/gen_golden_tree.py, float64: the relation ids that
// experiments/gocode's Relations computes on the reference's random trees
// (exactly), the bias [B, H, L, L], the output of a causal attention call
// softmax(q·kᵀ/√dh + bias | causal) v, and the gradients of the reference's
// linear functional of both w.r.t. the table, q, k and v, to 1e-5.
func TestGoldenTree(t *testing.T) {
	for _, name := range []string{"small", "default", "clip0"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "tree-"+name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			h, maxUp, maxDown := atoi("heads"), atoi("max_up"), atoi("max_down")
			qs := gc.shapes["q"] // [B, H, L, dh]
			b, l, dh := qs[0], qs[2], qs[3]
			nr := posenc.TreeRelations(maxUp, maxDown)
			if nr != gocode.NumTreeRelations(maxUp, maxDown) {
				t.Fatalf("TreeRelations %d, gocode's %d", nr, gocode.NumTreeRelations(maxUp, maxDown))
			}

			// relations: gocode on the reference's trees
			var tree gocode.Tree
			for i, p := range gc.ints["parent"] {
				tree.Parent = append(tree.Parent, int32(p))
				tree.Depth = append(tree.Depth, int32(gc.ints["depth"][i]))
			}
			rel := make([]int, b*l*l)
			for e := 0; e < b; e++ {
				bn := make([]int32, l)
				for i := range bn {
					bn[i] = int32(gc.ints["byte_node"][e*l+i])
				}
				if err := gocode.Relations(&tree, bn, 0, l, maxUp, maxDown, rel[e*l*l:(e+1)*l*l]); err != nil {
					t.Fatal(err)
				}
			}
			if want := gc.ints["rel"]; !slices.Equal(rel, want) {
				for i := range rel {
					if rel[i] != want[i] {
						t.Fatalf("relation of example %d pair (%d, %d) = %d, the reference's %d", i/(l*l), i/l%l, i%l, rel[i], want[i])
					}
				}
			}
			pos, err := posenc.NewPairwise(b, l, l, nr, rel)
			if err != nil {
				t.Fatal(err)
			}

			enc, err := posenc.NewTreeRel(maxUp, maxDown, 0.02, false)
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: h * dh,
				Span: posenc.Span{TQ: l, TK: l}, Pos: pos, Causal: true}
			bias, err := enc.ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{b, h, l, l}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			in := func(name string) *G.Node {
				sh := gc.shapes[name]
				return G.NewTensor(g, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(name),
					G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(sh), gc.floats[name])))
			}
			q, k, v := in("q"), in("k"), in("v")
			mask := graph.MaskNode(g, graph.CausalMask(tensor.Float64, l, l, 0, 0), "causal")
			probs, err := graph.AttentionProbs(q, k, graph.AttentionOpts{Bias: bias, Mask: mask})
			if err != nil {
				t.Fatal(err)
			}
			out, err := graph.AttentionOutput(probs, v, false) // [B, H, L, dh]
			if err != nil {
				t.Fatal(err)
			}
			lf := G.Must(G.Add(G.Must(G.Sum(G.Must(G.HadamardProd(bias, in("R_bias"))))),
				G.Must(G.Sum(G.Must(G.HadamardProd(out, in("R_out")))))))
			learn := p.Nodes(g)
			if len(learn) != 1 || learn[0].Name() != "block0/attn/tree_bias" {
				t.Fatalf("parameters %v", p.Names())
			}
			if err := p.Set(learn[0].Name(), gc.floats["table"]); err != nil {
				t.Fatal(err)
			}
			wrt := G.Nodes{learn[0], q, k, v}
			if _, err := G.Grad(lf, wrt...); err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "bias", graph.ToFloat64s(bias.Value()), gc.floats["bias"], 1e-5)
			closeTo(t, "out", graph.ToFloat64s(out.Value()), gc.floats["out"], 1e-5)
			for i, n := range []string{"grad_table", "grad_q", "grad_k", "grad_v"} {
				gv, err := wrt[i].Grad()
				if err != nil {
					t.Fatal(err)
				}
				closeTo(t, n, graph.ToFloat64s(gv), gc.floats[n], 1e-5)
			}
		})
	}
}
