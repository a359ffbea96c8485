package posenc_test

// The conformance checks of Options.Alpha, the learnable scale of the
// position bias or terms (posenc.AlphaInit), run on every registered
// encoding: an encoding creates its alpha parameters only with Alpha, an
// encoding with learnable parameters in the scores (a learnable ScoreBiaser
// or ScoreTermer) must create one, and alpha multiplies its whole
// contribution to the scores.

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// alphaHookOut is what the score and value hooks of an encoding gave on one
// site: the bias, terms and value terms (nil when the encoding has no such
// hook), and the parameters they created.
type alphaHookOut struct {
	bias, terms, values []float64
	params              *graph.Params
}

// alphaSite returns a site of kind k (B = 2, H = 2, dh = 4, d = 8) in a
// fresh graph and float64 store, for the encoding enc: a causal memory span
// for line positions (queries 9..11, keys 6..11), a 3×4 grid, per-example
// pairwise relations of 5 nodes, per-example next-event times of 5 tokens.
// Project is an affine map with fixed weights per "q" and "k" (DeBERTa
// projects its table with it). rng draws the positions.
func alphaSite(t *testing.T, rng *rand.Rand, enc posenc.Encoding, k posenc.PosKind) *posenc.Site {
	t.Helper()
	const b, h, dh = 2, 2, 4
	s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 5), Prefix: "block0/attn",
		B: b, H: h, DHead: dh, DModel: h * dh}
	var err error
	switch k {
	case posenc.PosLine:
		s.Span, s.Causal = posenc.Span{QStart: 9, TQ: 3, KStart: 6, TK: 6}, true
	case posenc.PosGrid:
		s.Pos, err = posenc.NewGrid(3, 4)
	case posenc.PosPairwise:
		s.Pos = randomPairwise(t, rng, b, 5, pairwiseRelations(enc))
	case posenc.PosReal:
		s.Pos, s.Causal = nextEventTimes(t, rng, b, 5, 0), true
	default:
		t.Fatalf("%s: no alpha site for %s positions", enc.Name(), k)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Pos != nil {
		s.Span = posenc.Span{TQ: s.Pos.TQ, TK: s.Pos.TK}
	}
	d := s.DModel
	s.Project = func(x *G.Node, which string) (*G.Node, error) {
		r := rand.New(rand.NewSource(int64(len(which)*7 + int(which[0]))))
		w, bb := make([]float64, d*d), make([]float64, d)
		for i := range w {
			w[i] = r.NormFloat64() * 0.5
		}
		for i := range bb {
			bb[i] = r.NormFloat64() * 0.5
		}
		wn := G.NewTensor(s.G, tensor.Float64, 2, G.WithShape(d, d), G.WithName("proj_w_"+which), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{d, d}, w)))
		bn := G.NewTensor(s.G, tensor.Float64, 1, G.WithShape(d), G.WithName("proj_b_"+which), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{d}, bb)))
		return graph.Linear(x, wn, bn)
	}
	return s
}

// randomConst returns a constant node of shape sh in s's graph with
// N(0, 1) entries from a source seeded with seed.
func randomConst(s *posenc.Site, name string, seed int64, sh ...int) *G.Node {
	r := rand.New(rand.NewSource(seed))
	n := 1
	for _, v := range sh {
		n *= v
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return G.NewTensor(s.G, tensor.Float64, len(sh), G.WithShape(sh...), G.WithName(name), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(sh), d)))
}

// alphaHooks calls the score and value hooks of the encoding called name
// (built from o) on a site of kind k, sets the parameters that w holds to
// its values (every parameter created must be in w or contain "alpha"),
// runs the graph, and returns the hooks' outputs. alpha, if not nil, is
// called between two runs with the store and the hooks' outputs of the
// first run, and the second run's outputs are returned (nil: one run).
func alphaHooks(t *testing.T, name string, o posenc.Options, k posenc.PosKind, w map[string][]float64,
	between func(p *graph.Params, first alphaHookOut)) alphaHookOut {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	s := alphaSite(t, rand.New(rand.NewSource(41)), enc, k)
	var bias, terms, values *G.Node
	if sb, ok := enc.(posenc.ScoreBiaser); ok {
		if bias, err = sb.ScoreBias(s); err != nil {
			t.Fatalf("%s %s: ScoreBias: %v", name, k, err)
		}
	}
	if st, ok := enc.(posenc.ScoreTermer); ok {
		q := randomConst(s, "q", 1, s.B, s.H, s.TQ, s.DHead)
		kk := randomConst(s, "k", 2, s.B, s.H, s.TK, s.DHead)
		if terms, err = st.ScoreTerms(s, q, kk); err != nil {
			t.Fatalf("%s %s: ScoreTerms: %v", name, k, err)
		}
	}
	if vt, ok := enc.(posenc.ValueTermer); ok {
		probs := randomConst(s, "probs", 3, s.B, s.H, s.TQ, s.TK)
		if values, err = vt.ValueTerms(s, probs); err != nil {
			t.Fatalf("%s %s: ValueTerms: %v", name, k, err)
		}
	}
	for _, n := range s.Params.Names() {
		v, ok := w[n]
		if !ok {
			if w != nil && !strings.Contains(n, "alpha") {
				t.Fatalf("%s %s: with Alpha, parameter %q is new and not an alpha", name, k, n)
			}
			continue
		}
		if err := s.Params.Set(n, v); err != nil {
			t.Fatal(err)
		}
	}
	run := func() alphaHookOut {
		if bias == nil && terms == nil && values == nil {
			return alphaHookOut{params: s.Params} // no score or value hook: nothing to run
		}
		m := G.NewTapeMachine(s.G)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatalf("%s %s: %v", name, k, err)
		}
		out := alphaHookOut{params: s.Params}
		for _, c := range []struct {
			n   *G.Node
			dst *[]float64
		}{{bias, &out.bias}, {terms, &out.terms}, {values, &out.values}} {
			if c.n != nil {
				*c.dst = graph.ToFloat64s(c.n.Value())
			}
		}
		return out
	}
	out := run()
	if between != nil {
		between(s.Params, out)
		out = run()
	}
	return out
}

