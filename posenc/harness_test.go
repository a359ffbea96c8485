package posenc_test

// Shared checks that every encoding must pass. Each encoding's test file
// calls them with its name and options.

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// tinyLM is a 2-layer, 2-head, d=8 model with the encoding.
func tinyLM(name string, o posenc.Options, causal bool) layers.Config {
	return layers.Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 2, FFN: 12, Eps: 1e-5, InitStd: 0.5,
		Causal: causal, Pos: name, PosOpts: o}
}

// randomizeParams sets every parameter to N(0, 0.5²) (position tables
// included) so gradient checks see no special structure.
func randomizeParams(p *graph.Params, rng *rand.Rand) {
	for _, n := range p.Names() {
		d := p.Float64s(n)
		for i := range d {
			d[i] = rng.NormFloat64() * 0.5
		}
		if err := p.Set(n, d); err != nil {
			panic(err)
		}
	}
}

func intNode(g *G.ExprGraph, name string, shape []int, data []int) *G.Node {
	return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))))
}

// checkLMGrad gradient-checks (float64, central differences) a cross-entropy
// loss through the tiny LM with the encoding, w.r.t. every learnable, and
// requires that the parameters named in want exist (the encoding's tables).
func checkLMGrad(t *testing.T, name string, o posenc.Options, causal bool, start int, want ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(11))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	const b, tt = 2, 5
	data := make([]int, b*tt)
	tg := make([]int, b*tt)
	for i := range data {
		data[i], tg[i] = rng.Intn(256), rng.Intn(256)
	}
	logits, err := lm.FwdAt(intNode(g, "ids", []int{b, tt}, data), start)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b * tt}, tg))
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rng)
	names := map[string]bool{}
	for _, n := range lm.Learnables() {
		names[n.Name()] = true
	}
	for _, w := range want {
		if !names[w] {
			t.Fatalf("%s: parameter %q missing; have %v", name, w, p.Names())
		}
		if info, _ := p.Info(w); info.Decay {
			t.Fatalf("%s: position parameter %q is weight-decayed", name, w)
		}
	}
	if err := graph.GradCheck(g, loss, lm.Learnables(), graph.GradCheckOpts{MaxPerNode: 8, Seed: 2}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// runLogits returns the tiny LM's logits for ids [1, len(data)] at start.
func runLogits(t *testing.T, name string, o posenc.Options, causal bool, weights map[string][]float64, data []int, start int) []float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	logits, err := lm.FwdAt(intNode(g, "ids", []int{1, len(data)}, append([]int(nil), data...)), start)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range weights {
		if err := p.Set(n, w); err != nil {
			t.Fatal(err)
		}
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(logits.Value())
}

// weightsFor draws random weights for every parameter of the tiny LM with the
// encoding (tables created lazily during Fwd included).
func weightsFor(t *testing.T, name string, o posenc.Options, causal bool, tt int, seed int64) map[string][]float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, seed)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{1, tt}, make([]int, tt))); err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rand.New(rand.NewSource(seed)))
	w := map[string][]float64{}
	for _, n := range p.Names() {
		w[n] = p.Float64s(n)
	}
	return w
}

// checkCausal: in a causal LM with the encoding, changing token k changes no
// output at positions < k, and does change position k.
func checkCausal(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	const tt, k = 7, 4
	w := weightsFor(t, name, o, true, tt, 3)
	data := []int{10, 20, 30, 40, 50, 60, 70}
	base := runLogits(t, name, o, true, w, data, 0)
	data[k] = 99
	changed := runLogits(t, name, o, true, w, data, 0)
	for pos := 0; pos < tt; pos++ {
		same := true
		for v := 0; v < 256; v++ {
			same = same && base[pos*256+v] == changed[pos*256+v]
		}
		if pos < k && !same {
			t.Fatalf("%s: output at position %d changed when token %d changed", name, pos, k)
		}
		if pos == k && same {
			t.Fatalf("%s: output at position %d did not change with its own token", name, pos)
		}
	}
}

