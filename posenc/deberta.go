package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "deberta", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewDeBERTa(o.DebertaBuckets, o.DebertaMaxPosition, o.InitStd)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
}

// DeBERTa is the disentangled attention of He et al. 2021, "DeBERTa:
// Decoding-enhanced BERT with Disentangled Attention", as implemented in
// DeBERTa-v2/v3 (Hugging Face modeling_deberta_v2, share_att_key, log
// buckets). Each score is the sum of a content-to-content, a
// content-to-position and a position-to-content term, all scaled by
// 1/sqrt(3·dh):
//
//	score_ij = (q_i·k_j + q_i·Kr_h[c2p_ij] + k_j·Qr_h[p2c_ij]) / sqrt(3·dh)
//	Kr = deberta_rel·W_k + b_k,  Qr = deberta_rel·W_q + b_q     [2·span, d]
//	c2p_ij = clamp( DebertaBucket(qpos_i - kpos_j) + span, 0, 2·span-1)
//	p2c_ij = clamp(-DebertaBucket(kpos_j - qpos_i) + span, 0, 2·span-1)
//
// where span = Buckets and Kr_h, Qr_h are the columns of head h. The
// relative embeddings are projected by the layer's own key and query
// projections, biases included (Site.Project). The signs are those of the
// reference code, not of the paper's δ(j, i): the relative position is
// query minus key for both terms (the bucket function is odd, so
// p2c_ij = c2p_ij). Hugging Face builds p2c for q_len != k_len from the key
// positions only and its gather then needs q_len = k_len; here both indices
// come from the absolute positions of the span, so cross-attention and
// memory spans are well defined.
//
// Parameter: "deberta_rel" [2·Buckets, d], shared by all layers, init
// N(0, InitStd²), not weight-decayed; no LayerNorm on it (HF's norm_rel_ebd
// is not modelled) and no absolute position input. With Alpha
// (Options.Alpha), also "deberta_alpha" [1], init AlphaInit, shared like
// deberta_rel, not weight-decayed, multiplying the position terms
// c2p + p2c (not the content term q·k). The index tables are computed on
// the host once per span and cached.
//
// Settings compared with Hugging Face DeBERTa-v2/v3 (deberta-v3-base's
// config.json):
//
//	HF setting                   deberta-v3-base            here
//	position_buckets             256                        Options.DebertaBuckets, default 32
//	max_relative_positions       -1 (= max_position_        Options.DebertaMaxPosition, default 128
//	                             embeddings = 512)
//	share_att_key                true                       always (the layer's own q/k projections)
//	pos_att_type                 ["p2c", "c2p"]             always both
//	norm_rel_ebd                 "layer_norm"               not modelled (no LayerNorm on deberta_rel)
//	position_biased_input        false                      same (no absolute positions)
//
// The two sizes differ on purpose: the reference model of this library is
// trained on 64-token windows with d = 128 (and evaluated on up to 8x
// longer inputs), not on HF's 512 tokens. With HF's 256 buckets every
// relative position up to ±128, twice the training window, would have its
// own bucket, so no training distance would reach a log bucket and the
// table [2·256, d] would be mostly rows no training step updates. The
// defaults scale HF's geometry to the window: 32 buckets make distances up
// to ±16 exact, a quarter of the training length as HF's ±128 of 512, and
// the log buckets end at 128 = twice the training length (HF: 512, the
// training length), so distances seen in evaluation beyond training still
// fall in distinct log buckets before the clamp. Set DebertaBuckets = 256
// and DebertaMaxPosition = 512 for HF's bucket function; share_att_key and
// both attention types are what HF's v3 configs use, and the LayerNorm of
// the table is the one v3 setting not available here.
type DeBERTa struct {
	// Buckets is the bucket size (HF position_buckets); the table has
	// 2·Buckets rows and relative positions up to Buckets/2 are exact.
	Buckets int
	// MaxPosition is where the log buckets end (HF max_relative_positions).
	MaxPosition int
	// InitStd is the init standard deviation of deberta_rel.
	InitStd float64
	// Alpha scales the terms by the learnable "deberta_alpha"
	// (Options.Alpha).
	Alpha bool

	cache tableCache[debertaKey, *debertaIdx]
}

