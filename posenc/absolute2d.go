package posenc

import (
	"math"
	"slices"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "learned-2d", Kind: KindAbsolute, Learnable: true}, func(o Options) (Encoding, error) {
		return NewLearned2D(o.GridRows, o.GridCols, o.InitStd, o.GridResample)
	})
	register(Info{Name: "sinusoidal-2d", Kind: KindAbsolute}, func(o Options) (Encoding, error) {
		if o.SinusoidalScale < 0 {
			return nil, errors.Errorf("posenc sinusoidal-2d: SinusoidalScale %v is negative", o.SinusoidalScale)
		}
		return &Sinusoidal2D{Scale: o.SinusoidalScale}, nil
	})
}

// The resampling modes of Learned2D (Options.GridResample). The "-aa"
// modes are F.interpolate's antialias=True, timm's default in
// resample_abs_pos_embed (see ResampleWeights).
const (
	ResampleNone       = "none"
	ResampleBilinear   = "bilinear"
	ResampleBicubic    = "bicubic"
	ResampleBilinearAA = "bilinear-aa"
	ResampleBicubicAA  = "bicubic-aa"
)

// ResampleModes lists the valid values of Options.GridResample.
var ResampleModes = []string{ResampleNone, ResampleBilinear, ResampleBicubic, ResampleBilinearAA, ResampleBicubicAA}

// absInputGrid returns the 2-D grid positions of an input hook's site and the
// input's sizes, or an error naming the encoding: x must be [B, T, DModel]
// and s.Pos 2-D grid positions with T queries.
func absInputGrid(name string, s *Site, x *G.Node) (p *Positions, t, d int, err error) {
	sh := x.Shape()
	if sh.Dims() != 3 || sh[2] != s.DModel {
		return nil, 0, 0, errors.Errorf("posenc %s: input has shape %v, want [B, T, %d]", name, sh, s.DModel)
	}
	t, d = sh[1], sh[2]
	p = s.Pos
	if p == nil || p.Kind != PosGrid {
		return nil, 0, 0, errors.Errorf("posenc %s: needs grid positions, got %s positions", name, p.Describe())
	}
	if len(p.Extent) != 2 {
		return nil, 0, 0, errors.Errorf("posenc %s: needs 2-D grid positions (rows, cols), got a %d-D %s", name, len(p.Extent), p.Describe())
	}
	if p.TQ != t {
		return nil, 0, 0, errors.Errorf("posenc %s: %s positions have %d query positions, the input has %d tokens", name, p.Describe(), p.TQ, t)
	}
	return p, t, d, nil
}

// Learned2D is a learned absolute table of 2-D grid positions, ViT's
// position embedding (Dosovitskiy et al. 2021, "An Image is Worth 16x16
// Words: Transformers for Image Recognition at Scale"): one learnable row
// per patch of a Rows×Cols grid, parameter "pos_emb_2d" [Rows*Cols, d],
// initialised N(0, InitStd²), not weight-decayed, shared by the model. The
// token at (r, c) gets row r*Cols + c added (raster order, rows first, as
// ViT's flattened patch sequence). ViT's class-token row is a separate
// parameter, "pos_emb_2d_cls" [1, d] (same init, not decayed), created only
// when a model with a class token asks for it (AddToClass: layers.ViT with
// vit-pool cls and vit-cls-pos with, timm's no_embed_class=False); it is
// never resampled, as timm's resample_abs_pos_embed keeps its prefix rows.
//
// On a grid R'×C' other than Rows×Cols the table is, with Resample
//
//   - "none": not used; AddToInput returns an error naming both grids.
//   - "bilinear" or "bicubic": resampled to R'×C' as F.interpolate of the
//     table seen as a [d, Rows, Cols] image, align_corners=False,
//     antialias=False (bicubic with PyTorch's A = -0.75 and indices clamped
//     at the border), as MAE's interpolate_pos_embed (util/pos_embed.py).
//   - "bilinear-aa" or "bicubic-aa": the same with antialias=True, the
//     default of timm's resample_abs_pos_embed (timm/layers/pos_embed.py:
//     interpolation='bicubic', antialias=True): PyTorch's antialiased
//     kernels widen the taps by the factor when downsizing, renormalise at
//     the border instead of clamping, and use A = -0.5 for bicubic, so they
//     differ from the plain modes when upsizing too.
//
// ResampleWeights gives the weights of every mode. The resampling is linear
// in the table, so it is a constant matrix M [R'*C', Rows*Cols] built on the
// host (ResampleMatrix) times the table, one matrix product through which
// gradients flow into the table. The original ViT code resamples with
// scipy's zoom instead.
//
// One value may build graphs from several goroutines at once.
type Learned2D struct {
	// Rows and Cols are the grid the table is sized for.
	Rows, Cols int
	// InitStd is the init standard deviation of the table.
	InitStd float64
	// Resample is ResampleNone, ResampleBilinear or ResampleBicubic.
	Resample string
	cache    tableCache[learned2DKey, learned2DPlan]
}

