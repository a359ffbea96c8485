package posenc

// Real-valued positions (issue #15): the helpers shared by the encodings
// that serve PosReal (alibi, rope, kerple-log, kerple-power, fire, dpb).
//
// A Site with real positions (NewReal) has query i of example b at time
// QTimes[b*TQ+i] and key j at KTimes[b*TK+j] (b = 0 when Batch is 1). The
// encodings compute what they need from the times on the host (ALiBi's
// bias, RoPE's angles, the time differences Δt = t_k - t_q), and it enters
// the graph as
//
//   - a constant input node, cached in the encoding per (positions Key,
//     what, dtype), without a Feed: right for times that never change, but
//     every new Positions value adds a cached constant (and needs a new
//     graph);
//   - an input node registered in Positions.Feed, refilled by Feed.Bind,
//     with a Feed: one graph for every batch of times of the same shape.
//
// Per-example times (Batch = B) give biases [B, H|1, Tq, Tk]; times shared
// by the batch (Batch = 1) give [H|1, Tq, Tk]. The causal mask stays by
// index (Span); encodings whose causal formula assumes that a visible key
// is not later than its query (ALiBi's -m (t_q - t_k)) return an error
// naming the pair otherwise (checkCausalTimes).

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// realKey identifies a constant derived from real positions: the
// positions' Key, what the constant holds (with the encoding's settings and
// its shape) and the dtype.
type realKey struct {
	pos, what string
	dt        tensor.Dtype
}

// Times returns the query times [TQ] and key times [TK] of example b of
// real positions (b is ignored when the times are shared, Batch 1). The
// slices alias p and must not be modified. It panics if p is not PosReal
// or b is out of range.
func (p *Positions) Times(b int) (q, k []float64) {
	if p.Kind != PosReal {
		panic("posenc: Times of " + p.Describe() + " positions")
	}
	if p.Batch == 1 {
		b = 0
	}
	return p.QTimes[b*p.TQ : (b+1)*p.TQ], p.KTimes[b*p.TK : (b+1)*p.TK]
}

// realInput returns a node [shape] of the site's dtype holding fill(s.Pos)
// (fill writes shape.TotalSize() values): an input registered in
// s.Pos.Feed under (owner, what, shape, dtype) if the positions have a
// Feed (so that the layers sharing owner share the node, and Bind refills
// it), else a constant cached in cache per positions Key. what names the
// data in errors ("the alibi bias of real positions (2 heads, causal)");
// name is the node's name.
func realInput(s *Site, cache *tableCache[realKey, *tensor.Dense], owner any, what, name string, shape tensor.Shape,
	fill func(p *Positions, dst []float64) error) (*G.Node, error) {
	dt, p := s.Dtype(), s.Pos
	if p.Feed != nil {
		key := fmt.Sprintf("real %p %s %v %v", owner, what, shape, dt)
		return p.Feed.floatInput(s.G, key, "the "+what, name, p, dt, shape, fill)
	}
	v, err := cache.get(realKey{pos: p.Key(), what: fmt.Sprintf("%s %v", what, shape), dt: dt}, func() (*tensor.Dense, error) {
		vals := make([]float64, shape.TotalSize())
		if err := fill(p, vals); err != nil {
			return nil, err
		}
		return graph.FromFloat64s(dt, shape, vals), nil
	})
	if err != nil {
		return nil, err
	}
	return G.NewTensor(s.G, dt, shape.Dims(), G.WithShape(shape...), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, name))), nil
}

// realBiasShape is the shape of a bias of real positions with h heads
// (1: shared by the heads): [Batch, h, TQ, TK] per example, [h, TQ, TK]
// shared by the batch.
func realBiasShape(p *Positions, h int) tensor.Shape {
	if p.Batch > 1 {
		return tensor.Shape{p.Batch, h, p.TQ, p.TK}
	}
	return tensor.Shape{h, p.TQ, p.TK}
}

