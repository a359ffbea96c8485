package posenc_test

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

func newRope(t *testing.T, name string, o posenc.Options) *posenc.Rope {
	t.Helper()
	e, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return e.(*posenc.Rope)
}

// ropeRotate rotates the query rows qs [TQ][dh] and key rows ks [TK][dh] of
// one head with enc's TransformQK at span (TQ, TK taken from the rows) and
// returns the rotated rows. The site is causal (xpos refuses others).
func ropeRotate(t *testing.T, enc posenc.Encoding, qs, ks [][]float64, qStart, kStart int) (qr, kr [][]float64) {
	t.Helper()
	dh := len(qs[0])
	g := G.NewGraph()
	node := func(name string, rows [][]float64) *G.Node {
		var d []float64
		for _, r := range rows {
			d = append(d, r...)
		}
		sh := tensor.Shape{1, 1, len(rows), dh}
		return G.NewTensor(g, tensor.Float64, 4, G.WithShape(sh...), G.WithName(name), G.WithValue(graph.FromFloat64s(tensor.Float64, sh, d)))
	}
	q, k := node("q", qs), node("k", ks)
	site := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 1, DHead: dh, DModel: dh,
		Span: posenc.Span{QStart: qStart, TQ: len(qs), KStart: kStart, TK: len(ks)}, Causal: true}
	q2, k2, err := enc.(posenc.QKTransformer).TransformQK(site, q, k)
	if err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	split := func(v []float64) [][]float64 {
		var out [][]float64
		for i := 0; i < len(v); i += dh {
			out = append(out, v[i:i+dh])
		}
		return out
	}
	return split(graph.ToFloat64s(q2.Value())), split(graph.ToFloat64s(k2.Value()))
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func repeatRows(v []float64, n int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestRopeRelative: the same q at every query position and the same k at
// every key position give scores that depend only on kpos - qpos (also
// across spans with different offsets), vary with it, preserve norms and
// leave the non-rotary dims alone; in both pairings, full and partial.
func TestRopeRelative(t *testing.T) {
	const dh, tt = 8, 6
	for _, pairing := range []string{"half", "interleaved"} {
		for _, frac := range []float64{1, 0.75, 0.5, 0.25} {
			enc := newRope(t, "rope", posenc.Options{RopePairing: pairing, RopeFraction: frac, RopeBase: 100})
			rot, err := enc.RotaryDims(dh)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(int64(10 * frac)))
			q, k := randVec(rng, dh), randVec(rng, dh)
			// span A: queries at 0..5, keys at 0..5; span B: queries at
			// 13..18, keys at 10..15 (a memory offset).
			qa, ka := ropeRotate(t, enc, repeatRows(q, tt), repeatRows(k, tt), 0, 0)
			qb, kb := ropeRotate(t, enc, repeatRows(q, tt), repeatRows(k, tt), 13, 10)
			byRel := map[int]float64{}
			check := func(qr, kr [][]float64, qs, ks int) {
				for i := range qr {
					for j := range kr {
						s := dot(qr[i], kr[j])
						rel := ks + j - qs - i
						if w, ok := byRel[rel]; ok && math.Abs(s-w) > 1e-12 {
							t.Fatalf("%s frac %g: score at qpos %d, kpos %d is %v, another pair at distance %d gave %v", pairing, frac, qs+i, ks+j, s, rel, w)
						}
						byRel[rel] = s
					}
				}
			}
			check(qa, ka, 0, 0)
			check(qb, kb, 13, 10)
			if math.Abs(byRel[0]-byRel[1]) < 1e-6 || math.Abs(byRel[0]-dot(q, k)) > 1e-12 {
				t.Fatalf("%s frac %g: scores at distance 0 (%v, plain q.k %v) and 1 (%v): rotation missing", pairing, frac, byRel[0], dot(q, k), byRel[1])
			}
			for i := range qb {
				if d := math.Abs(dot(qb[i], qb[i]) - dot(q, q)); d > 1e-12 {
					t.Fatalf("%s frac %g: |q| changed by %v at position %d", pairing, frac, d, 13+i)
				}
				for c := rot; c < dh; c++ {
					if qb[i][c] != q[c] || kb[i][c] != k[c] {
						t.Fatalf("%s frac %g: non-rotary dim %d (rot %d) changed", pairing, frac, c, rot)
					}
				}
			}
		}
	}
}

