package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "xl", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e := NewXL(o.InitStd)
		e.UntieR = o.XLUntieR
		e.Alpha = o.Alpha
		return e, nil
	})
}

// XL is the relative position encoding of Transformer-XL (Dai et al. 2019,
// "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
// Sec. 3.3). With dist = qpos_i - kpos_j (the paper's i - j; negative for
// keys after the query, which a causal mask hides), the score of query i and
// key j in head h is
//
//	score_ij = ((q_i + u_h)·k_j + (q_i + v_h)·P_h[dist_ij]) / sqrt(dh)
//	P[dist]  = R[dist] · W_r                                  [d]
//	R[dist]  = concat(sin(dist·f), cos(dist·f)),  f_c = 1/10000^(2c/d)
//
// (half-split layout: sines in columns 0..d/2-1, cosines after them), where
// P_h is columns h·dh..(h+1)·dh-1 of P. The paper's four terms (a) content,
// (b) content-dependent position, (c) global content bias u and (d) global
// position bias v are all there; q·k is attention's, so ScoreTerms returns
// u_h·k_j + (q_i + v_h)·P_h[dist_ij]. XL is also a QueryBiasTermer
// (QueryBias u, QueryTerms (q_i + v_h)·P_h[dist_ij]): against a key/value
// cache attention computes (q_i + u_h)·k_j instead, as the reference code
// does, reading the cached keys once.
//
// Parameters (none weight-decayed): per layer "<prefix>/xl_wr" [d, d] (no
// bias), shared by all layers "xl_u" and "xl_v" [H, dh], all initialised
// N(0, InitStd²). With UntieR (the reference code's and Hugging Face's
// untie_r, see Options.XLUntieR) u and v are per layer instead:
// "<prefix>/xl_u" and "<prefix>/xl_v". With Alpha (Options.Alpha),
// "<prefix>/xl_alpha" [1], init AlphaInit, per layer like xl_wr (whatever
// UntieR), multiplies the whole of ScoreTerms, u_h·k_j + (q_i+v_h)·P_h:
// the terms (b), (c) and (d), not the content term (a). The R table of the TQ+TK-1 distances of a span is computed
// on the host once per (span, d, dtype) and cached; the position term is one
// matmul of q+v with P over those distances followed by a gather
// (graph.GatherRel), not the paper's rel-shift trick.
//
// The memory of the paper (cached states of the previous segment, no
// gradient) is layers.Options.Mems, run segment by segment by
// layers.SegmentRunner. The model width d must be even.
type XL struct {
	// InitStd is the init standard deviation of xl_u, xl_v and xl_wr.
	InitStd float64
	// UntieR makes u and v per layer (Options.XLUntieR).
	UntieR bool
	// Alpha scales the terms by the learnable "<prefix>/xl_alpha"
	// (Options.Alpha).
	Alpha bool
	// Memo builds P = R·W_r with one op that keeps its result between
	// runs of the graph while W_r holds the same values (its bits compared
	// at every run), instead of G.Mul and a transpose per run: the same values, for
	// graphs that run many times over one span, as layers.Decoder's does
	// (it sets Memo). That op has no gradient: forward-only graphs only.
	Memo bool

	cache tableCache[xlKey, *tensor.Dense] // R tables
}

type xlKey struct {
	span Span
	d    int
	dt   tensor.Dtype
}

// NewXL returns the Transformer-XL encoding with parameters initialised
// N(0, std²).
func NewXL(std float64) *XL { return &XL{InitStd: std} }

// Name implements Encoding.
func (*XL) Name() string { return "xl" }

// XLDistances returns the distance index of span s: idx[i*TK+j] =
// (qpos_i - kpos_j) - minDist, with minDist = s.QStart - (s.KStart+s.TK-1)
// the smallest distance of the span and n = TQ+TK-1 the number of distinct
// distances (row r of the span's R table is distance minDist+r).
func XLDistances(s Span) (idx []int, minDist, n int) {
	minDist = s.QStart - (s.KStart + s.TK - 1)
	n = s.TQ + s.TK - 1
	idx = make([]int, s.TQ*s.TK)
	for i := 0; i < s.TQ; i++ {
		for j := 0; j < s.TK; j++ {
			idx[i*s.TK+j] = (s.QStart + i) - (s.KStart + j) - minDist
		}
	}
	return idx, minDist, n
}

