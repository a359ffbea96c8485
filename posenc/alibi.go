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
	register(Info{Name: "alibi", Kind: KindRelative}, func(Options) (Encoding, error) { return NewAlibi(), nil })
}

// Alibi is "Attention with Linear Biases" (Press et al. 2022, "Train Short,
// Test Long"): a fixed, content-free score bias that falls linearly with the
// distance between query and key, with one slope per head:
//
//	causal:         bias[h, i, j] = -m_h · (qpos_i - kpos_j)
//	bidirectional:  bias[h, i, j] = -m_h · |qpos_i - kpos_j|
//
// with qpos_i = s.QStart+i, kpos_j = s.KStart+j. In the causal case the
// formula is used for every (i, j); entries with kpos_j > qpos_i (positive
// there) are hidden by the causal mask. The bias [H, TQ, TK] is added to the
// scaled scores. Slopes are AlibiSlopes(H). ALiBi has no parameters and no
// input embedding.
//
// The bias of a (span, heads, causal, dtype) is computed on the host once and
// cached; each attention layer gets an input node holding it. The zero value
// is ready to use, and one value may build graphs from several goroutines at
// once.
//
// Padded batches: ALiBi depends only on position differences, so with left
// padding the bias between real tokens is the same whether positions are
// counted from the first column or, as PositionsFromPadding does, from each
// row's first real token. BiasFromPositions builds the bias [B, H, Tq, Tk] of
// explicit per-row positions, e.g. for padding in the middle of a row.
//
// Real positions (PosReal, NewReal): query i at time t_q[i], key j at
// t_k[j], per example or shared,
//
//	causal:         bias[b, h, i, j] = -m_h · (t_q[i] - t_k[j])
//	bidirectional:  bias[b, h, i, j] = -m_h · |t_k[j] - t_q[i]|
//
// (AlibiBiasTimes), [B, H, TQ, TK] for per-example times, [H, TQ, TK] for
// shared ones, computed on the host: a constant cached per positions Key,
// or with a Feed an input node [Batch, H, TQ, TK] refilled by Feed.Bind.
// The causal mask is by index; a causal site whose visible keys (by index)
// are later than their query is an error naming the pair (give padded
// tokens at the end of a row the time of the last real one, so that the
// times do not decrease). Integer times 0..T-1 give exactly the bias of the
// line path.
//
// Alibi is a TableBiaser on line positions: BiasTable is the constant
// [TQ+TK-1, H] of the bias at the span's distinct distances (row
// j - i + TQ - 1 for query i and key j, see DistanceIndex) and BiasIndex
// maps every pair to its row; their gather equals ScoreBias bit for bit.
// BiasTable and BiasIndex refuse real positions (their distances are
// continuous and per example).
type Alibi struct {
	cache  tableCache[alibiKey, *tensor.Dense]
	tcache tableCache[alibiKey, *tensor.Dense] // BiasTable values
	rcache tableCache[realKey, *tensor.Dense]
}

type alibiKey struct {
	span   Span
	heads  int
	causal bool
	dt     tensor.Dtype
}

// NewAlibi returns the ALiBi encoding.
func NewAlibi() *Alibi { return &Alibi{} }

// Name implements Encoding.
func (*Alibi) Name() string { return "alibi" }

// AlibiSlopes returns the slopes m_h of n heads (nil for n <= 0) as the
// paper's get_slopes computes them (ofirpress/attention_with_linear_biases),
// up to rounding: for n a power of two, m_h = 2^(-8(h+1)/n), h = 0..n-1; for
// other n, the slopes of the largest power of two c < n followed by the
// slopes of 2c at indices 0, 2, 4, ..., the first n - c of them. E.g. 6
// heads: 2^-2, 2^-4, 2^-6, 2^-8 (c = 4), then 2^-1, 2^-3 (from the 8-head
// slopes 2^-1..2^-8).
func AlibiSlopes(n int) []float64 {
	if n <= 0 {
		return nil
	}
	pow2 := func(n int) []float64 {
		// The paper: start = 2^(-2^-(log2 n - 3)) = 2^(-8/n), ratio =
		// start, slopes start·ratio^i; computed here as 2^(-8(i+1)/n),
		// which is exact for integer exponents (the paper's product is off
		// by a few ulps).
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Exp2(-8 * float64(i+1) / float64(n))
		}
		return out
	}
	if n&(n-1) == 0 {
		return pow2(n)
	}
	c := 1
	for c*2 < n {
		c *= 2
	}
	out := pow2(c)
	extra := AlibiSlopes(2 * c)
	for i := 0; i < n-c; i++ {
		out = append(out, extra[2*i])
	}
	return out
}