// checkAttentionShapes runs one attention layer with the encoding in causal
// self-attention, bidirectional self-attention, cross-attention with Tq != Tk
// and with a position offset, and gradient-checks each.
func checkAttentionShapes(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	cases := []struct {
		label  string
		causal bool
		span   posenc.Span
	}{
		{"causal self", true, posenc.Span{TQ: 5, TK: 5}},
		{"bidirectional self", false, posenc.Span{TQ: 5, TK: 5}},
		{"cross tq<tk", false, posenc.Span{TQ: 3, TK: 6}},
		{"cross tq>tk", false, posenc.Span{TQ: 6, TK: 3}},
		{"causal offset memory", true, posenc.Span{QStart: 9, TQ: 3, KStart: 6, TK: 6}},
	}
	for ci, c := range cases {
		rng := rand.New(rand.NewSource(int64(20 + ci)))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		enc, err := posenc.New(name, o)
		if err != nil {
			t.Fatal(err)
		}
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Causal: c.causal, Pos: enc})
		if err != nil {
			t.Fatal(err)
		}
		mk := func(nm string, tt int) *G.Node {
			d := make([]float64, 2*tt*8)
			for i := range d {
				d[i] = rng.NormFloat64()
			}
			return G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, tt, 8), G.WithName(nm), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, tt, 8}, d)))
		}
		xq, xkv := mk("xq", c.span.TQ), mk("xkv", c.span.TK)
		y, err := a.Fwd(xq, xkv, c.span, nil)
		if !c.causal && causalOnly(t, name, o) {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s %s: a causal-only encoding gave error %v, want one naming it", name, c.label, err)
			}
			continue
		}
		if err != nil {
			if strings.Contains(err.Error(), name) {
				// an encoding may refuse a shape it cannot serve, but only
				// with an error naming itself; learned absolute positions
				// have no attention hooks, so never get here.
				t.Logf("%s %s: refused: %v", name, c.label, err)
				continue
			}
			t.Fatalf("%s %s: %v", name, c.label, err)
		}
		if got := y.Shape(); !got.Eq(tensor.Shape{2, c.span.TQ, 8}) {
			t.Fatalf("%s %s: output %v", name, c.label, got)
		}
		randomizeParams(p, rng)
		r := mk("R", c.span.TQ)
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
		wrt := append(G.Nodes{xq, xkv}, p.Nodes(g)...)
		if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{MaxPerNode: 6, Seed: 4}); err != nil {
			t.Fatalf("%s %s: %v", name, c.label, err)
		}
	}
}

// causalOnly reports whether the encoding called name is a
// posenc.CausalOnly that says so.
func causalOnly(t *testing.T, name string, o posenc.Options) bool {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	co, ok := enc.(posenc.CausalOnly)
	return ok && co.CausalOnly()
}

// checkBidirectionalRefused: the bidirectional tiny LM with a causal-only
// encoding is an error naming the encoding, at construction or forward.
func checkBidirectionalRefused(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	g := G.NewGraph()
	lm, err := layers.NewLM(g, graph.NewParams(tensor.Float64, 1), tinyLM(name, o, false))
	if err == nil {
		_, err = lm.FwdAt(intNode(g, "ids", []int{2, 5}, make([]int, 10)), 3)
	}
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("%s: bidirectional LM gave error %v, want one naming the encoding", name, err)
	}
}

// harnessOptions are the small sizes the shared checks use: 1-D tables of
// 16 positions, 2-D tables of a 3×4 grid (non-square, so that a row/column
// mix-up shows).
func harnessOptions() posenc.Options {
	return posenc.Options{MaxLen: 16, ShawK: 2, T5Buckets: 8, T5MaxDistance: 16, DebertaBuckets: 4, DebertaMaxPosition: 16,
		GridRows: 3, GridCols: 4, Rel2DBuckets: 2, Rel2DMaxDistance: 6, GraphMaxDist: 2, GraphMaxDegree: 3, TreeMaxUp: 1, TreeMaxDown: 2}
}

// harnessCombinations are combined encodings (posenc.New's "a+b") that the
// harness checks besides the registered ones: a structural bias with a 1-D
// rotation (the code study's), and Graphormer's two graph encodings.
var harnessCombinations = []string{"tree+rope", "tree+t5", "graphormer-spatial+graphormer-centrality"}