// XLSinusoids returns the Transformer-XL sinusoid table R [n, d] (row-major)
// of the distances minDist..minDist+n-1:
//
//	R[r, c]       = sin((minDist+r) · f_c)
//	R[r, d/2 + c] = cos((minDist+r) · f_c),   f_c = 1/10000^(2c/d), c < d/2
//
// It panics if d is odd or n negative.
func XLSinusoids(minDist, n, d int) []float64 {
	if d%2 != 0 || n < 0 {
		panic("posenc xl: XLSinusoids needs an even d and n >= 0")
	}
	half := d / 2
	inv := make([]float64, half)
	for c := range inv {
		inv[c] = 1 / math.Pow(10000, float64(2*c)/float64(d))
	}
	out := make([]float64, n*d)
	for r := 0; r < n; r++ {
		dist := float64(minDist + r)
		row := out[r*d : (r+1)*d]
		for c, f := range inv {
			row[c] = math.Sin(dist * f)
			row[half+c] = math.Cos(dist * f)
		}
	}
	return out
}

// table returns the cached R table [n, d] of span s (n = TQ+TK-1, row r
// the distance minDist+r of XLDistances).
func (e *XL) table(s Span, d int, dt tensor.Dtype) (tab *tensor.Dense, n int) {
	minDist, n := s.QStart-(s.KStart+s.TK-1), s.TQ+s.TK-1
	tab, _ = e.cache.get(xlKey{s, d, dt}, func() (*tensor.Dense, error) {
		return graph.FromFloat64s(dt, tensor.Shape{n, d}, XLSinusoids(minDist, n, d)), nil
	})
	return tab, n
}

// xlParams are the nodes of a site's terms: u, v [H, dh] and the
// projected sinusoids P = R·W_r [n, d] over the span's n distances, or
// with split its per-head copy [H, n, dh].
type xlParams struct {
	u, v, p *G.Node
	n       int
}

// bias creates (or finds) the site's bias u or v [H, dh] (which: "u" or
// "v"): "xl_u", "xl_v", per layer with UntieR.
func (e *XL) bias(s *Site, which string) (*G.Node, error) {
	name := "xl_" + which
	if e.UntieR {
		name = s.Prefix + "/" + name
	}
	n, err := s.Params.Node(s.G, name, tensor.Shape{s.H, s.DHead}, graph.Normal(e.InitStd), false)
	return n, errors.Wrap(err, "posenc xl")
}

// params creates (or finds) the site's parameters and builds P (split:
// per head).
func (e *XL) params(s *Site, split bool) (*xlParams, error) {
	h, dh, d := s.H, s.DHead, s.DModel
	if d%2 != 0 {
		return nil, errors.Errorf("posenc xl: d_model %d must be even (sin/cos pairs)", d)
	}
	init := graph.Normal(e.InitStd)
	u, err := e.bias(s, "u")
	if err != nil {
		return nil, err
	}
	v, err := e.bias(s, "v")
	if err != nil {
		return nil, err
	}
	wr, err := s.Params.Node(s.G, s.Prefix+"/xl_wr", tensor.Shape{d, d}, init, false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl")
	}
	tab, n := e.table(s.Span, d, s.Dtype())
	if e.Memo {
		p, err := xlMemo(tab, wr, s.QStart-(s.KStart+s.TK-1), n, h, dh, split)
		if err != nil {
			return nil, err
		}
		return &xlParams{u: u, v: v, p: p, n: n}, nil
	}
	r := G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(n, d), G.WithValue(tab), G.WithName(graph.UniqueName(s.G, "xl_R")))

	p, err := G.Mul(r, wr) // [n, d]
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl: R·W_r")
	}
	if split {
		if p, err = splitHeadTable(p, n, h, dh); err != nil { // [H, n, dh]
			return nil, errors.Wrap(err, "posenc xl")
		}
	}
	return &xlParams{u: u, v: v, p: p, n: n}, nil
}

// ScoreTerms implements ScoreTermer: (alpha *) (u_h·k_j + (q_i + v_h)·P_h[dist_ij])
// [B, H, TQ, TK] from q [B, H, TQ, dh] and k [B, H, TK, dh].
func (e *XL) ScoreTerms(s *Site, q, k *G.Node) (*G.Node, error) {
	if err := checkQK("xl", s, q, k); err != nil {
		return nil, err
	}
	xp, err := e.params(s, true)
	if err != nil {
		return nil, err
	}
	bd, err := e.positionTerms(s, xp, q) // [B, H, TQ, TK]
	if err != nil {
		return nil, err
	}
	u3, err := graph.Reshape(xp.u, s.H, 1, s.DHead)
	if err != nil {
		return nil, err
	}
	uk, err := graph.KeyScores(u3, k) // [B, H, 1, TK]
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl: u·k")
	}
	out, err := graph.BroadcastAdd(bd, uk)
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl")
	}
	out, err = withAlpha(s, out, e.Alpha, s.Prefix+"/xl_alpha")
	return out, errors.Wrap(err, "posenc xl")
}

