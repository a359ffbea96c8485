package layers

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// AttentionConfig configures a multi-head attention layer.
type AttentionConfig struct {
	// Name prefixes the parameters: NAME/wq, NAME/bq, ... NAME/wo, NAME/bo.
	Name string
	// Layer is the 0-based block index, passed to the position encoding.
	Layer    int
	D, Heads int
	InitStd  float64
	// Causal masks keys after each query (by absolute position).
	Causal bool
	// Pos is the position encoding (nil: none). Attention only uses its hook
	// interfaces (posenc.QKTransformer, ScoreTermer, QueryBiasTermer,
	// Scaler, ScoreBiaser, ValueTermer).
	Pos posenc.Encoding
	// Stream computes the attention with graph.StreamAttention (tiles of
	// keys, online softmax, no [B, H, Tq, Tk] tensor in the forward or the
	// backward pass) instead of AttentionProbs and AttentionOutput. It
	// serves encodings without score terms: none, the absolute encodings,
	// rope and its scalings, xpos, the table biases of posenc.StreamBias
	// (t5, alibi, kerple, sandwich, shaw-scalar, fire, dpb, ... on line
	// positions), the relative terms of the posenc.StreamTermers (shaw, xl,
	// deberta), computed per tile, and the encodings that stream the
	// attention themselves (posenc.StreamAttender: cope, fire); Fwd returns
	// StreamBias's error for the others (combinations with terms or a
	// bias). The mask
	// must be nil or a key-padding mask [B, 1, 1, Tk] whose value is known
	// when the graph is built. Probs is nil; the probe still records.
	Stream bool
}

// Attention is multi-head scaled dot-product attention (Vaswani et al. 2017)
// with separate q, k, v and output projections, each with bias:
//
//	scores = (q.kᵀ + terms) * scale + bias     // [B, H, Tq, Tk]
//	probs  = softmax(scores | mask)            // masked entries exactly 0
//	out    = (probs v + valueTerms) Wo + bo    // [B, Tq, d]
//
// terms, scale, bias and valueTerms come from the position encoding's hooks
// (zero, 1/sqrt(dh), zero, zero without one). The bias is added before the
// mask, the mask is applied inside the softmax; a query with no key to attend
// to gets a zero output, never NaN.
type Attention struct {
	Cfg        AttentionConfig
	DHead      int
	Q, K, V, O *Linear
	g          *G.ExprGraph
	p          *graph.Params
	probs      *G.Node
	probe      *graph.AttentionProbe
	mem        *KV // cached keys and values of the current FwdCached, or nil
	newKV      KV  // the current call's own projected keys and values
}

// Probs returns the attention probabilities [B, H, Tq, Tk] of the last Fwd
// (nil before any, and always nil with Cfg.Stream, which never forms
// them), for inspection: its value is set once the graph has run.
func (a *Attention) Probs() *G.Node { return a.probs }

// Probe returns the layer's attention probe: arm it (graph.AttentionProbe)
// before running a graph that holds the layer, and read its per-head
// statistics (entropy, score extremes, position part, one-hot fraction)
// after. Unarmed, it costs nothing and changes nothing.
func (a *Attention) Probe() *graph.AttentionProbe { return a.probe }

// NewAttention creates the four projections in g.
func NewAttention(g *G.ExprGraph, p *graph.Params, cfg AttentionConfig) (*Attention, error) {
	if cfg.Heads <= 0 || cfg.D <= 0 || cfg.D%cfg.Heads != 0 {
		return nil, errors.Errorf("attention %s: d_model %d must be a positive multiple of heads %d", cfg.Name, cfg.D, cfg.Heads)
	}
	a := &Attention{Cfg: cfg, DHead: cfg.D / cfg.Heads, g: g, p: p, probe: graph.NewAttentionProbe()}
	lin := func(w, b string) (*Linear, error) {
		return NewLinear(g, p, LinearConfig{Name: cfg.Name + "/" + w, In: cfg.D, Out: cfg.D, Bias: true, InitStd: cfg.InitStd,
			WName: cfg.Name + "/" + w, BName: cfg.Name + "/" + b})
	}
	var err error
	if a.Q, err = lin("wq", "bq"); err != nil {
		return nil, err
	}
	if a.K, err = lin("wk", "bk"); err != nil {
		return nil, err
	}
	if a.V, err = lin("wv", "bv"); err != nil {
		return nil, err
	}
	if a.O, err = lin("wo", "bo"); err != nil {
		return nil, err
	}
	return a, nil
}