// AlibiBias returns the bias [len(slopes), len(qpos), len(kpos)] (row-major)
// of queries at positions qpos and keys at kpos: -m_h (qpos_i - kpos_j) if
// causal, else -m_h |qpos_i - kpos_j|.
func AlibiBias(slopes []float64, qpos, kpos []int, causal bool) []float64 {
	tq, tk := len(qpos), len(kpos)
	out := make([]float64, len(slopes)*tq*tk)
	for h, m := range slopes {
		for i, qp := range qpos {
			for j, kp := range kpos {
				d := float64(qp - kp)
				if !causal {
					d = math.Abs(d)
				}
				if d != 0 { // (no -0 on the diagonal)
					out[(h*tq+i)*tk+j] = -m * d
				}
			}
		}
	}
	return out
}

// AlibiBiasTimes is AlibiBias for real positions: the bias
// [len(slopes), len(q), len(k)] (row-major) of queries at times q and keys
// at times k, -m_h (q_i - k_j) if causal, else -m_h |q_i - k_j|.
func AlibiBiasTimes(slopes, q, k []float64, causal bool) []float64 {
	tq, tk := len(q), len(k)
	out := make([]float64, len(slopes)*tq*tk)
	for h, m := range slopes {
		for i, qt := range q {
			for j, kt := range k {
				d := qt - kt
				if !causal {
					d = math.Abs(d)
				}
				if d != 0 { // (no -0 on the diagonal)
					out[(h*tq+i)*tk+j] = -m * d
				}
			}
		}
	}
	return out
}

// Accepts implements PositionAccepter: line and real positions.
func (*Alibi) Accepts() []PosKind { return []PosKind{PosLine, PosReal} }

// ScoreBias implements ScoreBiaser: the bias [H, TQ, TK] of the site's span,
// or of real positions [B, H, TQ, TK] per example and [H, TQ, TK] shared
// (see Alibi). It returns an error naming the encoding if the site has no
// heads or an empty span, or if a causal site's real times put a visible
// key after its query.
func (e *Alibi) ScoreBias(s *Site) (*G.Node, error) {
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc alibi: %d heads and span TQ=%d TK=%d must be positive", s.H, s.TQ, s.TK)
	}
	if s.Kind() == PosReal {
		return e.realBias(s)
	}
	key := alibiKey{span: s.Span, heads: s.H, causal: s.Causal, dt: s.Dtype()}
	v, _ := e.cache.get(key, func() (*tensor.Dense, error) {
		return graph.FromFloat64s(key.dt, tensor.Shape{s.H, s.TQ, s.TK},
			AlibiBias(AlibiSlopes(s.H), positions(s.QStart, s.TQ), positions(s.KStart, s.TK), s.Causal)), nil
	})
	return G.NewTensor(s.G, key.dt, 3, G.WithShape(s.H, s.TQ, s.TK), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "alibi_bias"))), nil
}

// BiasTable implements TableBiaser: a constant [TQ+TK-1, H], row r holding
// -m_h·d (causal) or -m_h·|d| for the distance d = QStart - KStart -
// (r - TQ + 1) (query minus key position), the value ScoreBias has at every
// pair of that distance. An error for real positions or an empty site.
func (e *Alibi) BiasTable(s *Site) (*G.Node, error) {
	if err := checkBiasSite("alibi", s); err != nil {
		return nil, err
	}
	if s.Kind() == PosReal {
		return nil, errRealTiles("alibi")
	}
	key := alibiKey{span: s.Span, heads: s.H, causal: s.Causal, dt: s.Dtype()}
	r := s.TQ + s.TK - 1
	v, _ := e.tcache.get(key, func() (*tensor.Dense, error) {
		bias := AlibiBias(AlibiSlopes(s.H), []int{0}, distanceRows(s.Span), s.Causal) // [H, 1, R]
		return graph.FromFloat64s(key.dt, tensor.Shape{r, s.H}, transposeHR(bias, s.H, r)), nil
	})
	return G.NewTensor(s.G, key.dt, 2, G.WithShape(r, s.H), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "alibi_table"))), nil
}