// TestRopeLayout checks the pairs and the sign of the rotation by hand: a
// unit vector on the first coordinate of pair p at position 1 goes to
// (cos θ_p, sin θ_p) on the pair's coordinates.
func TestRopeLayout(t *testing.T) {
	const dh = 6
	for _, c := range []struct {
		pairing string
		a, b    int // pair 1 (θ_1 = 100^(-2/6))
	}{{"half", 1, 4}, {"interleaved", 2, 3}} {
		enc := newRope(t, "rope", posenc.Options{RopePairing: c.pairing, RopeBase: 100})
		e := make([]float64, dh)
		e[c.a] = 1
		qr, _ := ropeRotate(t, enc, [][]float64{e}, [][]float64{e}, 1, 0)
		th := math.Pow(100, -2.0/6)
		want := make([]float64, dh)
		want[c.a], want[c.b] = math.Cos(th), math.Sin(th)
		for i := range want {
			if math.Abs(qr[0][i]-want[i]) > 1e-15 {
				t.Fatalf("%s: rotated e_%d = %v, want %v", c.pairing, c.a, qr[0], want)
			}
		}
	}
}

// project computes x W + b for x [T, d] (rows), W [d, d] input-major.
func project(x [][]float64, w, b []float64) [][]float64 {
	d := len(b)
	out := make([][]float64, len(x))
	for t, row := range x {
		y := append([]float64(nil), b...)
		for i, xi := range row {
			for o := 0; o < d; o++ {
				y[o] += xi * w[i*d+o]
			}
		}
		out[t] = y
	}
	return out
}

// headScores returns the RoPE scores [H][TQ][TK] of projections xq [TQ, d],
// xk [TK, d] (rows) split into heads, rotated by enc.
func headScores(t *testing.T, enc posenc.Encoding, heads int, xq, xk [][]float64, qStart, kStart int) [][][]float64 {
	d := len(xq[0])
	dh := d / heads
	out := make([][][]float64, heads)
	for h := 0; h < heads; h++ {
		cut := func(rows [][]float64) [][]float64 {
			r := make([][]float64, len(rows))
			for i, x := range rows {
				r[i] = x[h*dh : (h+1)*dh]
			}
			return r
		}
		qr, kr := ropeRotate(t, enc, cut(xq), cut(xk), qStart, kStart)
		out[h] = make([][]float64, len(qr))
		for i := range qr {
			out[h][i] = make([]float64, len(kr))
			for j := range kr {
				out[h][i][j] = dot(qr[i], kr[j])
			}
		}
	}
	return out
}

