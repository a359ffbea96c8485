package graph

import (
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Init fills a freshly created parameter tensor. rng is the Params' seeded
// generator, so a model's initial weights depend only on the seed and the order
// in which its parameters are created.
type Init func(rng *rand.Rand, data []float64)

// Normal returns an Init drawing from N(0, std²).
func Normal(std float64) Init {
	return func(rng *rand.Rand, data []float64) {
		for i := range data {
			data[i] = rng.NormFloat64() * std
		}
	}
}

// Constant returns an Init that sets every element to v.
func Constant(v float64) Init {
	return func(_ *rand.Rand, data []float64) {
		for i := range data {
			data[i] = v
		}
	}
}

// Zeros is Constant(0).
var Zeros = Constant(0)

// Ones is Constant(1).
var Ones = Constant(1)

// ParamInfo describes one learnable tensor of a Params store.
type ParamInfo struct {
	Name  string
	Shape tensor.Shape
	// Decay reports whether decoupled weight decay applies (weight matrices
	// and embeddings); false for biases, LayerNorm gains and position-encoding
	// parameters.
	Decay bool
}

// Params is the store of a model's named learnable tensors. Every graph built
// from the same Params shares the same backing tensors, so a training graph at
// length L and an evaluation graph at length 8L see the same weights, and an
// optimiser updating them in place updates both.
//
// Node returns one node per (graph, name); calling it again for the same graph
// returns the same node, which is how tables shared by all layers (the T5 bias)
// stay one node.
//
// Two stores may be used in one graph only if their parameter names differ:
// Gorgonia merges input nodes of equal name, type and shape, so two stores'
// parameters of one name would silently become one node. Node returns an
// error naming both stores and the parameter instead (see SetName).
//
// A Params is not safe for concurrent use.
type Params struct {
	name  string
	dt    tensor.Dtype
	rng   *rand.Rand
	order []string
	info  map[string]ParamInfo
	vals  map[string]*tensor.Dense
	nodes map[*G.ExprGraph]map[string]*G.Node
}

// NewParams returns an empty store of dtype dt (tensor.Float32 or
// tensor.Float64) whose initialisers draw from a generator seeded with seed.
func NewParams(dt tensor.Dtype, seed int64) *Params {
	p := &Params{
		name:  "params#" + strconv.FormatInt(storeCount.Add(1), 10),
		dt:    dt,
		rng:   rand.New(rand.NewSource(seed)),
		info:  map[string]ParamInfo{},
		vals:  map[string]*tensor.Dense{},
		nodes: map[*G.ExprGraph]map[string]*G.Node{},
	}
	stores.add(p)
	return p
}

// Dtype is the store's element type.
func (p *Params) Dtype() tensor.Dtype { return p.dt }

// Name is the store's name in error messages: "params#N" (the N-th store of
// the process) unless set with SetName.
func (p *Params) Name() string { return p.name }

// SetName names the store in error messages (e.g. "model", "probe") and
// returns p.
func (p *Params) SetName(name string) *Params { p.name = name; return p }

// storeCount numbers the stores.
var storeCount atomic.Int64

// stores lists the live stores (weakly), so that the error of a name clash
// can name the store that owns the other node.
var stores liveStores

type liveStores struct {
	mu   sync.Mutex
	list []weak.Pointer[Params]
}

func (l *liveStores) add(p *Params) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.list[:0]
	for _, w := range l.list {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	l.list = append(live, weak.Make(p))
}

// owner returns the store whose node of g is n, or nil.
func (l *liveStores) owner(g *G.ExprGraph, n *G.Node) *Params {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.list {
		if p := w.Value(); p != nil && p.nodes[g][n.Name()] == n {
			return p
		}
	}
	return nil
}

// checkClash returns an error if g already has a node called name that is
// not p's: another store's parameter, or any other input of that name.
func (p *Params) checkClash(g *G.ExprGraph, name string) error {
	for _, n := range g.ByName(name) {
		if o := stores.owner(g, n); o != nil {
			return errors.Errorf("param %q of store %s: the graph already has parameter %q of store %s (Gorgonia would merge the two into one node; give the stores' parameters distinct names)",
				name, p.name, name, o.name)
		}
		return errors.Errorf("param %q of store %s: the graph already has a node named %q (%v %v) that is not this store's (Gorgonia may merge equal input nodes)",
			name, p.name, name, n.Dtype(), n.Shape())
	}
	return nil
}

// Node returns the node of parameter name in g, creating the parameter (with
// init) on first use in the store and the node on first use in g. It returns an
// error if name exists with another shape, or if g already has a node called
// name that is not this store's (another store's parameter, which Gorgonia
// would merge with this one, or any other node of that name); the error
// names both stores and the parameter, and the store is left unchanged.
func (p *Params) Node(g *G.ExprGraph, name string, shape tensor.Shape, init Init, decay bool) (*G.Node, error) {
	if byName, ok := p.nodes[g]; ok {
		if n, ok := byName[name]; ok {
			if !n.Shape().Eq(shape) {
				return nil, errors.Errorf("param %q: requested shape %v, already %v", name, shape, n.Shape())
			}
			return n, nil
		}
	}
	if err := p.checkClash(g, name); err != nil {
		return nil, err
	}
	v, ok := p.vals[name]
	if !ok {
		data := make([]float64, shape.TotalSize())
		init(p.rng, data)
		v = fromFloat64(p.dt, shape, data)
		p.vals[name] = v
		p.info[name] = ParamInfo{Name: name, Shape: shape.Clone(), Decay: decay}
		p.order = append(p.order, name)
	} else if !v.Shape().Eq(shape) {
		return nil, errors.Errorf("param %q: requested shape %v, stored %v", name, shape, v.Shape())
	}
	n := G.NewTensor(g, p.dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
	if p.nodes[g] == nil {
		p.nodes[g] = map[string]*G.Node{}
	}
	p.nodes[g][name] = n
	return n, nil
}

// Names lists the parameters in creation order.
func (p *Params) Names() []string { return append([]string(nil), p.order...) }

// Info describes parameter name.
func (p *Params) Info(name string) (ParamInfo, bool) { i, ok := p.info[name]; return i, ok }

// Value is the backing tensor of parameter name (nil if absent). Writes to it
// are seen by every graph.
func (p *Params) Value(name string) *tensor.Dense { return p.vals[name] }

// Nodes returns g's nodes of all parameters of the store that g uses, sorted
// by name.
func (p *Params) Nodes(g *G.ExprGraph) G.Nodes {
	byName := p.nodes[g]
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(G.Nodes, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}

// Forget drops the store's record of g's nodes (call when g is discarded).
func (p *Params) Forget(g *G.ExprGraph) { delete(p.nodes, g) }

// Count is the total number of scalar parameters.
func (p *Params) Count() int {
	n := 0
	for _, v := range p.vals {
		n += v.Shape().TotalSize()
	}
	return n
}

// Set copies data into parameter name, converting to the store's dtype.
func (p *Params) Set(name string, data []float64) error {
	v, ok := p.vals[name]
	if !ok {
		return errors.Errorf("param %q: no such parameter", name)
	}
	if len(data) != v.Shape().TotalSize() {
		return errors.Errorf("param %q: %d values for shape %v", name, len(data), v.Shape())
	}
	switch d := v.Data().(type) {
	case []float32:
		for i, x := range data {
			d[i] = float32(x)
		}
	case []float64:
		copy(d, data)
	}
	return nil
}

// Randomize sets every parameter, in the order of Names, to independent
// draws std·N(0, 1) from rng (a math/rand or math/rand/v2 generator): the
// random weights of gradient checks and reference comparisons, where the
// trained-from-init scale is too small to exercise a model.
func (p *Params) Randomize(rng interface{ NormFloat64() float64 }, std float64) {
	for _, n := range p.order {
		v := p.vals[n]
		switch d := v.Data().(type) {
		case []float32:
			for i := range d {
				d[i] = float32(rng.NormFloat64() * std)
			}
		case []float64:
			for i := range d {
				d[i] = rng.NormFloat64() * std
			}
		}
	}
}

// Float64s returns a copy of parameter name's values as float64.
func (p *Params) Float64s(name string) []float64 {
	v, ok := p.vals[name]
	if !ok {
		return nil
	}
	return ToFloat64s(v)
}

// ToFloat64s copies the data of a float32 or float64 tensor or scalar (a
// tensor.Tensor or G.Value) to a new []float64.
func ToFloat64s(t interface{ Data() interface{} }) []float64 {
	switch d := t.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out
	case []float64:
		return append([]float64(nil), d...)
	case float32:
		return []float64{float64(d)}
	case float64:
		return []float64{d}
	}
	return nil
}

func fromFloat64(dt tensor.Dtype, shape tensor.Shape, data []float64) *tensor.Dense {
	switch dt {
	case tensor.Float32:
		d := make([]float32, len(data))
		for i, x := range data {
			d[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case tensor.Float64:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
	panic("graph: unsupported dtype " + dt.String())
}

// CopyFloat32s writes x into the float32 or float64 tensor d (converted),
// in place: host batches of float32 inputs (image patches, node features)
// into the value a graph input is bound to. d must hold at least len(x)
// elements; another dtype is left unchanged.
func CopyFloat32s(d *tensor.Dense, x []float32) {
	switch v := d.Data().(type) {
	case []float32:
		copy(v, x)
	case []float64:
		for i, f := range x {
			v[i] = float64(f)
		}
	}
}

// FromFloat64s returns a new tensor of dtype dt and the given shape holding
// data (converted). It panics on a dtype other than Float32 or Float64.
func FromFloat64s(dt tensor.Dtype, shape tensor.Shape, data []float64) *tensor.Dense {
	return fromFloat64(dt, shape, append([]float64(nil), data...))
}

// UniqueName returns base, or base_N for the smallest N ≥ 1 that g does not
// use yet. Gorgonia may merge input nodes of equal name, type and shape, so
// every fixed buffer added to a graph gets its own name.
func UniqueName(g *G.ExprGraph, base string) string {
	if len(g.ByName(base)) == 0 {
		return base
	}
	for i := 1; ; i++ {
		n := base + "_" + strconv.Itoa(i)
		if len(g.ByName(n)) == 0 {
			return n
		}
	}
}

// Scalar returns a constant scalar node of g's dtype dt holding v.
func Scalar(g *G.ExprGraph, dt tensor.Dtype, v float64) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// RepeatMask returns m [Tq, Tk] repeated n times as [n, 1, Tq, Tk].
func RepeatMask(m *tensor.Dense, n int) *tensor.Dense {
	sh := m.Shape()
	tq, tk := sh[0], sh[1]
	src := ToFloat64s(m)
	out := make([]float64, 0, n*len(src))
	for i := 0; i < n; i++ {
		out = append(out, src...)
	}
	return fromFloat64(m.Dtype(), tensor.Shape{n, 1, tq, tk}, out)
}
