package posenc

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "shaw", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewShaw(o.ShawK, o.InitStd)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
	register(Info{Name: "shaw-scalar", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) { return NewShawScalar(o.ShawK, o.InitStd, o.Alpha) })
}

// ShawIndex returns the clipped relative index of Shaw et al. (2018) for
// every query-key pair of span, row-major [TQ, TK]:
//
//	idx[i*TK + j] = clamp(kpos_j - qpos_i, -k, k) + k   in [0, 2k]
//
// with kpos_j = span.KStart + j and qpos_i = span.QStart + i. k must not be
// negative (ShawIndex panics otherwise).
func ShawIndex(span Span, k int) []int {
	if k < 0 {
		panic(errors.Errorf("posenc: ShawIndex: clipping distance %d is negative", k))
	}
	idx := make([]int, span.TQ*span.TK)
	for i := 0; i < span.TQ; i++ {
		for j := 0; j < span.TK; j++ {
			idx[i*span.TK+j] = min(max(span.Rel(i, j), -k), k) + k
		}
	}
	return idx
}

// shawKey keys the cached index tables of Shaw and ShawScalar (h is 0 for
// Shaw, whose table is shared by the heads).
type shawKey struct {
	span Span
	k, h int
}

// Shaw is the relative position representation of Shaw, Uszkoreit and
// Vaswani (2018), "Self-Attention with Relative Position Representations"
// (NAACL): learned key and value embeddings of the clipped relative distance
// idx = clamp(kpos_j - qpos_i, -K, K) + K (ShawIndex), shared by the heads of
// a layer. Per head, with q, k, v the projected heads:
//
//	scores[i, j] = (q_i·k_j + q_i·shaw_k[idx_ij]) / sqrt(dh)
//	out_i        = sum_j p_ij (v_j + shaw_v[idx_ij])
//
// ScoreTerms computes q_i·shaw_k[idx_ij] as one matmul M = q·shaw_kᵀ
// [B, H, Tq, 2K+1] followed by graph.GatherRel; ValueTerms scatters the
// probabilities onto the 2K+1 distances with graph.ScatterRel
// ([B, H, Tq, 2K+1]) and multiplies by shaw_v. Neither builds the
// [Tq, Tk, dh] tensor of gathered embeddings.
//
// Parameters, per layer (prefix = Site.Prefix, e.g. "block0/attn"):
// "<prefix>/shaw_k" and "<prefix>/shaw_v", each [2K+1, dh], N(0, InitStd²),
// not weight-decayed. With Alpha (Options.Alpha), also
// "<prefix>/shaw_k_alpha" [1], init AlphaInit, not weight-decayed, which
// multiplies the key terms, the whole contribution to the scores:
//
//	scores[i, j] = (q_i·k_j + alpha·q_i·shaw_k[idx_ij]) / sqrt(dh)
//
// (computed as q·(alpha·shaw_k), the same up to rounding, exactly the same
// at alpha = 1). The value terms are not scaled: alpha is a remedy for
// unstable scores, and shaw_v acts after the softmax. The name differs from
// shaw-scalar's "<prefix>/shaw_alpha", so the two combined ("shaw+shaw-scalar")
// keep separate scales. The index matrix is computed on the host once per
// span and cached; one Shaw value may build graphs from several goroutines
// at once.
type Shaw struct {
	K       int
	InitStd float64
	// Alpha scales the key terms by "<prefix>/shaw_k_alpha".
	Alpha bool
	idx   tableCache[shawKey, []int]
}

// NewShaw returns Shaw's encoding with clipping distance k (>= 0) and tables
// initialised N(0, initStd²).
func NewShaw(k int, initStd float64) (*Shaw, error) {
	if k < 0 {
		return nil, errors.Errorf("posenc shaw: clipping distance K = %d is negative", k)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc shaw: init std %g is negative", initStd)
	}
	return &Shaw{K: k, InitStd: initStd}, nil
}

// Name implements Encoding.
func (*Shaw) Name() string { return "shaw" }

// index returns the cached ShawIndex of span (the caller has checked K).
func (e *Shaw) index(span Span) []int {
	idx, _ := e.idx.get(shawKey{span: span, k: e.K}, func() ([]int, error) { return ShawIndex(span, e.K), nil })
	return idx
}

// table returns the layer's [2K+1, dh] table "<prefix>/shaw_<which>".
func (e *Shaw) table(s *Site, which string) (*G.Node, error) {
	n, err := s.Params.Node(s.G, s.Prefix+"/shaw_"+which, tensor.Shape{2*e.K + 1, s.DHead}, graph.Normal(e.InitStd), false)
	return n, errors.Wrap(err, "posenc shaw")
}