// TestRopeConvertPairing: scores of a q/k projection in one pairing equal the
// scores of the converted projection in the other (exactly up to rounding),
// for full and partial rotary, both directions; unconverted weights differ.
func TestRopeConvertPairing(t *testing.T) {
	const heads, dh, tq, tk = 2, 8, 3, 5
	const d = heads * dh
	for ci, frac := range []float64{1, 0.5} {
		for _, dir := range [][2]string{{"half", "interleaved"}, {"interleaved", "half"}} {
			rng := rand.New(rand.NewSource(int64(ci + 1)))
			wq, wk, bq, bk := randVec(rng, d*d), randVec(rng, d*d), randVec(rng, d), randVec(rng, d)
			xq, xk := make([][]float64, tq), make([][]float64, tk)
			for i := range xq {
				xq[i] = randVec(rng, d)
			}
			for i := range xk {
				xk[i] = randVec(rng, d)
			}
			from := newRope(t, "rope", posenc.Options{RopePairing: dir[0], RopeFraction: frac, RopeBase: 50})
			to := newRope(t, "rope", posenc.Options{RopePairing: dir[1], RopeFraction: frac, RopeBase: 50})
			rot, _ := from.RotaryDims(dh)
			conv := func(w []float64) []float64 {
				c, err := posenc.ConvertPairing(w, heads, dh, rot, dir[0], dir[1])
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			convB := func(b []float64) []float64 {
				c, err := posenc.ConvertPairingBias(b, heads, dh, rot, dir[0], dir[1])
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			want := headScores(t, from, heads, project(xq, wq, bq), project(xk, wk, bk), 4, 2)
			got := headScores(t, to, heads, project(xq, conv(wq), convB(bq)), project(xk, conv(wk), convB(bk)), 4, 2)
			bad := headScores(t, to, heads, project(xq, wq, bq), project(xk, wk, bk), 4, 2)
			maxBad := 0.0
			for h := range want {
				for i := range want[h] {
					for j := range want[h][i] {
						if diff := math.Abs(got[h][i][j] - want[h][i][j]); diff > 1e-12 {
							t.Fatalf("frac %g %s->%s: head %d score (%d,%d) = %v, want %v", frac, dir[0], dir[1], h, i, j, got[h][i][j], want[h][i][j])
						}
						maxBad = math.Max(maxBad, math.Abs(bad[h][i][j]-want[h][i][j]))
					}
				}
			}
			if maxBad < 1e-3 {
				t.Fatalf("frac %g %s->%s: unconverted weights give the same scores (diff %v); test is vacuous", frac, dir[0], dir[1], maxBad)
			}
			// round trip
			back, err := posenc.ConvertPairing(conv(wq), heads, dh, rot, dir[1], dir[0])
			if err != nil {
				t.Fatal(err)
			}
			for i := range back {
				if back[i] != wq[i] {
					t.Fatalf("frac %g %s->%s->back: element %d changed", frac, dir[0], dir[1], i)
				}
			}
		}
	}
}

// TestRopeConvertPairingColumns checks the permutation itself on column
// labels: one row [2 heads × 6 dims], rot 4: half pairs (0,2),(1,3);
// interleaved pairs (0,1),(2,3).
func TestRopeConvertPairingColumns(t *testing.T) {
	row := []float64{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}
	got, err := posenc.ConvertPairingBias(row, 2, 6, 4, "half", "interleaved")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 2, 1, 3, 4, 5, 10, 12, 11, 13, 14, 15}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("half->interleaved columns %v, want %v", got, want)
		}
	}
	for _, c := range []struct {
		w             []float64
		heads, dh, rt int
		from, to      string
	}{
		{make([]float64, 7), 2, 6, 4, "half", "interleaved"},
		{row, 2, 6, 3, "half", "interleaved"},
		{row, 2, 6, 8, "half", "interleaved"},
		{row, 2, 6, 4, "half", "gptj"},
	} {
		if _, err := posenc.ConvertPairing(c.w, c.heads, c.dh, c.rt, c.from, c.to); err == nil || !strings.Contains(err.Error(), "ConvertPairing") {
			t.Errorf("ConvertPairing(len %d, %d, %d, rot %d, %s, %s): error %v", len(c.w), c.heads, c.dh, c.rt, c.from, c.to, err)
		}
	}
}

