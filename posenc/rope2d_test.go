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

// rope2DGraph is one TransformQK of a 2-D rotary encoding on random q, k
// and a random linear functional loss = Σ q2·wq + Σ k2·wk.
type rope2DGraph struct {
	g        *G.ExprGraph
	p        *graph.Params
	q, k     *G.Node
	q2, k2   *G.Node
	loss     *G.Node
	wrt      G.Nodes // q, k and the encoding's parameters
	freqName string
}

// randomValues returns a source of N(0, 1) values for buildRope2D drawn
// from seed, so that graphs of two dtypes see the same values.
func randomValues(seed int64) func(name string, shape []int) []float64 {
	rng := rand.New(rand.NewSource(seed))
	return func(_ string, shape []int) []float64 {
		d := make([]float64, tensor.Shape(shape).TotalSize())
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		return d
	}
}

// buildRope2D builds the graph of enc on grid positions pos with b
// examples, h heads of dh dims; q, k and the loss weights wq, wk come from
// vals (called in that order with their names and shapes). freqs, if not
// nil, is set into rope-mixed's parameter.
func buildRope2D(t *testing.T, enc posenc.Encoding, pos *posenc.Positions, b, h, dh int, dt tensor.Dtype,
	vals func(name string, shape []int) []float64, freqs []float64) *rope2DGraph {
	t.Helper()
	r := &rope2DGraph{g: G.NewGraph(), p: graph.NewParams(dt, 1), freqName: "block0/attn/rope_mixed_freqs"}
	mk := func(name string, shape ...int) *G.Node {
		d := vals(name, shape)
		if len(d) != tensor.Shape(shape).TotalSize() {
			t.Fatalf("%s: %d values for shape %v", name, len(d), shape)
		}
		return G.NewTensor(r.g, dt, len(shape), G.WithShape(shape...), G.WithName(name),
			G.WithValue(graph.FromFloat64s(dt, tensor.Shape(shape), d)))
	}
	r.q, r.k = mk("q", b, h, pos.TQ, dh), mk("k", b, h, pos.TK, dh)
	s := &posenc.Site{G: r.g, Params: r.p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: h * dh,
		Span: posenc.Span{TQ: pos.TQ, TK: pos.TK}, Pos: pos}
	var err error
	if r.q2, r.k2, err = enc.(posenc.QKTransformer).TransformQK(s, r.q, r.k); err != nil {
		t.Fatal(err)
	}
	if freqs != nil {
		if err := r.p.Set(r.freqName, freqs); err != nil {
			t.Fatal(err)
		}
	}
	lq := G.Must(G.Sum(G.Must(G.HadamardProd(r.q2, mk("wq", b, h, pos.TQ, dh)))))
	lk := G.Must(G.Sum(G.Must(G.HadamardProd(r.k2, mk("wk", b, h, pos.TK, dh)))))
	r.loss = G.Must(G.Add(lq, lk))
	r.wrt = append(G.Nodes{r.q, r.k}, r.p.Nodes(r.g)...)
	return r
}