// Learnables returns the projections' parameters (position-encoding
// parameters are returned by the LM, which owns the encoding).
func (a *Attention) Learnables() G.Nodes {
	var ns G.Nodes
	for _, l := range []*Linear{a.Q, a.K, a.V, a.O} {
		ns = append(ns, l.Learnables()...)
	}
	return ns
}

// Fwd attends from xq [B, Tq, d] to xkv [B, Tk, d] (xkv nil: self-attention
// on xq). span places queries and keys (span.TQ, span.TK must match the
// inputs). mask is nil or a float node [B|1, 1, Tq, Tk] (1 attend, 0 blocked)
// that is combined with the causal mask when the layer is causal; the causal
// mask itself is built from span. Returns [B, Tq, d].
func (a *Attention) Fwd(xq, xkv *G.Node, span posenc.Span, mask *G.Node) (*G.Node, error) {
	return a.FwdPositions(xq, xkv, span, nil, mask)
}

// FwdPositions is Fwd with positions beyond a line: pos (nil for line
// positions) is passed to the encoding's hooks in Site.Pos. It returns an
// error naming the encoding and both kinds if the encoding does not serve
// pos's kind (posenc.CheckKind), and one naming both sizes if pos does not
// fit the inputs (posenc.Positions.Check). With Cfg.Stream it also
// returns posenc.StreamBias's error for an encoding the streaming attention
// does not serve, and an error naming the mask's shape for a mask that is
// not a key-padding mask [B, 1, 1, Tk] with a value.
func (a *Attention) FwdPositions(xq, xkv *G.Node, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, error) {
	out, _, err := a.fwd(xq, xkv, nil, span, pos, mask)
	return out, err
}

// KV holds projected keys and values of one attention layer, heads merged:
// K and V [B, M, d], before any rotation of the position encoding (the
// encoding's QKTransformer is applied to the cached and the new keys
// together, at their span positions, every time the layer runs).
//
// With Room, K and V are [B, M+T, d] and already have room for the call's
// own T keys and values at their end: the call writes them there, in place
// (graph.WriteTail), instead of concatenating a copy; such a graph is
// forward-only, and the caller owns the cache's memory (layers.Decoder).
type KV struct {
	K, V *G.Node
	Room bool
}

// FwdCached is self-attention of xq [B, Tq, d] to the cached keys and
// values mem (projected, [B, M, d]) followed by xq's own: the keys are
// concat(mem.K, K(xq)) [B, M+Tq, d], so span must have TK = M+Tq (the cache
// at KStart..KStart+M-1, xq at QStart = KStart+M for a contiguous cache).
// It returns the output [B, Tq, d] and xq's projected keys and values
// [B, Tq, d], which the caller appends to its cache. Every hook of the
// encoding sees the span, so position-dependent terms and biases cover the
// cached keys (incremental decoding, layers.Decoder).
func (a *Attention) FwdCached(xq *G.Node, mem KV, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, KV, error) {
	if mem.K == nil || mem.V == nil {
		return nil, KV{}, errors.Errorf("attention %s: cached call without keys or values", a.Cfg.Name)
	}
	return a.fwd(xq, nil, &mem, span, pos, mask)
}

func (a *Attention) fwd(xq, xkv *G.Node, mem *KV, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, KV, error) {
	name := a.Cfg.Name
	if xkv == nil {
		xkv = xq
	}
	qs, ks := xq.Shape(), xkv.Shape()
	if qs.Dims() != 3 || ks.Dims() != 3 || qs[0] != ks[0] || qs[2] != a.Cfg.D || ks[2] != a.Cfg.D {
		return nil, KV{}, errors.Errorf("attention %s: query input %v and key input %v, want [B, Tq, %d] and [B, Tk, %d]", name, qs, ks, a.Cfg.D, a.Cfg.D)
	}
	b, tq, tk, h, dh, d := qs[0], qs[1], ks[1], a.Cfg.Heads, a.DHead, a.Cfg.D
	if mem != nil {
		for _, n := range []*G.Node{mem.K, mem.V} {
			if ms := n.Shape(); ms.Dims() != 3 || ms[0] != b || ms[2] != d {
				return nil, KV{}, errors.Errorf("attention %s: cached keys or values %v, want [%d, M, %d]", name, ms, b, d)
			}
		}
		switch m := mem.K.Shape()[1]; {
		case !mem.Room:
			tk += m
		case m < tq:
			return nil, KV{}, errors.Errorf("attention %s: cached keys %v have no room for %d new rows", name, mem.K.Shape(), tq)
		default:
			tk = m
		}
	}
	a.mem, a.newKV = mem, KV{}
	out, err := a.fwdHooks(xq, xkv, b, tq, tk, h, dh, d, span, pos, mask)
	return out, a.newKV, err
}

