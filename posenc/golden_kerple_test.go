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

// TestGoldenKerple matches kerple-log and kerple-power with the PyTorch
// reference of testdata/golden/gen_golden_kerple.py (written from the paper
// and checked there against a transcription of its code): the bias
// [H, Tq, Tk] of self, cross and memory spans, and the gradients of
// sum(bias * R) w.r.t. r1 and r2, float64, to 1e-5; power-clamped has
// parameters outside their range (gradient 0 there).
func TestGoldenKerple(t *testing.T) {
	for _, name := range []string{"log-self", "log-cross", "power-self", "power-memory", "power-clamped"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "kerple-"+name)
			atoi := func(k string) int { return metaInt(t, gc, k) }
			eps, err := strconv.ParseFloat(gc.meta["eps"], 64)
			if err != nil {
				t.Fatal(err)
			}
			h := atoi("heads")
			enc, err := posenc.New(gc.meta["pos"], posenc.Options{KerpleEps: eps})
			if err != nil {
				t.Fatal(err)
			}
			tq, tk := len(gc.ints["q_pos"]), len(gc.ints["k_pos"])
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 2, H: h, DHead: 4, DModel: 4 * h,
				Span: posenc.Span{QStart: atoi("q_start"), TQ: tq, KStart: atoi("k_start"), TK: tk}}
			bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{h, tq, tk}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			n1, n2 := enc.(*posenc.Kerple).ParamNames()
			if got := p.Names(); !slices.Equal(got, []string{n1, n2}) {
				t.Fatalf("parameters %v, want [%s %s]", got, n1, n2)
			}
			for n, v := range map[string][]float64{n1: gc.floats["r1"], n2: gc.floats["r2"]} {
				if err := p.Set(n, v); err != nil {
					t.Fatal(err)
				}
			}
			checkBiasGolden(t, g, bias, p.Nodes(g), gc.floats["R"], gc.floats["bias"], func(name string) []float64 {
				if name == n2 {
					return gc.floats["grad_r2"]
				}
				return gc.floats["grad_r1"]
			})
			// The host formula agrees too.
			host := posenc.KerpleBias(enc.(*posenc.Kerple).Kernel, gc.floats["r1"], gc.floats["r2"], eps, gc.ints["q_pos"], gc.ints["k_pos"])
			closeTo(t, "KerpleBias", host, gc.floats["bias"], 1e-12)
		})
	}
}

// TestGoldenSandwich matches sandwich with the PyTorch reference of
// testdata/golden/gen_golden_kerple.py (the paper's inner products of
// sinusoidal embeddings over the per-head ratios): the bias [H, Tq, Tk] of
// self, cross and memory spans, float64, to 1e-5.
func TestGoldenSandwich(t *testing.T) {
	for _, name := range []string{"self", "cross", "memory"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "kerple-sandwich-"+name)
			atoi := func(k string) int { return metaInt(t, gc, k) }
			h := atoi("heads")
			enc, err := posenc.New(gc.meta["pos"], posenc.Options{SandwichDim: atoi("sandwich_dim")})
			if err != nil {
				t.Fatal(err)
			}
			tq, tk := len(gc.ints["q_pos"]), len(gc.ints["k_pos"])
			for _, causal := range []bool{true, false} {
				g := G.NewGraph()
				s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 2, H: h, DHead: 4, DModel: 4 * h,
					Span: posenc.Span{QStart: atoi("q_start"), TQ: tq, KStart: atoi("k_start"), TK: tk}, Causal: causal}
				bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
				if err != nil {
					t.Fatal(err)
				}
				if want := []int{h, tq, tk}; !slices.Equal(bias.Shape(), want) {
					t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
				}
				closeTo(t, "bias", graph.ToFloat64s(bias.Value()), gc.floats["bias"], 1e-5)
			}
		})
	}
}

// metaInt is the integer metadata key of a golden case.
func metaInt(t *testing.T, gc goldenCase, key string) int {
	t.Helper()
	v, err := strconv.Atoi(gc.meta[key])
	if err != nil {
		t.Fatalf("metadata %s: %v", key, err)
	}
	return v
}