// run returns the rotated q and k and the gradients of the loss w.r.t. wrt.
func (r *rope2DGraph) run(t *testing.T) (q2, k2 []float64, grads [][]float64) {
	t.Helper()
	if _, err := G.Grad(r.loss, r.wrt...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(r.g, G.BindDualValues(r.wrt...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, n := range r.wrt {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, graph.ToFloat64s(gv))
	}
	return graph.ToFloat64s(r.q2.Value()), graph.ToFloat64s(r.k2.Value()), grads
}

func newEnc(t *testing.T, name string, o posenc.Options) posenc.Encoding {
	t.Helper()
	e, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// randomCells returns n (row, col) pairs of a rows×cols grid drawn with
// replacement.
func randomCells(rng *rand.Rand, rows, cols, n int) []int {
	c := make([]int, 0, 2*n)
	for i := 0; i < n; i++ {
		c = append(c, rng.Intn(rows), rng.Intn(cols))
	}
	return c
}

// TestRope2DAngles checks the axial angles: pair p < dh/4 turns by
// col·base^(-4p/dh), pair dh/4+k by row·base^(-4k/dh) (rope-vit's column
// first).
func TestRope2DAngles(t *testing.T) {
	cases := []struct {
		row, col, dh int
		base         float64
		want         []float64
	}{
		{2, 3, 8, 100, []float64{3, 0.3, 2, 0.2}},
		{1, 5, 4, 10, []float64{5, 1}},
		{4, 1, 12, 1000, []float64{1, 0.1, 0.01, 4, 0.4, 0.04}},
		{0, 0, 8, 100, []float64{0, 0, 0, 0}},
	}
	for _, c := range cases {
		cos, sin := posenc.Rope2DAngles([]int{c.row, c.col}, c.dh, c.base)
		for p, a := range c.want {
			if math.Abs(cos[p]-math.Cos(a)) > 1e-14 || math.Abs(sin[p]-math.Sin(a)) > 1e-14 {
				t.Errorf("(%d, %d) dh %d base %g: pair %d turns by atan2 = %v, want %v", c.row, c.col, c.dh, c.base, p, math.Atan2(sin[p], cos[p]), a)
			}
		}
	}
}

// TestRope2DRelative: both encodings make q·k a function of the coordinate
// difference only: shifting every query and key by the same (Δrow, Δcol)
// leaves every score unchanged, shifting only the keys changes them.
func TestRope2DRelative(t *testing.T) {
	const b, h, dh, n = 1, 2, 8, 5
	for _, name := range []string{posenc.Rope2DName, posenc.RopeMixedName} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(3))
			qc, kc := randomCells(rng, 3, 4, n), randomCells(rng, 3, 4, n+1)
			shift := func(c []int, dr, dc int) []int {
				out := append([]int(nil), c...)
				for i := 0; i < len(out); i += 2 {
					out[i], out[i+1] = out[i]+dr, out[i+1]+dc
				}
				return out
			}
			var freqs []float64
			if name == posenc.RopeMixedName {
				for i := 0; i < 2*h*dh/2; i++ {
					freqs = append(freqs, rng.NormFloat64())
				}
			}
			scores := func(qc, kc []int) []float64 {
				pos, err := posenc.NewGridCoords([]int{7, 9}, qc, kc)
				if err != nil {
					t.Fatal(err)
				}
				r := buildRope2D(t, newEnc(t, name, posenc.Options{}), pos, b, h, dh, tensor.Float64, randomValues(5), freqs)
				q2, k2, _ := r.run(t)
				var s []float64
				for hh := 0; hh < h; hh++ {
					for i := 0; i < pos.TQ; i++ {
						for j := 0; j < pos.TK; j++ {
							var d float64
							for c := 0; c < dh; c++ {
								d += q2[(hh*pos.TQ+i)*dh+c] * k2[(hh*pos.TK+j)*dh+c]
							}
							s = append(s, d)
						}
					}
				}
				return s
			}
			base := scores(qc, kc)
			moved := scores(shift(qc, 2, 3), shift(kc, 2, 3))
			for i := range base {
				if math.Abs(base[i]-moved[i]) > 1e-12 {
					t.Fatalf("score %d: %v, %v after shifting every token by (2, 3)", i, base[i], moved[i])
				}
			}
			for _, d := range [][2]int{{1, 0}, {0, 1}} {
				other := scores(qc, shift(kc, d[0], d[1]))
				same := true
				for i := range base {
					same = same && math.Abs(base[i]-other[i]) < 1e-9
				}
				if same {
					t.Fatalf("shifting only the keys by %v left every score unchanged", d)
				}
			}
		})
	}
}

