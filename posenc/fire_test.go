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

// mlpBiasRun builds the score bias of encoding name on span (float64,
// causal as given), sets every parameter to N(0, 0.5²) from seed (fire_c
// and fire_l_mult as given when present), runs the graph twice and returns
// the bias [H, TQ, TK] of both runs, the graph, the bias node and the
// parameters.
func mlpBiasRun(t *testing.T, name string, o posenc.Options, h int, span posenc.Span, causal bool, seed int64, set map[string]float64) (run1, run2 []float64, g *G.ExprGraph, bias *G.Node, p *graph.Params) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	g = G.NewGraph()
	p = graph.NewParams(tensor.Float64, 1)
	s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: h, DHead: 2, DModel: 2 * h, Span: span, Causal: causal}
	bias, err = enc.(posenc.ScoreBiaser).ScoreBias(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
	if err != nil || again != bias {
		t.Fatalf("second ScoreBias of the same site: %v, %v; want the cached node", again, err)
	}
	rng := rand.New(rand.NewSource(seed))
	for _, n := range p.Names() {
		d := p.Float64s(n)
		for i := range d {
			d[i] = rng.NormFloat64() * 0.5
			if v, ok := set[n]; ok {
				d[i] = v
			}
		}
		if err := p.Set(n, d); err != nil {
			t.Fatal(err)
		}
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	run1 = graph.ToFloat64s(bias.Value())
	m.Reset()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	run2 = graph.ToFloat64s(bias.Value())
	return run1, run2, g, bias, p
}

// hostMLP evaluates the MLP "<name>_w<l>", "<name>_b<l>" of p on scalar x
// with activation act between layers (no norm).
func hostMLP(p *graph.Params, name string, layers int, x float64, act func(float64) float64) []float64 {
	v := []float64{x}
	for l := 0; l < layers; l++ {
		w := p.Float64s(name + "_w" + string(rune('0'+l)))
		b := p.Float64s(name + "_b" + string(rune('0'+l)))
		out := make([]float64, len(b))
		for o := range out {
			out[o] = b[o]
			for i := range v {
				out[o] += v[i] * w[i*len(b)+o]
			}
			if l+1 < layers {
				out[o] = act(out[o])
			}
		}
		v = out
	}
	return v
}

// TestFIREBias checks fire's bias against the formula on the host for self,
// memory and cross spans, causal and bidirectional, with a threshold inside
// and outside the span: bias[h, i, j] = MLP(ψ(|p_i - k_j|) / (ψ(max(L, p_i)) + eps))[h].
func TestFIREBias(t *testing.T) {
	cases := []struct {
		span     posenc.Span
		causal   bool
		c, lmult float64
		initL    float64
	}{
		{posenc.Span{TQ: 6, TK: 6}, true, 0.3, 1, 2.5},
		{posenc.Span{TQ: 6, TK: 6}, false, -0.2, 0.7, 3},
		{posenc.Span{QStart: 8, TQ: 3, KStart: 2, TK: 9}, true, 0.1, 1, 0},          // default L = 512
		{posenc.Span{QStart: 1, TQ: 4, KStart: 3, TK: 5}, false, 0.5, -1.3, 2},      // |l_mult|
		{posenc.Span{QStart: 100, TQ: 2, KStart: 0, TK: 120}, true, 0.05, 0.2, 512}, // L = 102.4 between the queries
	}
	relu := func(x float64) float64 { return max(x, 0) }
	for n, c := range cases {
		const h = 3
		o := posenc.Options{FireWidth: 4, FireInitL: c.initL}
		got, again, _, _, p := mlpBiasRun(t, "fire", o, h, c.span, c.causal, int64(n), map[string]float64{"fire_c": c.c, "fire_l_mult": c.lmult})
		initL := c.initL
		if initL == 0 {
			initL = 512
		}
		L := math.Abs(c.lmult * initL)
		psi := func(x float64) float64 { return math.Log1p(math.Abs(c.c) * x) }
		for i := 0; i < c.span.TQ; i++ {
			pi := float64(c.span.QStart + i)
			for j := 0; j < c.span.TK; j++ {
				d := math.Abs(pi - float64(c.span.KStart+j))
				want := hostMLP(p, "fire", 2, psi(d)/(psi(max(L, pi))+posenc.FireEps), relu)
				for hh := 0; hh < h; hh++ {
					k := (hh*c.span.TQ+i)*c.span.TK + j
					if math.Abs(got[k]-want[hh]) > 1e-12 || got[k] != again[k] {
						t.Fatalf("case %d: bias[%d, %d, %d] = %g (second run %g), want %g", n, hh, i, j, got[k], again[k], want[hh])
					}
				}
			}
		}
	}
}

// TestDPBBias checks dpb's bias against the formula on the host (depth 1,
// no norm) and that it depends on the distance only, on cross and memory
// spans.
func TestDPBBias(t *testing.T) {
	silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	for n, c := range []struct {
		span   posenc.Span
		logd   bool
		causal bool
	}{
		{posenc.Span{TQ: 5, TK: 5}, false, true},
		{posenc.Span{TQ: 5, TK: 5}, true, false},
		{posenc.Span{QStart: 7, TQ: 3, KStart: 0, TK: 10}, true, true},
		{posenc.Span{QStart: 0, TQ: 4, KStart: 2, TK: 3}, false, false},
	} {
		const h = 2
		o := posenc.Options{DPBWidth: 3, DPBDepth: 1, DPBLogDistance: c.logd}
		got, again, _, _, p := mlpBiasRun(t, "dpb", o, h, c.span, c.causal, int64(10+n), nil)
		for i := 0; i < c.span.TQ; i++ {
			for j := 0; j < c.span.TK; j++ {
				r := c.span.QStart + i - c.span.KStart - j
				x := float64(r)
				if c.logd {
					x = math.Copysign(math.Log(math.Abs(x)+1), x)
				}
				if math.Abs(x-posenc.DPBInput(r, c.logd)) > 1e-15 {
					t.Fatalf("DPBInput(%d, %v) = %g, want %g", r, c.logd, posenc.DPBInput(r, c.logd), x)
				}
				want := hostMLP(p, "dpb", 2, x, silu)
				for hh := 0; hh < h; hh++ {
					k := (hh*c.span.TQ+i)*c.span.TK + j
					if math.Abs(got[k]-want[hh]) > 1e-12 || got[k] != again[k] {
						t.Fatalf("case %d: bias[%d, %d, %d] = %g (second run %g), want %g", n, hh, i, j, got[k], again[k], want[hh])
					}
				}
			}
		}
	}
}

// TestMLPBiasGrad gradient-checks sum(bias * R) w.r.t. every parameter of
// fire and dpb (float64, central differences) on a memory span and a cross
// span, dpb with log distance and norm.
func TestMLPBiasGrad(t *testing.T) {
	for _, c := range []struct {
		name string
		o    posenc.Options
		span posenc.Span
	}{
		{"fire", posenc.Options{FireWidth: 3, FireInitL: 4}, posenc.Span{QStart: 3, TQ: 3, KStart: 0, TK: 6}},
		{"fire", posenc.Options{FireWidth: 3, FireInitL: 1}, posenc.Span{QStart: 0, TQ: 4, KStart: 2, TK: 3}},
		{"dpb", posenc.Options{DPBWidth: 3, DPBDepth: 2, DPBLogDistance: true, DPBNorm: true}, posenc.Span{QStart: 3, TQ: 3, KStart: 0, TK: 6}},
		{"dpb", posenc.Options{DPBWidth: 2, DPBDepth: 1}, posenc.Span{QStart: 0, TQ: 4, KStart: 2, TK: 3}},
	} {
		const h = 2
		_, _, g, bias, p := mlpBiasRun(t, c.name, c.o, h, c.span, false, 3, map[string]float64{"fire_c": 0.4, "fire_l_mult": 1.3})
		rng := rand.New(rand.NewSource(4))
		rv := make([]float64, h*c.span.TQ*c.span.TK)
		for i := range rv {
			rv[i] = rng.NormFloat64()
		}
		r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(h, c.span.TQ, c.span.TK), G.WithName("R"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{h, c.span.TQ, c.span.TK}, rv)))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(bias, r))))
		if err := graph.GradCheck(g, loss, p.Nodes(g), graph.GradCheckOpts{Seed: 1}); err != nil {
			t.Fatalf("%s %+v: %v", c.name, c.span, err)
		}
	}
}