// TestRopeConvertPairingAttention: a whole attention layer with the q/k
// projections converted gives the same output in the other pairing.
func TestRopeConvertPairingAttention(t *testing.T) {
	const d, heads = 8, 2
	run := func(pairing string, convert bool) []float64 {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 5)
		enc, err := posenc.New("rope", posenc.Options{RopePairing: pairing, RopeBase: 20})
		if err != nil {
			t.Fatal(err)
		}
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "att", D: d, Heads: heads, InitStd: 0.7, Causal: true, Pos: enc})
		if err != nil {
			t.Fatal(err)
		}
		if convert {
			for _, n := range []string{"att/wq", "att/wk", "att/bq", "att/bk"} {
				c, err := posenc.ConvertPairing(p.Float64s(n), heads, d/heads, d/heads, "half", pairing)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Set(n, c); err != nil {
					t.Fatal(err)
				}
			}
		}
		rng := rand.New(rand.NewSource(3))
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 5, d), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, 5, d}, randVec(rng, 2*5*d))))
		y, err := a.Fwd(x, nil, posenc.Span{QStart: 3, TQ: 5, KStart: 3, TK: 5}, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(y.Value())
	}
	want := run("half", false)
	got := run("interleaved", true)
	bad := run("interleaved", false)
	maxBad := 0.0
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("output %d: %v with converted weights, %v in half pairing", i, got[i], want[i])
		}
		maxBad = math.Max(maxBad, math.Abs(bad[i]-want[i]))
	}
	if maxBad < 1e-4 {
		t.Fatalf("unconverted weights give the same output (diff %v)", maxBad)
	}
}

func checkFloats(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s: %v, want %v (element %d)", what, got, want, i)
		}
	}
}

// TestRopeScalingFrequencies checks each scaling against values computed by
// hand, rot = 4, base 10000 (θ = 1, 1/100), s = 4, L = 8.
func TestRopeScalingFrequencies(t *testing.T) {
	o := posenc.Options{RopeScale: 4, RopeTrainLen: 8}
	cases := []struct {
		name      string
		scale     float64
		seqLen    int
		theta     []float64
		div, attn float64
	}{
		{"rope", 4, 100, []float64{1, 1.0 / 100}, 1, 1},
		{"rope-pi", 4, 100, []float64{1, 1.0 / 100}, 4, 1},
		// base' = 10000·4^(4/2) = 160000, θ_1 = 1/400
		{"rope-ntk", 4, 100, []float64{1, 1.0 / 400}, 1, 1},
		// T <= L: plain
		{"rope-dynamic", 4, 8, []float64{1, 1.0 / 100}, 1, 1},
		{"rope-dynamic", 1, 5, []float64{1, 1.0 / 100}, 1, 1},
		// s = 1, T = 16: base' = 10000·(16/8)^2 = 40000, θ_1 = 1/200
		{"rope-dynamic", 1, 16, []float64{1, 1.0 / 200}, 1, 1},
		// s = 2, T = 16: base' = 10000·(2·2 - 1)^2 = 90000, θ_1 = 1/300
		{"rope-dynamic", 2, 16, []float64{1, 1.0 / 300}, 1, 1},
	}
	for _, c := range cases {
		oc := o
		oc.RopeScale = c.scale
		enc := newRope(t, c.name, oc)
		th, div, attn, err := enc.Frequencies(4, c.seqLen)
		if err != nil {
			t.Fatal(err)
		}
		checkFloats(t, c.name+" θ", th, c.theta, 1e-14)
		if div != c.div || attn != c.attn {
			t.Fatalf("%s (s %g, T %d): divisor %v and factor %v, want %v and %v", c.name, c.scale, c.seqLen, div, attn, c.div, c.attn)
		}
	}
}