// TestRope2DGradCross gradient-checks (float64) TransformQK w.r.t. q, k
// and rope-mixed's frequencies with distinct query and key coordinates
// (cross-attention, TQ != TK, repeated cells), and checks that a float32
// graph gives the same outputs and gradients to float32 precision.
func TestRope2DGradCross(t *testing.T) {
	for _, name := range []string{posenc.Rope2DName, posenc.RopeMixedName} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(8))
			pos, err := posenc.NewGridCoords([]int{4, 5}, randomCells(rng, 4, 5, 3), randomCells(rng, 4, 5, 6))
			if err != nil {
				t.Fatal(err)
			}
			enc := newEnc(t, name, posenc.Options{})
			r := buildRope2D(t, enc, pos, 2, 2, 8, tensor.Float64, randomValues(9), nil)
			if name == posenc.RopeMixedName && len(r.wrt) != 3 {
				t.Fatalf("wrt %v: the frequencies are missing", r.wrt)
			}
			if err := graph.GradCheck(r.g, r.loss, r.wrt, graph.GradCheckOpts{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			q64, k64, g64 := buildRope2D(t, enc, pos, 2, 2, 8, tensor.Float64, randomValues(9), nil).run(t)
			q32, k32, g32 := buildRope2D(t, enc, pos, 2, 2, 8, tensor.Float32, randomValues(9), nil).run(t)
			closeTo(t, "float32 q", q32, q64, 1e-5)
			closeTo(t, "float32 k", k32, k64, 1e-5)
			for i := range g64 {
				closeTo(t, "float32 gradient "+r.wrt[i].Name(), g32[i], g64[i], 1e-5)
			}
		})
	}
}

// TestRopeMixedParam checks rope-mixed's parameter: its name, shape and
// no weight decay; the init of rope-vit's init_random_2d_freqs (per head,
// the first dh/4 pairs turn along a random direction α_h with magnitudes
// base^(-4k/dh), the other dh/4 along α_h + π/2); different angles per
// head and per layer; the same values for the same seed.
func TestRopeMixedParam(t *testing.T) {
	const h, dh, base = 3, 12, 10.0
	pos, err := posenc.NewGrid(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	build := func(seed int64) *graph.Params {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, seed)
		enc := newEnc(t, posenc.RopeMixedName, posenc.Options{RopeMixedBase: base})
		for l, prefix := range []string{"block0/attn", "block1/attn"} {
			x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, h, 6, dh), G.WithName(prefix+"/q"), G.WithInit(G.Zeroes()))
			s := &posenc.Site{G: g, Params: p, Layer: l, Prefix: prefix, B: 1, H: h, DHead: dh, DModel: h * dh, Span: posenc.Span{TQ: 6, TK: 6}, Pos: pos}
			if _, _, err := enc.(posenc.QKTransformer).TransformQK(s, x, x); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	p := build(4)
	var alphas []float64
	for _, name := range []string{"block0/attn/rope_mixed_freqs", "block1/attn/rope_mixed_freqs"} {
		info, ok := p.Info(name)
		if !ok {
			t.Fatalf("no parameter %q; have %v", name, p.Names())
		}
		if !info.Shape.Eq(tensor.Shape{2, h, dh / 2}) || info.Decay {
			t.Fatalf("%s: shape %v decay %v, want [2 %d %d] without decay", name, info.Shape, info.Decay, h, dh/2)
		}
		f := p.Float64s(name)
		fx, fy := f[:h*dh/2], f[h*dh/2:]
		mag := posenc.Rope2DFrequencies(base, dh)
		for hh := 0; hh < h; hh++ {
			a := math.Atan2(fy[hh*dh/2], fx[hh*dh/2])
			alphas = append(alphas, a)
			for k, m := range mag {
				i, j := hh*dh/2+k, hh*dh/2+dh/4+k
				want := []float64{m * math.Cos(a), m * math.Sin(a), -m * math.Sin(a), m * math.Cos(a)}
				got := []float64{fx[i], fy[i], fx[j], fy[j]}
				for c := range want {
					if math.Abs(got[c]-want[c]) > 1e-12 {
						t.Fatalf("%s head %d pair %d: (fx, fy, fx', fy') = %v, want %v", name, hh, k, got, want)
					}
				}
			}
		}
	}
	for i := range alphas {
		for j := 0; j < i; j++ {
			if math.Abs(alphas[i]-alphas[j]) < 1e-9 {
				t.Fatalf("heads %d and %d (over both layers) start with the same angle %v", i, j, alphas[i])
			}
		}
	}
	again := build(4)
	for _, n := range p.Names() {
		closeTo(t, "same seed "+n, again.Float64s(n), p.Float64s(n), 0)
	}
	other := build(5).Float64s("block0/attn/rope_mixed_freqs")
	if math.Abs(other[0]-p.Float64s("block0/attn/rope_mixed_freqs")[0]) < 1e-12 {
		t.Fatal("another seed gave the same initial frequencies")
	}
}

