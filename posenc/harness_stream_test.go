package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// streamTol is the largest difference allowed between the streaming and the
// materialised attention, in float64.
const streamTol = 1e-12

// checkStream: for an encoding serving line positions, either StreamBias
// returns its documented error (naming the encoding) and a model with
// Stream on refuses to build with it, or (for a StreamAttender, or when
// StreamBias accepts it) the tiny LM with Stream on equals
// the tiny LM with Stream off (same parameters) to streamTol in float64,
// logits and the gradients of every learnable, causal and (where served)
// bidirectional, at a start offset; and so does one attention layer on the
// harness's spans with a memory (Tq != Tk, offsets).
func checkStream(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	enc, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	site := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 2, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{TQ: 5, TK: 5}, Causal: true}
	_, own := enc.(posenc.StreamAttender) // streams the attention itself (cope): StreamBias is not asked
	if _, _, serr := posenc.StreamBias(enc, site); serr != nil && !own {
		if !strings.Contains(serr.Error(), name) || !strings.Contains(serr.Error(), "stream") {
			t.Fatalf("%s: StreamBias error %q does not name the encoding and the streaming attention", name, serr)
		}
		cfg := tinyLM(name, o, true)
		cfg.Stream = true
		_, _, err := streamLM(cfg, 0)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: the LM with Stream on gave error %v, want StreamBias's", name, err)
		}
		return
	}
	modes := []bool{true}
	if !causalOnly(t, name, o) {
		modes = append(modes, false)
	}
	for _, causal := range modes {
		cfg := tinyLM(name, o, causal)
		ref, refGrads, err := streamLM(cfg, 3)
		if err != nil {
			t.Fatalf("%s causal %v: %v", name, causal, err)
		}
		cfg.Stream = true
		got, gotGrads, err := streamLM(cfg, 3)
		if err != nil {
			t.Fatalf("%s causal %v stream: %v", name, causal, err)
		}
		compareStream(t, name+" LM logits", got, ref)
		for n, g := range refGrads {
			compareStream(t, name+" LM gradient of "+n, gotGrads[n], g)
		}
	}
	spans := []struct {
		causal bool
		span   posenc.Span
	}{
		{true, posenc.Span{QStart: 9, TQ: 3, KStart: 6, TK: 6}},
		{false, posenc.Span{QStart: 2, TQ: 3, KStart: 0, TK: 6}},
	}
	for _, c := range spans {
		if !c.causal && causalOnly(t, name, o) {
			continue
		}
		ref, refGrads, err := streamAttention(name, o, c.causal, c.span, false)
		if err != nil {
			t.Fatalf("%s span %+v: %v", name, c.span, err)
		}
		got, gotGrads, err := streamAttention(name, o, c.causal, c.span, true)
		if err != nil {
			t.Fatalf("%s span %+v stream: %v", name, c.span, err)
		}
		compareStream(t, name+" attention output", got, ref)
		for n, g := range refGrads {
			compareStream(t, name+" attention gradient of "+n, gotGrads[n], g)
		}
	}
}

// compareStream fails unless got and want have equal lengths and agree to
// streamTol.
func compareStream(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= streamTol) {
			t.Fatalf("%s [%d]: stream %v, materialised %v (diff %g)", what, i, got[i], want[i], d)
		}
	}
}

// streamLM runs the tiny LM of cfg (float64, parameters from a fixed seed)
// on fixed ids [2, 5] at start and returns its logits and the gradient of a
// cross-entropy loss w.r.t. every learnable, by name.
func streamLM(cfg layers.Config, start int) ([]float64, map[string][]float64, error) {
	rng := rand.New(rand.NewSource(31))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		return nil, nil, err
	}
	const b, tt = 2, 5
	data, tg := make([]int, b*tt), make([]int, b*tt)
	for i := range data {
		data[i], tg[i] = rng.Intn(256), rng.Intn(256)
	}
	logits, err := lm.FwdAt(intNode(g, "ids", []int{b, tt}, data), start)
	if err != nil {
		return nil, nil, err
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b * tt}, tg))
	if err != nil {
		return nil, nil, err
	}
	randomizeParams(p, rng)
	return runStream(g, logits, loss, lm.Learnables())
}

// streamAttention runs one attention layer with the encoding on random
// inputs of span (float64, fixed seeds) and returns its output and the
// gradients of a random projection of it w.r.t. the inputs and learnables.
func streamAttention(name string, o posenc.Options, causal bool, span posenc.Span, stream bool) ([]float64, map[string][]float64, error) {
	rng := rand.New(rand.NewSource(23))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	enc, err := posenc.New(name, o)
	if err != nil {
		return nil, nil, err
	}
	a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Causal: causal, Pos: enc, Stream: stream})
	if err != nil {
		return nil, nil, err
	}
	mk := func(nm string, tt int) *G.Node {
		d := make([]float64, 2*tt*8)
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		return G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, tt, 8), G.WithName(nm), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, tt, 8}, d)))
	}
	xq, xkv := mk("xq", span.TQ), mk("xkv", span.TK)
	y, err := a.Fwd(xq, xkv, span, nil)
	if err != nil {
		return nil, nil, err
	}
	w := mk("w", span.TQ)
	prod, err := G.HadamardProd(y, w)
	if err != nil {
		return nil, nil, err
	}
	loss, err := G.Sum(prod)
	if err != nil {
		return nil, nil, err
	}
	wrt := append(G.Nodes{xq, xkv}, p.Nodes(g)...) // the projections and the encoding's tables
	randomizeParams(p, rng)
	return runStream(g, y, loss, wrt)
}

// runStream differentiates loss w.r.t. wrt, runs g and returns out's value
// and the gradients by node name.
func runStream(g *G.ExprGraph, out, loss *G.Node, wrt G.Nodes) ([]float64, map[string][]float64, error) {
	grads, err := G.Grad(loss, wrt...)
	if err != nil {
		return nil, nil, errors.Wrap(err, "grad")
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return nil, nil, err
	}
	gs := map[string][]float64{}
	for i, n := range wrt {
		gs[n.Name()] = graph.ToFloat64s(grads[i].Value())
	}
	return graph.ToFloat64s(out.Value()), gs, nil
}