// TestRopeYarnFrequencies: rot 16, base 10000, L 2048, betas 32 and 1:
// c(32) = 8 ln(2048/(64π))/ln 10000 = 2.016 -> lo = 2; c(1) = 8
// ln(2048/(2π))/ln 10000 = 5.026 -> hi = 6; ramp p = 0..7: 0 0 0 1/4 1/2
// 3/4 1 1. s = 4: θ'_p = θ_p (1 - r_p + r_p/4), factor 0.1 ln 4 + 1.
func TestRopeYarnFrequencies(t *testing.T) {
	enc := newRope(t, "rope-yarn", posenc.Options{RopeScale: 4, RopeTrainLen: 2048})
	checkFloats(t, "ramp", enc.YarnRamp(16), []float64{0, 0, 0, 0.25, 0.5, 0.75, 1, 1}, 1e-15)
	th, div, attn, err := enc.Frequencies(16, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 8)
	for p, mul := range []float64{1, 1, 1, 0.8125, 0.625, 0.4375, 0.25, 0.25} {
		want[p] = math.Pow(10000, -float64(2*p)/16) * mul
	}
	checkFloats(t, "YaRN θ", th, want, 1e-14)
	if div != 1 || math.Abs(attn-1.1386294361119890) > 1e-15 {
		t.Fatalf("YaRN divisor %v, attention factor %v, want 1 and 1.1386294361", div, attn)
	}
	// s <= 1: factor 1 and no interpolation
	for _, s := range []float64{1, 0.5} {
		e1 := newRope(t, "rope-yarn", posenc.Options{RopeScale: s, RopeTrainLen: 2048})
		th, _, attn, _ := e1.Frequencies(16, 10)
		if attn != 1 {
			t.Fatalf("YaRN s=%g: attention factor %v, want 1", s, attn)
		}
		if s == 1 {
			plain := make([]float64, 8)
			for p := range plain {
				plain[p] = math.Pow(10000, -float64(2*p)/16)
			}
			checkFloats(t, "YaRN s=1 θ", th, plain, 1e-14)
		}
	}
	// betas 3 and 2: c(3) = 8 ln(2048/(6π))/ln 1e4 = 4.07 -> lo = 4; c(2) =
	// 4.42 -> hi = 5: a one-step ramp.
	e2 := newRope(t, "rope-yarn", posenc.Options{RopeScale: 2, RopeTrainLen: 2048, YarnBetaFast: 3, YarnBetaSlow: 2})
	checkFloats(t, "short ramp", e2.YarnRamp(16), []float64{0, 0, 0, 0, 0, 1, 1, 1}, 1e-15)
}

// TestRopeScalingsInGraph: the scalings act on the rotations the attention
// sees: rope-pi at position 4p equals rope at p; rope-dynamic within the
// training length equals rope; rope-yarn multiplies the rotary norm by its
// factor; rope-ntk differs from rope.
func TestRopeScalingsInGraph(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	q := randVec(rng, 8)
	o := posenc.Options{RopeScale: 4, RopeTrainLen: 8, RopeBase: 100}
	plain := newRope(t, "rope", o)
	pi := newRope(t, "rope-pi", o)
	pPlain, _ := ropeRotate(t, plain, [][]float64{q}, [][]float64{q}, 3, 0)
	pPI, _ := ropeRotate(t, pi, [][]float64{q}, [][]float64{q}, 12, 0)
	checkFloats(t, "rope-pi at 12 vs rope at 3", pPI[0], pPlain[0], 1e-14)

	dyn := newRope(t, "rope-dynamic", o)
	rows := repeatRows(q, 8)
	a, _ := ropeRotate(t, plain, rows, rows, 0, 0)
	b, _ := ropeRotate(t, dyn, rows, rows, 0, 0)
	c, _ := ropeRotate(t, dyn, repeatRows(q, 9), repeatRows(q, 9), 0, 0)
	ntk := newRope(t, "rope-ntk", o)
	n, _ := ropeRotate(t, ntk, rows, rows, 0, 0)
	for i := range a {
		checkFloats(t, "rope-dynamic at T = L", b[i], a[i], 0)
	}
	if math.Abs(c[7][1]-a[7][1]) < 1e-9 || math.Abs(n[7][1]-a[7][1]) < 1e-9 {
		t.Fatalf("rope-dynamic at T > L (%v) or rope-ntk (%v) equals rope (%v)", c[7][1], n[7][1], a[7][1])
	}

	yarn := newRope(t, "rope-yarn", o)
	y, _ := ropeRotate(t, yarn, rows, rows, 0, 0)
	f := 0.1*math.Log(4) + 1
	for i := range y {
		if d := math.Abs(dot(y[i], y[i]) - f*f*dot(q, q)); d > 1e-12 {
			t.Fatalf("rope-yarn: |q|² %v at position %d, want %v", dot(y[i], y[i]), i, f*f*dot(q, q))
		}
	}
}

func TestRopeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		o    posenc.Options
		want string
	}{
		{"rope", posenc.Options{RopePairing: "gptj"}, "pairing"},
		{"rope-ntk", posenc.Options{RopeFraction: 1.5}, "fraction"},
		{"rope-pi", posenc.Options{RopeScale: -2}, "scale"},
		{"rope-yarn", posenc.Options{RopeBase: 0.5}, "base"},
		{"rope-yarn", posenc.Options{YarnAttentionFactor: -1}, "attention factor -1"},
		{"rope-yarn", posenc.Options{YarnMscale: 1}, "set together"},
		{"rope-yarn", posenc.Options{YarnMscaleAllDim: 1}, "set together"},
		{"rope-yarn", posenc.Options{RopeScale: 8, YarnMscale: 1, YarnMscaleAllDim: -5}, "not a finite number > 0"},
		{"rope-llama3", posenc.Options{Llama3LowFreqFactor: 4, Llama3HighFreqFactor: 2}, "low 4 and high 2"},
		{"rope-llama3", posenc.Options{Llama3LowFreqFactor: -1}, "low -1"},
		{"xpos", posenc.Options{XPosScaleBase: -3}, "scale base -3"},
		{"xpos", posenc.Options{RopePairing: "gptj"}, "pairing"},
	} {
		if _, err := posenc.New(c.name, c.o); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v", c.name, c.o, err)
		}
	}
	// too few rotary dims; base scaling with rot = 2
	q := [][]float64{{1, 2, 3, 4}}
	for _, c := range []struct {
		name string
		o    posenc.Options
		want string
	}{
		{"rope", posenc.Options{RopeFraction: 0.25}, "rotary dims"},
		{"rope-ntk", posenc.Options{RopeFraction: 0.5, RopeScale: 2}, "more than 2 rotary dims"},
	} {
		enc := newRope(t, c.name, c.o)
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 1, 4), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 1, 4}, q[0])))
		site := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 1, DHead: 4, DModel: 4, Span: posenc.Span{TQ: 1, TK: 1}}
		if _, _, err := enc.TransformQK(site, x, x); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		site.TQ = 2
		if _, _, err := enc.TransformQK(site, x, x); err == nil || !strings.Contains(err.Error(), "q has shape") {
			t.Errorf("%s: shape error %v", c.name, err)
		}
	}
}

// TestRopeFloat32 runs a float32 rotation against the float64 one (rope-yarn,
// rope-llama3 and xpos, with their scalings active).
func TestRopeFloat32(t *testing.T) {
	for _, name := range []string{"rope-yarn", "rope-llama3", "xpos"} {
		enc, err := posenc.New(name, posenc.Options{RopeScale: 2, RopeTrainLen: 4, XPosScaleBase: 4})
		if err != nil {
			t.Fatal(err)
		}
		checkFloat32(t, name, enc.(posenc.QKTransformer))
	}
}

func checkFloat32(t *testing.T, name string, enc posenc.QKTransformer) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	data := randVec(rng, 2*3*4)
	out := map[tensor.Dtype][]float64{}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		g := G.NewGraph()
		x := G.NewTensor(g, dt, 4, G.WithShape(1, 2, 3, 4), G.WithName("x"), G.WithValue(graph.FromFloat64s(dt, tensor.Shape{1, 2, 3, 4}, data)))
		site := &posenc.Site{G: g, Params: graph.NewParams(dt, 1), B: 1, H: 2, DHead: 4, DModel: 8, Span: posenc.Span{QStart: 5, TQ: 3, KStart: 5, TK: 3}, Causal: true}
		q2, _, err := enc.TransformQK(site, x, x)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if q2.Dtype() != dt {
			t.Fatalf("dtype %v, want %v", q2.Dtype(), dt)
		}
		out[dt] = graph.ToFloat64s(q2.Value())
	}
	checkFloats(t, name+" float32 vs float64", out[tensor.Float32], out[tensor.Float64], 1e-5)
}

