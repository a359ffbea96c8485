package posenc

import (
	"math"
	"math/rand"
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// The names of the 2-D rotary encodings.
const (
	Rope2DName    = "rope-2d"
	RopeMixedName = "rope-mixed"
)

// The axis orders of rope-2d (Options.Rope2DAxisOrder): the grid axis that
// the first dh/4 rotation pairs of a head turn with.
const (
	Rope2DXFirst = "x-first" // the column first: rope-vit's compute_axial_cis
	Rope2DYFirst = "y-first" // the row first: timm's build_rotary_pos_embed ('ij')
)

func init() {
	register(Info{Name: Rope2DName, Kind: KindRotary}, func(o Options) (Encoding, error) { return NewRope2D(o) })
	register(Info{Name: RopeMixedName, Kind: KindRotary, Learnable: true}, func(o Options) (Encoding, error) { return NewRopeMixed(o) })
}

// Rope2D is RoPE-Axial of Heo et al. 2024, "Rotary Position Embedding for
// Vision Transformer" (ECCV 2024; reference code naver-ai/rope-vit,
// models/vit_rope.py, compute_axial_cis and apply_rotary_emb): rotary
// position embedding of 2-D grid positions in which half of each head's
// rotation pairs turn with the column of a patch and the other half with
// its row. For a head of dh dims (dh divisible by 4) and a token at
// (row y, column x):
//
//	θ_k = Base^(-4k/dh),  k = 0 .. dh/4-1
//	pair p < dh/4:        φ_p = x·θ_p          (column, rope-vit's t_x = index % end_x)
//	pair p = dh/4 + k:    φ_p = y·θ_k          (row, rope-vit's t_y = index // end_x)
//
// and each pair (a, b) of q and k is rotated by φ_p as in Rope:
// (a, b) -> (a cos φ - b sin φ, b cos φ + a sin φ). Pairs are interleaved
// (x_{2p}, x_{2p+1}), rope-vit's complex view of q and k, whose
// freqs_cis = cat([freqs_x, freqs_y]) puts the column frequencies first;
// this type follows that convention exactly (Pairing may be set to
// graph.RotaryHalf for (x_p, x_{p+dh/2}); then column pairs are
// p < dh/4 of that pairing). Every head uses the same angles; all dh dims
// rotate (no partial rotary). Base is Options.Rope2DBase (default 100,
// rope-vit's rope_theta).
//
// YFirst (Options.Rope2DAxisOrder "y-first") swaps the axes: pair p < dh/4
// turns by y·θ_p and pair dh/4 + k by x·θ_k, timm's default convention
// (timm/layers/pos_embed_sincos.py: build_rotary_pos_embed with
// grid_indexing 'ij' stacks the meshgrid (row, col), so its sin/cos
// [T, dh] hold the row bands first, repeat_interleave(2) for interleaved
// pairs, applied by apply_rot_embed_cat; EVA-02's RotaryEmbeddingCat). With
// timm's in_pixels=False, feat_shape = ref_feat_shape and grid_offset 0
// (EVA-02's settings at its training resolution) and Base = timm's
// temperature (10000 there), rope-2d with YFirst is timm's rotation
// exactly. timm's grid_indexing 'xy' (its ports of rope-vit's models and
// its Perception Encoder models) puts the column first again, x-first.
// Not modelled: timm's pixel mode (in_pixels=True, RotaryEmbeddingCat's
// default: bands linspace(1, max_res/2)·π on coordinates in [-1, 1]), its
// positions rescaled to a reference grid (t·ref_feat_shape/feat_shape) and
// its grid_offset (a constant added to the coordinates: the scores stay,
// the rotated q and k do not).
//
// Then q·k depends on the positions only through (Δrow, Δcol): ⟨R(y_i,
// x_i) q, R(y_j, x_j) k⟩ = ⟨q, R(y_j - y_i, x_j - x_i) k⟩. Queries are
// rotated at s.Pos.QCoords, keys at s.Pos.KCoords, so cross-attention and
// arbitrary token orders work. rope-vit does not rotate its class token;
// this library's ViT has none (mean pooling).
//
// The cos/sin tables [T, dh/2] are computed on the host in float64 once per
// (positions, queries or keys, dh) and cached; they enter graphs as
// graph.Rotary tables (whose gradient is the inverse rotation). Rope2D has
// no parameters. Build it with NewRope2D (a struct literal needs Base, and
// gets the zero Pairing, graph.RotaryHalf, unless it sets one); one value
// may build graphs from several goroutines at once.
type Rope2D struct {
	// Base is θ's base (Rope2DBase).
	Base float64
	// Pairing is graph.RotaryInterleaved (rope-vit's; NewRope2D's choice)
	// or graph.RotaryHalf.
	Pairing graph.RotaryPairing
	// YFirst turns the first dh/4 pairs with the row and the other dh/4
	// with the column (timm's order); false (the zero value): the column
	// first (rope-vit's).
	YFirst bool

	cache tableCache[rope2DKey, *graph.RotaryTable]
}

type rope2DKey struct {
	pos    string // Positions.Key
	keys   bool   // key coordinates (else query)
	dh     int
	yFirst bool
}

// NewRope2D returns rope-2d with base o.Rope2DBase and axis order
// o.Rope2DAxisOrder (defaults applied) and interleaved pairs. A base that
// is not a finite number > 1, or an axis order other than x-first and
// y-first, is an error naming the encoding.
func NewRope2D(o Options) (*Rope2D, error) {
	o = o.Defaults()
	if !(o.Rope2DBase > 1) || math.IsInf(o.Rope2DBase, 0) {
		return nil, errors.Errorf("posenc %s: base %g must be a finite number > 1", Rope2DName, o.Rope2DBase)
	}
	if o.Rope2DAxisOrder != Rope2DXFirst && o.Rope2DAxisOrder != Rope2DYFirst {
		return nil, errors.Errorf("posenc %s: rope2d-axis-order %q must be %s or %s", Rope2DName, o.Rope2DAxisOrder, Rope2DXFirst, Rope2DYFirst)
	}
	return &Rope2D{Base: o.Rope2DBase, Pairing: graph.RotaryInterleaved, YFirst: o.Rope2DAxisOrder == Rope2DYFirst}, nil
}

// Name implements Encoding.
func (*Rope2D) Name() string { return Rope2DName }

// Accepts implements PositionAccepter: 2-D grid positions only.
func (*Rope2D) Accepts() []PosKind { return []PosKind{PosGrid} }

// Rope2DFrequencies returns θ_k = base^(-4k/dh), k = 0..dh/4-1, the
// frequencies of each axis of RoPE-Axial (rope-vit's compute_axial_cis)
// and of the magnitudes of RoPE-Mixed's initial frequencies
// (init_random_2d_freqs).
func Rope2DFrequencies(base float64, dh int) []float64 {
	th := make([]float64, dh/4)
	for k := range th {
		th[k] = 1 / math.Pow(base, float64(4*k)/float64(dh))
	}
	return th
}

// Rope2DAngles returns the cos and sin tables [T, dh/2] of RoPE-Axial for
// the tokens at coords [T*2] (row, col pairs, token-major as in
// Positions.QCoords): pair p < dh/4 turns by col·θ_p, pair dh/4+k by
// row·θ_k (see Rope2D; Rope2DAxisAngles with yFirst false).
func Rope2DAngles(coords []int, dh int, base float64) (cos, sin []float64) {
	return Rope2DAxisAngles(coords, dh, base, false)
}

// Rope2DAxisAngles is Rope2DAngles in either axis order: with yFirst,
// pair p < dh/4 turns by row·θ_p and pair dh/4+k by col·θ_k (timm's
// order), else the column first (rope-vit's).
func Rope2DAxisAngles(coords []int, dh int, base float64, yFirst bool) (cos, sin []float64) {
	th := Rope2DFrequencies(base, dh)
	q, half := dh/4, dh/2
	n := len(coords) / 2
	cos, sin = make([]float64, n*half), make([]float64, n*half)
	for t := 0; t < n; t++ {
		first, second := float64(coords[2*t+1]), float64(coords[2*t]) // column, row
		if yFirst {
			first, second = second, first
		}
		for k, f := range th {
			s, c := math.Sincos(first * f)
			cos[t*half+k], sin[t*half+k] = c, s
			s, c = math.Sincos(second * f)
			cos[t*half+q+k], sin[t*half+q+k] = c, s
		}
	}
	return cos, sin
}

// rope2DCheck returns an error naming the encoding unless q [B, H, TQ, dh]
// and k [B, H, TK, dh] match the site, the site has 2-D grid positions for
// its queries and keys, and dh is divisible by 4.
func rope2DCheck(name string, s *Site, q, k *G.Node) error {
	qs, ks := q.Shape(), k.Shape()
	wq := tensor.Shape{s.B, s.H, s.TQ, s.DHead}
	wk := tensor.Shape{s.B, s.H, s.TK, s.DHead}
	if !qs.Eq(wq) {
		return errors.Errorf("posenc %s: q has shape %v, want %v", name, qs, wq)
	}
	if !ks.Eq(wk) {
		return errors.Errorf("posenc %s: k has shape %v, want %v", name, ks, wk)
	}
	if s.Pos == nil || s.Pos.Kind != PosGrid {
		return errors.Errorf("posenc %s: needs grid positions, the site has %s positions", name, s.Pos.Describe())
	}
	if n := len(s.Pos.Extent); n != 2 {
		return errors.Errorf("posenc %s: needs 2-D grid positions, got %d-D (%s)", name, n, s.Pos.Describe())
	}
	if err := s.Pos.Check(s.B, s.TQ, s.TK); err != nil {
		return errors.WithMessage(err, "posenc "+name)
	}
	if s.DHead%4 != 0 {
		return errors.Errorf("posenc %s: head dim %d must be divisible by 4 (half of the rotation pairs per grid axis)", name, s.DHead)
	}
	return nil
}

// table returns the cached rotary table of the site's query (keys false)
// or key coordinates.
func (e *Rope2D) table(s *Site, keys bool) (*graph.RotaryTable, error) {
	key := rope2DKey{pos: s.Pos.Key(), keys: keys, dh: s.DHead, yFirst: e.YFirst}
	return e.cache.get(key, func() (*graph.RotaryTable, error) {
		coords := s.Pos.QCoords
		if keys {
			coords = s.Pos.KCoords
		}
		cos, sin := Rope2DAxisAngles(coords, s.DHead, e.Base, e.YFirst)
		tab, err := graph.NewRotaryTable(len(coords)/2, s.DHead/2, cos, sin)
		return tab, errors.Wrapf(err, "posenc %s", Rope2DName)
	})
}

// TransformQK implements QKTransformer: q [B, H, TQ, dh] rotated at the
// grid coordinates s.Pos.QCoords, k [B, H, TK, dh] at s.Pos.KCoords. It
// returns an error naming the encoding if the shapes do not match the
// site, the site has no 2-D grid positions, or dh is not divisible by 4.
func (e *Rope2D) TransformQK(s *Site, q, k *G.Node) (q2, k2 *G.Node, err error) {
	if err := rope2DCheck(Rope2DName, s, q, k); err != nil {
		return nil, nil, err
	}
	qt, err := e.table(s, false)
	if err != nil {
		return nil, nil, err
	}
	kt, err := e.table(s, true)
	if err != nil {
		return nil, nil, err
	}
	if q2, err = graph.Rotary(q, qt, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: q", Rope2DName)
	}
	if k2, err = graph.Rotary(k, kt, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: k", Rope2DName)
	}
	return q2, k2, nil
}

// RopeMixed is RoPE-Mixed of Heo et al. 2024, "Rotary Position Embedding
// for Vision Transformer" (ECCV 2024; naver-ai/rope-vit,
// models/vit_rope.py: init_random_2d_freqs, compute_mixed_cis): rotary
// position embedding of 2-D grid positions with learnable frequencies for
// both axes, per layer, head and pair, so that a pair can turn along any
// direction of the grid (diagonals included). For a token at (row y,
// column x), head h and pair p:
//
//	φ[h, t, p] = x_t·fx[h, p] + y_t·fy[h, p]
//
// and pair p of q[:, h, t] and k[:, h, t] is rotated by φ as in Rope2D
// (interleaved pairs (x_{2p}, x_{2p+1}), rope-vit's complex view). The
// frequencies are the parameter "<prefix>/rope_mixed_freqs" [2, H, dh/2]
// of each attention layer, fx = [0, h, :] (the column, rope-vit's
// freqs[0] times t_x) and fy = [1, h, :] (the row), not weight-decayed
// (rope-vit lists 'freqs' in no_weight_decay). They are initialised as
// rope-vit's init_random_2d_freqs(dim=dh, num_heads=H,
// theta=RopeMixedBase, rotate=True): with magnitudes m_k =
// RopeMixedBase^(-4k/dh), k < dh/4, and one angle α_h uniform in [0, 2π)
// per head (drawn from the Params' seeded generator, head by head),
//
//	fx[h] = [m cos α_h, m cos(α_h + π/2)]     fy[h] = [m sin α_h, m sin(α_h + π/2)]
//
// so the first dh/4 pairs of a head turn along direction α_h and the other
// dh/4 along the perpendicular one (α_h = 0: the axial frequencies of
// Rope2D with base RopeMixedBase). RopeMixedBase defaults to 10, rope-vit's
// RoPE-Mixed theta.
//
// The angles are computed in the graph, φ = C·F with C the constant
// coordinates [T, 2] (column, row) and F the frequencies [2, H·dh/2], then
// [T, H, dh/2] -> [H, T, dh/2], and applied with graph.RotaryAngles, so
// gradients reach the frequencies. Queries use s.Pos.QCoords, keys
// s.Pos.KCoords. Build it with NewRopeMixed (a struct literal needs Base,
// and gets the zero Pairing, graph.RotaryHalf, unless it sets one); one
// value may build graphs from several goroutines at once.
type RopeMixed struct {
	// Base is the base of the initial magnitudes (RopeMixedBase).
	Base float64
	// Pairing is graph.RotaryInterleaved (rope-vit's; NewRopeMixed's
	// choice) or graph.RotaryHalf.
	Pairing graph.RotaryPairing
}

// NewRopeMixed returns rope-mixed with initial base o.RopeMixedBase
// (defaults applied) and interleaved pairs. A base that is not a finite
// number > 1 is an error.
func NewRopeMixed(o Options) (*RopeMixed, error) {
	o = o.Defaults()
	if !(o.RopeMixedBase > 1) || math.IsInf(o.RopeMixedBase, 0) {
		return nil, errors.Errorf("posenc %s: base %g must be a finite number > 1", RopeMixedName, o.RopeMixedBase)
	}
	return &RopeMixed{Base: o.RopeMixedBase, Pairing: graph.RotaryInterleaved}, nil
}

// Name implements Encoding.
func (*RopeMixed) Name() string { return RopeMixedName }

// Accepts implements PositionAccepter: 2-D grid positions only.
func (*RopeMixed) Accepts() []PosKind { return []PosKind{PosGrid} }

// RopeMixedFreqs returns the frequencies [2, H, dh/2] (row-major) of
// init_random_2d_freqs for the given per-head rotation angles α
// (len(alpha) = H): see RopeMixed. dh must be divisible by 4.
func RopeMixedFreqs(base float64, dh int, alpha []float64) []float64 {
	mag := Rope2DFrequencies(base, dh)
	heads, q, half := len(alpha), dh/4, dh/2
	out := make([]float64, 2*heads*half)
	fx, fy := out[:heads*half], out[heads*half:]
	for h, a := range alpha {
		for k, m := range mag {
			fx[h*half+k] = m * math.Cos(a)
			fx[h*half+q+k] = m * math.Cos(math.Pi/2+a)
			fy[h*half+k] = m * math.Sin(a)
			fy[h*half+q+k] = m * math.Sin(math.Pi/2+a)
		}
	}
	return out
}

// RopeMixedInit is the graph.Init of the frequencies [2, heads, dh/2]: one
// angle α_h = 2π·U[0, 1) per head from the store's generator, then
// RopeMixedFreqs.
func RopeMixedInit(base float64, heads, dh int) graph.Init {
	return func(rng *rand.Rand, data []float64) {
		alpha := make([]float64, heads)
		for h := range alpha {
			alpha[h] = rng.Float64() * 2 * math.Pi
		}
		copy(data, RopeMixedFreqs(base, dh, alpha))
	}
}

// FreqsName is the name of the frequency parameter of the layer with the
// given prefix: "<prefix>/rope_mixed_freqs".
func (*RopeMixed) FreqsName(prefix string) string { return prefix + "/rope_mixed_freqs" }

// angles returns φ [H, T, dh/2] of the tokens at coords [T*2] (row, col)
// from f2, the frequencies as [2, H*dh/2].
func (e *RopeMixed) angles(s *Site, f2 *G.Node, coords []int, what string) (*G.Node, error) {
	n := len(coords) / 2
	c := make([]float64, 2*n) // [T, 2]: (column, row), the rows of F
	for t := 0; t < n; t++ {
		c[2*t], c[2*t+1] = float64(coords[2*t+1]), float64(coords[2*t])
	}
	cn := G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(n, 2), G.WithValue(graph.FromFloat64s(s.Dtype(), tensor.Shape{n, 2}, c)),
		G.WithName(graph.UniqueName(s.G, s.Prefix+"/rope_mixed_"+what+"_coords")))
	a, err := G.Mul(cn, f2) // [T, H*dh/2]
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s: %s angles", RopeMixedName, what)
	}
	if a, err = graph.Reshape(a, n, s.H, s.DHead/2); err != nil {
		return nil, err
	}
	if a, err = G.Transpose(a, 1, 0, 2); err != nil { // [H, T, dh/2]
		return nil, errors.Wrapf(err, "posenc %s: %s angles", RopeMixedName, what)
	}
	return a, nil
}

