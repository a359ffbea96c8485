package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "sandwich", Kind: KindRelative}, func(o Options) (Encoding, error) {
		return NewSandwich(o.SandwichDim)
	})
}

// Sandwich is the parameter-free relative bias of Chi, Fan, Rudnicky and
// Ramadge 2023 ("Dissecting Transformer Length Extrapolation via the Lens
// of Receptive Field Analysis", ACL 2023): the inner product of the
// sinusoidal embeddings p of the query's and the key's positions, a fixed
// function of their distance, divided per head by ALiBi-like compression
// ratios:
//
//	p(t) = [sin(t·ω_0), ..., sin(t·ω_{D/2-1}), cos(t·ω_0), ..., cos(t·ω_{D/2-1})],  ω_k = 10000^(-2k/D)
//	bias[h, i, j] = p(qpos_i)·p(kpos_j) / ρ_h = Σ_k cos((kpos_j - qpos_i)·ω_k) / ρ_h,  ρ_h = 8(h+1)/H
//
// with qpos_i = s.QStart+i, kpos_j = s.KStart+j and D = Dim (the paper's
// d̄, default Options.SandwichDim = 128, the paper's value), in causal and
// bidirectional attention alike (the bias is even in the distance; the
// causal mask hides future keys). The bias is added to the scaled scores;
// there is no input embedding.
//
// Conventions: the formula is the paper's appendix construction
// (pos_embs @ pos_embs.T, divided by the compression ratio 8(h+1)/H; the
// same as attn-gym's generate_sandwich_bias). The bias is D/2/ρ_h at
// distance 0 and decreases, roughly logarithmically, with the distance.
// NeMo's sandwich_pos_bias subtracts D/2 (a constant per head, which
// softmax ignores) and sums the angles instead of their cosines; this
// follows the paper.
//
// The bias of a (span, heads, dtype) is computed on the host once and
// cached. One Sandwich may build graphs from several goroutines at once.
//
// Sandwich is a TableBiaser: BiasTable is the constant [TQ+TK-1, H] of the
// span's distinct distances and BiasIndex is DistanceIndex; their gather
// equals ScoreBias bit for bit.
type Sandwich struct {
	// Dim is d̄, the width of the sinusoidal embeddings (even, > 0).
	Dim int

	cache  tableCache[sandwichKey, *tensor.Dense]
	tcache tableCache[sandwichKey, *tensor.Dense] // BiasTable values
}

type sandwichKey struct {
	span  Span
	heads int
	dt    tensor.Dtype
}

// NewSandwich returns the Sandwich bias with sinusoids of width dim. It
// returns an error naming the encoding unless dim is even and positive.
func NewSandwich(dim int) (*Sandwich, error) {
	if err := sandwichCheck(dim); err != nil {
		return nil, err
	}
	return &Sandwich{Dim: dim}, nil
}

func sandwichCheck(dim int) error {
	if dim <= 0 || dim%2 != 0 {
		return errors.Errorf("posenc sandwich: dim %d (d̄, the width of the sinusoids) must be even and positive", dim)
	}
	return nil
}

// Name implements Encoding.
func (*Sandwich) Name() string { return "sandwich" }

// SandwichBias returns the bias [heads, len(qpos), len(kpos)] (row-major)
// of queries at qpos and keys at kpos with sinusoids of width dim (see
// Sandwich); nil for heads <= 0 or dim not even and positive.
func SandwichBias(heads, dim int, qpos, kpos []int) []float64 {
	if heads <= 0 || sandwichCheck(dim) != nil {
		return nil
	}
	tq, tk := len(qpos), len(kpos)
	omega := make([]float64, dim/2)
	for k := range omega {
		omega[k] = math.Pow(10000, -2*float64(k)/float64(dim))
	}
	rel := make([]float64, tq*tk)
	for i, qp := range qpos {
		for j, kp := range kpos {
			var s float64
			d := float64(kp - qp)
			for _, w := range omega {
				s += math.Cos(d * w)
			}
			rel[i*tk+j] = s
		}
	}
	out := make([]float64, heads*tq*tk)
	for h := 0; h < heads; h++ {
		rho := 8 * float64(h+1) / float64(heads)
		for k, v := range rel {
			out[h*tq*tk+k] = v / rho
		}
	}
	return out
}

// ScoreBias implements ScoreBiaser: the bias [H, TQ, TK] of the site's span.
// It returns an error naming the encoding if the site has no heads or an
// empty span, or Dim is not even and positive.
func (e *Sandwich) ScoreBias(s *Site) (*G.Node, error) {
	if err := sandwichCheck(e.Dim); err != nil {
		return nil, err
	}
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc sandwich: %d heads and span TQ=%d TK=%d must be positive", s.H, s.TQ, s.TK)
	}
	key := sandwichKey{span: s.Span, heads: s.H, dt: s.Dtype()}
	v, _ := e.cache.get(key, func() (*tensor.Dense, error) {
		return graph.FromFloat64s(key.dt, tensor.Shape{s.H, s.TQ, s.TK},
			SandwichBias(s.H, e.Dim, positions(s.QStart, s.TQ), positions(s.KStart, s.TK))), nil
	})
	return G.NewTensor(s.G, key.dt, 3, G.WithShape(s.H, s.TQ, s.TK), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "sandwich_bias"))), nil
}

// BiasTable implements TableBiaser: a constant [TQ+TK-1, H], row r holding
// the bias of the key-minus-query distance KStart - QStart + r - TQ + 1
// (DistanceIndex's row), the value ScoreBias has at every pair of that
// distance. An error for an empty site or a bad Dim.
func (e *Sandwich) BiasTable(s *Site) (*G.Node, error) {
	if err := sandwichCheck(e.Dim); err != nil {
		return nil, err
	}
	if err := checkBiasSite("sandwich", s); err != nil {
		return nil, err
	}
	key := sandwichKey{span: s.Span, heads: s.H, dt: s.Dtype()}
	r := s.TQ + s.TK - 1
	v, _ := e.tcache.get(key, func() (*tensor.Dense, error) {
		bias := SandwichBias(s.H, e.Dim, []int{0}, distanceRows(s.Span)) // [H, 1, R]
		return graph.FromFloat64s(key.dt, tensor.Shape{r, s.H}, transposeHR(bias, s.H, r)), nil
	})
	return G.NewTensor(s.G, key.dt, 2, G.WithShape(r, s.H), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "sandwich_table"))), nil
}

// BiasIndex implements TableBiaser: DistanceIndex of every pair of tile t,
// shared by the batch.
func (e *Sandwich) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	return false, DistanceIndex(s, t, dst)
}