// checkSite returns an error unless the site's sizes are positive.
func (e *Shaw) checkSite(s *Site) error {
	if s.B <= 0 || s.H <= 0 || s.DHead <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return errors.Errorf("posenc shaw: B = %d, H = %d, dh = %d, TQ = %d and TK = %d must be positive", s.B, s.H, s.DHead, s.TQ, s.TK)
	}
	if e.K < 0 {
		return errors.Errorf("posenc shaw: clipping distance K = %d is negative", e.K)
	}
	return nil
}

// ScoreTerms implements ScoreTermer: terms [B, H, TQ, TK] with
// terms[b, h, i, j] = (alpha *) q[b, h, i]·shaw_k[idx_ij], from
// q [B, H, TQ, dh] (k is not used).
func (e *Shaw) ScoreTerms(s *Site, q, _ *G.Node) (*G.Node, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	b, h, tq, tk, dh, r := s.B, s.H, s.TQ, s.TK, s.DHead, 2*e.K+1
	if want := (tensor.Shape{b, h, tq, dh}); q == nil || !q.Shape().Eq(want) {
		var got tensor.Shape
		if q != nil {
			got = q.Shape()
		}
		return nil, errors.Errorf("posenc shaw: q has shape %v, want %v", got, want)
	}
	tab, err := e.table(s, "k")
	if err != nil {
		return nil, err
	}
	if tab, err = withAlpha(s, tab, e.Alpha, s.Prefix+"/shaw_k_alpha"); err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	q3, err := graph.Reshape(q, 1, b*h*tq, dh)
	if err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	t3, err := graph.Reshape(tab, 1, r, dh)
	if err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	m, err := G.BatchedMatMul(q3, t3, false, true) // [1, B*H*Tq, 2K+1]
	if err != nil {
		return nil, errors.Wrapf(err, "posenc shaw: q·shaw_kᵀ (q %v, shaw_k %v)", q.Shape(), tab.Shape())
	}
	if m, err = graph.Reshape(m, b, h, tq, r); err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	out, err := graph.GatherRel(m, e.index(s.Span), tq, tk) // [B, H, Tq, Tk]
	return out, errors.Wrap(err, "posenc shaw: key term")
}

// ValueTerms implements ValueTermer: terms [B, H, TQ, dh] with
// terms[b, h, i] = sum_j probs[b, h, i, j] shaw_v[idx_ij], from probs
// [B, H, TQ, TK].
func (e *Shaw) ValueTerms(s *Site, probs *G.Node) (*G.Node, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	b, h, tq, tk, dh, r := s.B, s.H, s.TQ, s.TK, s.DHead, 2*e.K+1
	if want := (tensor.Shape{b, h, tq, tk}); probs == nil || !probs.Shape().Eq(want) {
		var got tensor.Shape
		if probs != nil {
			got = probs.Shape()
		}
		return nil, errors.Errorf("posenc shaw: probs has shape %v, want %v", got, want)
	}
	tab, err := e.table(s, "v")
	if err != nil {
		return nil, err
	}
	pr, err := graph.ScatterRel(probs, e.index(s.Span), tq, tk, r) // [B, H, Tq, 2K+1]
	if err != nil {
		return nil, errors.Wrap(err, "posenc shaw: value term")
	}
	if pr, err = graph.Reshape(pr, 1, b*h*tq, r); err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	t3, err := graph.Reshape(tab, 1, r, dh)
	if err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	out, err := G.BatchedMatMul(pr, t3) // [1, B*H*Tq, dh]
	if err != nil {
		return nil, errors.Wrapf(err, "posenc shaw: scattered probs·shaw_v (shaw_v %v)", tab.Shape())
	}
	out, err = graph.Reshape(out, b, h, tq, dh)
	return out, errors.Wrap(err, "posenc shaw")
}

// ShawScalar is the scalar variant of Shaw et al. (2018): a learned bias per
// clipped relative distance and per head, added to the scaled scores before
// the mask:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + shaw_bias[idx_ij, h]
//
// with idx = ShawIndex (clamp(kpos_j - qpos_i, -K, K) + K). It is T5's bias
// with 2K+1 uniform buckets, per layer.
//
// Parameters, per layer (prefix = Site.Prefix): "<prefix>/shaw_bias"
// [2K+1, H], N(0, InitStd²); with Alpha also "<prefix>/shaw_alpha" [1], init
// AlphaInit, multiplying the table. Neither is weight-decayed. The gather
// indices are computed on the host once per (span, H) and cached; one
// ShawScalar value may build graphs from several goroutines at once.
//
// ShawScalar is a TableBiaser: BiasTable is the (alpha-scaled) table and
// BiasIndex the ShawIndex of each pair of a tile.
type ShawScalar struct {
	K       int
	InitStd float64
	Alpha   bool
	flat    tableCache[shawKey, []int] // headTableIndex of ShawIndex
}

