package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

func TestXLSinusoidsHand(t *testing.T) {
	// d = 4: f = 1/10000^(0/4) = 1 and 1/10000^(2/4) = 0.01; row layout
	// [sin(x·1), sin(x·0.01), cos(x·1), cos(x·0.01)], distances -1, 0, 1, 2.
	got := posenc.XLSinusoids(-1, 4, 4)
	want := []float64{
		-0.8414709848078965, -0.009999833334166664, 0.5403023058681398, 0.9999500004166653,
		0, 0, 1, 1,
		0.8414709848078965, 0.009999833334166664, 0.5403023058681398, 0.9999500004166653,
		0.9092974268256817, 0.01999866669333308, -0.4161468365471424, 0.9998000066665778,
	}
	xlCheckClose(t, "XLSinusoids(-1, 4, 4)", got, want, 1e-15)
	// d = 6: f = 1, 10000^(-1/3) = 0.046415888336127795, 10000^(-2/3) = 0.0021544346900318843;
	// distance 3: sin(3), sin(0.13924766500838338), sin(0.006463304070095653), then the
	// cosines (values from Python's math module).
	got = posenc.XLSinusoids(3, 1, 6)
	want = []float64{0.1411200080598672, 0.13879810108005053, 0.006463259070189645,
		-0.9899924966004454, 0.990320699135675, 0.9999791129229608}
	xlCheckClose(t, "XLSinusoids(3, 1, 6)", got, want, 1e-15)
}

func TestXLSinusoidsPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "xl") {
			t.Fatalf("odd d: recovered %v, want a panic naming xl", r)
		}
	}()
	posenc.XLSinusoids(0, 2, 5)
}

func TestXLDistances(t *testing.T) {
	cases := []struct {
		span     posenc.Span
		idx      []int
		min, num int
	}{
		// self-attention: dist = i - j in -2..2, index dist + 2
		{posenc.Span{TQ: 3, TK: 3}, []int{2, 1, 0, 3, 2, 1, 4, 3, 2}, -2, 5},
		// queries at 9, 10 after keys 6..9: dist = 3+i-j in 0..4
		{posenc.Span{QStart: 9, TQ: 2, KStart: 6, TK: 4}, []int{3, 2, 1, 0, 4, 3, 2, 1}, 0, 5},
		// queries at 0..2 before keys 5, 6: dist = i-5-j in -6..-3
		{posenc.Span{QStart: 0, TQ: 3, KStart: 5, TK: 2}, []int{1, 0, 2, 1, 3, 2}, -6, 4},
	}
	for _, c := range cases {
		idx, mn, n := posenc.XLDistances(c.span)
		if mn != c.min || n != c.num {
			t.Fatalf("%+v: minDist %d, n %d; want %d, %d", c.span, mn, n, c.min, c.num)
		}
		for k := range idx {
			if idx[k] != c.idx[k] {
				t.Fatalf("%+v: idx %v, want %v", c.span, idx, c.idx)
			}
		}
	}
}

// xlCheckClose fails unless got and want agree to atol (plus 1e-12 relative).
func xlCheckClose(t *testing.T, what string, got, want []float64, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= atol+1e-12*math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %.17g, want %.17g (diff %.3g)", what, i, got[i], want[i], d)
		}
	}
}

// xlRandInput is a float64 input node of g with N(0, 1) values.
func xlRandInput(g *G.ExprGraph, rng *rand.Rand, name string, shape ...int) (*G.Node, []float64) {
	n := tensor.Shape(shape).TotalSize()
	d := make([]float64, n)
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	v := graph.FromFloat64s(tensor.Float64, tensor.Shape(shape), d)
	return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v)), d
}

// xlRandomizeParams sets every parameter of p to N(0, 0.5²).
func xlRandomizeParams(t *testing.T, p *graph.Params, rng *rand.Rand) {
	p.Randomize(rng, 0.5)
}

func xlRun(t *testing.T, g *G.ExprGraph) {
	t.Helper()
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
}

