package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DRope matches rope-2d and rope-mixed with the PyTorch
// references of testdata/golden/gen_golden_rope.py (written from rope-vit's
// compute_axial_cis, compute_mixed_cis and apply_rotary_emb, float64): the
// rotated q and k and the gradients of a fixed random linear functional of
// them w.r.t. q, k and (rope-mixed) the frequencies.
func TestGolden2DRope(t *testing.T) {
	for _, name := range []string{"2d-rope-axial", "2d-rope-axial-cross", "2d-rope-mixed", "2d-rope-mixed-cross"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, h, dh, rows, cols := atoi("B"), atoi("H"), atoi("dh"), atoi("rows"), atoi("cols")
			base, err := strconv.ParseFloat(gc.meta["base"], 64)
			if err != nil {
				t.Fatal(err)
			}
			pos := gc.meta["pos"]
			o := posenc.Options{Rope2DBase: base, RopeMixedBase: base}
			enc, err := posenc.New(pos, o)
			if err != nil {
				t.Fatal(err)
			}
			grid, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["q_coords"], gc.ints["k_coords"])
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			node := func(n string) *G.Node {
				sh := gc.shapes[n]
				return G.NewTensor(g, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(n),
					G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(sh), gc.floats[n])))
			}
			q, k := node("q"), node("k")
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: h * dh,
				Span: posenc.Span{TQ: grid.TQ, TK: grid.TK}, Pos: grid}
			q2, k2, err := enc.(posenc.QKTransformer).TransformQK(s, q, k)
			if err != nil {
				t.Fatal(err)
			}
			wrt := G.Nodes{q, k}
			freqs := "block0/attn/rope_mixed_freqs"
			if pos == posenc.RopeMixedName {
				if err := p.Set(freqs, gc.floats["freqs"]); err != nil {
					t.Fatal(err)
				}
				wrt = append(wrt, p.Nodes(g)...)
			}
			lq := G.Must(G.Sum(G.Must(G.HadamardProd(q2, node("wq")))))
			lk := G.Must(G.Sum(G.Must(G.HadamardProd(k2, node("wk")))))
			loss := G.Must(G.Add(lq, lk))
			if _, err := G.Grad(loss, wrt...); err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, name+" q_out", graph.ToFloat64s(q2.Value()), gc.floats["q_out"], 1e-5)
			closeTo(t, name+" k_out", graph.ToFloat64s(k2.Value()), gc.floats["k_out"], 1e-5)
			for _, n := range wrt {
				gv, err := n.Grad()
				if err != nil {
					t.Fatal(err)
				}
				want := "grad/" + n.Name()
				if n.Name() == freqs {
					want = "grad/freqs"
				}
				if gc.floats[want] == nil {
					t.Fatalf("golden file has no %s", want)
				}
				closeTo(t, name+" "+want, graph.ToFloat64s(gv), gc.floats[want], 1e-5)
			}
		})
	}
}

// TestGolden2DRopeMixedInit: RopeMixedFreqs gives rope-vit's
// init_random_2d_freqs for the golden per-head angles.
func TestGolden2DRopeMixedInit(t *testing.T) {
	gc := readGoldenCase(t, "2d-rope-mixed-init")
	dh, err := strconv.Atoi(gc.meta["dh"])
	if err != nil {
		t.Fatal(err)
	}
	base, err := strconv.ParseFloat(gc.meta["base"], 64)
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "init freqs", posenc.RopeMixedFreqs(base, dh, gc.floats["alpha"]), gc.floats["freqs"], 1e-12)
}