// NewShawScalar returns the scalar Shaw bias with clipping distance k (>= 0),
// tables initialised N(0, initStd²) and, if alpha, a learnable scale.
func NewShawScalar(k int, initStd float64, alpha bool) (*ShawScalar, error) {
	if k < 0 {
		return nil, errors.Errorf("posenc shaw-scalar: clipping distance K = %d is negative", k)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc shaw-scalar: init std %g is negative", initStd)
	}
	return &ShawScalar{K: k, InitStd: initStd, Alpha: alpha}, nil
}

// Name implements Encoding.
func (*ShawScalar) Name() string { return "shaw-scalar" }

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK] with bias[h, i, j] =
// (alpha *) shaw_bias[idx_ij, h] for the calling layer's table.
func (e *ShawScalar) ScoreBias(s *Site) (*G.Node, error) {
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc shaw-scalar: H = %d, TQ = %d and TK = %d must be positive", s.H, s.TQ, s.TK)
	}
	if e.K < 0 {
		return nil, errors.Errorf("posenc shaw-scalar: clipping distance K = %d is negative", e.K)
	}
	flat, _ := e.flat.get(shawKey{span: s.Span, k: e.K, h: s.H}, func() ([]int, error) {
		return headTableIndex(ShawIndex(s.Span, e.K), s.H, s.TQ, s.TK), nil
	})
	table, err := e.table(s)
	if err != nil {
		return nil, err
	}
	bias, err := headTableBias(table, flat, s.H, s.TQ, s.TK)
	return bias, errors.Wrapf(err, "posenc shaw-scalar: bias [%d, %d, %d] from table %v", s.H, s.TQ, s.TK, table.Shape())
}

// table returns the layer's table [2K+1, H], times its alpha with Alpha.
func (e *ShawScalar) table(s *Site) (*G.Node, error) {
	table, err := s.Params.Node(s.G, s.Prefix+"/shaw_bias", tensor.Shape{2*e.K + 1, s.H}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc shaw-scalar")
	}
	if e.Alpha {
		if table, err = alphaScaled(s, table, s.Prefix+"/shaw_alpha"); err != nil {
			return nil, errors.Wrap(err, "posenc shaw-scalar")
		}
	}
	return table, nil
}

// BiasTable implements TableBiaser: the calling layer's "<prefix>/shaw_bias"
// [2K+1, H] (times "<prefix>/shaw_alpha" with Alpha). An error for an
// empty site or a negative K.
func (e *ShawScalar) BiasTable(s *Site) (*G.Node, error) {
	if err := checkBiasSite("shaw-scalar", s); err != nil {
		return nil, err
	}
	if e.K < 0 {
		return nil, errors.Errorf("posenc shaw-scalar: clipping distance K = %d is negative", e.K)
	}
	return e.table(s)
}

// BiasIndex implements TableBiaser: ShawIndex, clamp(key - query, -K, K) + K,
// of every pair of tile t, shared by the batch.
func (e *ShawScalar) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	if e.K < 0 {
		return false, errors.Errorf("posenc shaw-scalar: clipping distance K = %d is negative", e.K)
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return false, errors.Errorf("posenc shaw-scalar: BiasIndex: dst has %d entries, the tile %d", len(dst), (t.Q1-t.Q0)*tk)
	}
	for i := t.Q0; i < t.Q1; i++ {
		for j := t.K0; j < t.K1; j++ {
			dst[(i-t.Q0)*tk+j-t.K0] = min(max(s.Rel(i, j), -e.K), e.K) + e.K
		}
	}
	return false, nil
}

// StreamTerms implements StreamTermer: a query term with the (alpha-scaled)
// "<prefix>/shaw_k" [2K+1, dh] and a value term with "<prefix>/shaw_v"
// [2K+1, dh], both shared by the heads and indexed by ShawIndex, so that
// graph.StreamAttention computes ScoreTerms and ValueTerms per tile.
func (e *Shaw) StreamTerms(s *Site) ([]graph.StreamTerm, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	tk, err := e.table(s, "k")
	if err != nil {
		return nil, err
	}
	if tk, err = withAlpha(s, tk, e.Alpha, s.Prefix+"/shaw_k_alpha"); err != nil {
		return nil, errors.Wrap(err, "posenc shaw")
	}
	tv, err := e.table(s, "v")
	if err != nil {
		return nil, err
	}
	k := e.K
	idx := &distIndexer{span: s.Span, row: func(rel int) int { return min(max(rel, -k), k) + k }}
	return []graph.StreamTerm{{Kind: graph.QueryTerm, Table: tk, Index: idx}, {Kind: graph.ValueTerm, Table: tv, Index: idx}}, nil
}
