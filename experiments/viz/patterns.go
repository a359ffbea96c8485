package viz

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// BiasOptions says where ScoreBias and BiasByDistance evaluate an
// encoding's score bias.
type BiasOptions struct {
	// Params is the parameter store whose tables the bias reads (a trained
	// model's, e.g. trainer.Trainer.Params); nil: a fresh float64 store
	// seeded with Seed, so learnable tables hold their initial values.
	Params *graph.Params
	Seed   int64
	// Layer is the block whose bias is evaluated; the site's prefix is
	// "block<Layer>/attn", as layers.LM names its attention layers (per-layer
	// tables such as shaw-scalar's are looked up under it).
	Layer int
	// Heads is the number of attention heads H (> 0).
	Heads int
	// Causal selects the causal form of the bias (T5's causal buckets,
	// ALiBi's signed distance).
	Causal bool
}

// ScoreBias evaluates the score bias that enc adds to the attention scores
// of span (enc must implement posenc.ScoreBiaser: t5, alibi, shaw-scalar)
// and returns one Matrix [TQ, TK] per head (one in all if the bias is
// shared by the heads), with X0 = span.KStart and Y0 = span.QStart so the
// axes show key and query positions. The bias is computed by the
// encoding's own graph nodes: a graph with a posenc.Site (batch 1,
// o.Heads heads, head width 1) is built and run forward once; the store
// forgets the graph afterwards. It returns an error if enc has no score
// bias, o.Heads is not positive, or the encoding or Gorgonia fails.
func ScoreBias(enc posenc.Encoding, span posenc.Span, o BiasOptions) ([]Matrix, error) {
	sb, ok := enc.(posenc.ScoreBiaser)
	if !ok {
		return nil, errors.Errorf("viz: encoding %q adds no score bias (it is not a posenc.ScoreBiaser)", enc.Name())
	}
	if o.Heads <= 0 || span.TQ <= 0 || span.TK <= 0 {
		return nil, errors.Errorf("viz: score bias of %q with %d heads over TQ=%d TK=%d, want positive", enc.Name(), o.Heads, span.TQ, span.TK)
	}
	p := o.Params
	if p == nil {
		p = graph.NewParams(tensor.Float64, o.Seed)
	}
	g := G.NewGraph()
	defer p.Forget(g)
	site := &posenc.Site{G: g, Params: p, Layer: o.Layer, Prefix: fmt.Sprintf("block%d/attn", o.Layer),
		B: 1, H: o.Heads, DHead: 1, DModel: o.Heads, Span: span, Causal: o.Causal}
	bias, err := sb.ScoreBias(site)
	if err != nil {
		return nil, errors.WithMessagef(err, "viz: score bias of %q", enc.Name())
	}
	vals, err := runNode(g, bias)
	if err != nil {
		return nil, errors.WithMessagef(err, "viz: score bias of %q", enc.Name())
	}
	n := span.TQ * span.TK
	if len(vals)%n != 0 {
		return nil, errors.Errorf("viz: score bias of %q has shape %v, want [H|1, %d, %d]", enc.Name(), bias.Shape(), span.TQ, span.TK)
	}
	out := make([]Matrix, len(vals)/n)
	for h := range out {
		out[h] = Matrix{Rows: span.TQ, Cols: span.TK, Data: vals[h*n : (h+1)*n], X0: float64(span.KStart), Y0: float64(span.QStart)}
	}
	return out, nil
}

// BiasByDistance returns, for each head, the score bias that enc adds
// between a query and a key at relative distance rel = key position -
// query position, for rel = minRel..maxRel: one Series per head, named
// "head h", with X the distances. It evaluates ScoreBias on a single query
// at position max(0, -minRel) and the keys around it, so every position is
// non-negative. It returns ScoreBias's errors, or an error if maxRel <
// minRel.
func BiasByDistance(enc posenc.Encoding, minRel, maxRel int, o BiasOptions) ([]Series, error) {
	if maxRel < minRel {
		return nil, errors.Errorf("viz: distances %d..%d: empty range", minRel, maxRel)
	}
	q := max(0, -minRel)
	ms, err := ScoreBias(enc, posenc.Span{QStart: q, TQ: 1, KStart: q + minRel, TK: maxRel - minRel + 1}, o)
	if err != nil {
		return nil, err
	}
	out := make([]Series, len(ms))
	for h, m := range ms {
		out[h] = Series{Name: fmt.Sprintf("head %d", h), X: IntRange(minRel, maxRel), Y: m.Row(0)}
	}
	return out, nil
}