// TransformQK implements QKTransformer: q [B, H, TQ, dh] rotated at the
// grid coordinates s.Pos.QCoords, k [B, H, TK, dh] at s.Pos.KCoords, by
// the layer's learnable frequencies (created on first use). It returns an
// error naming the encoding if the shapes do not match the site, the site
// has no 2-D grid positions, or dh is not divisible by 4.
func (e *RopeMixed) TransformQK(s *Site, q, k *G.Node) (q2, k2 *G.Node, err error) {
	if err := rope2DCheck(RopeMixedName, s, q, k); err != nil {
		return nil, nil, err
	}
	half := s.DHead / 2
	f, err := s.Params.Node(s.G, e.FreqsName(s.Prefix), tensor.Shape{2, s.H, half}, RopeMixedInit(e.Base, s.H, s.DHead), false)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s", RopeMixedName)
	}
	f2, err := graph.Reshape(f, 2, s.H*half)
	if err != nil {
		return nil, nil, err
	}
	qa, err := e.angles(s, f2, s.Pos.QCoords, "q")
	if err != nil {
		return nil, nil, err
	}
	ka := qa
	if !slices.Equal(s.Pos.QCoords, s.Pos.KCoords) {
		if ka, err = e.angles(s, f2, s.Pos.KCoords, "k"); err != nil {
			return nil, nil, err
		}
	}
	if q2, err = graph.RotaryAngles(q, qa, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: q", RopeMixedName)
	}
	if k2, err = graph.RotaryAngles(k, ka, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: k", RopeMixedName)
	}
	return q2, k2, nil
}