// BiasIndex implements TableBiaser: DistanceIndex of every pair of tile t,
// shared by the batch. An error for real positions.
func (e *Alibi) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if s.Kind() == PosReal {
		return false, errRealTiles("alibi")
	}
	return false, DistanceIndex(s, t, dst)
}

// realBias is ScoreBias for real positions.
func (e *Alibi) realBias(s *Site) (*G.Node, error) {
	slopes := AlibiSlopes(s.H)
	causal, span, h := s.Causal, s.Span, s.H
	fill := func(p *Positions, dst []float64) error {
		if causal {
			if err := checkCausalTimes("alibi", span, p); err != nil {
				return err
			}
		}
		n := h * p.TQ * p.TK
		for b := 0; b < p.Batch; b++ {
			q, k := p.Times(b)
			copy(dst[b*n:(b+1)*n], AlibiBiasTimes(slopes, q, k, causal))
		}
		return nil
	}
	what := fmt.Sprintf("alibi bias of real positions (%d heads, causal %v)", h, causal)
	if causal {
		what += fmt.Sprintf(" span %+v", span)
	}
	return realInput(s, &e.rcache, e, what, "alibi_bias", realBiasShape(s.Pos, h), fill)
}

// BiasFromPositions returns a constant input node of g, dtype dt, holding
// the ALiBi bias [B, heads, Tq, Tk] of explicit per-row positions: row b has
// queries at qpos[b] [Tq] and keys at kpos[b] [Tk] (for self-attention pass
// the same positions twice, e.g. from PositionsFromPadding). It is added to
// scores [B, H, Tq, Tk] with graph.BroadcastAdd; the padding mask still has
// to hide the padded keys. It returns an error naming the encoding if the
// rows disagree in number or length, or heads is not positive.
func (e *Alibi) BiasFromPositions(g *G.ExprGraph, dt tensor.Dtype, heads int, qpos, kpos [][]int, causal bool) (*G.Node, error) {
	if heads <= 0 || len(qpos) == 0 || len(qpos) != len(kpos) || len(qpos[0]) == 0 || len(kpos[0]) == 0 {
		return nil, errors.Errorf("posenc alibi: BiasFromPositions with %d heads, %d query rows and %d key rows, want positive and equal", heads, len(qpos), len(kpos))
	}
	b, tq, tk := len(qpos), len(qpos[0]), len(kpos[0])
	slopes := AlibiSlopes(heads)
	data := make([]float64, 0, b*heads*tq*tk)
	for r := range qpos {
		if len(qpos[r]) != tq || len(kpos[r]) != tk {
			return nil, errors.Errorf("posenc alibi: BiasFromPositions row %d has %d query and %d key positions, row 0 has %d and %d", r, len(qpos[r]), len(kpos[r]), tq, tk)
		}
		data = append(data, AlibiBias(slopes, qpos[r], kpos[r], causal)...)
	}
	v := graph.FromFloat64s(dt, tensor.Shape{b, heads, tq, tk}, data)
	return G.NewTensor(g, dt, 4, G.WithShape(b, heads, tq, tk), G.WithValue(v),
		G.WithName(graph.UniqueName(g, "alibi_bias"))), nil
}

// PositionsFromPadding returns, for every row of a padding mask (valid[b][t]
// true for a real token), the positions of its tokens counted over real
// tokens only: 0 at the row's first real token, +1 at each further real
// token. A padding entry gets the position of the last real token before it,
// or 0 if there is none (its value does not matter once the padding mask
// hides it). With left padding {false, false, true, true, true} the
// positions are {0, 0, 0, 1, 2}, the same as those of the unpadded row. This
// is HF's attention_mask.cumsum(-1) - 1 clamped at 0.
func PositionsFromPadding(valid [][]bool) [][]int {
	out := make([][]int, len(valid))
	for b, row := range valid {
		pos := make([]int, len(row))
		n := 0
		for t, ok := range row {
			if ok {
				n++
			}
			if n > 0 {
				pos[t] = n - 1
			}
		}
		out[b] = pos
	}
	return out
}