// QKScores returns the dot products ⟨q'_i, k'_j⟩ [TQ, TK] of the constant
// query vector q and key vector k placed at every query and key position of
// span and transformed by enc (which must implement posenc.QKTransformer:
// rope, rope-pi, rope-ntk, rope-dynamic, rope-yarn, rope-llama3, xpos; a
// causal-only encoding such as xpos gets a causal site, the keys of span
// are not masked), with X0 = span.KStart
// and Y0 = span.QStart. For RoPE the result depends on the positions only
// through rel = key - query: with span {QStart: 0, TQ: 1, KStart: 0, TK: n},
// row 0 is the score against distance 0..n-1. The rotation is the
// encoding's own graph op (batch 1, one head of width len(q)); the dot
// products are taken on the host. It returns an error if enc does not
// transform q and k, q and k differ in length or are empty, or the
// encoding or Gorgonia fails.
func QKScores(enc posenc.Encoding, q, k []float64, span posenc.Span) (Matrix, error) {
	qk, ok := enc.(posenc.QKTransformer)
	if !ok {
		return Matrix{}, errors.Errorf("viz: encoding %q does not transform q and k (it is not a posenc.QKTransformer)", enc.Name())
	}
	dh := len(q)
	if dh == 0 || len(k) != dh || span.TQ <= 0 || span.TK <= 0 {
		return Matrix{}, errors.Errorf("viz: q.k scores of %q with q [%d], k [%d] over TQ=%d TK=%d, want equal non-empty vectors and positive lengths", enc.Name(), len(q), len(k), span.TQ, span.TK)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	defer p.Forget(g)
	tile := func(v []float64, t int) *tensor.Dense {
		d := make([]float64, 0, t*dh)
		for i := 0; i < t; i++ {
			d = append(d, v...)
		}
		return tensor.New(tensor.WithShape(1, 1, t, dh), tensor.WithBacking(d))
	}
	qn := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, span.TQ, dh), G.WithName("viz_q"), G.WithValue(tile(q, span.TQ)))
	kn := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, span.TK, dh), G.WithName("viz_k"), G.WithValue(tile(k, span.TK)))
	site := &posenc.Site{G: g, Params: p, Layer: 0, Prefix: "block0/attn", B: 1, H: 1, DHead: dh, DModel: dh, Span: span}
	if co, ok := enc.(posenc.CausalOnly); ok && co.CausalOnly() {
		site.Causal = true // xPos serves causal attention only; no mask is applied here
	}
	q2, k2, err := qk.TransformQK(site, qn, kn)
	if err != nil {
		return Matrix{}, errors.WithMessagef(err, "viz: q.k scores of %q", enc.Name())
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return Matrix{}, errors.Wrapf(err, "viz: q.k scores of %q", enc.Name())
	}
	qv, kv := graph.ToFloat64s(q2.Value()), graph.ToFloat64s(k2.Value())
	out := Matrix{Rows: span.TQ, Cols: span.TK, Data: make([]float64, span.TQ*span.TK), X0: float64(span.KStart), Y0: float64(span.QStart)}
	for i := 0; i < span.TQ; i++ {
		for j := 0; j < span.TK; j++ {
			s := 0.0
			for c := 0; c < dh; c++ {
				s += qv[i*dh+c] * kv[j*dh+c]
			}
			out.Data[i*span.TK+j] = s
		}
	}
	return out, nil
}