// QueryBias implements QueryBiasTermer: u [H, dh] (alpha·u with Alpha),
// the global content bias (c) that attention adds to the queries of the
// content product, (q_i + u_h)·k_j.
func (e *XL) QueryBias(s *Site) (*G.Node, error) {
	if s.H*s.DHead != s.DModel {
		return nil, errors.Errorf("posenc xl: %d heads of %d do not make d_model %d", s.H, s.DHead, s.DModel)
	}
	u, err := e.bias(s, "u")
	if err != nil {
		return nil, err
	}
	u, err = withAlpha(s, u, e.Alpha, s.Prefix+"/xl_alpha")
	return u, errors.Wrap(err, "posenc xl: alpha·u")
}

// QueryTerms implements QueryBiasTermer: (alpha *) (q_i + v_h)·P_h[dist_ij]
// [B, H, TQ, TK] from q [B, H, TQ, dh], ScoreTerms without u·k.
func (e *XL) QueryTerms(s *Site, q *G.Node) (*G.Node, error) {
	if wq := (tensor.Shape{s.B, s.H, s.TQ, s.DHead}); !q.Shape().Eq(wq) {
		return nil, errors.Errorf("posenc xl: q has shape %v, want %v", q.Shape(), wq)
	}
	if s.H*s.DHead != s.DModel {
		return nil, errors.Errorf("posenc xl: %d heads of %d do not make d_model %d", s.H, s.DHead, s.DModel)
	}
	xp, err := e.params(s, true)
	if err != nil {
		return nil, err
	}
	bd, err := e.positionTerms(s, xp, q)
	if err != nil {
		return nil, err
	}
	bd, err = withAlpha(s, bd, e.Alpha, s.Prefix+"/xl_alpha")
	return bd, errors.Wrap(err, "posenc xl")
}

// positionTerms is (q_i + v_h)·P_h[dist_ij] [B, H, TQ, TK] from q
// [B, H, TQ, dh] and the site's split parameters xp: one product over the
// span's distances, then a gather.
func (e *XL) positionTerms(s *Site, xp *xlParams, q *G.Node) (*G.Node, error) {
	v4, err := graph.Reshape(xp.v, 1, s.H, 1, s.DHead)
	if err != nil {
		return nil, err
	}
	qv, err := graph.BroadcastAdd(q, v4) // [B, H, TQ, dh]
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl: q+v")
	}
	m, err := graph.RelScores(qv, xp.p) // [B, H, TQ, n]
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl: (q+v)·Pᵀ")
	}
	idx, _, _ := XLDistances(s.Span)
	bd, err := graph.GatherRel(m, idx, s.TQ, s.TK) // [B, H, TQ, TK]
	return bd, errors.Wrap(err, "posenc xl")
}

// StreamTerms implements StreamTermer: a query term (q_i + v_h)·P_h[dist]
// with P = R·W_r [n, d] (per head, QBias v [H*dh]) over the span's
// XLDistances, and a key term u_h·k_j with the one-row table u [1, H*dh];
// with Alpha both tables are multiplied by "<prefix>/xl_alpha".
func (e *XL) StreamTerms(s *Site) ([]graph.StreamTerm, error) {
	if s.B <= 0 || s.H <= 0 || s.DHead <= 0 || s.TQ <= 0 || s.TK <= 0 || s.H*s.DHead != s.DModel {
		return nil, errors.Errorf("posenc xl: B = %d, H = %d, dh = %d, TQ = %d and TK = %d must be positive and H*dh = d_model %d", s.B, s.H, s.DHead, s.TQ, s.TK, s.DModel)
	}
	xp, err := e.params(s, false)
	if err != nil {
		return nil, err
	}
	hd := s.H * s.DHead
	u, err := graph.Reshape(xp.u, 1, hd)
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl")
	}
	v, err := graph.Reshape(xp.v, hd)
	if err != nil {
		return nil, errors.Wrap(err, "posenc xl")
	}
	p := xp.p
	if e.Alpha {
		a, err := s.Params.Node(s.G, s.Prefix+"/xl_alpha", tensor.Shape{1}, graph.Constant(AlphaInit), false)
		if err != nil {
			return nil, errors.Wrap(err, "posenc xl")
		}
		if p, err = graph.BroadcastMul(p, a); err != nil {
			return nil, errors.Wrap(err, "posenc xl: alpha·P")
		}
		if u, err = graph.BroadcastMul(u, a); err != nil {
			return nil, errors.Wrap(err, "posenc xl: alpha·u")
		}
	}
	// row of (query i, key j): (qpos_i - kpos_j) - minDist, rel = kpos - qpos
	minDist := s.QStart - (s.KStart + s.TK - 1)
	dist := &distIndexer{span: s.Span, row: func(rel int) int { return -rel - minDist }}
	return []graph.StreamTerm{
		{Kind: graph.QueryTerm, Table: p, QBias: v, Index: dist},
		{Kind: graph.KeyTerm, Table: u, Index: &distIndexer{span: s.Span, row: func(int) int { return 0 }}},
	}, nil
}
