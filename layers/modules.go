package layers

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Linear is y = x W + b with W [In, Out] (stored input-major, so a PyTorch
// weight is its transpose) and an optional bias b [Out]. Parameters:
// NAME/w (decayed) and NAME/b (not decayed).
type Linear struct {
	Name    string
	In, Out int
	W, B    *G.Node
}

// LinearConfig configures a Linear.
type LinearConfig struct {
	Name    string
	In, Out int
	Bias    bool
	InitStd float64 // weights ~ N(0, InitStd²); biases start at zero
	// WName overrides the weight's parameter name (default Name+"/w").
	WName string
	// BName overrides the bias's parameter name (default Name+"/b").
	BName string
}

// NewLinear creates (or reuses, when p already has them) the parameters of a
// Linear in g.
func NewLinear(g *G.ExprGraph, p *graph.Params, cfg LinearConfig) (*Linear, error) {
	if cfg.In <= 0 || cfg.Out <= 0 {
		return nil, errors.Errorf("linear %s: sizes %dx%d must be positive", cfg.Name, cfg.In, cfg.Out)
	}
	wn, bn := cfg.WName, cfg.BName
	if wn == "" {
		wn = cfg.Name + "/w"
	}
	if bn == "" {
		bn = cfg.Name + "/b"
	}
	l := &Linear{Name: cfg.Name, In: cfg.In, Out: cfg.Out}
	var err error
	if l.W, err = p.Node(g, wn, tensor.Shape{cfg.In, cfg.Out}, graph.Normal(cfg.InitStd), true); err != nil {
		return nil, err
	}
	if cfg.Bias {
		if l.B, err = p.Node(g, bn, tensor.Shape{cfg.Out}, graph.Zeros, false); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Fwd maps x [N, In] to [N, Out], or more generally x [..., In] to
// [..., Out], as one fused op (graph.Linear: the product with the bias
// folded in, no reshapes).
func (l *Linear) Fwd(x *G.Node) (*G.Node, error) {
	if s := x.Shape(); s.Dims() < 2 || s[s.Dims()-1] != l.In {
		return nil, errors.Errorf("linear %s: input shape %v, want [N, %d] or [..., %d]", l.Name, s, l.In, l.In)
	}
	y, err := graph.Linear(x, l.W, l.B)
	return y, errors.Wrapf(err, "linear %s", l.Name)
}

// Learnables returns W and, if present, B.
func (l *Linear) Learnables() G.Nodes {
	if l.B == nil {
		return G.Nodes{l.W}
	}
	return G.Nodes{l.W, l.B}
}

// Embedding is a lookup table [Vocab, D] (parameter NAME, decayed).
type Embedding struct {
	Name     string
	Vocab, D int
	Table    *G.Node
}

// NewEmbedding creates the table, initialised N(0, std²).
func NewEmbedding(g *G.ExprGraph, p *graph.Params, name string, vocab, d int, std float64) (*Embedding, error) {
	if vocab <= 0 || d <= 0 {
		return nil, errors.Errorf("embedding %s: sizes %dx%d must be positive", name, vocab, d)
	}
	t, err := p.Node(g, name, tensor.Shape{vocab, d}, graph.Normal(std), true)
	if err != nil {
		return nil, err
	}
	return &Embedding{Name: name, Vocab: vocab, D: d, Table: t}, nil
}

// Fwd maps integer ids (tensor.Int) of shape S to vectors S+[D]. An id
// outside [0, Vocab) is an error when the graph runs.
func (e *Embedding) Fwd(ids *G.Node) (*G.Node, error) { return graph.Embedding(e.Table, ids) }

// Learnables returns the table.
func (e *Embedding) Learnables() G.Nodes { return G.Nodes{e.Table} }

// LayerNorm normalises over the last axis with gain NAME/gamma (init 1) and
// bias NAME/beta (init 0), neither decayed (Ba et al. 2016).
type LayerNorm struct {
	Name        string
	D           int
	Eps         float64
	Gamma, Beta *G.Node
}

// NewLayerNorm creates the gain and bias of a LayerNorm over d features.
func NewLayerNorm(g *G.ExprGraph, p *graph.Params, name string, d int, eps float64) (*LayerNorm, error) {
	if d <= 0 || eps <= 0 {
		return nil, errors.Errorf("layernorm %s: d=%d and eps=%g must be positive", name, d, eps)
	}
	ln := &LayerNorm{Name: name, D: d, Eps: eps}
	var err error
	if ln.Gamma, err = p.Node(g, name+"/gamma", tensor.Shape{d}, graph.Ones, false); err != nil {
		return nil, err
	}
	if ln.Beta, err = p.Node(g, name+"/beta", tensor.Shape{d}, graph.Zeros, false); err != nil {
		return nil, err
	}
	return ln, nil
}

// Fwd normalises x [..., D].
func (ln *LayerNorm) Fwd(x *G.Node) (*G.Node, error) {
	y, err := graph.LayerNorm(x, ln.Gamma, ln.Beta, ln.Eps)
	return y, errors.Wrapf(err, "layernorm %s", ln.Name)
}

// Learnables returns gamma and beta.
func (ln *LayerNorm) Learnables() G.Nodes { return G.Nodes{ln.Gamma, ln.Beta} }

// FeedForward is Linear(d, ff) -> GELU (tanh form) -> Linear(ff, d), with
// parameters NAME/w1, NAME/b1, NAME/w2, NAME/b2.
type FeedForward struct {
	Name     string
	Up, Down *Linear
}

// NewFeedForward creates a position-wise feed-forward network.
func NewFeedForward(g *G.ExprGraph, p *graph.Params, name string, d, ff int, std float64) (*FeedForward, error) {
	up, err := NewLinear(g, p, LinearConfig{Name: name, In: d, Out: ff, Bias: true, InitStd: std, WName: name + "/w1", BName: name + "/b1"})
	if err != nil {
		return nil, err
	}
	down, err := NewLinear(g, p, LinearConfig{Name: name, In: ff, Out: d, Bias: true, InitStd: std, WName: name + "/w2", BName: name + "/b2"})
	if err != nil {
		return nil, err
	}
	return &FeedForward{Name: name, Up: up, Down: down}, nil
}

// Fwd maps x [N, d] (or [..., d]) to [N, d] (or [..., d]).
func (f *FeedForward) Fwd(x *G.Node) (*G.Node, error) {
	h, err := f.Up.Fwd(x) // [N, ff]
	if err != nil {
		return nil, err
	}
	if h, err = graph.GELU(h); err != nil {
		return nil, errors.Wrapf(err, "ffn %s", f.Name)
	}
	return f.Down.Fwd(h) // [N, d]
}

// Learnables returns the parameters of both Linears.
func (f *FeedForward) Learnables() G.Nodes { return append(f.Up.Learnables(), f.Down.Learnables()...) }