// TestEveryEncoding runs the shared checks on every registered encoding:
// the LM checks for those that serve line positions, the grid checks for
// those that serve grid positions, the kind errors for all, and the tile
// check for every TableBiaser.
func TestEveryEncoding(t *testing.T) {
	infos := posenc.Registered()
	for _, c := range harnessCombinations {
		info, ok := posenc.InfoOf(c)
		if !ok {
			t.Fatalf("combination %s: no Info", c)
		}
		infos = append(infos, info)
	}
	for _, info := range infos {
		name := info.Name
		t.Run(name, func(t *testing.T) {
			o := harnessOptions()
			if partsServe(t, name, posenc.PosLine) {
				checkCausal(t, name, o)
				checkDecode(t, name, o)
				checkLMGrad(t, name, o, true, 0)
				if causalOnly(t, name, o) {
					checkBidirectionalRefused(t, name, o)
				} else {
					checkLMGrad(t, name, o, false, 3)
				}
				checkAttentionShapes(t, name, o)
			}
			if partsServe(t, name, posenc.PosGrid) {
				checkGridGrad(t, name, o, 3, 4)
				checkGridAttention(t, name, o, 3, 4)
			}
			if slices.Contains(info.Positions, posenc.PosPairwise) {
				checkPairwise(t, name, o)
			}
			if slices.Contains(info.Positions, posenc.PosReal) && partsServe(t, name, posenc.PosReal) {
				checkReal(t, name, o)
			}
			checkKindErrors(t, name, o, info.Positions)
			checkTiles(t, name, o)
			if partsServe(t, name, posenc.PosLine) {
				checkStream(t, name, o)
			}
		})
	}
}

// tinyViT is a 2-block, 2-head, d=8 classifier of 2×2 single-channel
// patches into 3 classes.
func tinyViT(name string, o posenc.Options) layers.ViTConfig {
	c := layers.DefaultViTConfig()
	c.Encoder.DModel, c.Encoder.Heads, c.Encoder.Layers, c.Encoder.FFN, c.Encoder.InitStd = 8, 2, 2, 12, 0.5
	c.Encoder.Pos, c.Encoder.PosOpts = name, o
	c.Patch, c.Classes = 2, 3
	return c
}

// checkGridGrad gradient-checks (float64, central differences) the
// cross-entropy of the tiny ViT on a rows×cols patch grid w.r.t. every
// learnable and the input patches.
func checkGridGrad(t *testing.T, name string, o posenc.Options, rows, cols int) {
	t.Helper()
	rng := rand.New(rand.NewSource(17))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewViT(g, p, tinyViT(name, o))
	if err != nil {
		t.Fatal(err)
	}
	const b = 2
	pd := m.Cfg.PatchDim()
	x := make([]float64, b*rows*cols*pd)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, rows*cols, pd), G.WithName("patches"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, rows * cols, pd}, x)))
	logits, err := m.Fwd(in, rows, cols)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b}, []int{0, 2}))
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rng)
	for _, n := range p.Names() {
		if info, _ := p.Info(n); info.Decay && !strings.Contains(n, "/w") && !strings.HasSuffix(n, "_emb") {
			t.Errorf("%s: parameter %q is weight-decayed", name, n)
		}
	}
	wrt := append(G.Nodes{in}, m.Learnables()...)
	if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{MaxPerNode: 8, Seed: 5}); err != nil {
		t.Fatalf("%s on a %dx%d grid: %v", name, rows, cols, err)
	}
}

// checkGridAttention runs one bidirectional attention layer with grid
// positions (rows×cols self-attention) and gradient-checks it w.r.t. its
// inputs and parameters; a shuffled token order with the same coordinates
// gives the same outputs, permuted (positions come from the coordinates,
// not from the token index).
func checkGridAttention(t *testing.T, name string, o posenc.Options, rows, cols int) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	n := rows * cols
	rng := rand.New(rand.NewSource(29))
	xs := make([]float64, 2*n*8)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	perm := rng.Perm(n)
	run := func(permute bool, check bool) []float64 {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 7)
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Pos: enc})
		if err != nil {
			t.Fatal(err)
		}
		coords := make([]int, 0, 2*n)
		x := make([]float64, len(xs))
		for b := 0; b < 2; b++ {
			for i := 0; i < n; i++ {
				src := i
				if permute {
					src = perm[i]
				}
				copy(x[(b*n+i)*8:(b*n+i+1)*8], xs[(b*n+src)*8:(b*n+src+1)*8])
			}
		}
		for i := 0; i < n; i++ {
			src := i
			if permute {
				src = perm[i]
			}
			coords = append(coords, src/cols, src%cols)
		}
		pos, err := posenc.NewGridCoords([]int{rows, cols}, coords, coords)
		if err != nil {
			t.Fatal(err)
		}
		xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, n, 8), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, n, 8}, x)))
		y, err := a.FwdPositions(xn, nil, posenc.Span{TQ: n, TK: n}, pos, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		randomizeParams(p, rand.New(rand.NewSource(31)))
		if check {
			r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, n, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
			if err := graph.GradCheck(g, loss, append(G.Nodes{xn}, p.Nodes(g)...), graph.GradCheckOpts{MaxPerNode: 6, Seed: 4}); err != nil {
				t.Fatalf("%s grid attention: %v", name, err)
			}
			return nil
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(y.Value())
	}
	run(false, true)
	base, shuf := run(false, false), run(true, false)
	for b := 0; b < 2; b++ {
		for i := 0; i < n; i++ {
			for c := 0; c < 8; c++ {
				want, got := base[(b*n+perm[i])*8+c], shuf[(b*n+i)*8+c]
				if d := want - got; d > 1e-9 || d < -1e-9 {
					t.Fatalf("%s: token %d (grid cell %d) gives %v in shuffled order, %v in raster order", name, i, perm[i], got, want)
				}
			}
		}
	}
}