func (a *Attention) fwdHooks(xq, xkv *G.Node, b, tq, tk, h, dh, d int, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, error) {
	name := a.Cfg.Name
	if span.TQ != tq || span.TK != tk {
		return nil, errors.Errorf("attention %s: span has TQ=%d TK=%d, inputs have %d and %d", name, span.TQ, span.TK, tq, tk)
	}
	if a.Cfg.Pos != nil {
		if err := posenc.CheckKind(a.Cfg.Pos, pos); err != nil {
			return nil, errors.WithMessagef(err, "attention %s", name)
		}
	}
	if err := pos.Check(b, tq, tk); err != nil {
		return nil, errors.WithMessagef(err, "attention %s", name)
	}
	site := &posenc.Site{G: a.g, Params: a.p, Layer: a.Cfg.Layer, Prefix: name, B: b, H: h, DHead: dh, DModel: d,
		Span: span, Pos: pos, Causal: a.Cfg.Causal, Project: a.project}

	// Projections with the heads merged, [B, T, d]: head h is columns
	// h*dh:(h+1)*dh. The fused attention ops address the heads in place;
	// heads are split ([B, H, T, dh]) only for encodings whose hooks need it.
	if a.Cfg.Stream {
		return a.fwdStream(site, xq, xkv, mask)
	}
	qkT, needQK := a.Cfg.Pos.(posenc.QKTransformer)
	termer, hasTerms := a.Cfg.Pos.(posenc.ScoreTermer)
	// Against a key/value cache, an encoding whose terms hold a bias on the
	// queries (posenc.QueryBiasTermer: XL's u) has it added to the queries
	// of the content product instead, (q + b)·kᵀ: the cached keys are read
	// once and split into heads for no hook.
	qb, biasQ := a.Cfg.Pos.(posenc.QueryBiasTermer)
	biasQ = biasQ && a.mem != nil
	q, k, v, err := a.projectQKV(xq, xkv, needQK || hasTerms && !biasQ)
	if err != nil {
		return nil, err
	}
	if needQK {
		if q, k, err = qkT.TransformQK(site, q, k); err != nil {
			return nil, err
		}
	}

	// probs = softmax((q kᵀ + terms) * scale + bias | mask), one fused op
	opts := graph.AttentionOpts{Heads: h, Scale: 1 / math.Sqrt(float64(dh)), Probe: a.probe}
	switch {
	case biasQ:
		if opts.Terms, q, err = a.queryBiasTerms(qb, site, q); err != nil {
			return nil, err
		}
	case hasTerms:
		if opts.Terms, err = termer.ScoreTerms(site, q, k); err != nil { // [B, H, Tq, Tk]
			return nil, err
		}
	}
	if s, ok := a.Cfg.Pos.(posenc.Scaler); ok {
		opts.Scale = s.Scale(dh)
	}
	if bi, ok := a.Cfg.Pos.(posenc.ScoreBiaser); ok {
		if opts.Bias, err = bi.ScoreBias(site); err != nil { // [B|1, H|1, Tq, Tk] or [H|1, Tq, Tk]
			return nil, err
		}
	}
	if a.Cfg.Causal {
		if mask, err = a.withCausal(mask, span); err != nil {
			return nil, err
		}
	}
	opts.Mask = mask
	probs, err := graph.AttentionProbs(q, k, opts) // [B, H, Tq, Tk]
	if err != nil {
		return nil, errors.Wrapf(err, "attention %s", name)
	}
	a.probs = probs

	var out *G.Node
	if t, ok := a.Cfg.Pos.(posenc.ValueTermer); ok {
		if out, err = graph.AttentionOutput(probs, v, false); err != nil { // [B, H, Tq, dh]
			return nil, errors.Wrapf(err, "attention %s: probs.v", name)
		}
		terms, err := t.ValueTerms(site, probs) // [B, H, Tq, dh]
		if err != nil {
			return nil, err
		}
		if out, err = graph.Add(out, terms); err != nil {
			return nil, errors.Wrapf(err, "attention %s: value terms %v", name, terms.Shape())
		}
		if out, err = graph.MergeHeads(out); err != nil { // [B, Tq, d]
			return nil, err
		}
	} else if out, err = graph.AttentionOutput(probs, v, true); err != nil { // [B, Tq, d]
		return nil, errors.Wrapf(err, "attention %s: probs.v", name)
	}
	return a.O.Fwd(out) // [B, Tq, d]
}

