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

// TestGoldenReal matches the encodings that serve real positions with the
// PyTorch references of testdata/golden/gen_golden_real.py (the papers'
// formulas with times for positions), on per-example and shared times:
// the score biases [B|-, H, Tq, Tk] of alibi, kerple-log, kerple-power,
// fire and dpb with the gradients of sum(bias * R) w.r.t. every parameter,
// and RoPE's rotated q and k with the gradients of sum(q_rot * Rq) +
// sum(k_rot * Rk) w.r.t. q and k; float64, to 1e-5.
func TestGoldenReal(t *testing.T) {
	cases := []string{"alibi-causal", "alibi-cross", "alibi-shared", "kerple-log", "kerple-power", "fire", "fire-cross",
		"dpb", "dpb-log-norm", "rope", "rope-interleaved-partial", "rope-pi"}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "real-"+name)
			atoi := func(k string) int { return metaValue(t, gc, k, strconv.Atoi) }
			atof := func(k string) float64 {
				return metaValue(t, gc, k, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
			}
			atob := func(k string) bool { return metaValue(t, gc, k, strconv.ParseBool) }
			h, b, tq, tk := atoi("heads"), atoi("batch"), atoi("tq"), atoi("tk")
			o := posenc.Options{KerpleEps: atof("eps"),
				FireWidth: atoi("fire_width"), FireInitC: atof("fire_init_c"), FireInitL: atof("fire_init_l"),
				DPBWidth: atoi("dpb_width"), DPBDepth: atoi("dpb_depth"), DPBLogDistance: atob("dpb_log_distance"), DPBNorm: atob("dpb_norm"),
				RopeBase: atof("rope_base"), RopePairing: gc.meta["rope_pairing"], RopeFraction: atof("rope_fraction"), RopeScale: atof("rope_scale")}
			enc, err := posenc.New(gc.meta["pos"], o)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := posenc.NewReal(b, gc.floats["q_times"], gc.floats["k_times"])
			if err != nil {
				t.Fatal(err)
			}
			if pos.TQ != tq || pos.TK != tk {
				t.Fatalf("times for %d queries and %d keys, metadata %d and %d", pos.TQ, pos.TK, tq, tk)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			dh := max(atoi("dh"), 4)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 2, H: h, DHead: dh, DModel: dh * h,
				Span: posenc.Span{TQ: tq, TK: tk}, Pos: pos, Causal: atob("causal")}
			if err := posenc.CheckKind(enc, pos); err != nil {
				t.Fatal(err)
			}

			if rope, ok := enc.(posenc.QKTransformer); ok {
				in := func(n string) *G.Node {
					return G.NewTensor(g, tensor.Float64, 4, G.WithShape(gc.shapes[n]...), G.WithName(n),
						G.WithValue(graph.FromFloat64s(tensor.Float64, gc.shapes[n], gc.floats[n])))
				}
				q, k := in("q"), in("k")
				q2, k2, err := rope.TransformQK(s, q, k)
				if err != nil {
					t.Fatal(err)
				}
				loss := G.Must(G.Add(G.Must(G.Sum(G.Must(G.HadamardProd(q2, in("Rq"))))), G.Must(G.Sum(G.Must(G.HadamardProd(k2, in("Rk")))))))
				if _, err := G.Grad(loss, q, k); err != nil {
					t.Fatal(err)
				}
				m := G.NewTapeMachine(g, G.BindDualValues(q, k))
				defer m.Close()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				closeTo(t, "q_rot", graph.ToFloat64s(q2.Value()), gc.floats["q_rot"], 1e-5)
				closeTo(t, "k_rot", graph.ToFloat64s(k2.Value()), gc.floats["k_rot"], 1e-5)
				for n, x := range map[string]*G.Node{"q": q, "k": k} {
					gv, err := x.Grad()
					if err != nil {
						t.Fatal(err)
					}
					closeTo(t, "grad_"+n, graph.ToFloat64s(gv), gc.floats["grad_"+n], 1e-5)
				}
				return
			}

			bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := gc.shapes["bias"]; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			// The golden case names KERPLE's parameters r1 and r2.
			golden := func(n string) string { return n }
			if kp, ok := enc.(*posenc.Kerple); ok {
				n1, n2 := kp.ParamNames()
				golden = func(n string) string {
					return map[string]string{n1: "r1", n2: "r2"}[n]
				}
			}
			learn := p.Nodes(g)
			if len(learn) == 0 { // alibi: no parameters, the bias only
				m := G.NewTapeMachine(g)
				defer m.Close()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				closeTo(t, "bias", graph.ToFloat64s(bias.Value()), gc.floats["bias"], 1e-5)
				return
			}
			setGoldenParams(t, g, p, gc, golden)
			checkBiasGolden(t, g, bias, learn, gc.floats["R"], gc.floats["bias"], func(n string) []float64 { return gc.floats["grad_"+golden(n)] })
		})
	}
}

// setGoldenParams sets every parameter of p (its nodes in g, returned) to
// its value in the golden case, stored under golden(name); the case must
// have as many parameters (tensors with a grad_ twin) as p.
func setGoldenParams(t *testing.T, g *G.ExprGraph, p *graph.Params, gc goldenCase, golden func(string) string) G.Nodes {
	t.Helper()
	learn := p.Nodes(g)
	nParams := 0
	for k := range gc.floats {
		if _, ok := gc.floats["grad_"+k]; ok {
			nParams++
		}
	}
	if len(learn) != nParams {
		t.Fatalf("%d parameters %v; the golden case has %d", len(learn), p.Names(), nParams)
	}
	for _, n := range learn {
		v, ok := gc.floats[golden(n.Name())]
		if !ok {
			t.Fatalf("parameter %s is not in the golden case", n.Name())
		}
		if err := p.Set(n.Name(), v); err != nil {
			t.Fatal(err)
		}
	}
	return learn
}
