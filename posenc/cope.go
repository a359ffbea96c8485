package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// CoPEName is the name of the contextual position encoding.
const CoPEName = "cope"

func init() {
	register(Info{Name: CoPEName, Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) { return NewCoPE(o) })
}

// CoPE is the contextual position encoding of Golovneva, Wang, Weston and
// Sukhbaatar 2024, "Contextual Position Encoding: Learning to Count What's
// Important" (arXiv 2405.18719): the position of key j seen from query i is
// not j - i but a count of the keys between them that the query's gates
// select, and the score gets a term read from a learned table at that
// fractional position:
//
//	a_ij   = q_i·k_j / √dh                               (the scaled content logits)
//	g_ij   = σ(a_ij) if key j is visible from query i, else 0
//	p_ij   = min(Σ_{k=j..Tk-1} g_ik, npos-1)             (a reverse cumulative sum over the keys)
//	z_i[n] = q_i·e[:, n],  e = "<prefix>/cope_emb" [dh, npos]
//	o_ij   = z_i[⌈p_ij⌉]·w + z_i[⌊p_ij⌋]·(1-w),  w = p_ij - ⌊p_ij⌋
//	scores = a_ij + o_ij, then the mask and the softmax
//
// Key j is visible from query i when its position is at most the query's,
// s.KStart+j <= s.QStart+i (memory spans, Tk > Tq with KStart < QStart,
// work; the keys must be in position order, as every span is). Since the
// gates lie in (0, 1), p_ij counts at most the visible keys from j to i
// and is 0 for a masked key.
//
// The hook is a ScoreTermer: attention computes (q·kᵀ + terms)·scale with
// scale = 1/√dh, so ScoreTerms returns √dh·o, and the scores get exactly
// the paper's o added to the scaled logits (its appendix code adds it after
// the division). The gates need the scaled logits before the softmax, which
// the ScoreTermer hook does not see, so q·kᵀ is computed a second time
// inside the hook (one more batched product of the attention's size); the
// sigmoid, the mask and the reverse cumulative sum are one op
// (graph.CoPEPositions), the clamp and the interpolation another
// (graph.CoPEInterp). The gates use 1/√dh whatever the attention's scale
// (a Scaler combined with cope does not change them). One training step of
// the reference model (d = 128, 4 heads, 2 layers, batch 32 × 64, float32)
// takes about 1.4 times rope's.
//
// Conventions, checked against the authors' code (facebookresearch/RAM,
// projects/cope/src/cope/context_position.py): the table e is per layer
// (the module lives in each attention layer; their --cope-shared option
// shares it), shared by the heads, zero-initialised as theirs (so the first
// gradient w.r.t. the gates is 0; it is never weight-decayed), and z = q·e
// uses the unscaled query. Their code's default (without --cope-nodiv) adds
// o before dividing by √dh: set CopeDivide for that (terms = o). The
// number of positions npos is CopeNPos (default 64, this library's
// training length; their default is the block size + 1, since p_ii can
// reach T). The gradient w.r.t. the positions is that of PyTorch's autograd
// of the paper's code: 0 at integer positions and where the clamp acts
// (graph.CoPEInterp). The gates see only the causal mask, not a caller's
// padding mask (their code multiplies the gates by its attention mask; this
// library's language models have none).
//
// With Alpha (Options.Alpha), "<prefix>/cope_alpha" [1], per layer like
// the table, init AlphaInit, not weight-decayed, multiplies the terms (o,
// not the content logits nor the gates), computed as z = q·(alpha·e): the
// interpolation is linear in z, so this is alpha·o up to rounding, exactly
// o at alpha = 1. With the zero table, alpha's first gradient is 0 too.
//
// Kind: KindRelative, since p_ij is a contextual count of the keys between
// key and query, a relative position that depends on the content.
//
// CoPE is causal only (the count runs from the key to the query; future
// keys would need gates of their own): ScoreTerms returns an error naming
// the encoding for a bidirectional site.
//
// With layers' Stream, CoPE is a StreamAttender: StreamAttend computes the
// same attention with graph.StreamCoPE (gates carried across key tiles,
// backward by recomputation), without any [B, H, TQ, TK] tensor.
type CoPE struct {
	// NPos is npos, the number of positions of the table (> 0).
	NPos int
	// Divide adds o before the division by √dh (terms = o, the authors'
	// code's default) instead of after it (terms = √dh·o, the paper's
	// appendix).
	Divide bool
	// Alpha scales the terms by the learnable "<prefix>/cope_alpha"
	// (Options.Alpha).
	Alpha bool
}

