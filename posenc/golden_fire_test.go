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

// TestGoldenFire matches fire and dpb with the PyTorch references of
// testdata/golden/gen_golden_fire.py (the paper's FIRE pseudo-code and
// x-transformers' DynamicPositionBias, generalised to offset and cross
// spans): the bias [H, Tq, Tk] and the gradient of sum(bias * R) w.r.t.
// every parameter, float64, to 1e-5.
func TestGoldenFire(t *testing.T) {
	for _, name := range []string{"fire", "fire-cross", "fire-default", "dpb", "dpb-log-norm", "dpb-deep-cross"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "fire-"+name)
			atoi := func(k string) int { return metaValue(t, gc, k, strconv.Atoi) }
			atof := func(k string) float64 {
				return metaValue(t, gc, k, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
			}
			atob := func(k string) bool { return metaValue(t, gc, k, strconv.ParseBool) }
			h := atoi("heads")
			o := posenc.Options{FireWidth: atoi("fire_width"), FireInitC: atof("fire_init_c"), FireInitL: atof("fire_init_l"),
				DPBWidth: atoi("dpb_width"), DPBDepth: atoi("dpb_depth"), DPBLogDistance: atob("dpb_log_distance"), DPBNorm: atob("dpb_norm")}
			enc, err := posenc.New(gc.meta["pos"], o)
			if err != nil {
				t.Fatal(err)
			}
			span := posenc.Span{QStart: atoi("q_start"), TQ: atoi("tq"), KStart: atoi("k_start"), TK: atoi("tk")}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 2, H: h, DHead: 4, DModel: 4 * h, Span: span, Causal: true}
			bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{h, span.TQ, span.TK}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			learn := setGoldenParams(t, g, p, gc, func(n string) string { return n })
			checkBiasGolden(t, g, bias, learn, gc.floats["R"], gc.floats["bias"], func(name string) []float64 { return gc.floats["grad_"+name] })
		})
	}
}

// metaValue parses the metadata value of key with parse; a missing key is
// the zero value (the encoding's default).
func metaValue[T any](t *testing.T, gc goldenCase, key string, parse func(string) (T, error)) T {
	t.Helper()
	var zero T
	v, ok := gc.meta[key]
	if !ok {
		return zero
	}
	x, err := parse(v)
	if err != nil {
		t.Fatalf("metadata %s: %v", key, err)
	}
	return x
}

// checkBiasGolden runs the loss sum(bias * R) of a bias node [H, Tq, Tk] of
// g with R from a golden case, and matches the bias and the gradient of
// every node of learn (want(name)) to 1e-5.
func checkBiasGolden(t *testing.T, g *G.ExprGraph, bias *G.Node, learn G.Nodes, rv, wantBias []float64, want func(name string) []float64) {
	t.Helper()
	r := G.NewTensor(g, tensor.Float64, bias.Dims(), G.WithShape(bias.Shape()...), G.WithName("R"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, bias.Shape(), rv)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(bias, r))))
	if _, err := G.Grad(loss, learn...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(learn...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	closeTo(t, "bias", graph.ToFloat64s(bias.Value()), wantBias, 1e-5)
	for _, n := range learn {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, "grad "+n.Name(), graph.ToFloat64s(gv), want(n.Name()), 1e-5)
	}
}