type debertaKey struct {
	span                 Span
	buckets, maxPosition int
}

// debertaIdx holds the gather indices of one span: c2p [TQ*TK] (row i,
// column j) and p2cT [TK*TQ] (row j, column i: p2c transposed, the layout
// of the key-side gather).
type debertaIdx struct {
	c2p, p2cT []int
}

// NewDeBERTa returns the encoding with bucket size buckets (>= 2) and log
// buckets ending at maxPosition (> buckets/2 + 1), deberta_rel initialised
// N(0, std²).
func NewDeBERTa(buckets, maxPosition int, std float64) (*DeBERTa, error) {
	if err := debertaCheck(buckets, maxPosition); err != nil {
		return nil, err
	}
	return &DeBERTa{Buckets: buckets, MaxPosition: maxPosition, InitStd: std}, nil
}

func debertaCheck(buckets, maxPosition int) error {
	if buckets < 2 || maxPosition <= buckets/2+1 {
		return errors.Errorf("posenc deberta: bucket size %d must be >= 2 and max position %d > bucket size/2 + 1 = %d", buckets, maxPosition, buckets/2+1)
	}
	return nil
}

// Name implements Encoding.
func (*DeBERTa) Name() string { return "deberta" }

// Scale implements Scaler: 1/sqrt(3·dh) (one term each for c2c, c2p, p2c).
func (*DeBERTa) Scale(dHead int) float64 { return 1 / math.Sqrt(3*float64(dHead)) }

// DebertaBucket is DeBERTa's log-bucketed relative position
// (make_log_bucket_position of HF modeling_deberta_v2): with
// mid = bucketSize/2,
//
//	bucket(rel) = rel                                                      if |rel| <= mid
//	bucket(rel) = sign(rel)·(mid + ceil(ln(|rel|/mid) / ln((maxPosition-1)/mid) · (mid-1)))  otherwise
//
// computed in float64 in that order, with |rel| taken without overflow (so
// math.MinInt gives -bucket(math.MaxInt), not math.MinInt). It is odd
// (bucket(-rel) = -bucket(rel)), has the sign of rel, and |bucket| is
// non-decreasing in |rel|; |rel| = maxPosition-1 maps to ±(2·mid-1), and
// beyond it the value keeps growing slowly (callers clamp it to the table),
// up to its bound DebertaBucket(math.MaxInt, ...), which is at most
// DebertaBucketLimit. It panics if bucketSize < 2 or maxPosition <=
// bucketSize/2 + 1.
func DebertaBucket(rel, bucketSize, maxPosition int) int {
	if err := debertaCheck(bucketSize, maxPosition); err != nil {
		panic(err.Error())
	}
	mid := bucketSize / 2
	a := absInt(rel)
	if a <= uint64(mid) {
		return rel
	}
	lp := math.Ceil(math.Log(float64(a)/float64(mid))/math.Log(float64(maxPosition-1)/float64(mid))*float64(mid-1)) + float64(mid)
	lp = math.Min(lp, DebertaBucketLimit) // only reached with maxPosition barely above mid+1
	if rel < 0 {
		return -int(lp)
	}
	return int(lp)
}

// DebertaBucketLimit bounds |DebertaBucket|: the log bucket of a huge
// distance with maxPosition-1 barely above bucketSize/2 would not fit an int,
// so it saturates here.
const DebertaBucketLimit = 1 << 52

