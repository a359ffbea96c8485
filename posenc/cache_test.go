package posenc_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// buildWith builds one attention layer (and the input term, for an
// InputAdder) with enc in a fresh graph and parameter store, and runs it.
//
// An encoding that does not serve line positions gets a 1×TQ grid, or
// pairwise relations if it serves no grid (and TK = TQ): its caches are
// keyed by the positions instead of the span.
func buildWith(enc posenc.Encoding, span posenc.Span, causal bool) error {
	var pos *posenc.Positions
	if kinds := posenc.Accepted(enc); !slices.Contains(kinds, posenc.PosLine) {
		var err error
		if slices.Contains(kinds, posenc.PosGrid) {
			pos, err = posenc.NewGrid(1, span.TQ)
		} else {
			// pairwise: relation |i-j| mod nrel, shared by the batch
			nrel := pairwiseRelations(enc)
			rel := make([]int, span.TQ*span.TQ)
			for i := range rel {
				rel[i] = max(i/span.TQ-i%span.TQ, i%span.TQ-i/span.TQ) % nrel
			}
			pos, err = posenc.NewPairwise(1, span.TQ, span.TQ, nrel, rel)
		}
		if err != nil {
			return err
		}
		span = posenc.Span{TQ: span.TQ, TK: span.TQ}
		causal = false
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	const b, d, h = 2, 8, 2
	mk := func(name string, t int) *G.Node {
		v := make([]float64, b*t*d)
		for i := range v {
			v[i] = float64(i%7) * 0.1
		}
		return G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, t, d), G.WithName(name),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, t, d}, v)))
	}
	xq, xkv := mk("xq", span.TQ), mk("xkv", span.TK)
	if ad, ok := enc.(posenc.InputAdder); ok {
		site := &posenc.Site{G: g, Params: p, Layer: -1, B: b, H: h, DHead: d / h, DModel: d, Span: span, Pos: pos, Causal: causal}
		var err error
		if xq, err = ad.AddToInput(site, xq); err != nil {
			return err
		}
	}
	a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: d, Heads: h, InitStd: 0.5, Causal: causal, Pos: enc})
	if err != nil {
		return err
	}
	if _, err := a.FwdPositions(xq, xkv, span, pos, nil); err != nil {
		return err
	}
	return runGraph(g)
}

// runGraph runs g forward once.
func runGraph(g *G.ExprGraph) error {
	m := G.NewTapeMachine(g)
	defer m.Close()
	return m.RunAll()
}

// TestConcurrentGraphBuilds builds graphs from one encoding value in several
// goroutines at once (each with its own graph and parameter store), over
// spans that miss the cache, for every registered encoding. Run it with
// -race: the host-table caches are shared by the goroutines.
func TestConcurrentGraphBuilds(t *testing.T) {
	// learned-2d resamples its 7x7 table to the workers' 1xT grids
	o := posenc.Options{MaxLen: 32, ShawK: 2, T5Buckets: 8, T5MaxDistance: 16, DebertaBuckets: 4, DebertaMaxPosition: 16, GridResample: "bilinear"}
	for _, name := range posenc.Names() {
		t.Run(name, func(t *testing.T) {
			enc, err := posenc.New(name, o)
			if err != nil {
				t.Fatal(err)
			}
			const workers, rounds = 4, 3
			errs := make(chan error, workers*rounds)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for r := 0; r < rounds; r++ {
						span := posenc.Span{QStart: r + w%2, TQ: 3 + w, KStart: r + w%2, TK: 3 + w}
						co, _ := enc.(posenc.CausalOnly)
						if err := buildWith(enc, span, w%2 == 0 || co != nil && co.CausalOnly()); err != nil {
							errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
						}
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestZeroValueEncodings builds a graph with encodings written as struct
// literals (no constructor): their caches must work from the zero value,
// and an invalid literal must give an error, not a panic.
func TestZeroValueEncodings(t *testing.T) {
	span := posenc.Span{TQ: 4, TK: 4}
	ok := []posenc.Encoding{
		&posenc.Sinusoidal{},
		&posenc.Alibi{},
		&posenc.XL{InitStd: 0.02},
		&posenc.DeBERTa{Buckets: 4, MaxPosition: 16, InitStd: 0.02},
		&posenc.Rope{Base: 10000, Fraction: 1, Scale: 1, TrainLen: 64},
		&posenc.Shaw{K: 2, InitStd: 0.02},
		&posenc.ShawScalar{K: 2, InitStd: 0.02},
		&posenc.T5{NumBuckets: 8, MaxDistance: 16, InitStd: 0.02},
	}
	for _, enc := range ok {
		if err := buildWith(enc, span, true); err != nil {
			t.Errorf("%s (%T literal): %v", enc.Name(), enc, err)
		}
	}
	bad := []posenc.Encoding{
		&posenc.DeBERTa{},
		&posenc.T5{},
		&posenc.Shaw{K: -1},
		&posenc.ShawScalar{K: -1},
	}
	for _, enc := range bad {
		if err := buildWith(enc, span, true); err == nil {
			t.Errorf("%T literal %+v: no error", enc, enc)
		}
	}
}

// TestSinusoidalCacheScale checks that the cached table follows Scale and
// the dtype: one value used with two scales and two dtypes.
func TestSinusoidalCacheScale(t *testing.T) {
	e := &posenc.Sinusoidal{}
	run := func(dt tensor.Dtype) []float64 {
		g := G.NewGraph()
		p := graph.NewParams(dt, 1)
		x := G.NewTensor(g, dt, 3, G.WithShape(1, 3, 4), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(dt, tensor.Shape{1, 3, 4}, make([]float64, 12))))
		y, err := e.AddToInput(&posenc.Site{G: g, Params: p, B: 1, H: 1, DHead: 4, DModel: 4, Span: posenc.Span{TQ: 3, TK: 3}}, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := runGraph(g); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(y.Value())
	}
	def := run(tensor.Float64)
	_ = run(tensor.Float32)
	e.Scale = 1
	one := run(tensor.Float64)
	pe := posenc.SinusoidTable(0, 3, 4)
	for i := range pe {
		if one[i] != pe[i] || def[i] != pe[i]*0.5 {
			t.Fatalf("element %d: scale 1 gives %v, default %v; table %v", i, one[i], def[i], pe[i])
		}
	}
}