type learned2DKey struct {
	pos string
	dt  tensor.Dtype
}

// learned2DPlan is how a table becomes the rows of the tokens: the table
// itself (ident), a gather of its rows (idx), or a product with m
// [T, Rows*Cols] (resampling, with the tokens' rows of M selected).
type learned2DPlan struct {
	ident bool
	idx   []int
	m     *tensor.Dense
}

// NewLearned2D returns a learned rows×cols table initialised N(0, std²)
// that serves other grids as resample says ("" is ResampleNone). It returns
// an error for a non-positive grid or std or an unknown resample mode.
func NewLearned2D(rows, cols int, std float64, resample string) (*Learned2D, error) {
	if rows <= 0 || cols <= 0 {
		return nil, errors.Errorf("posenc learned-2d: grid %dx%d: both sides must be positive", rows, cols)
	}
	if std <= 0 || math.IsNaN(std) || math.IsInf(std, 0) {
		return nil, errors.Errorf("posenc learned-2d: init std %v must be positive", std)
	}
	if resample == "" {
		resample = ResampleNone
	}
	if !slices.Contains(ResampleModes, resample) {
		return nil, errors.Errorf("posenc learned-2d: grid resample %q (valid: %s)", resample, strings.Join(ResampleModes, ", "))
	}
	return &Learned2D{Rows: rows, Cols: cols, InitStd: std, Resample: resample}, nil
}

// Name implements Encoding.
func (*Learned2D) Name() string { return "learned-2d" }

// Accepts implements PositionAccepter: 2-D grid positions only.
func (*Learned2D) Accepts() []PosKind { return []PosKind{PosGrid} }

// AddToInput implements InputAdder: x [B, T, d] plus, for token i at
// (r, c) = s.Pos.Grid2 of query i, row r*C' + c of the table resampled to
// the positions' grid R'×C' (the table itself when R'×C' = Rows×Cols).
// Errors: x not [B, T, DModel], positions other than a 2-D grid of T
// queries, or a grid other than Rows×Cols with Resample "none".
func (e *Learned2D) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	pos, t, d, err := absInputGrid(e.Name(), s, x)
	if err != nil {
		return nil, err
	}
	r2, c2 := pos.Extent[0], pos.Extent[1]
	same := r2 == e.Rows && c2 == e.Cols
	if !same && e.Resample == ResampleNone {
		return nil, errBeyondTable("posenc learned-2d: table is %dx%d, the input grid is %dx%d; set -grid-resample bilinear or bicubic", e.Rows, e.Cols, r2, c2)
	}
	plan, err := e.cache.get(learned2DKey{pos.Key(), s.Dtype()}, func() (learned2DPlan, error) {
		idx := make([]int, t)
		for i := range idx {
			idx[i] = pos.QCoords[2*i]*c2 + pos.QCoords[2*i+1]
		}
		if same {
			ident := t == e.Rows*e.Cols
			for i, v := range idx {
				ident = ident && v == i
			}
			return learned2DPlan{ident: ident, idx: idx}, nil
		}
		m, err := ResampleMatrix(e.Resample, e.Rows, e.Cols, r2, c2)
		if err != nil {
			return learned2DPlan{}, err
		}
		n := e.Rows * e.Cols
		rows := make([]float64, 0, t*n)
		for _, v := range idx {
			rows = append(rows, m[v*n:(v+1)*n]...)
		}
		return learned2DPlan{m: graph.FromFloat64s(s.Dtype(), tensor.Shape{t, n}, rows)}, nil
	})
	if err != nil {
		return nil, err
	}
	tab, err := s.Params.Node(s.G, "pos_emb_2d", tensor.Shape{e.Rows * e.Cols, d}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, err
	}
	var pe *G.Node
	switch {
	case plan.ident:
		pe = tab
	case plan.m != nil:
		mn := G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(plan.m.Shape()...), G.WithValue(plan.m),
			G.WithName(graph.UniqueName(s.G, "pos_emb_2d_resample")))
		if pe, err = G.Mul(mn, tab); err != nil { // [T, Rows*Cols] · [Rows*Cols, d]
			return nil, errors.Wrap(err, "posenc learned-2d: resample")
		}
	default:
		ids := G.NewTensor(s.G, tensor.Int, 1, G.WithShape(t), G.WithName(graph.UniqueName(s.G, "pos_emb_2d_ids")),
			G.WithValue(tensor.New(tensor.WithShape(t), tensor.WithBacking(slices.Clone(plan.idx)))))
		if pe, err = graph.Embedding(tab, ids); err != nil {
			return nil, errors.Wrap(err, "posenc learned-2d: gather")
		}
	}
	return graph.BroadcastAdd(x, pe)
}