// DebertaIndex returns the c2p and p2c gather indices of span s, each
// [TQ*TK] row-major (query i, key j), with span = buckets:
//
//	c2p[i*TK+j] = clamp( DebertaBucket(qpos_i - kpos_j) + span, 0, 2·span-1)
//	p2c[i*TK+j] = clamp(-DebertaBucket(kpos_j - qpos_i) + span, 0, 2·span-1)
//
// It panics on the arguments DebertaBucket panics on.
func DebertaIndex(s Span, buckets, maxPosition int) (c2p, p2c []int) {
	c2p = make([]int, s.TQ*s.TK)
	p2c = make([]int, s.TQ*s.TK)
	clamp := func(x int) int { return min(max(x, 0), 2*buckets-1) }
	for i := 0; i < s.TQ; i++ {
		for j := 0; j < s.TK; j++ {
			qp, kp := s.QStart+i, s.KStart+j
			c2p[i*s.TK+j] = clamp(DebertaBucket(qp-kp, buckets, maxPosition) + buckets)
			p2c[i*s.TK+j] = clamp(-DebertaBucket(kp-qp, buckets, maxPosition) + buckets)
		}
	}
	return c2p, p2c
}

// indices returns the cached gather indices of span s (the caller has
// checked Buckets and MaxPosition).
func (e *DeBERTa) indices(s Span) *debertaIdx {
	ix, _ := e.cache.get(debertaKey{s, e.Buckets, e.MaxPosition}, func() (*debertaIdx, error) {
		c2p, p2c := DebertaIndex(s, e.Buckets, e.MaxPosition)
		p2cT := make([]int, len(p2c))
		for i := 0; i < s.TQ; i++ {
			for j := 0; j < s.TK; j++ {
				p2cT[j*s.TQ+i] = p2c[i*s.TK+j]
			}
		}
		return &debertaIdx{c2p: c2p, p2cT: p2cT}, nil
	})
	return ix
}

// projected returns Kr and Qr [2·Buckets, d], deberta_rel projected by the
// site's key and query projections.
func (e *DeBERTa) projected(s *Site) (kr, qr *G.Node, err error) {
	if s.Project == nil {
		return nil, nil, errors.New("posenc deberta: the site has no projection (Site.Project is nil)")
	}
	if err := debertaCheck(e.Buckets, e.MaxPosition); err != nil {
		return nil, nil, err
	}
	span, d := e.Buckets, s.DModel
	rel, err := s.Params.Node(s.G, "deberta_rel", tensor.Shape{2 * span, d}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, nil, errors.Wrap(err, "posenc deberta")
	}
	proj := func(which string) (*G.Node, error) {
		p, err := s.Project(rel, which) // [2span, d]
		if err != nil {
			return nil, errors.Wrapf(err, "posenc deberta: project deberta_rel %v with %s", rel.Shape(), which)
		}
		if !p.Shape().Eq(tensor.Shape{2 * span, d}) {
			return nil, errors.Errorf("posenc deberta: projection %s of deberta_rel has shape %v, want [%d, %d]", which, p.Shape(), 2*span, d)
		}
		return p, nil
	}
	if kr, err = proj("k"); err != nil {
		return nil, nil, err
	}
	if qr, err = proj("q"); err != nil {
		return nil, nil, err
	}
	return kr, qr, nil
}