// queryBiasTerms returns the terms of a QueryBiasTermer, QueryTerms of q
// [B, H, Tq, dh] (q [B, Tq, H*dh] is split for it), and the queries of the
// content product, q + b in q's layout.
func (a *Attention) queryBiasTerms(qb posenc.QueryBiasTermer, site *posenc.Site, q *G.Node) (terms, qc *G.Node, err error) {
	name := a.Cfg.Name
	h, dh := site.H, site.DHead
	qs := q
	if q.Dims() == 3 {
		if qs, err = graph.SplitHeads(q, h); err != nil { // [B, H, Tq, dh]
			return nil, nil, err
		}
	}
	if terms, err = qb.QueryTerms(site, qs); err != nil { // [B, H, Tq, Tk]
		return nil, nil, err
	}
	b, err := qb.QueryBias(site) // [H, dh]
	if err != nil {
		return nil, nil, err
	}
	if bs := b.Shape(); !bs.Eq(tensor.Shape{h, dh}) {
		return nil, nil, errors.Errorf("attention %s: query bias %v, want [%d, %d]", name, bs, h, dh)
	}
	if q.Dims() == 3 {
		b, err = graph.Reshape(b, 1, 1, h*dh)
	} else {
		b, err = graph.Reshape(b, 1, h, 1, dh)
	}
	if err != nil {
		return nil, nil, err
	}
	qc, err = graph.BroadcastAdd(q, b)
	return terms, qc, errors.Wrapf(err, "attention %s: q+b", name)
}

// fwdStream is FwdPositions with Cfg.Stream: q, k, v projected, the
// encoding's QKTransformer applied, then one graph.StreamAttention with the
// table bias of posenc.StreamBias, the relative terms of
// posenc.StreamTermsOf, the layer's causal mask and the caller's
// key-padding mask; or, for a posenc.StreamAttender (cope, fire), the encoding's
// StreamAttend with the same options instead.
func (a *Attention) fwdStream(site *posenc.Site, xq, xkv, mask *G.Node) (*G.Node, error) {
	name := a.Cfg.Name
	h, dh := site.H, site.DHead
	a.probs = nil
	attender, own := a.Cfg.Pos.(posenc.StreamAttender) // the encoding streams the attention itself
	var table *G.Node
	var idx graph.TileIndexer
	var terms []graph.StreamTerm
	var err error
	if !own {
		if table, idx, err = posenc.StreamBias(a.Cfg.Pos, site); err != nil {
			return nil, errors.WithMessagef(err, "attention %s: stream", name)
		}
		if terms, err = posenc.StreamTermsOf(a.Cfg.Pos, site); err != nil {
			return nil, errors.WithMessagef(err, "attention %s: stream", name)
		}
	}
	keyPad, err := a.streamKeyPad(mask, site.B, site.TK)
	if err != nil {
		return nil, err
	}
	qkT, needQK := a.Cfg.Pos.(posenc.QKTransformer)
	q, k, v, err := a.projectQKV(xq, xkv, needQK)
	if err != nil {
		return nil, err
	}
	if needQK {
		if q, k, err = qkT.TransformQK(site, q, k); err != nil {
			return nil, err
		}
		if q, err = graph.MergeHeads(q); err != nil { // [B, Tq, d]
			return nil, err
		}
		if k, err = graph.MergeHeads(k); err != nil { // [B, Tk, d]
			return nil, err
		}
	}
	opts := graph.StreamOpts{Heads: h, Scale: 1 / math.Sqrt(float64(dh)), Causal: a.Cfg.Causal,
		QStart: site.Span.QStart, KStart: site.Span.KStart, KeyPad: keyPad, Table: table, Index: idx, Terms: terms, Probe: a.probe}
	if s, ok := a.Cfg.Pos.(posenc.Scaler); ok {
		opts.Scale = s.Scale(dh)
	}
	var out *G.Node
	if own {
		out, err = attender.StreamAttend(site, q, k, v, opts) // [B, Tq, d]
	} else {
		out, err = graph.StreamAttention(q, k, v, opts) // [B, Tq, d]
	}
	if err != nil {
		return nil, errors.Wrapf(err, "attention %s: stream", name)
	}
	return a.O.Fwd(out) // [B, Tq, d]
}

