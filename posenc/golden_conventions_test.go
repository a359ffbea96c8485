package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The golden cases of two reference conventions that are options (issue
// #34), written by generate_conventions of testdata/golden/gen_golden.py
// from the references' own code run in float64.

// goldenMeta returns the integer and float parsers of a golden case's
// metadata.
func goldenMeta(t *testing.T, gc goldenCase) (atoi func(string) int, atof func(string) float64) {
	atoi = func(k string) int {
		t.Helper()
		v, err := strconv.Atoi(gc.meta[k])
		if err != nil {
			t.Fatalf("metadata %s: %v", k, err)
		}
		return v
	}
	atof = func(k string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(gc.meta[k], 64)
		if err != nil {
			t.Fatalf("metadata %s: %v", k, err)
		}
		return v
	}
	return atoi, atof
}

// TestGoldenRope2DYFirst matches rope-2d with rope2d-axis-order y-first
// with timm's axial 2-D RoPE (timm/layers/pos_embed_sincos.py:
// build_rotary_pos_embed with in_pixels=False and grid_indexing 'ij',
// apply_rot_embed_cat; the kept patches of the cross case gathered with
// apply_keep_indices_nlc, as EVA-02 does): the rotated q and k and the
// gradients of a fixed random linear functional of them w.r.t. q and k.
func TestGoldenRope2DYFirst(t *testing.T) {
	for _, name := range []string{"2d-rope-timm", "2d-rope-timm-cross"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			atoi, atof := goldenMeta(t, gc)
			b, h, dh, rows, cols := atoi("B"), atoi("H"), atoi("dh"), atoi("rows"), atoi("cols")
			if gc.meta["pos"] != posenc.Rope2DName || gc.meta["rope2d_axis_order"] != posenc.Rope2DYFirst {
				t.Fatalf("golden case of %s %s", gc.meta["pos"], gc.meta["rope2d_axis_order"])
			}
			enc, err := posenc.New(posenc.Rope2DName, posenc.Options{Rope2DBase: atof("base"), Rope2DAxisOrder: posenc.Rope2DYFirst})
			if err != nil {
				t.Fatal(err)
			}
			grid, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["q_coords"], gc.ints["k_coords"])
			if err != nil {
				t.Fatal(err)
			}
			vals := func(n string, shape []int) []float64 {
				if !tensor.Shape(gc.shapes[n]).Eq(tensor.Shape(shape)) {
					t.Fatalf("golden %s has shape %v, want %v", n, gc.shapes[n], shape)
				}
				return gc.floats[n]
			}
			q2, k2, grads := buildRope2D(t, enc, grid, b, h, dh, tensor.Float64, vals, nil).run(t)
			closeTo(t, name+" q_out", q2, gc.floats["q_out"], 1e-9)
			closeTo(t, name+" k_out", k2, gc.floats["k_out"], 1e-9)
			closeTo(t, name+" grad/q", grads[0], gc.floats["grad/q"], 1e-9)
			closeTo(t, name+" grad/k", grads[1], gc.floats["grad/k"], 1e-9)
		})
	}
}

// TestGoldenXPosFloor matches xpos with xpos-centre floor (and
// x-transformers' rotation: rope-pairing interleaved, rope-fraction 0.5)
// with x-transformers' RotaryEmbedding(use_xpos=True) and
// apply_rotary_pos_emb, for self-attention over an odd number of positions
// (where floor and ceil differ) and a cached decoding step: the rotated q
// and k and the gradients of a fixed random linear functional of them.
func TestGoldenXPosFloor(t *testing.T) {
	for _, name := range []string{"xpos-xt-self", "xpos-xt-decode"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			atoi, atof := goldenMeta(t, gc)
			b, h, dh := atoi("B"), atoi("H"), atoi("dh")
			span := posenc.Span{QStart: atoi("q_start"), TQ: atoi("tq"), KStart: atoi("k_start"), TK: atoi("tk")}
			if n := span.QStart + span.TQ; n%2 == 0 {
				t.Fatalf("N = %d is even: floor and ceil agree, the case tests nothing", n)
			}
			o := posenc.Options{RopeBase: atof("base"), RopePairing: gc.meta["pairing"], RopeFraction: atof("fraction"),
				XPosScaleBase: atof("xpos_scale_base"), XPosCentre: gc.meta["xpos_centre"]}
			if o.XPosCentre != posenc.XPosCentreFloor {
				t.Fatalf("golden case of centre %q", o.XPosCentre)
			}
			enc, err := posenc.New(gc.meta["pos"], o)
			if err != nil {
				t.Fatal(err)
			}
			r := &rope2DGraph{g: G.NewGraph(), p: graph.NewParams(tensor.Float64, 1)}
			mk := func(n string, shape ...int) *G.Node {
				if !tensor.Shape(gc.shapes[n]).Eq(tensor.Shape(shape)) {
					t.Fatalf("golden %s has shape %v, want %v", n, gc.shapes[n], shape)
				}
				return G.NewTensor(r.g, tensor.Float64, 4, G.WithShape(shape...), G.WithName(n),
					G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(shape), gc.floats[n])))
			}
			r.q, r.k = mk("q", b, h, span.TQ, dh), mk("k", b, h, span.TK, dh)
			s := &posenc.Site{G: r.g, Params: r.p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: h * dh, Span: span, Causal: true}
			if r.q2, r.k2, err = enc.(posenc.QKTransformer).TransformQK(s, r.q, r.k); err != nil {
				t.Fatal(err)
			}
			lq := G.Must(G.Sum(G.Must(G.HadamardProd(r.q2, mk("wq", b, h, span.TQ, dh)))))
			lk := G.Must(G.Sum(G.Must(G.HadamardProd(r.k2, mk("wk", b, h, span.TK, dh)))))
			r.loss, r.wrt = G.Must(G.Add(lq, lk)), G.Nodes{r.q, r.k}
			q2, k2, grads := r.run(t)
			closeTo(t, name+" q_out", q2, gc.floats["q_out"], 1e-9)
			closeTo(t, name+" k_out", k2, gc.floats["k_out"], 1e-9)
			closeTo(t, name+" grad/q", grads[0], gc.floats["grad/q"], 1e-9)
			closeTo(t, name+" grad/k", grads[1], gc.floats["grad/k"], 1e-9)
		})
	}
}