// NewCoPE returns the CoPE encoding configured by o (defaults applied):
// NPos = CopeNPos, Divide = CopeDivide, Alpha = Alpha. It returns an error naming cope for
// CopeNPos < 0 (0 is the default, 64).
func NewCoPE(o Options) (*CoPE, error) {
	o = o.Defaults()
	if o.CopeNPos <= 0 {
		return nil, errors.Errorf("posenc cope: number of positions CopeNPos = %d, want > 0", o.CopeNPos)
	}
	return &CoPE{NPos: o.CopeNPos, Divide: o.CopeDivide, Alpha: o.Alpha}, nil
}

// Name implements Encoding.
func (e *CoPE) Name() string { return CoPEName }

// CausalOnly implements CausalOnly: true.
func (e *CoPE) CausalOnly() bool { return true }

// ScoreTerms implements ScoreTermer: terms [B, H, TQ, TK] = √dh·o (o with
// Divide; times cope_alpha with Alpha), from q [B, H, TQ, dh] and k [B, H, TK, dh]; the table
// "<s.Prefix>/cope_emb" [dh, NPos] is created on first use (zeros). Returns
// an error naming cope for a bidirectional site, shapes that do not match
// the site, or NPos <= 0.
func (e *CoPE) ScoreTerms(s *Site, q, k *G.Node) (*G.Node, error) {
	if !s.Causal {
		return nil, errors.New("posenc cope: causal attention only (the gates count the keys from each key to the query); the site is bidirectional")
	}
	if e.NPos <= 0 {
		return nil, errors.Errorf("posenc cope: number of positions %d, want > 0", e.NPos)
	}
	b, h, tq, tk := s.B, s.H, s.TQ, s.TK
	if q == nil || k == nil {
		return nil, errors.New("posenc cope: q or k is nil")
	}
	qs, ks := q.Shape(), k.Shape()
	if qs.Dims() != 4 || !qs.Eq(tensor.Shape{b, h, tq, qs[3]}) || !ks.Eq(tensor.Shape{b, h, tk, qs[3]}) {
		return nil, errors.Errorf("posenc cope: q %v and k %v, want [%d, %d, %d, dh] and [%d, %d, %d, dh]", qs, ks, b, h, tq, b, h, tk)
	}
	dh := qs[3]
	fail := func(err error, what string) error {
		return errors.Wrapf(err, "posenc cope: %s (q %v, k %v)", what, qs, ks)
	}
	emb, err := s.Params.Node(s.G, s.Prefix+"/cope_emb", tensor.Shape{dh, e.NPos}, graph.Zeros, false)
	if err != nil {
		return nil, err
	}
	// positions p = Σ_{k>=j} σ(q·kᵀ/√dh) over the visible keys: [B*H*Tq, Tk]
	q3, err := graph.Reshape(q, b*h, tq, dh)
	if err != nil {
		return nil, fail(err, "q")
	}
	k3, err := graph.Reshape(k, b*h, tk, dh)
	if err != nil {
		return nil, fail(err, "k")
	}
	logits, err := G.BatchedMatMul(q3, k3, false, true)
	if err != nil {
		return nil, fail(err, "q·kᵀ")
	}
	pos, err := graph.CoPEPositions(logits, s.QStart, s.KStart, 1/math.Sqrt(float64(dh)))
	if err != nil {
		return nil, fail(err, "positions")
	}
	if pos, err = graph.Reshape(pos, b*h*tq, tk); err != nil {
		return nil, fail(err, "positions")
	}
	// z = q·e: [B*H*Tq, NPos]
	qf, err := graph.Reshape(q, 1, b*h*tq, dh)
	if err != nil {
		return nil, fail(err, "q")
	}
	if emb, err = withAlpha(s, emb, e.Alpha, s.Prefix+"/cope_alpha"); err != nil {
		return nil, fail(err, "cope_alpha")
	}
	e3, err := graph.Reshape(emb, 1, dh, e.NPos)
	if err != nil {
		return nil, fail(err, "cope_emb")
	}
	z, err := G.BatchedMatMul(qf, e3)
	if err != nil {
		return nil, fail(err, "q·cope_emb")
	}
	if z, err = graph.Reshape(z, b*h*tq, e.NPos); err != nil {
		return nil, fail(err, "q·cope_emb")
	}
	o, err := graph.CoPEInterp(z, pos)
	if err != nil {
		return nil, fail(err, "interpolation")
	}
	if !e.Divide {
		if o, err = graph.Scale(o, math.Sqrt(float64(dh))); err != nil {
			return nil, fail(err, "scale")
		}
	}
	o, err = graph.Reshape(o, b, h, tq, tk)
	return o, errors.Wrap(err, "posenc cope")
}