// AddToClass implements ClassTokenAdder: the class token cls [B, 1, d]
// plus the learnable row "pos_emb_2d_cls" [1, d] (init N(0, InitStd²), not
// decayed; timm's pos_embed[:, 0] with no_embed_class=False), the same on
// every grid: resampling never touches it, as timm's
// resample_abs_pos_embed keeps its num_prefix_tokens rows.
func (e *Learned2D) AddToClass(s *Site, cls *G.Node) (*G.Node, error) {
	if sh := cls.Shape(); sh.Dims() != 3 || sh[1] != 1 || sh[2] != s.DModel {
		return nil, errors.Errorf("posenc learned-2d: class token has shape %v, want [B, 1, %d]", sh, s.DModel)
	}
	row, err := s.Params.Node(s.G, "pos_emb_2d_cls", tensor.Shape{1, s.DModel}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, err
	}
	return graph.BroadcastAdd(cls, row)
}

// ResampleWeights returns the 1-D interpolation weights [out, in] (row
// major) that PyTorch's F.interpolate(mode, align_corners=False) applies
// along one axis resized from in to out samples without a scale factor.
// Without antialiasing output i reads the source coordinate
// src = (i + 0.5)·in/out - 0.5 and
//
//   - "bilinear": src clamped below at 0, i0 = floor(src), λ = src - i0,
//     weight 1-λ at i0 and λ at min(i0+1, in-1);
//   - "bicubic": i0 = floor(src), t = src - i0, Keys' cubic convolution
//     weights with A = -0.75 at i0-1, i0, i0+1, i0+2, each index clamped to
//     [0, in-1] (weights of a clamped index accumulate).
//
// With antialias=True ("bilinear-aa", "bicubic-aa": PyTorch's separable
// antialiased kernel, HelperInterpBase::_compute_indices_min_size_weights_aa
// in aten/src/ATen/native/cpu/UpSampleKernel.cpp, torch 1.13), with
// s = in/out, the filter's half-width n = 1 (bilinear) or 2 (bicubic), and
// f the triangle 1-|x| (bilinear) or Keys' cubic with A = -0.5 (bicubic),
// both zero beyond n:
//
//	support = n·s if s >= 1 (downsizing), else n
//	k       = 1/s if s >= 1, else 1
//	centre  = s·(i + 0.5)
//	xmin    = max(trunc(centre - support + 0.5), 0)
//	xmax    = min(trunc(centre + support + 0.5), in)
//	w_j     = f((j - centre + 0.5)·k) / Σ_j f(...),  xmin <= j < xmax
//
// (the weights renormalised over the taps inside the input instead of
// clamping indices; a zero sum leaves them unnormalised, as PyTorch).
//
// in == out gives the identity in every mode. It returns an error for
// another mode or a non-positive size.
func ResampleWeights(mode string, in, out int) ([]float64, error) {
	if in <= 0 || out <= 0 {
		return nil, errors.Errorf("posenc: resample %d to %d samples: sizes must be positive", in, out)
	}
	w := make([]float64, out*in)
	scale := float64(in) / float64(out)
	clamp := func(i int) int { return min(max(i, 0), in-1) }
	for i := 0; i < out; i++ {
		src := (float64(i)+0.5)*scale - 0.5
		row := w[i*in : (i+1)*in]
		switch mode {
		case ResampleBilinear:
			src = max(src, 0)
			i0 := min(int(math.Floor(src)), in-1)
			l := min(max(src-float64(i0), 0), 1)
			row[i0] += 1 - l
			row[clamp(i0+1)] += l
		case ResampleBicubic:
			f := math.Floor(src)
			i0, x := int(f), src-f
			const a = -0.75
			c1 := func(x float64) float64 { return ((a+2)*x-(a+3))*x*x + 1 }   // |x| <= 1
			c2 := func(x float64) float64 { return ((a*x-5*a)*x+8*a)*x - 4*a } // 1 < |x| < 2
			row[clamp(i0-1)] += c2(x + 1)
			row[clamp(i0)] += c1(x)
			row[clamp(i0+1)] += c1(1 - x)
			row[clamp(i0+2)] += c2(2 - x)
		case ResampleBilinearAA, ResampleBicubicAA:
			resampleAA(row, mode == ResampleBicubicAA, in, scale, i)
		default:
			return nil, errors.Errorf("posenc: resample mode %q (valid: bilinear, bicubic, bilinear-aa, bicubic-aa)", mode)
		}
	}
	return w, nil
}