// runNode runs g forward once and returns n's value as float64.
func runNode(g *G.ExprGraph, n *G.Node) ([]float64, error) {
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return nil, errors.Wrap(err, "running the graph")
	}
	if n.Value() == nil {
		return nil, errors.Errorf("node %v has no value after the run", n.Name())
	}
	return graph.ToFloat64s(n.Value()), nil
}

// Tabulate returns the curve of f over the integers from..to (inclusive),
// e.g. a bucket function of the relative distance such as
// posenc.DebertaBucket. It returns a series with no points if to < from.
func Tabulate(name string, from, to int, f func(int) float64) Series {
	s := Series{Name: name, X: IntRange(from, to)}
	s.Y = make([]float64, len(s.X))
	for i, x := range s.X {
		s.Y[i] = f(int(x))
	}
	return s
}

// RelMatrix returns the matrix [TQ, TK] of f(rel) for every query i and key
// j of span, rel = span.Rel(i, j) = key position - query position, with
// X0 = span.KStart and Y0 = span.QStart: the picture of a function of the
// relative distance (a bucket or clipped index) as attention sees it. It
// returns an error if the span is empty.
func RelMatrix(span posenc.Span, f func(rel int) float64) (Matrix, error) {
	if span.TQ <= 0 || span.TK <= 0 {
		return Matrix{}, errors.Errorf("viz: relative matrix over TQ=%d TK=%d, want positive", span.TQ, span.TK)
	}
	m := Matrix{Rows: span.TQ, Cols: span.TK, Data: make([]float64, span.TQ*span.TK), X0: float64(span.KStart), Y0: float64(span.QStart)}
	for i := 0; i < span.TQ; i++ {
		for j := 0; j < span.TK; j++ {
			m.Data[i*span.TK+j] = f(span.Rel(i, j))
		}
	}
	return m, nil
}

// CoPEPositions returns CoPE's contextual positions p_ij [TQ, TK] (Golovneva
// et al. 2024; see posenc.CoPE) for the queries q [TQ*dh] and keys
// k [TK*dh] (row-major, one row per token) of one head of width dh placed
// at span: the gates σ(q_i·k_j/√dh) of the keys visible from each query,
// summed from key j to the query (0 for a masked key). It runs cope's own
// op (graph.CoPEPositions) on the host-computed logits, so it shows the
// positions a trained layer would count, without the clamp to CopeNPos-1.
// X0 = span.KStart and Y0 = span.QStart. It returns an error if dh is not
// positive or q and k are not whole rows of the span's lengths.
func CoPEPositions(q, k []float64, dh int, span posenc.Span) (Matrix, error) {
	if dh <= 0 || span.TQ <= 0 || span.TK <= 0 || len(q) != span.TQ*dh || len(k) != span.TK*dh {
		return Matrix{}, errors.Errorf("viz: CoPE positions of q [%d] and k [%d] with dh %d over TQ=%d TK=%d, want q [TQ*dh] and k [TK*dh] with positive lengths", len(q), len(k), dh, span.TQ, span.TK)
	}
	logits := make([]float64, span.TQ*span.TK)
	for i := 0; i < span.TQ; i++ {
		for j := 0; j < span.TK; j++ {
			s := 0.0
			for c := 0; c < dh; c++ {
				s += q[i*dh+c] * k[j*dh+c]
			}
			logits[i*span.TK+j] = s
		}
	}
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, span.TQ, span.TK), G.WithName("viz_logits"),
		G.WithValue(tensor.New(tensor.WithShape(1, span.TQ, span.TK), tensor.WithBacking(logits))))
	pos, err := graph.CoPEPositions(x, span.QStart, span.KStart, 1/math.Sqrt(float64(dh)))
	if err != nil {
		return Matrix{}, errors.WithMessage(err, "viz: CoPE positions")
	}
	v, err := runNode(g, pos)
	if err != nil {
		return Matrix{}, errors.WithMessage(err, "viz: CoPE positions")
	}
	return Matrix{Rows: span.TQ, Cols: span.TK, Data: v, X0: float64(span.KStart), Y0: float64(span.QStart)}, nil
}