// TestRopeMixedZeroAngleIsAxial: rope-mixed with frequencies
// RopeMixedFreqs(base, dh, α = 0) rotates exactly as rope-2d of the same
// base (rope-vit: RoPE-Mixed without rotation is RoPE-Axial).
func TestRopeMixedZeroAngleIsAxial(t *testing.T) {
	const h, dh, base = 2, 8, 100.0
	rng := rand.New(rand.NewSource(2))
	pos, err := posenc.NewGridCoords([]int{3, 4}, randomCells(rng, 3, 4, 5), randomCells(rng, 3, 4, 7))
	if err != nil {
		t.Fatal(err)
	}
	o := posenc.Options{Rope2DBase: base, RopeMixedBase: base}
	qa, ka, ga := buildRope2D(t, newEnc(t, posenc.Rope2DName, o), pos, 2, h, dh, tensor.Float64, randomValues(3), nil).run(t)
	qm, km, gm := buildRope2D(t, newEnc(t, posenc.RopeMixedName, o), pos, 2, h, dh, tensor.Float64, randomValues(3),
		posenc.RopeMixedFreqs(base, dh, make([]float64, h))).run(t)
	closeTo(t, "q", qm, qa, 1e-12)
	closeTo(t, "k", km, ka, 1e-12)
	closeTo(t, "dq", gm[0], ga[0], 1e-12)
	closeTo(t, "dk", gm[1], ga[1], 1e-12)
}

// TestRope2DHalfPairing: with Pairing graph.RotaryHalf, rope-2d rotates
// the pairs (x_p, x_{p+dh/2}) by the angles interleaved pairs (x_{2p},
// x_{2p+1}) get: the outputs are the interleaved ones permuted.
func TestRope2DHalfPairing(t *testing.T) {
	const dh = 8
	pos, err := posenc.NewGrid(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := posenc.NewRope2D(posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	half, err := posenc.NewRope2D(posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	half.Pairing = graph.RotaryHalf
	// perm[c] is the interleaved dim that half-paired dim c holds.
	perm := make([]int, dh)
	for p := 0; p < dh/2; p++ {
		perm[p], perm[p+dh/2] = 2*p, 2*p+1
	}
	rotate := func(enc posenc.Encoding, x []float64) []float64 {
		g := G.NewGraph()
		n := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 6, dh), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 6, dh}, x)))
		s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 1, H: 1, DHead: dh, DModel: dh,
			Span: posenc.Span{TQ: 6, TK: 6}, Pos: pos}
		q2, _, err := enc.(posenc.QKTransformer).TransformQK(s, n, n)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(q2.Value())
	}
	rng := rand.New(rand.NewSource(1))
	xi := make([]float64, 6*dh)
	for i := range xi {
		xi[i] = rng.NormFloat64()
	}
	xh := make([]float64, len(xi))
	for tt := 0; tt < 6; tt++ {
		for c := 0; c < dh; c++ {
			xh[tt*dh+c] = xi[tt*dh+perm[c]]
		}
	}
	yi, yh := rotate(inter, xi), rotate(half, xh)
	for tt := 0; tt < 6; tt++ {
		for c := 0; c < dh; c++ {
			if d := yh[tt*dh+c] - yi[tt*dh+perm[c]]; math.Abs(d) > 1e-14 {
				t.Fatalf("token %d dim %d: half pairing gives %v, interleaved dim %d %v", tt, c, yh[tt*dh+c], perm[c], yi[tt*dh+perm[c]])
			}
		}
	}
}