// alphaNamesOf returns the parameters of p that are not in base, sorted.
func alphaNamesOf(p *graph.Params, base map[string][]float64) []string {
	var out []string
	for _, n := range p.Names() {
		if _, ok := base[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// takesAlphaRequired reports whether the encoding must take Options.Alpha:
// it has learnable parameters and contributes to the scores through a
// ScoreBiaser or a ScoreTermer.
func takesAlphaRequired(info posenc.Info, enc posenc.Encoding) bool {
	_, sb := enc.(posenc.ScoreBiaser)
	_, st := enc.(posenc.ScoreTermer)
	return info.Learnable && (sb || st)
}

// checkAlphaHooks runs the hook-level checks of Options.Alpha on the
// encoding for positions of kind k and returns the alpha parameters it
// created at the site:
//
//   - with Alpha off no parameter name contains "alpha";
//   - with Alpha on the parameters are those of Alpha off plus new [1]
//     parameters whose names contain "alpha", initialised to AlphaInit and
//     not weight-decayed;
//   - with the other parameters equal, the bias and the terms with alpha
//     at AlphaInit are AlphaInit times those without (to 1e-12), and with
//     alpha at 1 exactly those without; value terms do not change.
func checkAlphaHooks(t *testing.T, name string, k posenc.PosKind) []string {
	t.Helper()
	o := harnessOptions()
	oa := o
	oa.Alpha = true
	off := alphaHooks(t, name, o, k, nil, nil)
	rng := rand.New(rand.NewSource(int64(7 + len(name))))
	randomizeParams(off.params, rng)
	w := map[string][]float64{}
	for _, n := range off.params.Names() {
		if strings.Contains(n, "alpha") {
			t.Errorf("%s %s: without Alpha, parameter %q exists", name, k, n)
		}
		w[n] = off.params.Float64s(n)
	}
	off = alphaHooks(t, name, o, k, w, nil) // the outputs at the random values
	var scaled alphaHookOut
	on := alphaHooks(t, name, oa, k, w, func(p *graph.Params, first alphaHookOut) {
		scaled = first
		for _, n := range alphaNamesOf(p, w) {
			info, _ := p.Info(n)
			if !info.Shape.Eq(tensor.Shape{1}) || info.Decay {
				t.Errorf("%s %s: alpha %q: shape %v, decay %v; want [1], not decayed", name, k, n, info.Shape, info.Decay)
			}
			if v := p.Float64s(n); v[0] != posenc.AlphaInit {
				t.Errorf("%s %s: alpha %q starts at %v, want AlphaInit = %v", name, k, n, v[0], posenc.AlphaInit)
			}
			if err := p.Set(n, []float64{1}); err != nil {
				t.Fatal(err)
			}
		}
	})
	alphas := alphaNamesOf(on.params, w)
	if len(alphas) == 0 {
		return nil
	}
	for _, c := range []struct {
		what             string
		off, scaled, one []float64
		scalesWithAlpha  bool
	}{
		{"bias", off.bias, scaled.bias, on.bias, true},
		{"terms", off.terms, scaled.terms, on.terms, true},
		{"value terms", off.values, scaled.values, on.values, false},
	} {
		if !slices.Equal(c.one, c.off) {
			t.Errorf("%s %s: %s with alpha = 1 differ from those without Alpha by %g", name, k, c.what, maxAbsDiff(c.one, c.off))
		}
		f := posenc.AlphaInit
		if !c.scalesWithAlpha {
			f = 1
		}
		nonzero := false
		for i, v := range c.off {
			nonzero = nonzero || v != 0
			if got, want := c.scaled[i], f*v; math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("%s %s: %s[%d] with alpha = AlphaInit is %v, want %v × %v = %v", name, k, c.what, i, got, f, v, want)
				break
			}
		}
		if c.off != nil && !nonzero {
			t.Errorf("%s %s: the %s are all zero: the check would not see a missing alpha", name, k, c.what)
		}
	}
	return alphas
}

// alphaKinds are the kinds of positions the alpha checks run on.
var alphaKinds = []posenc.PosKind{posenc.PosLine, posenc.PosGrid, posenc.PosPairwise, posenc.PosReal}

// TestEveryEncodingAlpha runs the checks of Options.Alpha on every
// registered trainable encoding, for every kind of positions it serves:
// the hook-level checks (checkAlphaHooks); every encoding with learnable
// parameters in the scores must create an alpha, no other encoding may;
// and for those that do, the gradient checks with Alpha on (the LM's on
// line positions, the ViT's on grids, a block's on pairwise relations, the
// causal LM's on real times) and, for line positions, the LM's logits with
// every alpha at 1 equal those without Alpha exactly.
func TestEveryEncodingAlpha(t *testing.T) {
	for _, info := range posenc.Registered() {
		if info.EvalOnly {
			continue
		}
		name := info.Name
		t.Run(name, func(t *testing.T) {
			o := harnessOptions()
			oa := o
			oa.Alpha = true
			enc, err := posenc.New(name, o)
			if err != nil {
				t.Fatal(err)
			}
			required := takesAlphaRequired(info, enc)
			for _, k := range alphaKinds {
				if !slices.Contains(info.Positions, k) {
					continue
				}
				alphas := checkAlphaHooks(t, name, k)
				switch {
				case required && len(alphas) == 0:
					t.Errorf("%s %s: a learnable %s encoding with score hooks creates no alpha parameter with Options.Alpha (scale its bias or terms with alphaScaled)", name, k, info.Kind)
				case !required && len(alphas) > 0:
					t.Errorf("%s %s: creates alpha parameters %v but has no learnable bias or terms", name, k, alphas)
				}
				if len(alphas) == 0 {
					continue
				}
				switch k {
				case posenc.PosLine:
					checkAlphaLM(t, name, o)
					checkTiles(t, name, oa) // alpha multiplies the table
					checkStream(t, name, oa)
				case posenc.PosGrid:
					checkGridGrad(t, name, oa, 3, 4)
				case posenc.PosPairwise:
					checkPairwise(t, name, oa)
				case posenc.PosReal:
					checkAlphaRealGrad(t, name, oa)
				}
			}
		})
	}
}

// checkAlphaLM runs the LM-level checks of Options.Alpha on a line
// encoding that takes it: the tiny LM with Alpha has the parameters of the
// LM without plus alphas, none of which exists without Alpha; its float64
// gradient check passes (causal; the hook checks and the encodings' own
// tests cover the bidirectional bias); with every alpha at 1 and the other
// parameters equal its logits are those of the LM without Alpha, bit for
// bit.
func checkAlphaLM(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	oa := o
	oa.Alpha = true
	const tt = 6
	w := weightsFor(t, name, o, true, tt, 13)
	wa := weightsFor(t, name, oa, true, tt, 13)
	var alphas []string
	for n := range wa {
		if _, ok := w[n]; !ok {
			alphas = append(alphas, n)
			if !strings.Contains(n, "alpha") {
				t.Errorf("%s: with Alpha the LM has parameter %q, not an alpha", name, n)
			}
		}
	}
	for n := range w {
		if strings.Contains(n, "alpha") {
			t.Errorf("%s: without Alpha the LM has parameter %q", name, n)
		}
		if _, ok := wa[n]; !ok {
			t.Errorf("%s: with Alpha the LM lacks parameter %q", name, n)
		}
	}
	if len(alphas) == 0 {
		t.Fatalf("%s: the LM with Alpha has no alpha parameter, the attention site has", name)
	}
	slices.Sort(alphas)
	checkLMGrad(t, name, oa, true, 0, alphas...)
	one := map[string][]float64{}
	for n, v := range w {
		one[n] = v
	}
	for _, n := range alphas {
		one[n] = []float64{1}
	}
	data := []int{5, 60, 7, 200, 31, 9}
	if got, want := runLogits(t, name, oa, true, one, data, 0), runLogits(t, name, o, true, w, data, 0); !slices.Equal(got, want) {
		t.Errorf("%s: logits with every alpha at 1 differ from those without Alpha by %g", name, maxAbsDiff(got, want))
	}
}

// checkAlphaRealGrad gradient-checks (float64) the causal tiny LM with the
// encoding on per-example next-event times, w.r.t. every learnable.
func checkAlphaRealGrad(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	const b, tt = 2, 5
	rng := rand.New(rand.NewSource(int64(53 + len(name))))
	data := []int{3, 141, 59, 26, 53, 58, 97, 93, 238, 46}
	checkRealGrad(t, name, o, rng, data, b, tt, nextEventTimes(t, rng, b, tt, 0))
}