// ScoreTerms implements ScoreTermer: (alpha *) (c2p + p2c) [B, H, TQ, TK] from
// q [B, H, TQ, dh] and k [B, H, TK, dh] (unscaled; attention multiplies the
// sum with q·kᵀ by Scale).
func (e *DeBERTa) ScoreTerms(s *Site, q, k *G.Node) (*G.Node, error) {
	h, dh := s.H, s.DHead
	if err := checkQK("deberta", s, q, k); err != nil {
		return nil, err
	}
	kr, qr, err := e.projected(s)
	if err != nil {
		return nil, err
	}
	span := e.Buckets
	ix := e.indices(s.Span)
	posKey, err := splitHeadTable(kr, 2*span, h, dh) // [H, 2span, dh]
	if err != nil {
		return nil, errors.Wrap(err, "posenc deberta")
	}
	posQuery, err := splitHeadTable(qr, 2*span, h, dh)
	if err != nil {
		return nil, errors.Wrap(err, "posenc deberta")
	}
	// c2p[b,h,i,j] = q_i · Kr_h[c2p_ij]
	c2p, err := graph.RelScores(q, posKey) // [B, H, TQ, 2span]
	if err != nil {
		return nil, errors.Wrap(err, "posenc deberta: q·Krᵀ")
	}
	if c2p, err = graph.GatherRel(c2p, ix.c2p, s.TQ, s.TK); err != nil { // [B, H, TQ, TK]
		return nil, errors.Wrap(err, "posenc deberta: c2p")
	}
	// p2c[b,h,i,j] = k_j · Qr_h[p2c_ij], gathered per key row, then transposed
	p2c, err := graph.RelScores(k, posQuery) // [B, H, TK, 2span]
	if err != nil {
		return nil, errors.Wrap(err, "posenc deberta: k·Qrᵀ")
	}
	if p2c, err = graph.GatherRel(p2c, ix.p2cT, s.TK, s.TQ); err != nil { // [B, H, TK, TQ]
		return nil, errors.Wrap(err, "posenc deberta: p2c")
	}
	if p2c, err = graph.TransposeLast2(p2c); err != nil { // [B, H, TQ, TK]
		return nil, errors.Wrap(err, "posenc deberta: p2c")
	}
	out, err := graph.Add(c2p, p2c)
	if err != nil {
		return nil, errors.Wrap(err, "posenc deberta: c2p + p2c")
	}
	out, err = withAlpha(s, out, e.Alpha, "deberta_alpha")
	return out, errors.Wrap(err, "posenc deberta")
}

// StreamTerms implements StreamTermer: c2p as a query term with Kr
// [2·Buckets, d] (per head) indexed by the c2p bucket of each pair, p2c as
// a key term with Qr indexed by the p2c bucket (DebertaIndex's formulas,
// evaluated once per distance of a tile); with Alpha both tables are
// multiplied by "deberta_alpha". The scale 1/sqrt(3·dh) is Scale's.
func (e *DeBERTa) StreamTerms(s *Site) ([]graph.StreamTerm, error) {
	if s.B <= 0 || s.H <= 0 || s.DHead <= 0 || s.TQ <= 0 || s.TK <= 0 || s.H*s.DHead != s.DModel {
		return nil, errors.Errorf("posenc deberta: B = %d, H = %d, dh = %d, TQ = %d and TK = %d must be positive and H*dh = d_model %d", s.B, s.H, s.DHead, s.TQ, s.TK, s.DModel)
	}
	kr, qr, err := e.projected(s)
	if err != nil {
		return nil, err
	}
	if e.Alpha {
		if kr, err = alphaScaled(s, kr, "deberta_alpha"); err != nil {
			return nil, errors.Wrap(err, "posenc deberta: alpha·Kr")
		}
		if qr, err = alphaScaled(s, qr, "deberta_alpha"); err != nil {
			return nil, errors.Wrap(err, "posenc deberta: alpha·Qr")
		}
	}
	span, maxPos := e.Buckets, e.MaxPosition
	clamp := func(x int) int { return min(max(x, 0), 2*span-1) }
	// rel = kpos - qpos: c2p buckets qpos - kpos = -rel, p2c buckets rel
	c2p := &distIndexer{span: s.Span, row: func(rel int) int { return clamp(DebertaBucket(-rel, span, maxPos) + span) }}
	p2c := &distIndexer{span: s.Span, row: func(rel int) int { return clamp(-DebertaBucket(rel, span, maxPos) + span) }}
	return []graph.StreamTerm{{Kind: graph.QueryTerm, Table: kr, Index: c2p}, {Kind: graph.KeyTerm, Table: qr, Index: p2c}}, nil
}