// projectQKV returns the projections q [B, Tq, d], k and v [B, Tk, d] of xq
// and xkv, heads merged (head h is columns h*dh:(h+1)*dh); with split, q
// and k are returned split, [B, H, T, dh].
func (a *Attention) projectQKV(xq, xkv *G.Node, split bool) (q, k, v *G.Node, err error) {
	if q, err = a.Q.Fwd(xq); err != nil {
		return nil, nil, nil, err
	}
	if k, err = a.K.Fwd(xkv); err != nil {
		return nil, nil, nil, err
	}
	if v, err = a.V.Fwd(xkv); err != nil {
		return nil, nil, nil, err
	}
	a.newKV = KV{K: k, V: v}
	if a.mem != nil && a.mem.Room { // the new rows go into the cache's room
		if k, err = graph.WriteTail(a.mem.K, k); err != nil { // [B, M+T, d]
			return nil, nil, nil, errors.Wrapf(err, "attention %s: cached keys", a.Cfg.Name)
		}
		if v, err = graph.WriteTail(a.mem.V, v); err != nil { // [B, M+T, d]
			return nil, nil, nil, errors.Wrapf(err, "attention %s: cached values", a.Cfg.Name)
		}
	} else if a.mem != nil { // FwdCached: the cache's keys and values come first
		if k, err = graph.Concat(1, a.mem.K, k); err != nil { // [B, M+T, d]
			return nil, nil, nil, errors.Wrapf(err, "attention %s: cached keys", a.Cfg.Name)
		}
		if v, err = graph.Concat(1, a.mem.V, v); err != nil { // [B, M+T, d]
			return nil, nil, nil, errors.Wrapf(err, "attention %s: cached values", a.Cfg.Name)
		}
	}
	if split {
		if q, err = graph.SplitHeads(q, a.Cfg.Heads); err != nil {
			return nil, nil, nil, err
		}
		if k, err = graph.SplitHeads(k, a.Cfg.Heads); err != nil {
			return nil, nil, nil, err
		}
	}
	return q, k, v, nil
}

// streamKeyPad turns the caller's mask of the streaming path into
// StreamOpts.KeyPad [B, Tk] or [1, Tk], read each time the graph runs (so a
// mask rebound per batch works): nil stays nil; a mask [B, 1, 1, Tk] or
// [1, 1, 1, Tk] is reshaped. Any other mask is an error naming its shape.
func (a *Attention) streamKeyPad(mask *G.Node, b, tk int) (*G.Node, error) {
	if mask == nil {
		return nil, nil
	}
	ms := mask.Shape()
	if ms.Dims() != 4 || (ms[0] != b && ms[0] != 1) || ms[1] != 1 || ms[2] != 1 || ms[3] != tk {
		return nil, errors.Errorf("attention %s: stream: mask has shape %v; the streaming attention takes only a key-padding mask [%d, 1, 1, %d]", a.Cfg.Name, ms, b, tk)
	}
	pad, err := graph.Reshape(mask, ms[0], tk) // [B|1, Tk]
	return pad, errors.Wrapf(err, "attention %s: stream: key-padding mask", a.Cfg.Name)
}

// project applies the layer's q or k projection to x [N, d].
func (a *Attention) project(x *G.Node, which string) (*G.Node, error) {
	switch which {
	case "q":
		return a.Q.Fwd(x)
	case "k":
		return a.K.Fwd(x)
	}
	return nil, errors.Errorf("attention %s: no projection %q (want q or k)", a.Cfg.Name, which)
}

// withCausal combines the caller's mask (nil or [B'|1, 1, Tq|1, Tk]) with the
// causal mask of span. The causal mask is a host constant repeated B' times,
// so the caller's mask broadcasts onto it.
func (a *Attention) withCausal(mask *G.Node, span posenc.Span) (*G.Node, error) {
	name := a.Cfg.Name
	cm := graph.CausalMask(a.p.Dtype(), span.TQ, span.TK, span.QStart, span.KStart) // [Tq, Tk]
	if mask == nil {
		return graph.MaskNode(a.g, cm, graph.UniqueName(a.g, name+"/causal_mask")), nil
	}
	ms := mask.Shape()
	if ms.Dims() != 4 || ms[1] != 1 || (ms[2] != 1 && ms[2] != span.TQ) || ms[3] != span.TK {
		return nil, errors.Errorf("attention %s: mask has shape %v, want [B|1, 1, %d|1, %d]", name, ms, span.TQ, span.TK)
	}
	rep := graph.RepeatMask(cm, ms[0]) // [B', 1, Tq, Tk]
	full := graph.MaskNode(a.g, rep, graph.UniqueName(a.g, name+"/causal_mask"))
	out, err := graph.BroadcastMul(full, mask)
	return out, errors.Wrapf(err, "attention %s: mask %v", name, ms)
}
