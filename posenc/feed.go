package posenc

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Feed makes per-example positions rebindable, so that one graph serves
// every batch. Without a Feed, encodings turn positions into constants of
// the graph (GatherRel indices, degree ids): right for positions that never
// change (a text's span, an image's grid), but a graph whose relations
// differ per batch (graph distances, syntax-tree relations) would need a
// new graph, and a new machine, every step. With one (Positions.Feed set
// before the model is built), the encodings that read per-example host data
// make it a tensor.Int input node registered in the Feed instead, filled
// from the positions given at build time, and
//
//	feed.Bind(next) // next: same Kind, Batch, TQ, TK as at build
//
// refills and rebinds (G.Let) every registered node from next before the
// machine's next run. The encodings that use it: every TableBiaser through
// TileBias over the full site (GraphormerSpatial, TreeRel; the bias is then
// graph.TableBias of the table and a [Batch, TQ, TK] id node, one node per
// table shared by the layers that share the table), and GraphormerCentrality
// (degree ids [Batch, N]). Encodings of real positions (PosReal: alibi,
// rope, kerple-log, kerple-power, fire, dpb; see NewReal) register float
// input nodes of the graph's dtype holding data derived from the times on
// the host (ALiBi's bias, RoPE's angles, the time differences). Encodings
// that read no per-example data (none, RoPE and T5 on the span) register
// nothing, and Bind then does nothing.
//
// A Feed belongs to one graph. Positions derived from fed positions
// (WithVirtualNode) do not carry the Feed: set it on the derived value and
// bind derived values. A Feed is safe for concurrent use.
type Feed struct {
	mu     sync.Mutex
	items  []*feedItem
	shared map[string]*G.Node
	bound  atomic.Pointer[Positions] // the positions of the last Bind, nil before any
}

// Bound returns the positions of the last successful Bind, nil before any.
// The streaming attention's tile indexers read them (StreamBias), so the
// caller must not change them until the next Bind.
func (f *Feed) Bound() *Positions { return f.bound.Load() }

// feedItem is one registered input node: fill computes its ids from
// positions into dst (len = the node's size), or, for a float node (real
// positions), fillF its values in float64; kind, batch, tq and tk are the
// shape of the positions it was built with.
type feedItem struct {
	what          string
	node          *G.Node
	val           *tensor.Dense
	fill          func(p *Positions, dst []int) error
	fillF         func(p *Positions, dst []float64) error
	kind          PosKind
	batch, tq, tk int
	scratch       []int
	scratchF      []float64
}

// NewFeed returns an empty Feed.
func NewFeed() *Feed { return &Feed{} }

// Len returns the number of registered input nodes.
func (f *Feed) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.items)
}

