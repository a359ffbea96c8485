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

// streamFixture is one model or layer of checkStreamKind on positions of
// one kind. build makes it in a new graph with the streaming attention on
// or off, from fixed seeds (the same parameters either way), binds any Feed
// it uses, and returns its output, a scalar loss of it and the nodes to
// differentiate; or the model's error.
type streamFixture struct {
	what  string
	build func(stream bool) (g *G.ExprGraph, out, loss *G.Node, wrt G.Nodes, err error)
}

// streamFixtures gives, for every kind of positions beyond the line (which
// checkStream covers), the fixtures of checkStreamKind for the encoding
// called name. A new kind of positions adds one entry here (and, if some
// encodings refuse to stream on it by design, one in streamRefused).
var streamFixtures = map[posenc.PosKind]func(t *testing.T, name string, o posenc.Options) []streamFixture{
	posenc.PosGrid:     gridStreamFixtures,
	posenc.PosPairwise: pairwiseStreamFixtures,
	posenc.PosReal:     realStreamFixtures,
}

// streamRefused lists, per kind, the encodings the streaming attention
// refuses by design (with an error naming them): every bias on real times
// (ALiBi and KERPLE: no table over the time differences; FIRE and DPB: their
// table would be one MLP row per (example, query, key), the [B, T, T]
// the streaming attention exists to avoid), and a combination with two
// biasing parts (tree+t5: the sum of two tables is not one lookup). Any
// other refusal fails checkStreamKind.
var streamRefused = map[posenc.PosKind]map[string]bool{
	posenc.PosReal:     {"alibi": true, "kerple-log": true, "kerple-power": true, "fire": true, "dpb": true},
	posenc.PosPairwise: {"tree+t5": true},
}

// servesKind reports whether TestEveryEncoding runs the checks of kind k
// on the encoding of info (the same conditions).
func servesKind(t *testing.T, info posenc.Info, k posenc.PosKind) bool {
	t.Helper()
	switch k {
	case posenc.PosPairwise:
		return slices.Contains(info.Positions, k)
	case posenc.PosReal:
		return slices.Contains(info.Positions, k) && partsServe(t, info.Name, k)
	}
	return partsServe(t, info.Name, k)
}

// TestEveryEncodingStream runs checkStreamKind on every registered encoding
// (and the harness's combinations) for every kind of positions beyond the
// line that it serves.
func TestEveryEncodingStream(t *testing.T) {
	infos := posenc.Registered()
	for _, c := range harnessCombinations {
		info, ok := posenc.InfoOf(c)
		if !ok {
			t.Fatalf("combination %s: no Info", c)
		}
		infos = append(infos, info)
	}
	kinds := make([]posenc.PosKind, 0, len(streamFixtures))
	for k := range streamFixtures {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, info := range infos {
		t.Run(info.Name, func(t *testing.T) {
			for _, k := range kinds {
				if servesKind(t, info, k) {
					checkStreamKind(t, info.Name, harnessOptions(), k)
				}
			}
		})
	}
}

// checkStreamKind: on every fixture of kind k, the encoding called name
// with the streaming attention equals the materialised attention (same
// parameters) to streamTol in float64, in output and in the gradient of
// every differentiated node; or, for the encodings of streamRefused[k],
// the streaming model is refused with an error naming the encoding and
// the streaming attention.
func checkStreamKind(t *testing.T, name string, o posenc.Options, k posenc.PosKind) {
	t.Helper()
	for _, f := range streamFixtures[k](t, name, o) {
		what := name + " " + string(k) + " " + f.what
		g, out, loss, wrt, err := f.build(false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ref, refGrads, err := runStream(g, out, loss, wrt)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		g, out, loss, wrt, err = f.build(true)
		if streamRefused[k][name] {
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "stream") {
				t.Fatalf("%s: streaming gave error %v, want a refusal naming the encoding and the streaming attention", what, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s stream: %v", what, err)
		}
		got, gotGrads, err := runStream(g, out, loss, wrt)
		if err != nil {
			t.Fatalf("%s stream: %v", what, err)
		}
		compareStream(t, what+" output", got, ref)
		if len(gotGrads) != len(refGrads) {
			t.Fatalf("%s: %d gradients streaming, %d materialised", what, len(gotGrads), len(refGrads))
		}
		for n, gr := range refGrads {
			compareStream(t, what+" gradient of "+n, gotGrads[n], gr)
		}
	}
}

// floatInput is a float64 input node of shape with values from rng.
func floatInput(g *G.ExprGraph, rng *rand.Rand, name string, shape ...int) *G.Node {
	d := make([]float64, tensor.Shape(shape).TotalSize())
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(shape), d)))
}

