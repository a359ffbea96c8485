package posenc

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "none", Kind: KindNone}, func(Options) (Encoding, error) { return None{}, nil })
	register(Info{Name: "sinusoidal", Kind: KindAbsolute}, func(o Options) (Encoding, error) {
		if o.SinusoidalScale < 0 {
			return nil, errors.Errorf("posenc sinusoidal: SinusoidalScale %v is negative", o.SinusoidalScale)
		}
		e := NewSinusoidal()
		e.Scale = o.SinusoidalScale
		return e, nil
	})
	register(Info{Name: "learned", Kind: KindAbsolute, Learnable: true}, func(o Options) (Encoding, error) { return NewLearned(o.MaxLen, o.InitStd) })
}

// None is the baseline without position information. In a causal model the
// mask alone still leaks some order information.
type None struct{}

// Name implements Encoding.
func (None) Name() string { return "none" }

// Sinusoidal is the fixed absolute encoding of Vaswani et al. 2017,
// "Attention Is All You Need", added to the token embeddings:
//
//	PE[p, 2i]   = sin(p / 10000^(2i/d))
//	PE[p, 2i+1] = cos(p / 10000^(2i/d))
//
// (sines and cosines interleaved), times Scale. It has no parameters and
// works at any length; the table of a (start, T, d, scale, dtype) is
// computed on the host once and cached. The zero value is ready to use
// (Scale 0: the default), and one value may build graphs from several
// goroutines at once.
type Sinusoidal struct {
	// Scale multiplies the table; 0 means 1/√d_model (see
	// Options.SinusoidalScale).
	Scale float64
	cache tableCache[sinusoidKey, *tensor.Dense]
}

type sinusoidKey struct {
	start, t, d int
	scale       float64
	dt          tensor.Dtype
}

// NewSinusoidal returns the sinusoidal encoding with the default scale
// 1/√d_model.
func NewSinusoidal() *Sinusoidal { return &Sinusoidal{} }

// Name implements Encoding.
func (*Sinusoidal) Name() string { return "sinusoidal" }

// SinusoidTable returns PE [T, d] for positions start..start+T-1 as float64.
func SinusoidTable(start, t, d int) []float64 {
	out := make([]float64, t*d)
	for p := 0; p < t; p++ {
		pos := float64(start + p)
		for i := 0; 2*i < d; i++ {
			ang := pos / math.Pow(10000, float64(2*i)/float64(d))
			out[p*d+2*i] = math.Sin(ang)
			if 2*i+1 < d {
				out[p*d+2*i+1] = math.Cos(ang)
			}
		}
	}
	return out
}

// AddToInput implements InputAdder: x [B, T, d] + Scale·PE[start:start+T].
func (e *Sinusoidal) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	sh := x.Shape()
	if sh.Dims() != 3 || sh[2] != s.DModel {
		return nil, errors.Errorf("posenc sinusoidal: input has shape %v, want [B, T, %d]", sh, s.DModel)
	}
	return graph.BroadcastAdd(x, e.tableNode(s, s.QStart, sh[1]))
}

// tableNode is the constant node Scale·PE[start:start+t] [t, d] of s's
// graph, its values computed once per (start, t, d, scale, dtype).
func (e *Sinusoidal) tableNode(s *Site, start, t int) *G.Node {
	d := s.DModel
	scale := e.Scale
	if scale == 0 {
		scale = DefaultSinusoidalScale(d)
	}
	key := sinusoidKey{start: start, t: t, d: d, scale: scale, dt: s.Dtype()}
	tab, _ := e.cache.get(key, func() (*tensor.Dense, error) {
		pe := SinusoidTable(start, t, d)
		for i := range pe {
			pe[i] *= scale
		}
		return graph.FromFloat64s(key.dt, tensor.Shape{t, d}, pe), nil
	})
	return G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(t, d), G.WithValue(tab), G.WithName(graph.UniqueName(s.G, "sinusoid_pe")))
}

// Learned is a learned absolute position table [MaxLen, d] (parameter
// "pos_emb", BERT/GPT-2 style), added to the token embeddings. It cannot
// extrapolate: positions at or beyond MaxLen are an error, never clamped.
type Learned struct {
	MaxLen  int
	InitStd float64
}

// NewLearned returns a learned table of maxLen rows initialised N(0, std²).
func NewLearned(maxLen int, std float64) (*Learned, error) {
	if maxLen <= 0 {
		return nil, errors.Errorf("posenc learned: max length %d must be positive", maxLen)
	}
	return &Learned{MaxLen: maxLen, InitStd: std}, nil
}