// TestRopeScaledGradCheck gradient-checks an attention layer with each
// scaling active (the shared harness runs them at s = 1), over a memory span
// longer than the training length.
func TestRopeScaledGradCheck(t *testing.T) {
	o := posenc.Options{RopeScale: 3, RopeTrainLen: 4, RopePairing: "interleaved", RopeFraction: 0.5, RopeBase: 50}
	span := posenc.Span{QStart: 6, TQ: 3, KStart: 3, TK: 6}
	yo := o
	yo.YarnMscale, yo.YarnMscaleAllDim, yo.YarnNoTruncate = 2, 0.5, true
	for ci, name := range []string{"rope-pi", "rope-ntk", "rope-dynamic", "rope-yarn", "rope-llama3", "rope-yarn+options", "xpos"} {
		rng := rand.New(rand.NewSource(int64(30 + ci)))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		eo := o
		if name == "rope-yarn+options" {
			name, eo = "rope-yarn", yo
		}
		enc, err := posenc.New(name, eo)
		if err != nil {
			t.Fatal(err)
		}
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "att", D: 16, Heads: 2, InitStd: 0.5, Causal: true, Pos: enc})
		if err != nil {
			t.Fatal(err)
		}
		mk := func(nm string, tt int) *G.Node {
			return G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, tt, 16), G.WithName(nm),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{1, tt, 16}, randVec(rng, tt*16))))
		}
		xq, xkv := mk("xq", span.TQ), mk("xkv", span.TK)
		y, err := a.Fwd(xq, xkv, span, nil)
		if err != nil {
			t.Fatal(err)
		}
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, mk("R", span.TQ)))))
		wrt := append(G.Nodes{xq, xkv}, p.Nodes(g)...)
		if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{MaxPerNode: 6, Seed: 4}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestRopeRotaryDims: the fraction of the head dims, rounded down to even.
func TestRopeRotaryDims(t *testing.T) {
	for _, c := range []struct {
		dh   int
		frac float64
		want int
	}{{8, 1, 8}, {8, 0.75, 6}, {6, 0.5, 2}, {10, 0.5, 4}, {7, 1, 6}, {64, 0.25, 16}, {10, 0.3, 2}} {
		enc := newRope(t, "rope", posenc.Options{RopeFraction: c.frac})
		if got, err := enc.RotaryDims(c.dh); err != nil || got != c.want {
			t.Errorf("dh %d, fraction %g: rot %d (%v), want %d", c.dh, c.frac, got, err, c.want)
		}
	}
}