// resampleAA writes into row [in] the antialiased weights of output i (see
// ResampleWeights), scale = in/out, term by term as PyTorch computes them
// in double.
func resampleAA(row []float64, cubic bool, in int, scale float64, i int) {
	filter := func(x float64) float64 { // the triangle
		if x = math.Abs(x); x < 1 {
			return 1 - x
		}
		return 0
	}
	half := 1.0
	if cubic {
		const a = -0.5 // PyTorch's aa_filter: Keys' a = -0.5, not upsample_bicubic2d's -0.75
		filter = func(x float64) float64 {
			x = math.Abs(x)
			switch {
			case x < 1:
				return ((a+2)*x-(a+3))*x*x + 1
			case x < 2:
				return ((a*x-5*a)*x+8*a)*x - 4*a
			}
			return 0
		}
		half = 2
	}
	support, invscale := half, 1.0
	if scale >= 1 {
		support, invscale = half*scale, 1/scale
	}
	centre := scale * (float64(i) + 0.5)
	xmin := max(int(centre-support+0.5), 0) // int() truncates toward zero, as C++'s static_cast<int64_t>
	xmax := min(int(centre+support+0.5), in)
	total := 0.0
	for j := xmin; j < xmax; j++ {
		row[j] = filter((float64(j) - centre + 0.5) * invscale)
		total += row[j]
	}
	if total != 0 {
		for j := xmin; j < xmax; j++ {
			row[j] /= total
		}
	}
}

// ResampleMatrix returns the matrix M [outR*outC, inR*inC] (row major) that
// resamples a table of inR×inC grid rows (raster order, row r*inC + c) to
// outR×outC as F.interpolate(mode, align_corners=False; antialias=True
// for the "-aa" modes, else False) does over the table's [d, inR, inC]
// image: resampled = M · table. It is
// the Kronecker product of the row and column weights of ResampleWeights,
// M[i*outC + j, a*inC + b] = Wrow[i, a]·Wcol[j, b]. Errors as
// ResampleWeights.
func ResampleMatrix(mode string, inR, inC, outR, outC int) ([]float64, error) {
	wr, err := ResampleWeights(mode, inR, outR)
	if err != nil {
		return nil, err
	}
	wc, err := ResampleWeights(mode, inC, outC)
	if err != nil {
		return nil, err
	}
	n := inR * inC
	m := make([]float64, outR*outC*n)
	for i := 0; i < outR; i++ {
		for j := 0; j < outC; j++ {
			row := m[(i*outC+j)*n : (i*outC+j+1)*n]
			for a := 0; a < inR; a++ {
				if wr[i*inR+a] == 0 {
					continue
				}
				for b := 0; b < inC; b++ {
					row[a*inC+b] = wr[i*inR+a] * wc[j*inC+b]
				}
			}
		}
	}
	return m, nil
}

