package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGoldenXPos matches xpos, rope-llama3 and rope-yarn's options with the
// PyTorch references of testdata/golden/gen_golden_xpos.py (torchscale's
// XPOS, HF's _compute_llama3_parameters and _compute_yarn_parameters,
// float64): the rotated q and k at a causal span and the gradients of a
// fixed random linear functional of them w.r.t. q and k.
func TestGoldenXPos(t *testing.T) {
	for _, name := range []string{"self", "offset-half", "decode", "llama3", "llama3-factors", "yarn-mscale", "yarn-notrunc", "yarn-default"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "xpos-"+name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			atof := func(k string) float64 {
				v, err := strconv.ParseFloat(gc.meta[k], 64)
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, h, dh := atoi("B"), atoi("H"), atoi("dh")
			span := posenc.Span{QStart: atoi("q_start"), TQ: atoi("tq"), KStart: atoi("k_start"), TK: atoi("tk")}
			o := posenc.Options{RopeBase: atof("base"), RopePairing: gc.meta["pairing"], RopeFraction: atof("fraction"),
				RopeScale: atof("scale"), RopeTrainLen: atoi("train_len"), XPosScaleBase: atof("xpos_scale_base"),
				Llama3LowFreqFactor: atof("llama3_low"), Llama3HighFreqFactor: atof("llama3_high"),
				YarnAttentionFactor: atof("yarn_attention_factor"), YarnMscale: atof("yarn_mscale"),
				YarnMscaleAllDim: atof("yarn_mscale_all_dim"), YarnNoTruncate: atoi("yarn_no_truncate") == 1}
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
			closeTo(t, name+" q_out", q2, gc.floats["q_out"], 1e-5)
			closeTo(t, name+" k_out", k2, gc.floats["k_out"], 1e-5)
			closeTo(t, name+" grad/q", grads[0], gc.floats["grad/q"], 1e-5)
			closeTo(t, name+" grad/k", grads[1], gc.floats["grad/k"], 1e-5)
		})
	}
}
