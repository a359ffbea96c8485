package posenc_test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// pairwiseRelations is the number of relation ids the pairwise positions
// of enc must have: TreeRel's table rows exactly, GraphormerSpatial's rows
// without the virtual token's (graphdata's maxDist+2), else 3; for a
// combination, that of its first part with a constraint.
func pairwiseRelations(enc posenc.Encoding) int {
	if c, ok := posenc.AsCombined(enc); ok {
		for _, p := range c.Parts() {
			if n := pairwiseRelations(p); n != 3 {
				return n
			}
		}
		return 3
	}
	switch e := enc.(type) {
	case *posenc.TreeRel:
		return e.TableRows()
	case *posenc.GraphormerSpatial:
		return e.NumRel - 1
	}
	return 3
}

// partsServe reports whether every part of the encoding called name (the
// encoding itself if it is not a combination) serves positions of kind k:
// the checks of a kind run on combinations whose parts all serve it.
func partsServe(t *testing.T, name string, k posenc.PosKind) bool {
	t.Helper()
	enc, err := posenc.New(name, harnessOptions())
	if err != nil {
		t.Fatal(err)
	}
	parts := []posenc.Encoding{enc}
	if c, ok := posenc.AsCombined(enc); ok {
		parts = c.Parts()
	}
	for _, p := range parts {
		if !slices.Contains(posenc.Accepted(p), k) {
			return false
		}
	}
	return true
}

// structural reports whether enc or one of its parts is of
// posenc.KindStructural (reads per-example relations: it must register
// them in a Feed).
func structural(enc posenc.Encoding) bool {
	parts := []posenc.Encoding{enc}
	if c, ok := posenc.AsCombined(enc); ok {
		parts = c.Parts()
	}
	for _, p := range parts {
		if info, ok := posenc.InfoOf(p.Name()); ok && info.Kind == posenc.KindStructural {
			return true
		}
	}
	return false
}

// randomPairwise returns per-example (b > 1) or shared pairwise positions
// of n tokens with random relations in [0, nrel), the diagonal 0 (a node
// is at distance 0 from itself).
func randomPairwise(t *testing.T, rng *rand.Rand, b, n, nrel int) *posenc.Positions {
	t.Helper()
	rel := make([]int, b*n*n)
	for i := range rel {
		if i%n != i/n%n {
			rel[i] = rng.Intn(nrel)
		}
	}
	p, err := posenc.NewPairwise(b, n, n, nrel, rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pairwiseBlock builds one bidirectional pre-LN block (and the input term)
// of enc over x [B, N, d] with positions pos, in g and p, and returns its
// output and the input node, and with withLoss a scalar loss of the output
// (then the output's value is not readable: Gorgonia's product may
// overwrite it in place).
func pairwiseBlock(t *testing.T, g *G.ExprGraph, p *graph.Params, enc string, o posenc.Options, pos *posenc.Positions, x []float64, withLoss bool) (loss, out, in *G.Node) {
	t.Helper()
	loss, out, in, err := pairwiseBlockStream(g, p, enc, o, pos, x, withLoss, false)
	if err != nil {
		t.Fatal(err)
	}
	return loss, out, in
}

// pairwiseBlockStream is pairwiseBlock with the block's attention
// streaming (layers.Config.Stream) when stream is set; it returns the
// first error (a refusal of the streaming attention) instead of failing.
func pairwiseBlockStream(g *G.ExprGraph, p *graph.Params, enc string, o posenc.Options, pos *posenc.Positions, x []float64, withLoss, stream bool) (loss, out, in *G.Node, err error) {
	const d, h = 8, 2
	b, n := pos.Batch, pos.TQ
	cfg := layers.Config{Vocab: 3, DModel: d, Heads: h, Layers: 1, FFN: 16, Eps: 1e-5, InitStd: 0.3, Pos: enc, PosOpts: o, Stream: stream}
	e, err := posenc.New(enc, o)
	if err != nil {
		return nil, nil, nil, err
	}
	in = G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, d), G.WithName("x"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, n, d}, x)))
	h0 := in
	if ad, ok := e.(posenc.InputAdder); ok {
		site := &posenc.Site{G: g, Params: p, Layer: -1, B: b, H: h, DHead: d / h, DModel: d, Span: posenc.Span{TQ: n, TK: n}, Pos: pos}
		if h0, err = ad.AddToInput(site, h0); err != nil {
			return nil, nil, nil, err
		}
	}
	blk, err := layers.NewBlock(g, p, cfg, 0, e)
	if err != nil {
		return nil, nil, nil, err
	}
	if out, err = blk.FwdPositions(h0, nil, posenc.Span{TQ: n, TK: n}, pos, nil); err != nil {
		return nil, nil, nil, err
	}
	if !withLoss {
		return nil, out, in, nil
	}
	w := make([]float64, b*n*d)
	for i := range w {
		w[i] = float64(i%5)*0.3 - 0.6
	}
	wn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, d), G.WithName("w"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, n, d}, w)))
	prod, err := G.HadamardProd(out, wn)
	if err != nil {
		return nil, nil, nil, err
	}
	if loss, err = G.Sum(prod); err != nil {
		return nil, nil, nil, err
	}
	return loss, out, in, nil
}

