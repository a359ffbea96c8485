package layers

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

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
	// interfaces (posenc.QKTransformer, ScoreTermer, Scaler, ScoreBiaser,
	// ValueTermer).
	Pos posenc.Encoding
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
}

// NewAttention creates the four projections in g.
func NewAttention(g *G.ExprGraph, p *graph.Params, cfg AttentionConfig) (*Attention, error) {
	if cfg.Heads <= 0 || cfg.D <= 0 || cfg.D%cfg.Heads != 0 {
		return nil, errors.Errorf("attention %s: d_model %d must be a positive multiple of heads %d", cfg.Name, cfg.D, cfg.Heads)
	}
	a := &Attention{Cfg: cfg, DHead: cfg.D / cfg.Heads, g: g, p: p}
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
	name := a.Cfg.Name
	if xkv == nil {
		xkv = xq
	}
	qs, ks := xq.Shape(), xkv.Shape()
	if qs.Dims() != 3 || ks.Dims() != 3 || qs[0] != ks[0] || qs[2] != a.Cfg.D || ks[2] != a.Cfg.D {
		return nil, errors.Errorf("attention %s: query input %v and key input %v, want [B, Tq, %d] and [B, Tk, %d]", name, qs, ks, a.Cfg.D, a.Cfg.D)
	}
	b, tq, tk, h, dh, d := qs[0], qs[1], ks[1], a.Cfg.Heads, a.DHead, a.Cfg.D
	if span.TQ != tq || span.TK != tk {
		return nil, errors.Errorf("attention %s: span has TQ=%d TK=%d, inputs have %d and %d", name, span.TQ, span.TK, tq, tk)
	}
	site := &posenc.Site{G: a.g, Params: a.p, Layer: a.Cfg.Layer, Prefix: name, B: b, H: h, DHead: dh, DModel: d,
		Span: span, Causal: a.Cfg.Causal, Project: a.project}

	q, err := a.heads(a.Q, xq, b, tq) // [B, H, Tq, dh]
	if err != nil {
		return nil, err
	}
	k, err := a.heads(a.K, xkv, b, tk) // [B, H, Tk, dh]
	if err != nil {
		return nil, err
	}
	v, err := a.heads(a.V, xkv, b, tk) // [B, H, Tk, dh]
	if err != nil {
		return nil, err
	}
	if t, ok := a.Cfg.Pos.(posenc.QKTransformer); ok {
		if q, k, err = t.TransformQK(site, q, k); err != nil {
			return nil, err
		}
	}

	// scores = (q kᵀ + terms) * scale
	scores, err := G.BatchedMatMul(flat3(q, b*h, tq, dh), flat3(k, b*h, tk, dh), false, true) // [B*H, Tq, Tk]
	if err != nil {
		return nil, errors.Wrapf(err, "attention %s: q.kᵀ", name)
	}
	if scores, err = graph.Reshape(scores, b, h, tq, tk); err != nil { // [B, H, Tq, Tk]
		return nil, err
	}
	if t, ok := a.Cfg.Pos.(posenc.ScoreTermer); ok {
		terms, err := t.ScoreTerms(site, q, k) // [B, H, Tq, Tk]
		if err != nil {
			return nil, err
		}
		if scores, err = graph.Add(scores, terms); err != nil {
			return nil, errors.Wrapf(err, "attention %s: score terms %v", name, terms.Shape())
		}
	}
	scale := 1 / math.Sqrt(float64(dh))
	if s, ok := a.Cfg.Pos.(posenc.Scaler); ok {
		scale = s.Scale(dh)
	}
	if scores, err = graph.Scale(scores, scale); err != nil {
		return nil, err
	}
	// + bias, before the mask
	if bi, ok := a.Cfg.Pos.(posenc.ScoreBiaser); ok {
		bias, err := bi.ScoreBias(site) // [H|1, Tq, Tk]
		if err != nil {
			return nil, err
		}
		if scores, err = graph.BroadcastAdd(scores, bias); err != nil {
			return nil, errors.Wrapf(err, "attention %s: score bias", name)
		}
	}
	if a.Cfg.Causal {
		if mask, err = a.withCausal(mask, span); err != nil {
			return nil, err
		}
	}
	probs, err := graph.MaskedSoftmax(scores, mask) // [B, H, Tq, Tk]
	if err != nil {
		return nil, errors.Wrapf(err, "attention %s", name)
	}

	out, err := G.BatchedMatMul(flat3(probs, b*h, tq, tk), flat3(v, b*h, tk, dh)) // [B*H, Tq, dh]
	if err != nil {
		return nil, errors.Wrapf(err, "attention %s: probs.v", name)
	}
	if out, err = graph.Reshape(out, b, h, tq, dh); err != nil { // [B, H, Tq, dh]
		return nil, err
	}
	if t, ok := a.Cfg.Pos.(posenc.ValueTermer); ok {
		terms, err := t.ValueTerms(site, probs) // [B, H, Tq, dh]
		if err != nil {
			return nil, err
		}
		if out, err = graph.Add(out, terms); err != nil {
			return nil, errors.Wrapf(err, "attention %s: value terms %v", name, terms.Shape())
		}
	}
	if out, err = G.Transpose(out, 0, 2, 1, 3); err != nil { // [B, Tq, H, dh]
		return nil, err
	}
	if out, err = graph.Reshape(out, b*tq, d); err != nil { // [B*Tq, d]
		return nil, err
	}
	if out, err = a.O.Fwd(out); err != nil {
		return nil, err
	}
	return graph.Reshape(out, b, tq, d) // [B, Tq, d]
}

// heads projects x [B, T, d] with l and splits heads: [B, H, T, dh]; head h
// takes columns h*dh:(h+1)*dh.
func (a *Attention) heads(l *Linear, x *G.Node, b, t int) (*G.Node, error) {
	y, err := graph.Reshape(x, b*t, a.Cfg.D)
	if err != nil {
		return nil, err
	}
	if y, err = l.Fwd(y); err != nil { // [B*T, d]
		return nil, err
	}
	if y, err = graph.Reshape(y, b, t, a.Cfg.Heads, a.DHead); err != nil {
		return nil, err
	}
	return G.Transpose(y, 0, 2, 1, 3) // [B, H, T, dh]
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

// flat3 reshapes a 4-D node to [n, t, c]; shapes are known to agree.
func flat3(x *G.Node, n, t, c int) *G.Node {
	return G.Must(graph.Reshape(x, n, t, c))
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