// Sinusoidal2D is the fixed 2-D sine-cosine encoding of MAE (He et al.
// 2022, "Masked Autoencoders Are Scalable Vision Learners";
// get_2d_sincos_pos_embed in facebookresearch/mae util/pos_embed.py), added
// to the token embeddings. Half of the d channels encode one coordinate and
// half the other, each as a 1-D sine-cosine of d/2 channels with sines
// first, then cosines (not interleaved):
//
//	ω_k = 1 / 10000^(k/(d/4)),  k = 0..d/4-1   (= 1/10000^(2k/(d/2)))
//	PE[(r, c)] = Scale · [sin(c·ω), cos(c·ω), sin(r·ω), cos(r·ω)]   four blocks of d/4
//
// The column comes first, as in MAE: its grid is np.meshgrid(grid_w,
// grid_h), whose first plane holds the w (column) coordinate, and its
// emb_h (the first d/2 channels, despite the name) is computed from that
// plane. The order only permutes channels, which the model's first linear
// map absorbs, but matching MAE keeps tables exchangeable.
//
// Scale multiplies the table; 0 means 1/√d, DefaultSinusoidalScale, as for
// Sinusoidal (Options.SinusoidalScale): MAE adds the unit-amplitude table to
// a patch embedding of comparable size, while the models of package layers
// start their patch embeddings at N(0, InitStd), so the default keeps the
// same ratio of position to content as the 1-D sinusoidal encoding. d must
// be divisible by 4. The table is a constant (no parameters), defined on
// any grid (it extrapolates to larger ones), and computed on the host once
// per (positions, d, scale, dtype). The zero value is ready to use, and one
// value may build graphs from several goroutines at once.
type Sinusoidal2D struct {
	// Scale multiplies the table; 0 means 1/√d_model.
	Scale float64
	cache tableCache[sinusoid2DKey, *tensor.Dense]
}

type sinusoid2DKey struct {
	pos   string
	d     int
	scale float64
	dt    tensor.Dtype
}

// Name implements Encoding.
func (*Sinusoidal2D) Name() string { return "sinusoidal-2d" }

// Accepts implements PositionAccepter: 2-D grid positions only.
func (*Sinusoidal2D) Accepts() []PosKind { return []PosKind{PosGrid} }

// Sinusoid2DTable returns the unscaled MAE table PE [T, d] (see
// Sinusoidal2D) of the T positions coords [T*2] (row, col pairs,
// token-major). It returns an error unless d is a positive multiple of 4
// and coords a whole number of pairs.
func Sinusoid2DTable(coords []int, d int) ([]float64, error) {
	if d <= 0 || d%4 != 0 {
		return nil, errors.Errorf("posenc sinusoidal-2d: width %d is not a positive multiple of 4 (sin and cos of rows and columns)", d)
	}
	if len(coords)%2 != 0 {
		return nil, errors.Errorf("posenc sinusoidal-2d: %d coordinates are not (row, col) pairs", len(coords))
	}
	q := d / 4
	omega := make([]float64, q)
	for k := range omega {
		omega[k] = 1 / math.Pow(10000, float64(k)/float64(q))
	}
	t := len(coords) / 2
	out := make([]float64, t*d)
	for i := 0; i < t; i++ {
		row := out[i*d : (i+1)*d]
		r, c := float64(coords[2*i]), float64(coords[2*i+1])
		for k, w := range omega {
			row[k], row[q+k] = math.Sin(c*w), math.Cos(c*w)
			row[2*q+k], row[3*q+k] = math.Sin(r*w), math.Cos(r*w)
		}
	}
	return out, nil
}

// AddToClass implements ClassTokenAdder: cls itself, a zero row, as MAE's
// get_2d_sincos_pos_embed(cls_token=True) prepends for the class token (so
// vit-cls-pos with and without give the same model).
func (e *Sinusoidal2D) AddToClass(s *Site, cls *G.Node) (*G.Node, error) {
	if sh := cls.Shape(); sh.Dims() != 3 || sh[1] != 1 || sh[2] != s.DModel {
		return nil, errors.Errorf("posenc sinusoidal-2d: class token has shape %v, want [B, 1, %d]", sh, s.DModel)
	}
	return cls, nil
}

// AddToInput implements InputAdder: x [B, T, d] + Scale·PE of the queries'
// grid coordinates. Errors: x not [B, T, DModel], d not a multiple of 4,
// positions other than a 2-D grid of T queries.
func (e *Sinusoidal2D) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	pos, t, d, err := absInputGrid(e.Name(), s, x)
	if err != nil {
		return nil, err
	}
	scale := e.Scale
	if scale == 0 {
		scale = DefaultSinusoidalScale(d)
	}
	key := sinusoid2DKey{pos: pos.Key(), d: d, scale: scale, dt: s.Dtype()}
	tab, err := e.cache.get(key, func() (*tensor.Dense, error) {
		pe, err := Sinusoid2DTable(pos.QCoords, d)
		if err != nil {
			return nil, err
		}
		for i := range pe {
			pe[i] *= scale
		}
		return graph.FromFloat64s(key.dt, tensor.Shape{t, d}, pe), nil
	})
	if err != nil {
		return nil, err
	}
	pe := G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(t, d), G.WithValue(tab), G.WithName(graph.UniqueName(s.G, "sinusoid2d_pe")))
	return graph.BroadcastAdd(x, pe)
}