// TestMLPBiasErrors checks that bad settings are errors naming the
// encoding and the value, at construction and on a bad site.
func TestMLPBiasErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		o    posenc.Options
		want string
	}{
		{"fire", posenc.Options{FireWidth: -1}, "width -1"},
		{"fire", posenc.Options{FireInitC: -0.5}, "c -0.5"},
		{"fire", posenc.Options{FireInitC: math.NaN()}, "c NaN"},
		{"fire", posenc.Options{FireInitL: -3}, "threshold L -3"},
		{"fire", posenc.Options{FireInitL: math.Inf(1)}, "threshold L +Inf"},
		{"dpb", posenc.Options{DPBWidth: -2}, "width -2"},
		{"dpb", posenc.Options{DPBDepth: -1}, "depth -1"},
	} {
		_, err := posenc.New(c.name, c.o)
		if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s) with %s: %v, want an error naming %s and %q", c.name, c.want, err, c.name, c.want)
		}
	}
	for _, name := range []string{"fire", "dpb"} {
		enc, err := posenc.New(name, posenc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), H: 2, Span: posenc.Span{TQ: 0, TK: 3}}
		if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: empty span: %v, want an error naming the encoding", name, err)
		}
	}
}

// TestFIREStreamAttendErrors: fire is a StreamAttender; StreamAttend
// refuses real positions, options that already carry a bias, and invalid
// settings, with errors naming fire.
func TestFIREStreamAttendErrors(t *testing.T) {
	e, err := posenc.NewFIRE(4, 0.1, 8)
	if err != nil {
		t.Fatal(err)
	}
	var _ posenc.StreamAttender = e
	g := G.NewGraph()
	mk := func(name string, tt int) *G.Node {
		return G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, tt, 4), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(1, tt, 4), tensor.Of(tensor.Float64))))
	}
	q, k, v := mk("q", 3), mk("k", 3), mk("v", 3)
	site := func() *posenc.Site {
		return &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 1, H: 2, DHead: 2, DModel: 4,
			Span: posenc.Span{TQ: 3, TK: 3}, Causal: true}
	}
	o := graph.StreamOpts{Heads: 2, Causal: true}
	if _, err := e.StreamAttend(site(), q, k, v, o); err != nil {
		t.Fatalf("line site: %v", err)
	}
	real := site()
	if real.Pos, err = posenc.NewReal(1, []float64{0, 1, 2}, []float64{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	withTable := o
	withTable.Table = q
	bad := &posenc.FIRE{Width: 0, InitC: 0.1, InitL: 8}
	for _, c := range []struct {
		what string
		e    *posenc.FIRE
		s    *posenc.Site
		o    graph.StreamOpts
		want string
	}{
		{"real positions", e, real, o, "real positions"},
		{"a table already", e, site(), withTable, "already"},
		{"width 0", bad, site(), o, "width 0"},
	} {
		_, err := c.e.StreamAttend(c.s, q, k, v, c.o)
		if err == nil || !strings.Contains(err.Error(), "fire") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming fire and %q", c.what, err, c.want)
		}
	}
}
