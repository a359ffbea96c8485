package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// StreamAttender is the hook of an encoding that computes the whole
// streaming attention itself, because its score terms depend on the
// content in a way a table bias cannot express (CoPE's gates): with
// layers' Stream on, attention hands it q, k and v (heads merged, after
// any QKTransformer) and the options it would give graph.StreamAttention
// (heads, scale, causal mask and offsets, key-padding mask, tiles, probe),
// and uses the result [B, Tq, H*dv] instead. StreamBias is not asked.
type StreamAttender interface {
	// StreamAttend returns the attention output [B, TQ, H*dv] from q
	// [B, TQ, H*dh], k [B, TK, H*dh] and v [B, TK, H*dv], or an error
	// naming the encoding for a site it cannot serve.
	StreamAttend(s *Site, q, k, v *G.Node, o graph.StreamOpts) (*G.Node, error)
}

// StreamAttend implements StreamAttender with graph.StreamCoPE: the same
// table "<prefix>/cope_emb" [dh, NPos] (times cope_alpha with Alpha), gates
// at 1/√dh, terms √dh·o (o with Divide), the attention's scale o.Scale, as
// ScoreTerms and the materialised attention, without a [B, H, TQ, TK]
// tensor. It returns an error naming cope for a bidirectional site, a
// table bias in o, q, k, v that do not fit the site, or NPos <= 0.
func (e *CoPE) StreamAttend(s *Site, q, k, v *G.Node, o graph.StreamOpts) (*G.Node, error) {
	if !s.Causal || !o.Causal {
		return nil, errors.New("posenc cope: causal attention only (the gates count the keys from each key to the query); the site is bidirectional")
	}
	if e.NPos <= 0 {
		return nil, errors.Errorf("posenc cope: number of positions %d, want > 0", e.NPos)
	}
	if q == nil || k == nil || v == nil {
		return nil, errors.New("posenc cope: q, k or v is nil")
	}
	dh, d := s.DHead, s.H*s.DHead
	if qs, ks := q.Shape(), k.Shape(); !qs.Eq(tensor.Shape{s.B, s.TQ, d}) || !ks.Eq(tensor.Shape{s.B, s.TK, d}) {
		return nil, errors.Errorf("posenc cope: stream: q %v and k %v, want [%d, %d, %d] and [%d, %d, %d]", qs, ks, s.B, s.TQ, d, s.B, s.TK, d)
	}
	emb, err := s.Params.Node(s.G, s.Prefix+"/cope_emb", tensor.Shape{dh, e.NPos}, graph.Zeros, false)
	if err != nil {
		return nil, err
	}
	if emb, err = withAlpha(s, emb, e.Alpha, s.Prefix+"/cope_alpha"); err != nil {
		return nil, errors.Wrap(err, "posenc cope: cope_alpha")
	}
	co := graph.CoPEOpts{GateScale: 1 / math.Sqrt(float64(dh)), TermScale: math.Sqrt(float64(dh))}
	if e.Divide {
		co.TermScale = 1
	}
	out, err := graph.StreamCoPE(q, k, v, emb, o, co)
	return out, errors.WithMessage(err, "posenc cope")
}
