package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// XPosName is the name of the xPos encoding.
const XPosName = "xpos"

// The roundings of xPos's centre (Options.XPosCentre).
const (
	XPosCentreCeil  = "ceil"  // c = ⌈N/2⌉: torchscale's min_pos = -(length+offset)//2
	XPosCentreFloor = "floor" // c = ⌊N/2⌋: x-transformers' max_pos // 2
)

func init() {
	register(Info{Name: XPosName, Kind: KindRotary}, func(o Options) (Encoding, error) { return NewXPos(o) })
}

// CausalOnly is implemented by encodings that serve causal attention only
// (xPos): CausalOnly reports true, and their hooks return an error naming
// the encoding for a site with Causal false.
type CausalOnly interface {
	CausalOnly() bool
}

// XPos is the extrapolatable rotary encoding of Sun et al. 2022, "A
// Length-Extrapolatable Transformer" (xPos): RoPE whose rotations are
// multiplied by an exponential scale, growing with the position on queries
// and shrinking on keys, so that the score decays with the distance:
//
//	q_n -> ζ^(n/γ) ⊙ R(n) q_n,   k_m -> ζ^(-m/γ) ⊙ R(m) k_m
//	⟨q', k'⟩ = Σ_p ζ_p^((n-m)/γ) · (pair p of ⟨q, R(m-n) k⟩)
//	ζ_p = (p/(rot/2) + 0.4)/1.4 = (2p + 0.4·rot)/(1.4·rot),  p = 0 .. rot/2-1
//
// where R is the rotation of Rope (θ_p = base^(-2p/rot), RopeBase,
// RopePairing, RopeFraction) and γ = XPosScaleBase (512). ζ_p ∈ [0.29, 1),
// so for a causal query n ≥ m every pair's factor is at most 1 and decays
// with n-m, faster for the high-frequency pairs.
//
// Conventions, checked against torchscale's
// architecture/xpos_relative_position.py (XPOS, the authors' code): the
// angle uses the absolute position (query i at s.QStart+i, key j at
// s.KStart+j), the scale exponent the position minus a centre c: with N the
// largest query or key position + 1 of the call, c = ceil(N/2) (torchscale's
// min_pos = -(length+offset)//2), so the scales stay near 1 for positions
// 0..N-1; scores depend only on n-m, so c cancels up to rounding.
// FloorCentre (Options.XPosCentre "floor") takes c = floor(N/2) instead,
// x-transformers' RotaryEmbedding(use_xpos=True): power = (t - max_pos //
// 2)/scale_base with max_pos = t.max() + 1 (x_transformers.py; with
// x-transformers' own settings, pairs interleaved and dim_head/2 rotary
// dims, it is RopePairing "interleaved" and RopeFraction 0.5 here). ζ is
// computed over the rotary dims (torchscale: the whole head). torchscale
// pairs interleaved coordinates (rotate_every_two); here RopePairing applies
// (default "half", as rope): a model trained from scratch learns either, and
// ConvertPairing maps one onto the other. The scales multiply the cached
// cos/sin tables of graph.Rotary (float64 on the host), so xPos has no
// parameters and costs what RoPE costs.
//
// xPos is causal only (the decay ζ^((n-m)/γ) grows without bound for keys
// after the query): TransformQK returns an error naming the encoding for a
// bidirectional site. The paper also uses blockwise causal attention at
// evaluation; that is the caller's mask, not part of the encoding.
type XPos struct {
	rope *Rope
	// ScaleBase is γ.
	ScaleBase float64
	// FloorCentre takes the centre c = floor(N/2) (x-transformers');
	// false (the zero value): ceil(N/2) (torchscale's).
	FloorCentre bool

	cache tableCache[xposKey, *graph.RotaryTable]
}

type xposKey struct {
	start, n, rot, centre int
	down                  bool
}

// NewXPos returns the xPos encoding configured by o (defaults applied): the
// rotation of rope (RopeBase, RopePairing, RopeFraction) and
// γ = XPosScaleBase, with the centre XPosCentre. It returns an error naming
// xpos for a pairing, base or fraction rope refuses, a scale base that is
// not a finite number > 0, or a centre other than ceil and floor.
func NewXPos(o Options) (*XPos, error) {
	o = o.Defaults()
	r, err := NewRope(RopePlain, o)
	if err != nil {
		return nil, errors.Wrap(err, "posenc xpos")
	}
	r.name = XPosName
	if !(o.XPosScaleBase > 0) || math.IsInf(o.XPosScaleBase, 0) {
		return nil, errors.Errorf("posenc xpos: scale base %g must be a finite number > 0", o.XPosScaleBase)
	}
	if o.XPosCentre != XPosCentreCeil && o.XPosCentre != XPosCentreFloor {
		return nil, errors.Errorf("posenc xpos: xpos-centre %q must be %s or %s", o.XPosCentre, XPosCentreCeil, XPosCentreFloor)
	}
	return &XPos{rope: r, ScaleBase: o.XPosScaleBase, FloorCentre: o.XPosCentre == XPosCentreFloor}, nil
}