// TestRope2DErrors: bad options and sites give errors naming the encoding
// and the problem.
func TestRope2DErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		o    posenc.Options
		want string
	}{
		{posenc.Rope2DName, posenc.Options{Rope2DBase: 1}, "base 1"},
		{posenc.Rope2DName, posenc.Options{Rope2DBase: math.Inf(1)}, "base +Inf"},
		{posenc.Rope2DName, posenc.Options{Rope2DBase: math.NaN()}, "base NaN"},
		{posenc.RopeMixedName, posenc.Options{RopeMixedBase: 0.5}, "base 0.5"},
		{posenc.RopeMixedName, posenc.Options{RopeMixedBase: -2}, "base -2"},
	} {
		if _, err := posenc.New(c.name, c.o); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want one naming the encoding and %q", c.name, c.o, err, c.want)
		}
	}
	grid, _ := posenc.NewGrid(2, 3)
	grid3, _ := posenc.NewGridCoords([]int{2, 3, 2}, []int{0, 0, 0, 1, 2, 1}, []int{0, 0, 0, 1, 2, 1})
	grid1, _ := posenc.NewGridCoords([]int{6}, []int{0, 1, 2, 3, 4, 5}, []int{0, 1, 2, 3, 4, 5})
	real, _ := posenc.NewReal(1, make([]float64, 6), make([]float64, 6))
	cases := []struct {
		label      string
		pos        *posenc.Positions
		dh, tq, tk int
		qShape     []int
		want       string
	}{
		{"dh not divisible by 4", grid, 6, 6, 6, nil, "head dim 6 must be divisible by 4"},
		{"line positions", nil, 8, 6, 6, nil, "needs grid positions, the site has line positions"},
		{"real positions", real, 8, 6, 6, nil, "needs grid positions, the site has real positions"},
		{"3-D grid", grid3, 8, 2, 2, nil, "needs 2-D grid positions, got 3-D"},
		{"1-D grid", grid1, 8, 6, 6, nil, "needs 2-D grid positions, got 1-D"},
		{"too few queries", grid, 8, 5, 6, nil, "6 query and 6 key positions, the attention has 5 queries"},
		{"q shape", grid, 8, 6, 6, []int{2, 2, 5, 8}, "q has shape (2, 2, 5, 8)"},
	}
	for _, name := range []string{posenc.Rope2DName, posenc.RopeMixedName} {
		enc := newEnc(t, name, posenc.Options{})
		for _, c := range cases {
			g := G.NewGraph()
			qs := c.qShape
			if qs == nil {
				qs = []int{2, 2, c.tq, c.dh}
			}
			q := G.NewTensor(g, tensor.Float64, 4, G.WithShape(qs...), G.WithName("q"), G.WithInit(G.Zeroes()))
			k := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 2, c.tk, c.dh), G.WithName("k"), G.WithInit(G.Zeroes()))
			s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 2, H: 2, DHead: c.dh, DModel: 2 * c.dh,
				Span: posenc.Span{TQ: c.tq, TK: c.tk}, Pos: c.pos}
			_, _, err := enc.(posenc.QKTransformer).TransformQK(s, q, k)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: error %v, want one naming the encoding and containing %q", name, c.label, err, c.want)
			}
		}
	}
}