// checkKindErrors: an encoding given positions of a kind it does not serve
// fails with an error naming the encoding and both kinds.
func checkKindErrors(t *testing.T, name string, o posenc.Options, kinds []posenc.PosKind) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	grid, _ := posenc.NewGrid(2, 2)
	real, _ := posenc.NewReal(1, []float64{0, 0.5, 1, 2}, []float64{0, 0.5, 1, 2})
	pair, _ := posenc.NewPairwise(1, 4, 4, 3, make([]int, 16))
	for _, pos := range []*posenc.Positions{nil, grid, real, pair} {
		k := posenc.PosLine
		if pos != nil {
			k = pos.Kind
		}
		err := posenc.CheckKind(enc, pos)
		if slices.Contains(kinds, k) {
			if err != nil {
				t.Errorf("%s: %s positions refused: %v", name, k, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), string(k)) {
			t.Errorf("%s: %s positions: error %v does not name the encoding and the kind", name, k, err)
		}
	}
}

// checkTiles: for a TableBiaser, the bias of random tiles equals the
// corresponding block of ScoreBias, on the positions the encoding serves
// (line: a causal offset span; grid: a 3×4 grid).
func checkTiles(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	tb, ok := enc.(posenc.TableBiaser)
	if !ok {
		return
	}
	kinds := posenc.Accepted(enc)
	var sites []*posenc.Site
	if slices.Contains(kinds, posenc.PosLine) {
		sites = append(sites, &posenc.Site{Span: posenc.Span{QStart: 4, TQ: 5, KStart: 1, TK: 8}, Causal: true},
			&posenc.Site{Span: posenc.Span{TQ: 6, TK: 6}})
	}
	if slices.Contains(kinds, posenc.PosGrid) {
		grid, _ := posenc.NewGrid(3, 4)
		sites = append(sites, &posenc.Site{Span: posenc.Span{TQ: 12, TK: 12}, Pos: grid})
	}
	rng := rand.New(rand.NewSource(41))
	if slices.Contains(kinds, posenc.PosPairwise) {
		nrel := pairwiseRelations(enc)
		sites = append(sites, &posenc.Site{Span: posenc.Span{TQ: 6, TK: 6}, Pos: randomPairwise(t, rng, 2, 6, nrel)},
			&posenc.Site{Span: posenc.Span{TQ: 6, TK: 6}, Pos: randomPairwise(t, rng, 1, 6, nrel)})
	}
	for _, s := range sites {
		g := G.NewGraph()
		s.G, s.Params, s.B, s.H, s.DHead, s.DModel, s.Prefix = g, graph.NewParams(tensor.Float64, 3), 2, 2, 4, 8, "block0/attn"
		full, err := tb.ScoreBias(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tiles []*G.Node
		var rects []posenc.Tile
		for k := 0; k < 4; k++ {
			q0, k0 := rng.Intn(s.TQ), rng.Intn(s.TK)
			tl := posenc.Tile{Q0: q0, Q1: q0 + 1 + rng.Intn(s.TQ-q0), K0: k0, K1: k0 + 1 + rng.Intn(s.TK-k0)}
			n, err := posenc.TileBias(tb, s, tl)
			if err != nil {
				t.Fatalf("%s: tile %+v: %v", name, tl, err)
			}
			tiles, rects = append(tiles, n), append(rects, tl)
		}
		if _, err := posenc.TileBias(tb, s, posenc.Tile{Q0: 0, Q1: s.TQ + 1, K0: 0, K1: 1}); err == nil {
			t.Errorf("%s: a tile outside the scores was accepted", name)
		}
		randomizeParams(s.Params, rng)
		m := G.NewTapeMachine(g)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		fs := full.Shape()
		fv := graph.ToFloat64s(full.Value())
		at := func(b, h, i, j int) float64 { // index into full, broadcasting its leading axes
			var bb, hh int
			if len(fs) == 4 && fs[0] > 1 {
				bb = b
			}
			if fs[len(fs)-3] > 1 {
				hh = h
			}
			nh := fs[len(fs)-3]
			return fv[((bb*nh+hh)*s.TQ+i)*s.TK+j]
		}
		for n, tile := range tiles {
			ts, tv, tl := tile.Shape(), graph.ToFloat64s(tile.Value()), rects[n]
			tq, tk := tl.Q1-tl.Q0, tl.K1-tl.K0
			for b := 0; b < s.B; b++ {
				for h := 0; h < s.H; h++ {
					for i := 0; i < tq; i++ {
						for j := 0; j < tk; j++ {
							bb, hh := min(b, ts[0]-1), min(h, ts[1]-1)
							got := tv[((bb*ts[1]+hh)*tq+i)*tk+j]
							if want := at(b, h, tl.Q0+i, tl.K0+j); got != want {
								t.Fatalf("%s: tile %+v at (b%d h%d %d %d) = %v, ScoreBias %v", name, tl, b, h, i, j, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestUnknownName(t *testing.T) {
	_, err := posenc.New("rotary", posenc.Options{})
	if err == nil || !strings.Contains(err.Error(), "rope") || !strings.Contains(err.Error(), "none") {
		t.Fatalf("unknown name: %v", err)
	}
}

// goldenTables returns the integer tables (rel, T5 and DeBERTa buckets) that
// testdata/golden/gen_golden.py computed with PyTorch, by tensor name. The
// file is committed, so its absence is a failure, not a skip.
func goldenTables(t *testing.T) map[string][]int {
	t.Helper()
	path := filepath.Join("..", "testdata", "golden", "tables.safetensors")
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden tables: %v (regenerate with /usr/bin/python3 testdata/golden/gen_golden.py)", err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]int{}
	for _, nt := range st.Tensors() {
		if nt.TensorView.DType() != safetensors.I64 {
			continue
		}
		raw := nt.TensorView.Data()
		v := make([]int, len(raw)/8)
		for i := range v {
			v[i] = int(int64(binary.LittleEndian.Uint64(raw[8*i:])))
		}
		out[nt.Name] = v
	}
	return out
}

// goldenCase is one decoded golden file of testdata/golden: float64 and
// int64 tensors by name, their shapes, and the string metadata.
type goldenCase struct {
	floats map[string][]float64
	ints   map[string][]int
	shapes map[string][]int
	meta   map[string]string
}

// readGoldenCase reads testdata/golden/<name>.safetensors (written by
// testdata/golden/gen_golden.py or a module it runs). The files are
// committed, so a missing one is a failure, not a skip.
func readGoldenCase(t *testing.T, name string) goldenCase {
	t.Helper()
	path := filepath.Join("..", "testdata", "golden", name+".safetensors")
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden case: %v (regenerate with /usr/bin/python3 testdata/golden/gen_golden.py)", err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	gc := goldenCase{floats: map[string][]float64{}, ints: map[string][]int{}, shapes: map[string][]int{}, meta: md.Metadata()}
	for _, nt := range st.Tensors() {
		tv := nt.TensorView
		var shape []int
		for _, d := range tv.Shape() {
			shape = append(shape, int(d))
		}
		gc.shapes[nt.Name] = shape
		raw := tv.Data()
		switch tv.DType() {
		case safetensors.F64:
			v := make([]float64, len(raw)/8)
			for i := range v {
				v[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
			gc.floats[nt.Name] = v
		case safetensors.I64:
			v := make([]int, len(raw)/8)
			for i := range v {
				v[i] = int(int64(binary.LittleEndian.Uint64(raw[8*i:])))
			}
			gc.ints[nt.Name] = v
		default:
			t.Fatalf("%s: tensor %s has dtype %v, want F64 or I64", path, nt.Name, tv.DType())
		}
	}
	return gc
}

// closeTo fails unless got and want agree elementwise to tol (absolute,
// plus tol relative to |want|), naming what and the first bad index.
func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, golden has %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(got[i]) {
			t.Fatalf("%s[%d] = %.12g, golden %.12g (|diff| %.3g > %g)", what, i, got[i], want[i], d, tol)
		}
	}
}