// checkPairwise runs the shared checks of an encoding that serves pairwise
// positions, on per-example relations (B = 2, N = 5):
//
//   - gradient check (float64) of a block through the encoding w.r.t. its
//     input and every parameter;
//   - rebinding: a graph built once with a Feed and bound to other
//     relations gives exactly the output of a graph built for them, and
//     binding positions of another shape is an error naming both;
//   - structural encodings register their relations in the Feed;
//   - node order: permuting the nodes of an example (tokens and relations
//     together) permutes its outputs.
func checkPairwise(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	const b, n, d = 2, 5, 8
	nrel := pairwiseRelations(enc)
	rng := rand.New(rand.NewSource(int64(len(name))))
	x := make([]float64, b*n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	pos1, pos2 := randomPairwise(t, rng, b, n, nrel), randomPairwise(t, rng, b, n, nrel)

	// Gradient check.
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 5)
	loss, _, in := pairwiseBlock(t, g, p, name, o, pos1, x, true)
	randomizeParams(p, rng)
	if err := graph.GradCheck(g, loss, append(G.Nodes{in}, p.Nodes(g)...), graph.GradCheckOpts{MaxPerNode: 12, Seed: 4}); err != nil {
		t.Errorf("%s: pairwise gradient check: %v", name, err)
	}

	// Rebinding through a Feed equals a graph built for the new relations.
	forward := func(pos *posenc.Positions, bind *posenc.Positions) []float64 {
		g := G.NewGraph()
		_, out, _ := pairwiseBlock(t, g, p, name, o, pos, x, false)
		m := G.NewTapeMachine(g)
		defer m.Close()
		if bind != nil {
			if err := pos.Feed.Bind(bind); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(out.Value())
	}
	fed := *pos1
	fed.Feed = posenc.NewFeed()
	if got, want := forward(&fed, pos2), forward(pos2, nil); !slices.Equal(got, want) {
		t.Errorf("%s: a fed graph bound to other relations differs from a graph built for them", name)
	}
	if !structural(enc) {
		return
	}
	if fed.Feed.Len() == 0 {
		t.Errorf("%s: reads relations but registered nothing in the feed", name)
	}
	other := randomPairwise(t, rng, b, n+1, nrel)
	if err := fed.Feed.Bind(other); err == nil || !strings.Contains(err.Error(), "5 queries") || !strings.Contains(err.Error(), "6 queries") {
		t.Errorf("%s: binding positions of another shape: error %v, want one naming both shapes", name, err)
	}

	// Node order: permute example 1's nodes (not for encodings that also
	// read token order).
	if slices.Contains(posenc.Accepted(enc), posenc.PosLine) {
		return
	}
	perm := rng.Perm(n)
	rel := slices.Clone(pos1.Rel)
	xp := slices.Clone(x)
	for i := 0; i < n; i++ {
		copy(xp[(n+i)*d:(n+i+1)*d], x[(n+perm[i])*d:(n+perm[i]+1)*d])
		for j := 0; j < n; j++ {
			rel[(n+i)*n+j] = pos1.Rel[(n+perm[i])*n+perm[j]]
		}
	}
	posP, err := posenc.NewPairwise(b, n, n, nrel, rel)
	if err != nil {
		t.Fatal(err)
	}
	run := func(pos *posenc.Positions, x []float64) []float64 {
		g := G.NewGraph()
		_, out, _ := pairwiseBlock(t, g, p, name, o, pos, x, false)
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(out.Value())
	}
	y, yp := run(pos1, x), run(posP, xp)
	for i := 0; i < n; i++ {
		for c := 0; c < d; c++ {
			if a, bb := yp[(n+i)*d+c], y[(n+perm[i])*d+c]; abs(a-bb) > 1e-12 {
				t.Fatalf("%s: permuted node %d channel %d: %v, want %v", name, i, c, a, bb)
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