// TestXLScoreTermsDirect compares ScoreTerms with a per-element loop over
// the paper's terms (b)+(c)+(d) (without q·k), for self-attention, memory
// spans and Tq != Tk in both directions.
func TestXLScoreTermsDirect(t *testing.T) {
	const b, h, dh = 2, 2, 3
	const d = h * dh
	spans := []posenc.Span{
		{TQ: 4, TK: 4},
		{QStart: 9, TQ: 3, KStart: 2, TK: 5},
		{QStart: 0, TQ: 5, KStart: 3, TK: 2},
		{QStart: 4, TQ: 2, KStart: 4, TK: 6},
	}
	for si, span := range spans {
		rng := rand.New(rand.NewSource(int64(si + 1)))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		enc, err := posenc.New("xl", posenc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, qd := xlRandInput(g, rng, "q", b, h, span.TQ, dh)
		k, kd := xlRandInput(g, rng, "k", b, h, span.TK, dh)
		site := &posenc.Site{G: g, Params: p, Layer: 1, Prefix: "block1/attn", B: b, H: h, DHead: dh, DModel: d, Span: span, Causal: false}
		out, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Shape().Eq(tensor.Shape{b, h, span.TQ, span.TK}) {
			t.Fatalf("%+v: terms %v", span, out.Shape())
		}
		for _, n := range []string{"xl_u", "xl_v", "block1/attn/xl_wr"} {
			if p.Value(n) == nil {
				t.Fatalf("parameter %s not created; have %v", n, p.Names())
			}
		}
		xlRandomizeParams(t, p, rng)
		xlRun(t, g)
		got := graph.ToFloat64s(out.Value())

		u, v, wr := p.Float64s("xl_u"), p.Float64s("xl_v"), p.Float64s("block1/attn/xl_wr")
		want := make([]float64, 0, len(got))
		for bb := 0; bb < b; bb++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < span.TQ; i++ {
					for j := 0; j < span.TK; j++ {
						dist := float64(span.QStart + i - span.KStart - j)
						r := make([]float64, d) // R[dist], half-split
						for c := 0; c < d/2; c++ {
							f := math.Pow(10000, -float64(2*c)/float64(d))
							r[c], r[d/2+c] = math.Sin(dist*f), math.Cos(dist*f)
						}
						s := 0.0
						for c := 0; c < dh; c++ {
							col := hh*dh + c
							pc := 0.0 // P[dist][col] = sum_e R[e] W_r[e, col]
							for e := 0; e < d; e++ {
								pc += r[e] * wr[e*d+col]
							}
							qc := qd[((bb*h+hh)*span.TQ+i)*dh+c]
							kc := kd[((bb*h+hh)*span.TK+j)*dh+c]
							s += u[hh*dh+c]*kc + (qc+v[hh*dh+c])*pc
						}
						want = append(want, s)
					}
				}
			}
		}
		xlCheckClose(t, "xl terms", got, want, 1e-12)
	}
}

// TestXLRelative: the terms depend on the positions only through
// qpos - kpos.
func TestXLRelative(t *testing.T) {
	terms := func(span posenc.Span) []float64 {
		rng := rand.New(rand.NewSource(5))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		enc, _ := posenc.New("xl", posenc.Options{})
		q, _ := xlRandInput(g, rng, "q", 1, 2, span.TQ, 2)
		k, _ := xlRandInput(g, rng, "k", 1, 2, span.TK, 2)
		site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 2, DModel: 4, Span: span}
		out, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k)
		if err != nil {
			t.Fatal(err)
		}
		xlRandomizeParams(t, p, rng)
		xlRun(t, g)
		return graph.ToFloat64s(out.Value())
	}
	a := terms(posenc.Span{QStart: 2, TQ: 3, KStart: 0, TK: 4})
	b := terms(posenc.Span{QStart: 102, TQ: 3, KStart: 100, TK: 4})
	xlCheckClose(t, "shifted span", b, a, 1e-12)
	c := terms(posenc.Span{QStart: 3, TQ: 3, KStart: 0, TK: 4})
	same := true
	for i := range a {
		same = same && math.Abs(a[i]-c[i]) < 1e-9
	}
	if same {
		t.Fatal("moving the queries relative to the keys did not change the terms")
	}
}

