package posenc_test

// The query-bias role of the harness (posenc.QueryBiasTermer), run on every
// registered encoding that is one.

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestEveryQueryBiasTermer runs checkQueryBias on every registered
// encoding that is a QueryBiasTermer, with and without Options.Alpha and
// Options.XLUntieR (ignored by the encodings it is not for), and
// requires that xl is one (the decoder's fold of u depends on it).
func TestEveryQueryBiasTermer(t *testing.T) {
	seen := false
	for _, info := range posenc.Registered() {
		enc, err := posenc.New(info.Name, harnessOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := enc.(posenc.QueryBiasTermer); !ok {
			continue
		}
		seen = seen || info.Name == "xl"
		for _, alpha := range []bool{false, true} {
			for _, untie := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/alpha=%v/untie=%v", info.Name, alpha, untie), func(t *testing.T) {
					o := harnessOptions()
					o.Alpha, o.XLUntieR = alpha, untie
					checkQueryBias(t, info.Name, o)
				})
			}
		}
	}
	if !seen {
		t.Fatal("xl is not a QueryBiasTermer")
	}
}

// checkQueryBias checks the QueryBiasTermer contract of the encoding
// called name (built from o):
//
//   - on a causal memory span (alphaSite), ScoreTerms(q, k) equals
//     QueryBias_h·k_j + QueryTerms(q) (float64, within 1e-12), with the
//     parameters at random values;
//   - a cross-entropy loss through the tiny LM attending to a key/value
//     cache (layers.Options.KV, where attention folds the bias into the
//     queries) is gradient-checked (float64, central differences) with
//     respect to every learnable and the cached keys;
//   - the decoding role (checkDecode: layers.Decoder, which folds the bias,
//     against the full model) with these options.
func checkQueryBias(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	qbt := enc.(posenc.QueryBiasTermer)
	s := alphaSite(t, rand.New(rand.NewSource(41)), enc, posenc.PosLine)
	q := randomConst(s, "q", 1, s.B, s.H, s.TQ, s.DHead)
	k := randomConst(s, "k", 2, s.B, s.H, s.TK, s.DHead)
	terms, err := qbt.ScoreTerms(s, q, k)
	if err != nil {
		t.Fatalf("%s: ScoreTerms: %v", name, err)
	}
	qt, err := qbt.QueryTerms(s, q)
	if err != nil {
		t.Fatalf("%s: QueryTerms: %v", name, err)
	}
	bias, err := qbt.QueryBias(s)
	if err != nil {
		t.Fatalf("%s: QueryBias: %v", name, err)
	}
	if !bias.Shape().Eq(tensor.Shape{s.H, s.DHead}) {
		t.Fatalf("%s: QueryBias %v, want [%d, %d]", name, bias.Shape(), s.H, s.DHead)
	}
	randomizeParams(s.Params, rand.New(rand.NewSource(5)))
	m := G.NewTapeMachine(s.G)
	if err := m.RunAll(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m.Close()
	st, qv := graph.ToFloat64s(terms.Value()), graph.ToFloat64s(qt.Value())
	bv, kv := graph.ToFloat64s(bias.Value()), graph.ToFloat64s(k.Value())
	h, dh, tq, tk := s.H, s.DHead, s.TQ, s.TK
	for bb := 0; bb < s.B; bb++ {
		for hh := 0; hh < h; hh++ {
			for i := 0; i < tq; i++ {
				for j := 0; j < tk; j++ {
					var bk float64
					for c := 0; c < dh; c++ {
						bk += bv[hh*dh+c] * kv[((bb*h+hh)*tk+j)*dh+c]
					}
					x := ((bb*h+hh)*tq+i)*tk + j
					if got, want := bk+qv[x], st[x]; math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
						t.Fatalf("%s: (b %d, h %d, i %d, j %d): QueryBias·k + QueryTerms = %v, ScoreTerms %v", name, bb, hh, i, j, got, want)
					}
				}
			}
		}
	}

	// the fold, through attention against a cache: gradients
	rng := rand.New(rand.NewSource(13))
	cfg := tinyLM(name, o, true)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const b, mem, tt = 2, 3, 2
	opts := layers.Options{Start: mem}
	var caches G.Nodes
	for l := 0; l < cfg.Layers; l++ {
		kv := layers.KV{}
		for i, which := range []string{"k", "v"} {
			d := make([]float64, b*mem*cfg.DModel)
			for j := range d {
				d[j] = rng.NormFloat64()
			}
			n := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, mem, cfg.DModel), G.WithName(fmt.Sprintf("cache%d_%s", l, which)),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, mem, cfg.DModel}, d)))
			if i == 0 {
				kv.K = n
				caches = append(caches, n)
			} else {
				kv.V = n
			}
		}
		opts.KV = append(opts.KV, kv)
	}
	data, tg := make([]int, b*tt), make([]int, b*tt)
	for i := range data {
		data[i], tg[i] = rng.Intn(256), rng.Intn(256)
	}
	logits, err := lm.FwdWith(intNode(g, "ids", []int{b, tt}, data), opts)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b * tt}, tg))
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rng)
	if err := graph.GradCheck(g, loss, append(lm.Learnables(), caches...), graph.GradCheckOpts{MaxPerNode: 8, Seed: 2}); err != nil {
		t.Fatalf("%s: cached attention: %v", name, err)
	}
	checkDecode(t, name, o)
}
