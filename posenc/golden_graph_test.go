package posenc_test

import (
	"slices"
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// goldenInput returns an input node holding the golden tensor name.
func goldenInput(t *testing.T, g *G.ExprGraph, gc goldenCase, name string) *G.Node {
	t.Helper()
	v, ok := gc.floats[name]
	if !ok {
		t.Fatalf("golden case has no tensor %q", name)
	}
	sh := tensor.Shape(gc.shapes[name])
	return G.NewTensor(g, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(name),
		G.WithValue(graph.FromFloat64s(tensor.Float64, sh, v)))
}

// runGolden sets the parameters params (name -> golden tensor), builds
// loss = sum(out * R), runs the graph with gradients w.r.t. the parameters
// and the inputs wrt (golden gradient name -> node), and compares the
// gradients with the golden ones to 1e-5.
func runGolden(t *testing.T, g *G.ExprGraph, p *graph.Params, gc goldenCase, out *G.Node, params map[string]string, wrt map[string]*G.Node) {
	t.Helper()
	r := goldenInput(t, g, gc, "R")
	if !slices.Equal(out.Shape(), r.Shape()) {
		t.Fatalf("output shape %v, the reference's %v", out.Shape(), r.Shape())
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, r))))
	if len(p.Names()) != len(params) {
		t.Fatalf("parameters %v, the reference has %d", p.Names(), len(params))
	}
	for pn, gname := range params {
		if err := p.Set(pn, gc.floats[gname]); err != nil {
			t.Fatal(err)
		}
	}
	nodes := G.Nodes{}
	names := []string{}
	for _, n := range p.Nodes(g) {
		nodes = append(nodes, n)
		names = append(names, "grad_"+params[n.Name()])
	}
	for gname, n := range wrt {
		nodes = append(nodes, n)
		names = append(names, gname)
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(p.Nodes(g)...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, names[i], graph.ToFloat64s(gv), gc.floats[names[i]], 1e-5)
	}
}

// TestGoldenGraph matches the graph encodings with the PyTorch reference of
// testdata/golden/gen_golden_graph.py (written from microsoft/Graphormer's
// GraphAttnBias and GraphNodeFeature and from benchmarking-gnns' Laplacian
// projection): outputs and the gradients of sum(out * R) w.r.t. every
// parameter and input, float64, to 1e-5, on a padded batch of two graphs.
func TestGoldenGraph(t *testing.T) {
	atoi := func(t *testing.T, gc goldenCase, k string) int {
		v, err := strconv.Atoi(gc.meta[k])
		if err != nil {
			t.Fatalf("metadata %s: %v", k, err)
		}
		return v
	}
	for _, virtual := range []bool{false, true} {
		name := "spatial"
		if virtual {
			name = "spatial-virtual"
		}
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "graph-"+name)
			sh := gc.shapes["rel"]
			h, maxDist := atoi(t, gc, "heads"), atoi(t, gc, "max_dist")
			pos, err := posenc.NewPairwise(sh[0], sh[1], sh[2], maxDist+2, gc.ints["rel"])
			if err != nil {
				t.Fatal(err)
			}
			if virtual {
				if pos, err = posenc.WithVirtualNode(pos); err != nil {
					t.Fatal(err)
				}
			}
			enc, err := posenc.NewGraphormerSpatial(atoi(t, gc, "num_rel"), 0.02, false)
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: sh[0], H: h, DHead: 2, DModel: 2 * h,
				Span: posenc.Span{TQ: pos.TQ, TK: pos.TK}, Pos: pos}
			bias, err := enc.ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			runGolden(t, g, p, gc, bias, map[string]string{"spatial_bias": "table"}, nil)
			closeTo(t, "bias", graph.ToFloat64s(bias.Value()), gc.floats["bias"], 1e-5)
		})
	}
	t.Run("centrality", func(t *testing.T) {
		gc := readGoldenCase(t, "graph-centrality")
		sh := gc.shapes["rel"]
		b, n, d := sh[0], sh[1], atoi(t, gc, "d")
		pos, err := posenc.NewPairwise(b, n, n, atoi(t, gc, "num_rel"), gc.ints["rel"])
		if err != nil {
			t.Fatal(err)
		}
		enc, err := posenc.NewGraphormerCentrality(atoi(t, gc, "max_degree"), 0.02)
		if err != nil {
			t.Fatal(err)
		}
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		x := goldenInput(t, g, gc, "x")
		s := &posenc.Site{G: g, Params: p, Layer: -1, B: b, DModel: d, Span: posenc.Span{TQ: n, TK: n}, Pos: pos}
		out, err := enc.AddToInput(s, x)
		if err != nil {
			t.Fatal(err)
		}
		runGolden(t, g, p, gc, out, map[string]string{"centrality_emb": "table"}, map[string]*G.Node{"grad_x": x})
		// Graphormer gives padding nodes its zero padding row, this encoding
		// the degree-0 row: compare the real nodes.
		got, want, valid := graph.ToFloat64s(out.Value()), gc.floats["out"], gc.ints["valid"]
		var gv, wv []float64
		for i, ok := range valid {
			if ok == 1 {
				gv = append(gv, got[i*d:(i+1)*d]...)
				wv = append(wv, want[i*d:(i+1)*d]...)
			}
		}
		closeTo(t, "out (real nodes)", gv, wv, 1e-5)
	})
	t.Run("laplacian", func(t *testing.T) {
		gc := readGoldenCase(t, "graph-laplacian")
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		x, lap := goldenInput(t, g, gc, "x"), goldenInput(t, g, gc, "lap")
		out, err := posenc.LaplacianInput(g, p, "lap_proj", x, lap, 0.02)
		if err != nil {
			t.Fatal(err)
		}
		runGolden(t, g, p, gc, out, map[string]string{"lap_proj/w": "w", "lap_proj/b": "b"},
			map[string]*G.Node{"grad_x": x, "grad_lap": lap})
		closeTo(t, "out", graph.ToFloat64s(out.Value()), gc.floats["out"], 1e-5)
	})
}