// Name implements Encoding.
func (e *XPos) Name() string { return XPosName }

// CausalOnly implements CausalOnly: true.
func (e *XPos) CausalOnly() bool { return true }

// XPosZeta returns ζ_p = (2p + 0.4·rot)/(1.4·rot) for p = 0 .. rot/2-1.
func XPosZeta(rot int) []float64 {
	z := make([]float64, rot/2)
	for p := range z {
		z[p] = (float64(2*p) + 0.4*float64(rot)) / (1.4 * float64(rot))
	}
	return z
}

// XPosCentre is c, the position subtracted in the scale exponent when the
// largest position of the call is n-1: ceil(n/2) (torchscale's; see
// XPosFloorCentre for x-transformers').
func XPosCentre(n int) int { return (n + 1) / 2 }

// XPosFloorCentre is c with XPos.FloorCentre: floor(n/2), x-transformers'
// max_pos // 2.
func XPosFloorCentre(n int) int { return n / 2 }

// XPosAngles returns the cos and sin tables [n, rot/2] of positions
// start..start+n-1 for queries (down false: times ζ_p^((pos-centre)/γ)) or
// keys (down true: divided by it), with θ_p = base^(-2p/rot).
func XPosAngles(start, n, rot, centre int, base, gamma float64, down bool) (cos, sin []float64) {
	h := rot / 2
	theta := make([]float64, h)
	for p := range theta {
		theta[p] = 1 / math.Pow(base, float64(2*p)/float64(rot))
	}
	cos, sin = RopeAngles(start, n, theta, 1, 1)
	zeta := XPosZeta(rot)
	for t := 0; t < n; t++ {
		e := float64(start+t-centre) / gamma
		for p, z := range zeta {
			sc := math.Pow(z, e)
			if down {
				sc = 1 / sc
			}
			cos[t*h+p] *= sc
			sin[t*h+p] *= sc
		}
	}
	return cos, sin
}

func (e *XPos) table(start, n, rot, centre int, down bool) (*graph.RotaryTable, error) {
	key := xposKey{start: start, n: n, rot: rot, centre: centre, down: down}
	return e.cache.get(key, func() (*graph.RotaryTable, error) {
		cos, sin := XPosAngles(start, n, rot, centre, e.rope.Base, e.ScaleBase, down)
		tab, err := graph.NewRotaryTable(n, rot/2, cos, sin)
		return tab, errors.Wrapf(err, "posenc xpos: positions %d..%d", start, start+n-1)
	})
}

// TransformQK implements QKTransformer: q [B, H, TQ, dh] rotated and scaled
// up at positions s.QStart.., k [B, H, TK, dh] rotated and scaled down at
// s.KStart... Returns an error naming xpos for a bidirectional site
// (s.Causal false), shapes that do not match the site, or fewer than 2
// rotary dims.
func (e *XPos) TransformQK(s *Site, q, k *G.Node) (q2, k2 *G.Node, err error) {
	if !s.Causal {
		return nil, nil, errors.New("posenc xpos: causal attention only (its scale ζ^((n-m)/γ) grows without bound for keys after the query); the site is bidirectional")
	}
	qs, ks := q.Shape(), k.Shape()
	wq := tensor.Shape{s.B, s.H, s.TQ, s.DHead}
	wk := tensor.Shape{s.B, s.H, s.TK, s.DHead}
	if !qs.Eq(wq) {
		return nil, nil, errors.Errorf("posenc xpos: q has shape %v, want %v", qs, wq)
	}
	if !ks.Eq(wk) {
		return nil, nil, errors.Errorf("posenc xpos: k has shape %v, want %v", ks, wk)
	}
	rot, err := e.rope.RotaryDims(s.DHead)
	if err != nil {
		return nil, nil, err
	}
	n := s.QStart + s.TQ
	if l := s.KStart + s.TK; l > n {
		n = l
	}
	c := XPosCentre(n)
	if e.FloorCentre {
		c = XPosFloorCentre(n)
	}
	qt, err := e.table(s.QStart, s.TQ, rot, c, false)
	if err != nil {
		return nil, nil, err
	}
	kt, err := e.table(s.KStart, s.TK, rot, c, true)
	if err != nil {
		return nil, nil, err
	}
	if q2, err = graph.Rotary(q, qt, e.rope.Pairing); err != nil {
		return nil, nil, errors.Wrap(err, "posenc xpos: q")
	}
	if k2, err = graph.Rotary(k, kt, e.rope.Pairing); err != nil {
		return nil, nil, errors.Wrap(err, "posenc xpos: k")
	}
	return q2, k2, nil
}