// TestXLCachesTable: the R table of a span is computed once per (span, d,
// dtype) and shared by the graphs that use it.
func TestXLCachesTable(t *testing.T) {
	enc, _ := posenc.New("xl", posenc.Options{})
	table := func(span posenc.Span) *tensor.Dense {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		q := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, span.TQ, 2), G.WithName("q"))
		k := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, span.TK, 2), G.WithName("k"))
		site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 2, DModel: 4, Span: span}
		if _, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k); err != nil {
			t.Fatal(err)
		}
		ns := g.ByName("xl_R")
		if len(ns) != 1 {
			t.Fatalf("%d nodes named xl_R", len(ns))
		}
		return ns[0].Value().(*tensor.Dense)
	}
	s := posenc.Span{QStart: 1, TQ: 3, TK: 4}
	a, b := table(s), table(s)
	if a != b {
		t.Fatal("same span: R table rebuilt")
	}
	if c := table(posenc.Span{TQ: 3, TK: 4}); c == a {
		t.Fatal("different span: same R table")
	}
	xlCheckClose(t, "cached R", graph.ToFloat64s(a), posenc.XLSinusoids(-2, 6, 4), 0)
}

func TestXLErrors(t *testing.T) {
	enc, _ := posenc.New("xl", posenc.Options{})
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	q := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 3, 2, 3), G.WithName("q"))
	k := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 3, 2, 3), G.WithName("k"))
	span := posenc.Span{TQ: 2, TK: 2}
	odd := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 3, DHead: 3, DModel: 9, Span: span}
	if _, err := enc.(posenc.ScoreTermer).ScoreTerms(odd, q, k); err == nil || !strings.Contains(err.Error(), "xl") || !strings.Contains(err.Error(), "even") {
		t.Fatalf("odd d_model: %v", err)
	}
	wrong := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 3, DHead: 3, DModel: 9, Span: posenc.Span{TQ: 2, TK: 3}}
	if _, err := enc.(posenc.ScoreTermer).ScoreTerms(wrong, q, k); err == nil || !strings.Contains(err.Error(), "posenc xl: k has shape") {
		t.Fatalf("k shape: %v", err)
	}
}

func TestXLGrad(t *testing.T) {
	o := posenc.Options{}
	want := []string{"xl_u", "xl_v", "block0/attn/xl_wr", "block1/attn/xl_wr"}
	// TestEveryEncoding runs the causal and the bidirectional check; this
	// one also requires the parameters to exist and not to be decayed.
	checkLMGrad(t, "xl", o, true, 2, want...)
}

// TestXLUntieR gradient-checks the LM with per-layer u and v (untie_r),
// causal and bidirectional, and checks the parameter names: per layer when
// untied, the shared xl_u and xl_v (and no per-layer ones) by default.
func TestXLUntieR(t *testing.T) {
	o := posenc.Options{XLUntieR: true}
	want := []string{"block0/attn/xl_u", "block0/attn/xl_v", "block1/attn/xl_u", "block1/attn/xl_v", "block0/attn/xl_wr", "block1/attn/xl_wr"}
	checkLMGrad(t, "xl", o, true, 2, want...)
	checkLMGrad(t, "xl", o, false, 0, want...)
	for _, c := range []struct {
		untie     bool
		has, lack string
	}{{true, "block1/attn/xl_u", "xl_u"}, {false, "xl_u", "block0/attn/xl_u"}} {
		w := weightsFor(t, "xl", posenc.Options{XLUntieR: c.untie}, true, 4, 1)
		if _, ok := w[c.has]; !ok {
			t.Errorf("untie_r %v: no parameter %s", c.untie, c.has)
		}
		if _, ok := w[c.lack]; ok {
			t.Errorf("untie_r %v: unexpected parameter %s", c.untie, c.lack)
		}
	}
}