// Bind fills every registered node from p and binds it (G.Let). p must
// have the Kind, Batch, TQ and TK of the positions the nodes were built
// from; each encoding checks the rest (relations in its table, degrees).
// Bind is all or nothing: on an error (naming the encoding and the
// mismatch) no node changes. A nil p is an error; a Feed with no nodes
// accepts any p.
func (f *Feed) Bind(p *Positions) error {
	if p == nil {
		return errors.New("posenc: feed: no positions to bind")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range f.items {
		if p.Kind != it.kind || p.Batch != it.batch || p.TQ != it.tq || p.TK != it.tk {
			return errors.Errorf("posenc: feed: %s were built for %s positions of batch %d, %d queries and %d keys; got %s positions of batch %d, %d queries and %d keys",
				it.what, it.kind, it.batch, it.tq, it.tk, p.Kind, p.Batch, p.TQ, p.TK)
		}
		n := it.val.Shape().TotalSize()
		var err error
		if it.fillF != nil {
			if len(it.scratchF) != n {
				it.scratchF = make([]float64, n)
			}
			err = it.fillF(p, it.scratchF)
		} else {
			if len(it.scratch) != n {
				it.scratch = make([]int, n)
			}
			err = it.fill(p, it.scratch)
		}
		if err != nil {
			return errors.WithMessagef(err, "posenc: feed: %s", it.what)
		}
	}
	for _, it := range f.items {
		if it.fillF != nil {
			setFloats(it.val, it.scratchF)
		} else {
			copy(it.val.Data().([]int), it.scratch)
		}
		if err := G.Let(it.node, it.val); err != nil {
			return errors.Wrapf(err, "posenc: feed: binding %s", it.what)
		}
	}
	f.bound.Store(p)
	return nil
}

// input returns the Int input node [shape] of the feed registered under
// key (creating it, filled from p, on first use): key identifies what the
// node holds (the same key gives the same node, so layers that share a
// table share its ids), what names it in errors, name is the node's name.
func (f *Feed) input(g *G.ExprGraph, key, what, name string, p *Positions, shape tensor.Shape, fill func(p *Positions, dst []int) error) (*G.Node, error) {
	return f.register(key, func() (*feedItem, error) {
		vals := make([]int, shape.TotalSize())
		if err := fill(p, vals); err != nil {
			return nil, err
		}
		val := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
		n := G.NewTensor(g, tensor.Int, shape.Dims(), G.WithShape(shape...), G.WithName(graph.UniqueName(g, name)), G.WithValue(val))
		return &feedItem{what: what, node: n, val: val, fill: fill, kind: p.Kind, batch: p.Batch, tq: p.TQ, tk: p.TK}, nil
	})
}

// floatInput is input for a float node of dtype dt (real positions):
// fill computes its values in float64, converted to dt.
func (f *Feed) floatInput(g *G.ExprGraph, key, what, name string, p *Positions, dt tensor.Dtype, shape tensor.Shape, fill func(p *Positions, dst []float64) error) (*G.Node, error) {
	return f.register(key, func() (*feedItem, error) {
		vals := make([]float64, shape.TotalSize())
		if err := fill(p, vals); err != nil {
			return nil, err
		}
		val := graph.FromFloat64s(dt, shape, vals)
		n := G.NewTensor(g, dt, shape.Dims(), G.WithShape(shape...), G.WithName(graph.UniqueName(g, name)), G.WithValue(val))
		return &feedItem{what: what, node: n, val: val, fillF: fill, kind: p.Kind, batch: p.Batch, tq: p.TQ, tk: p.TK}, nil
	})
}

// register returns the node registered under key, or registers the item
// that build makes (under the feed's lock).
func (f *Feed) register(key string, build func() (*feedItem, error)) (*G.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.shared[key]; ok {
		return n, nil
	}
	it, err := build()
	if err != nil {
		return nil, err
	}
	f.items = append(f.items, it)
	if f.shared == nil {
		f.shared = map[string]*G.Node{}
	}
	f.shared[key] = it.node
	return it.node, nil
}

// setFloats writes src into the float32 or float64 tensor d (converted).
func setFloats(d *tensor.Dense, src []float64) {
	switch v := d.Data().(type) {
	case []float32:
		for i, x := range src {
			v[i] = float32(x)
		}
	case []float64:
		copy(v, src)
	}
}

// fedTableBias is TileBias over the full site for positions with a Feed:
// graph.TableBias of the table and an id node [Batch, TQ, TK] registered
// in the feed (see Feed).
func fedTableBias(e TableBiaser, s *Site, table *G.Node) (*G.Node, error) {
	p := s.Pos
	rows := table.Shape()[0]
	t := s.Full()
	shape := tensor.Shape{p.Batch, p.TQ, p.TK}
	fill := func(np *Positions, dst []int) error {
		sc := *s
		sc.Pos = np
		n := np.TQ * np.TK
		for b := 0; b < np.Batch; b++ {
			if _, err := e.BiasIndex(&sc, b, t, dst[b*n:(b+1)*n]); err != nil {
				return err
			}
		}
		for i, r := range dst {
			if r < 0 || r >= rows {
				return errors.Errorf("posenc %s: bias index %d of pair %d is outside the table's %d rows", e.Name(), r, i, rows)
			}
		}
		return nil
	}
	key := fmt.Sprintf("bias %s %p %v", e.Name(), table, shape)
	ids, err := p.Feed.input(s.G, key, "the "+e.Name()+" relation ids", e.Name()+"_rel_ids", p, shape, fill)
	if err != nil {
		return nil, err
	}
	out, err := graph.TableBias(table, ids) // [Batch, H|1, TQ, TK]
	return out, errors.Wrapf(err, "posenc %s: bias", e.Name())
}

// fedDegrees returns the degree id node [Batch, N] of GraphormerCentrality
// for positions with a Feed.
func fedDegrees(e *GraphormerCentrality, s *Site, p *Positions) (*G.Node, error) {
	fill := func(np *Positions, dst []int) error {
		deg, err := GraphDegrees(np, e.MaxDegree)
		if err != nil {
			return err
		}
		copy(dst, deg)
		return nil
	}
	key := fmt.Sprintf("degrees %p %d", e, e.MaxDegree)
	return p.Feed.input(s.G, key, "the graphormer-centrality degrees", "centrality_ids", p, tensor.Shape{p.Batch, p.TQ}, fill)
}