// TestRopeLlama3Frequencies: rot 8, base 10000 (θ = 1, 0.1, 0.01, 0.001,
// wavelengths 2π/θ = 6.28, 62.8, 628, 6283), L 64, s 4, factors 1 and 4
// (wavelength bounds 64/4 = 16 and 64/1 = 64): pair 0 is high frequency
// and keeps θ, pair 1 is medium (σ = (64/62.83 - 1)/3), pairs 2 and 3 are
// divided by 4 (HF _compute_llama3_parameters). With factor 1 nothing moves.
func TestRopeLlama3Frequencies(t *testing.T) {
	for _, c := range []struct {
		o    posenc.Options
		want []float64
	}{
		{posenc.Options{RopeScale: 4, RopeTrainLen: 64}, func() []float64 {
			sm := (64/(2*math.Pi/0.1) - 1) / 3
			return []float64{1, (1-sm)*0.1/4 + sm*0.1, 0.01 / 4, 0.001 / 4}
		}()},
		// low 0.1, high 8: bounds 640 and 8; pairs 1 and 2 are medium
		{posenc.Options{RopeScale: 2, RopeTrainLen: 64, Llama3LowFreqFactor: 0.1, Llama3HighFreqFactor: 8}, func() []float64 {
			sm := func(th float64) float64 { return (64/(2*math.Pi/th) - 0.1) / 7.9 }
			med := func(th float64) float64 { return (1-sm(th))*th/2 + sm(th)*th }
			return []float64{1, med(0.1), med(0.01), 0.001 / 2}
		}()},
		{posenc.Options{RopeScale: 1, RopeTrainLen: 64}, []float64{1, 0.1, 0.01, 0.001}},
	} {
		enc := newRope(t, "rope-llama3", c.o)
		th, div, attn, err := enc.Frequencies(8, 1000)
		if err != nil {
			t.Fatal(err)
		}
		checkFloats(t, fmt.Sprintf("llama3 θ %+v", c.o), th, c.want, 1e-15)
		if div != 1 || attn != 1 {
			t.Fatalf("llama3: divisor %v, factor %v, want 1 and 1", div, attn)
		}
	}
}

// TestRopeYarnOptions: the attention factor set, derived from the mscales,
// and the untruncated correction range; the defaults keep the old bits.
func TestRopeYarnOptions(t *testing.T) {
	base := posenc.Options{RopeScale: 4, RopeTrainLen: 2048}
	m := func(mu float64) float64 { return 0.1*mu*math.Log(4) + 1 }
	for _, c := range []struct {
		label string
		set   func(o *posenc.Options)
		attn  float64
	}{
		{"default", func(o *posenc.Options) {}, 0.1*math.Log(4) + 1},
		{"attention factor", func(o *posenc.Options) { o.YarnAttentionFactor = 1.7 }, 1.7},
		{"mscales", func(o *posenc.Options) { o.YarnMscale, o.YarnMscaleAllDim = 0.707, 0.5 }, m(0.707) / m(0.5)},
		{"equal mscales", func(o *posenc.Options) { o.YarnMscale, o.YarnMscaleAllDim = 0.707, 0.707 }, 1},
		{"factor wins", func(o *posenc.Options) { o.YarnAttentionFactor, o.YarnMscale, o.YarnMscaleAllDim = 0.9, 1, 2 }, 0.9},
	} {
		o := base
		c.set(&o)
		_, _, attn, err := newRope(t, "rope-yarn", o).Frequencies(16, 10)
		if err != nil || attn != c.attn {
			t.Errorf("%s: attention factor %v (%v), want %v", c.label, attn, err, c.attn)
		}
	}
	// mscales at s <= 1: each m is 1
	o := posenc.Options{RopeScale: 1, YarnMscale: 3, YarnMscaleAllDim: 1}
	if _, _, attn, _ := newRope(t, "rope-yarn", o).Frequencies(16, 10); attn != 1 {
		t.Errorf("mscales at s = 1: factor %v, want 1", attn)
	}
	// untruncated: c(32) = 2.0159, c(1) = 5.0257 (TestRopeYarnFrequencies)
	o = base
	o.YarnNoTruncate = true
	dim := func(beta float64) float64 { return 16 * math.Log(2048/(beta*2*math.Pi)) / (2 * math.Log(10000)) }
	lo, hi := dim(32), dim(1)
	want := make([]float64, 8)
	for p := range want {
		want[p] = math.Min(math.Max((float64(p)-lo)/(hi-lo), 0), 1)
	}
	enc := newRope(t, "rope-yarn", o)
	checkFloats(t, "untruncated ramp", enc.YarnRamp(16), want, 1e-15)
	th, _, _, err := enc.Frequencies(16, 10)
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		want[p] = math.Pow(10000, -float64(2*p)/16) * (1 - want[p] + want[p]/4)
	}
	checkFloats(t, "untruncated θ", th, want, 1e-15)
}