// gridStreamFixtures: the tiny ViT on a 3×4 patch grid (logits, gradients
// of the patches and every learnable), and one bidirectional attention
// layer whose tokens sit at shuffled grid cells (NewGridCoords), so that
// the tile rows must come from the coordinates, not the token index.
func gridStreamFixtures(_ *testing.T, name string, o posenc.Options) []streamFixture {
	const rows, cols, b = 3, 4, 2
	vit := func(stream bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
		rng := rand.New(rand.NewSource(17))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		cfg := tinyViT(name, o)
		cfg.Encoder.Stream = stream
		m, err := layers.NewViT(g, p, cfg)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		in := floatInput(g, rng, "patches", b, rows*cols, m.Cfg.PatchDim())
		logits, err := m.Fwd(in, rows, cols)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b}, []int{0, 2}))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		randomizeParams(p, rng)
		return g, logits, loss, append(G.Nodes{in}, m.Learnables()...), nil
	}
	shuffled := func(stream bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
		enc, err := posenc.New(name, o)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		rng := rand.New(rand.NewSource(29))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 7)
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Pos: enc, Stream: stream})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		n := rows * cols
		var coords []int
		for _, c := range rng.Perm(n) {
			coords = append(coords, c/cols, c%cols)
		}
		pos, err := posenc.NewGridCoords([]int{rows, cols}, coords, coords)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		x := floatInput(g, rng, "x", b, n, 8)
		y, err := a.FwdPositions(x, nil, posenc.Span{TQ: n, TK: n}, pos, nil)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		loss, err := G.Sum(G.Must(G.HadamardProd(y, floatInput(g, rng, "w", b, n, 8))))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		randomizeParams(p, rng)
		return g, y, loss, append(G.Nodes{x}, p.Nodes(g)...), nil
	}
	return []streamFixture{{"tiny ViT", vit}, {"shuffled grid cells", shuffled}}
}

// pairwiseStreamFixtures: the block of checkPairwise on per-example
// relations (B = 2, N = 5), built for them; and built for other relations
// with a Feed, then bound to them (the graph and code studies rebind every
// batch): the streaming attention must read the bound relations. The
// output is the loss (the block's output is not readable after the
// product); the gradient w.r.t. the input carries the rest.
func pairwiseStreamFixtures(t *testing.T, name string, o posenc.Options) []streamFixture {
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	const b, n, d = 2, 5, 8
	nrel := pairwiseRelations(enc)
	rng := rand.New(rand.NewSource(int64(7 + len(name))))
	x := make([]float64, b*n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	pos1, pos2 := randomPairwise(t, rng, b, n, nrel), randomPairwise(t, rng, b, n, nrel)
	block := func(pos, bind *posenc.Positions) func(bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
		return func(stream bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 5)
			if bind != nil {
				fed := *pos
				fed.Feed = posenc.NewFeed()
				pos = &fed
			}
			loss, _, in, err := pairwiseBlockStream(g, p, name, o, pos, x, true, stream)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if bind != nil {
				if err := pos.Feed.Bind(bind); err != nil {
					return nil, nil, nil, nil, err
				}
			}
			randomizeParams(p, rand.New(rand.NewSource(3)))
			return g, loss, loss, append(G.Nodes{in}, p.Nodes(g)...), nil
		}
	}
	return []streamFixture{{"per-example relations", block(pos2, nil)}, {"relations bound through a feed", block(pos1, pos2)}}
}

// realStreamFixtures: the tiny LM on per-example next-event times (B = 2,
// T = 5; queries at other times than keys), causal and (unless the
// encoding is causal-only) bidirectional, built for the times; and built
// for other times with a Feed, then bound to them.
func realStreamFixtures(t *testing.T, name string, o posenc.Options) []streamFixture {
	const b, tt = 2, 5
	rng := rand.New(rand.NewSource(int64(13 + len(name))))
	data := make([]int, b*tt)
	for i := range data {
		data[i] = rng.Intn(256)
	}
	pos1, pos2 := nextEventTimes(t, rng, b, tt, 0.5), nextEventTimes(t, rng, b, tt, 0)
	lm := func(causal bool, pos, bind *posenc.Positions) func(bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
		return func(stream bool) (*G.ExprGraph, *G.Node, *G.Node, G.Nodes, error) {
			if bind != nil {
				fed := *pos
				fed.Feed = posenc.NewFeed()
				pos = &fed
			}
			g, p, m, logits, loss, err := realLMStream(name, o, causal, stream, nil, data, b, tt, pos)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if bind != nil {
				if err := pos.Feed.Bind(bind); err != nil {
					return nil, nil, nil, nil, err
				}
			}
			randomizeParams(p, rand.New(rand.NewSource(9)))
			return g, logits, loss, m.Learnables(), nil
		}
	}
	fx := []streamFixture{{"causal next-event times", lm(true, pos2, nil)}, {"causal times bound through a feed", lm(true, pos1, pos2)}}
	if !causalOnly(t, name, o) {
		fx = append(fx, streamFixture{"bidirectional next-event times", lm(false, pos2, nil)})
	}
	return fx
}