// Name implements Encoding.
func (*Learned) Name() string { return "learned" }

// ErrBeyondTable is returned (wrapped) when a table is asked for positions it
// does not have: the learned absolute table beyond MaxLen, learned-2d on
// another grid without resampling, swin beyond its offsets. Callers that
// mark such cells n/a (the studies) test it with errors.Is.
var ErrBeyondTable = errors.New("position beyond the learned table")

// beyondTable is an error with the encoding's own message for which
// errors.Is(err, ErrBeyondTable) holds.
type beyondTable struct{ msg string }

func (e beyondTable) Error() string        { return e.msg }
func (e beyondTable) Is(target error) bool { return target == ErrBeyondTable }

// errBeyondTable formats an error that is ErrBeyondTable (see beyondTable).
func errBeyondTable(format string, args ...any) error {
	return errors.WithStack(beyondTable{fmt.Sprintf(format, args...)})
}

// AddToInput implements InputAdder.
func (e *Learned) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	sh := x.Shape()
	if sh.Dims() != 3 || sh[2] != s.DModel {
		return nil, errors.Errorf("posenc learned: input has shape %v, want [B, T, %d]", sh, s.DModel)
	}
	t, d := sh[1], sh[2]
	if s.QStart < 0 || s.QStart+t > e.MaxLen {
		return nil, errors.Wrapf(ErrBeyondTable, "posenc learned: positions %d..%d asked, the table has %d (learned absolute positions cannot extrapolate)", s.QStart, s.QStart+t-1, e.MaxLen)
	}
	tab, err := s.Params.Node(s.G, "pos_emb", tensor.Shape{e.MaxLen, d}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, err
	}
	pe := tab
	if s.QStart != 0 || t != e.MaxLen {
		if pe, err = G.Slice(tab, G.S(s.QStart, s.QStart+t)); err != nil {
			return nil, errors.Wrap(err, "posenc learned: slice")
		}
	}
	return graph.BroadcastAdd(x, pe)
}

// Accepts implements PositionAccepter: with no hooks, None serves every
// kind of positions.
func (None) Accepts() []PosKind { return PosKinds }

// stepRows returns onehot [B, P] · tab [P, d] reshaped to [B, 1, d] and
// added to x [B, 1, d] (StepAdder).
func stepRows(name string, s *Site, x, onehot, tab *G.Node) (*G.Node, error) {
	sh, oh := x.Shape(), onehot.Shape()
	if sh.Dims() != 3 || sh[1] != 1 || sh[2] != s.DModel || oh.Dims() != 2 || oh[0] != sh[0] {
		return nil, errors.Errorf("posenc %s: step input %v and positions %v, want [B, 1, %d] and [B, P]", name, sh, oh, s.DModel)
	}
	rows, err := G.Mul(onehot, tab) // [B, d]
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s: step rows", name)
	}
	if rows, err = graph.Reshape(rows, sh[0], 1, sh[2]); err != nil {
		return nil, err
	}
	return G.Add(x, rows)
}

// AddAtSteps implements StepAdder: x [B, 1, d] + Scale·PE[pos_b], the
// positions given by onehot [B, P].
func (e *Sinusoidal) AddAtSteps(s *Site, x, onehot *G.Node) (*G.Node, error) {
	return stepRows("sinusoidal", s, x, onehot, e.tableNode(s, 0, onehot.Shape()[len(onehot.Shape())-1]))
}

// AddAtSteps implements StepAdder: x [B, 1, d] + table[pos_b], the
// positions given by onehot [B, P], P <= MaxLen.
func (e *Learned) AddAtSteps(s *Site, x, onehot *G.Node) (*G.Node, error) {
	p, d := onehot.Shape()[len(onehot.Shape())-1], s.DModel
	if p > e.MaxLen {
		return nil, errors.Wrapf(ErrBeyondTable, "posenc learned: decoding positions 0..%d asked, the table has %d (learned absolute positions cannot extrapolate)", p-1, e.MaxLen)
	}
	tab, err := s.Params.Node(s.G, "pos_emb", tensor.Shape{e.MaxLen, d}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, err
	}
	if p != e.MaxLen {
		if tab, err = G.Slice(tab, G.S(0, p)); err != nil {
			return nil, errors.Wrap(err, "posenc learned: slice")
		}
	}
	return stepRows("learned", s, x, onehot, tab)
}