// checkCausalTimes returns an error naming the encoding, the example and
// the pair unless every key visible to a query under the causal mask of
// span (key j visible to query i if KStart+j <= QStart+i) has a time not
// later than the query's: t_k[j] <= t_q[i]. Sorted self-attention times,
// and the query times of a next-event model (query i at the time of event
// i+1, key j at event j), pass.
func checkCausalTimes(name string, span Span, p *Positions) error {
	for b := 0; b < p.Batch; b++ {
		q, k := p.Times(b)
		for i, tq := range q {
			for j, tk := range k {
				if span.KStart+j > span.QStart+i {
					break
				}
				if tk > tq {
					return errors.Errorf("posenc %s: causal real positions: example %d: key %d at time %g is visible to query %d at the earlier time %g (times must not decrease along the causal order)",
						name, b, j, tk, i, tq)
				}
			}
		}
	}
	return nil
}

// realNodeKey identifies the bias node of real positions for one graph
// (every layer of a forward pass shares it).
type realNodeKey struct {
	pos string
	h   int
	p   *graph.Params
}

// realScoreBias returns the bias of real positions that build makes for
// the site, built once per (graph, positions Key, H, parameter store) and
// cached in nodes (so every layer of a forward pass shares it); errors
// are wrapped with the encoding's name.
func realScoreBias(name string, nodes *graphNodes[realNodeKey], s *Site, build func(*Site) (*G.Node, error)) (*G.Node, error) {
	return nodes.get(s.G, realNodeKey{pos: s.Pos.Key(), h: s.H, p: s.Params}, func() (*G.Node, error) {
		bias, err := build(s)
		return bias, errors.Wrap(err, "posenc "+name)
	})
}

// realPairs fills dst [Batch*TQ*TK] (row-major [Batch, TQ, TK]) with
// f(t_q, t_k) of every (query, key) pair of p.
func realPairs(p *Positions, dst []float64, f func(tq, tk float64) float64) {
	for b := 0; b < p.Batch; b++ {
		q, k := p.Times(b)
		for i, tq := range q {
			row := dst[(b*p.TQ+i)*p.TK : (b*p.TQ+i+1)*p.TK]
			for j, tk := range k {
				row[j] = f(tq, tk)
			}
		}
	}
}

// realPairInput is realInput of f(t_q, t_k) over every pair of the site's
// positions, shape [Batch*TQ*TK] (1-D) or [Batch*TQ*TK, 1] (column).
func realPairInput(s *Site, cache *tableCache[realKey, *tensor.Dense], owner any, what, name string, column bool,
	f func(tq, tk float64) float64) (*G.Node, error) {
	p := s.Pos
	shape := tensor.Shape{p.Batch * p.TQ * p.TK}
	if column {
		shape = tensor.Shape{shape[0], 1}
	}
	return realInput(s, cache, owner, what, name, shape, func(p *Positions, dst []float64) error {
		realPairs(p, dst, f)
		return nil
	})
}

// realPairBias turns a table [Batch*TQ*TK, h] with one row per (example,
// query, key) pair (row-major) into the bias [Batch, h, TQ, TK] (Batch >
// 1) or [h, TQ, TK] (Batch 1): one gather with host indices that depend
// on the shapes only (so fed positions keep them), whose gradient
// scatter-adds into the table.
func realPairBias(table *G.Node, p *Positions, h int) (*G.Node, error) {
	n := p.TQ * p.TK
	if ts := table.Shape(); len(ts) != 2 || ts[0] != p.Batch*n || ts[1] != h {
		return nil, errors.Errorf("pair table has shape %v, want [%d, %d]", ts, p.Batch*n, h)
	}
	flat := make([]int, p.Batch*h*n)
	for b := 0; b < p.Batch; b++ {
		for hh := 0; hh < h; hh++ {
			o := (b*h + hh) * n
			for k := 0; k < n; k++ {
				flat[o+k] = (b*n+k)*h + hh
			}
		}
	}
	m, err := graph.Reshape(table, 1, p.Batch*n*h)
	if err != nil {
		return nil, err
	}
	out, err := graph.GatherRel(m, flat, 1, len(flat))
	if err != nil {
		return nil, err
	}
	return graph.Reshape(out, realBiasShape(p, h)...)
}

// errRealTiles is the error of BiasTable and BiasIndex of the TableBiasers
// that serve real positions (fire, dpb) on a real site: their bias is not
// a lookup into a table shared by the batch there.
func errRealTiles(name string) error {
	return errors.Errorf("posenc %s: no bias table or tiles for real positions (use ScoreBias)", name)
}
