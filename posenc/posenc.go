package posenc

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Span says where the queries and keys of one attention call sit: query i is
// at absolute position QStart+i, key j at KStart+j. Self-attention over a
// fresh window has QStart = KStart = 0 and TQ = TK; a segment attending to a
// cached memory has KStart = QStart - memory length; cross-attention may have
// TQ != TK.
type Span struct {
	QStart, TQ int
	KStart, TK int
}

// Rel returns the relative distance key minus query, KStart+j - (QStart+i).
func (s Span) Rel(i, j int) int { return s.KStart + j - s.QStart - i }

// Site is what attention tells an encoding about one call: the graph and the
// parameter store to create nodes in, which layer is asking, the shapes, and
// where the queries and keys sit.
type Site struct {
	G      *G.ExprGraph
	Params *graph.Params
	// Layer is the 0-based block index; -1 for the input hook.
	Layer int
	// Prefix names the calling module's parameters, e.g. "block0/attn".
	Prefix string
	// B is the batch size, H the number of heads, DHead the head width and
	// DModel the model width.
	B, H, DHead, DModel int
	// Span places the queries and keys on a line: their indices in the
	// sequence, and their positions when Pos is nil.
	Span
	// Pos holds the positions when they are more than a line (grid
	// coordinates, real times, pairwise relations); nil for line positions.
	// An encoding serves the kinds it lists in Accepts (PositionAccepter);
	// attention checks the kind with CheckKind before calling any hook.
	Pos *Positions
	// Causal is true when keys after the query are masked.
	Causal bool
	// Project applies the layer's own query ("q") or key ("k") projection,
	// bias included, to x [N, DModel] -> [N, DModel]. DeBERTa projects its
	// relative embeddings with it. Nil for the input hook.
	Project func(x *G.Node, which string) (*G.Node, error)
}

// Dtype is the element type of the site's parameters and graph.
func (s *Site) Dtype() tensor.Dtype { return s.Params.Dtype() }

// Encoding is a position encoding. It acts on attention only through the hook
// interfaces below; an encoding implements the ones it needs, and attention
// knows nothing else about it.
type Encoding interface {
	// Name is the command-line name, e.g. "rope".
	Name() string
}

// InputAdder is an encoding added to the token embeddings (sinusoidal,
// learned absolute).
type InputAdder interface {
	// AddToInput returns x + PE, with x [B, T, d] at positions
	// s.QStart..s.QStart+T-1.
	AddToInput(s *Site, x *G.Node) (*G.Node, error)
}

// ClassTokenAdder is an InputAdder that also embeds a class token: a token
// prepended to the patches of an image with no grid position of its own
// (layers.ViT with vit-pool cls and vit-cls-pos with; timm's ViT with
// no_embed_class=False, whose position table has a row for it). learned-2d
// adds a learnable row of its own, sinusoidal-2d adds nothing (MAE's zero
// row).
type ClassTokenAdder interface {
	InputAdder
	// AddToClass returns cls + e_cls for the class token cls [B, 1, d].
	AddToClass(s *Site, cls *G.Node) (*G.Node, error)
}

// StepAdder is an InputAdder whose table can also be indexed by positions
// given at run time, so that one decoding graph (layers.Decoder) serves
// every step: the cache sits at fixed positions, but an absolute table
// adds each new token's own position, and the cached keys keep the ones
// they were added at (so the cache cannot slide: Info.NoSlide).
type StepAdder interface {
	InputAdder
	// AddAtSteps returns x + onehot·PE[0:P], with x [B, 1, d] one new
	// token per sequence and onehot [B, P] a float input holding a single
	// 1 per row, at the token's position (a row of zeros adds nothing).
	// An encoding whose table has fewer than P positions returns an error
	// wrapping ErrBeyondTable.
	AddAtSteps(s *Site, x, onehot *G.Node) (*G.Node, error)
}

// QKTransformer transforms queries and keys before their dot products
// (RoPE and its scalings).
type QKTransformer interface {
	// TransformQK maps q [B, H, TQ, dh] and k [B, H, TK, dh] to tensors of the
	// same shapes.
	TransformQK(s *Site, q, k *G.Node) (q2, k2 *G.Node, err error)
}

// ScoreBiaser adds a content-free bias to the scaled attention scores, before
// the mask (T5, ALiBi, Shaw's scalar variant).
type ScoreBiaser interface {
	// ScoreBias returns a bias that broadcasts onto the scores
	// [B, H, TQ, TK]: [H|1, TQ, TK] when it is the same for every example,
	// [B|1, H|1, TQ, TK] when it may differ per example (pairwise or
	// per-example real positions).
	ScoreBias(s *Site) (*G.Node, error)
}

// ScoreTermer adds content-position terms to the raw scores q.k^T, before
// scaling (Shaw's key embeddings, Transformer-XL, DeBERTa).
type ScoreTermer interface {
	// ScoreTerms returns terms [B, H, TQ, TK] from q [B, H, TQ, dh] and
	// k [B, H, TK, dh].
	ScoreTerms(s *Site, q, k *G.Node) (*G.Node, error)
}

// QueryBiasTermer is a ScoreTermer whose terms are a per-head bias on the
// queries of the content product plus terms that read the queries only
// (Transformer-XL: u_h·k_j + (q_i + v_h)·P_h[dist_ij]):
//
//	ScoreTerms(s, q, k) = QueryBias(s)_h · k_j + QueryTerms(s, q)
//
// so that attention may compute (q_i + b_h)·k_j + QueryTerms, reading the
// keys once (the (q+u)·K of Dai et al.'s reference code) and splitting
// neither the keys nor the content queries into heads. The two forms are
// equal up to rounding; attention uses this one against a key/value cache
// (Attention.FwdCached, layers.Decoder), where the keys are many and the
// queries few, and ScoreTerms everywhere else (the training path and its
// attention probe, whose position part then holds b·k, are unchanged).
type QueryBiasTermer interface {
	ScoreTermer
	// QueryBias returns b [H, dh], head h's bias on the queries of the
	// content product.
	QueryBias(s *Site) (*G.Node, error)
	// QueryTerms returns ScoreTerms less b·k, [B, H, TQ, TK] from
	// q [B, H, TQ, dh].
	QueryTerms(s *Site, q *G.Node) (*G.Node, error)
}

// AfterBlocker transforms the hidden states after a block (conditional
// position encodings: Chu et al. 2021's PEG after the first block). The
// model calls it after every block with Site.Layer the 0-based index of
// the block just computed; an encoding returns x unchanged for the blocks
// it does not act on.
type AfterBlocker interface {
	// AfterBlock maps x [B, T, d] (the output of block s.Layer) to
	// [B, T, d].
	AfterBlock(s *Site, x *G.Node) (*G.Node, error)
}

// Scaler overrides the score scale 1/sqrt(dh) (DeBERTa: 1/sqrt(3 dh)).
type Scaler interface {
	Scale(dHead int) float64
}

// ValueTermer adds position terms to the attention output (Shaw's value
// embeddings).
type ValueTermer interface {
	// ValueTerms returns terms [B, H, TQ, dh] from the attention
	// probabilities [B, H, TQ, TK].
	ValueTerms(s *Site, probs *G.Node) (*G.Node, error)
}

// Options configures every encoding; each reads the fields it needs. Zero
// values take the defaults documented on each field; Resolve fills them all
// in (Defaults all but the width-dependent SinusoidalScale), so that a
// caller can record the values a model was built with instead of zeros.
type Options struct {
	// MaxLen is the number of rows of the learned absolute table (default 64,
	// the reference training length).
	MaxLen int
	// InitStd is the init standard deviation of learnable position tables
	// (default 0.02).
	InitStd float64 `opt:"pos-init-std"`
	// Alpha multiplies the score bias or terms of every learnable relative
	// encoding by a learnable scalar [1] (init AlphaInit = 0.1; off by
	// default): t5, shaw-scalar, shaw (its key terms; the value terms are
	// not scaled), xl, deberta, kerple-log, kerple-power, fire, dpb, cope,
	// swin, swin-log, tree and graphormer-spatial; AlphaInit lists the
	// parameter names. Encodings without learnable position parameters in
	// the scores ignore it.
	Alpha bool

	// SinusoidalScale multiplies the sinusoidal table (default 1/√d_model).
	// Vaswani et al. add the unit-amplitude table to token embeddings that
	// they scale by √d_model; the LMs of package layers keep their
	// embeddings at N(0, InitStd) unscaled, so the default divides the table
	// by √d_model instead, which keeps the same ratio of position to content
	// signal (x-transformers' ScaledSinusoidalEmbedding starts at the same
	// d^-0.5). With 1, a d=128 model starts with positions about 35 times
	// louder than its N(0, 0.02) tokens and barely learns (measured: stuck
	// at the unigram entropy, 4.5 bits/byte, after 150 updates). Negative
	// values are an error.
	SinusoidalScale float64

	// ShawK is the clipping distance K of Shaw et al. (default 16).
	ShawK int

	// T5Buckets is the number of buckets N of the T5 bias (default 32).
	T5Buckets int
	// T5MaxDistance is where the log-spaced T5 buckets end (default 128).
	T5MaxDistance int

	// XLUntieR gives every layer its own Transformer-XL biases u and v
	// ("<prefix>/xl_u", "<prefix>/xl_v") instead of the shared "xl_u" and
	// "xl_v": the untie_r option of Dai et al. 2019's reference code
	// (kimiyoung/transformer-xl) and of Hugging Face's TransfoXLConfig,
	// whose default is untie_r=True. Default false (tied, one u and v for
	// the model, as in the paper's equations and this library's committed
	// results).
	XLUntieR bool

	// DebertaBuckets is DeBERTa's bucket size (HF position_buckets; the
	// relative table has 2*DebertaBuckets rows; default 32, HF
	// deberta-v3-base 256; see the DeBERTa type for why).
	DebertaBuckets int
	// DebertaMaxPosition is where DeBERTa's log buckets end (HF
	// max_relative_positions, or max_position_embeddings when that is
	// -1; default 128, HF deberta-v3-base 512).
	DebertaMaxPosition int

	// RopeBase is RoPE's base (default 10000).
	RopeBase float64
	// RopePairing is "half" (HF Llama rotate_half, the default) or
	// "interleaved" (GPT-J, x-transformers).
	RopePairing string
	// RopeFraction is the fraction of each head's dims that rotate
	// (default 1).
	RopeFraction float64
	// RopeScale is the context-extension factor s of the evaluation-time
	// scalings rope-pi, rope-ntk, rope-yarn and rope-llama3 (default 1: no
	// scaling).
	RopeScale float64
	// RopeTrainLen is the training context length L that rope-dynamic and
	// rope-yarn refer to (default 64).
	RopeTrainLen int
	// YarnBetaFast and YarnBetaSlow bound YaRN's ramp in rotations
	// (defaults 32 and 1, as in Peng et al. 2023).
	YarnBetaFast, YarnBetaSlow float64

	// GridRows and GridCols are the patch grid that 2-D position tables are
	// sized for (learned-2d's table, swin's (2R-1)(2C-1) relative table);
	// default 7×7, MNIST's 28×28 pixels in 4×4 patches.
	GridRows, GridCols int
	// GridResample is how learned-2d serves a grid other than
	// GridRows×GridCols: "none" (the default: an error naming both grids),
	// "bilinear" or "bicubic" (F.interpolate with antialias=False, as MAE's
	// interpolate_pos_embed), "bilinear-aa" or "bicubic-aa" (antialias=True,
	// as timm's resample_abs_pos_embed, whose default is bicubic-aa).
	GridResample string
	// Rel2DBuckets is the number of buckets per axis and sign of swin-log's
	// log-bucketed (Δrow, Δcol) indices (default 8), Rel2DMaxDistance where
	// its log buckets end (default 32).
	Rel2DBuckets     int `opt:"rel2d-buckets"`
	Rel2DMaxDistance int `opt:"rel2d-max-distance"`
	// Rope2DBase is the base of rope-2d's axial frequencies (default 100,
	// Heo et al. 2024's rope_theta for RoPE-Axial); RopeMixedBase the base
	// of rope-mixed's initial frequencies (default 10, their RoPE-Mixed).
	Rope2DBase    float64 `opt:"rope2d-base"`
	RopeMixedBase float64
	// Rope2DAxisOrder is the grid axis that the first dh/4 rotation pairs
	// of each head of rope-2d turn with (the other dh/4 turn with the other
	// axis): "x-first" (the column, as Heo et al.'s rope-vit
	// compute_axial_cis; the default) or "y-first" (the row, as timm's
	// build_rotary_pos_embed with its default grid_indexing 'ij', the
	// RotaryEmbeddingCat of EVA-02). Another value is an error naming the
	// option; rope-mixed does not read it.
	Rope2DAxisOrder string `opt:"rope2d-axis-order"`
	// CPEKernel is the side of cpe's depthwise convolution (default 3, odd)
	// and CPEAfterBlock the 1-based block after which it is added (default
	// 1: after the first block, as Chu et al. 2021's PEG).
	CPEKernel, CPEAfterBlock int

	// GraphMaxDist is graphormer-spatial's largest distance with its own
	// row (default 6): its table has GraphMaxDist+3 rows, distances
	// 0..GraphMaxDist (farther pairs share the last), unreachable pairs and
	// the virtual token's pairs, the relations of graphdata with MaxDist =
	// GraphMaxDist (with or without WithVirtualNode).
	GraphMaxDist int
	// GraphMaxDegree is graphormer-centrality's largest degree with its own
	// row (default 16).
	GraphMaxDegree int
	// TreeMaxUp and TreeMaxDown clip the steps up and down of tree's
	// relations (default 4 and 4: 25 relations), as gocode.Options.
	TreeMaxUp, TreeMaxDown int

	// -- KERPLE and Sandwich options (issue #15) --
	// KerpleEps is the lower bound of kerple-log's and kerple-power's
	// parameters r1, r2 (default 0.01, the clamp of Chi et al.'s code; in
	// (0, 1)).
	KerpleEps float64
	// SandwichDim is sandwich's d̄, the width of the sinusoidal embeddings
	// whose inner product is the bias (default 128, Chi et al. 2023's
	// value; even and positive).
	SandwichDim int

	// -- FIRE and dynamic position bias options (issue #15) --
	// FireWidth is the hidden width of fire's MLP (default 32, Li et al.
	// 2023's mlp_width).
	FireWidth int
	// FireInitC is the initial value of fire's learnable c in
	// ψ(x) = log(|c|x + 1) (default 0.1, the paper's init_c); negative is an
	// error.
	FireInitC float64
	// FireInitL is fire's init_L: the threshold L = |fire_l_mult · FireInitL|,
	// with the learnable multiplier starting at 1 (default 512, the
	// paper's); negative is an error.
	FireInitL float64
	// DPBWidth is the hidden width of dpb's MLP (default 32: x-transformers'
	// dim // 4 for this library's d_model = 128), DPBDepth its number of
	// hidden layers (default 2, x-transformers' dynamic_pos_bias_mlp_depth).
	DPBWidth int `opt:"dpb-width"`
	DPBDepth int `opt:"dpb-depth"`
	// DPBLogDistance feeds dpb's MLP sign(r) log(|r|+1) instead of the
	// distance r (default false, as x-transformers).
	DPBLogDistance bool `opt:"dpb-log-distance"`
	// DPBNorm puts a LayerNorm before every SiLU of dpb's MLP (default
	// false, as x-transformers).
	DPBNorm bool `opt:"dpb-norm"`

	// -- xPos, Llama 3 and YaRN options (issue #15) --

	// XPosScaleBase is xPos's scale base γ (default 512, torchscale's
	// scale_base): the scale of pair p at distance n is ζ_p^(n/γ).
	XPosScaleBase float64 `opt:"xpos-scale-base"`
	// XPosCentre is how xPos rounds the centre c of its scale exponent
	// (n - c)/γ, with N the largest position of the call + 1: "ceil"
	// (c = ⌈N/2⌉, torchscale's min_pos = -(length+offset)//2; the default)
	// or "floor" (c = ⌊N/2⌋, x-transformers' max_pos // 2). c cancels in
	// q·k, so scores agree up to rounding; the rotated q and k differ by
	// the factor ζ_p^(±1/γ) when N is odd. Another value is an error naming
	// the option.
	XPosCentre string `opt:"xpos-centre"`
	// Llama3LowFreqFactor and Llama3HighFreqFactor are rope-llama3's
	// low_freq_factor and high_freq_factor (defaults 1 and 4, Llama 3.1's):
	// pairs whose wavelength exceeds RopeTrainLen/Llama3LowFreqFactor are
	// interpolated by RopeScale, pairs shorter than
	// RopeTrainLen/Llama3HighFreqFactor keep their frequency. The high
	// factor must exceed the low one.
	Llama3LowFreqFactor  float64
	Llama3HighFreqFactor float64
	// YarnAttentionFactor is rope-yarn's attention factor multiplying cos
	// and sin (HF rope_scaling attention_factor); 0 (the default) derives it
	// from RopeScale s: 0.1·ln s + 1, or, with YarnMscale and
	// YarnMscaleAllDim both set, (0.1·YarnMscale·ln s + 1)/(0.1·
	// YarnMscaleAllDim·ln s + 1) (HF mscale, mscale_all_dim; each term 1 if
	// s ≤ 1). Negative values are an error; set explicitly it takes
	// precedence over the mscales, as in HF. These three options are 0
	// when unset (HF's None) and Resolve leaves them 0: the derived factor
	// depends on RopeScale, which an evaluation sets after resolving.
	YarnAttentionFactor float64
	// YarnMscale and YarnMscaleAllDim are HF's mscale and mscale_all_dim
	// (default 0: unset); set both or neither.
	YarnMscale       float64
	YarnMscaleAllDim float64
	// YarnNoTruncate turns off the rounding of YaRN's correction range
	// (HF truncate=False): lo and hi are used unrounded. Default false:
	// lo = floor, hi = ceil, as HF's default truncate=True.
	YarnNoTruncate bool

	// -- CoPE options (issue #15) --

	// CopeNPos is cope's npos_max, the number of positions of its table
	// "<prefix>/cope_emb" [dh, npos]: contextual positions above npos-1 read
	// the last column (default 64, the reference training length; the
	// authors' code uses the block size + 1). Negative is an error.
	CopeNPos int `opt:"cope-npos"`
	// CopeDivide adds cope's position logits before the division by √dh,
	// as the authors' released code does by default, instead of after it,
	// as the paper's appendix (default false: the paper's).
	CopeDivide bool
}

// DefaultSinusoidalScale is the default SinusoidalScale of a model of width
// dModel, 1/√dModel (see Options.SinusoidalScale). Sinusoidal uses it when
// its Scale is 0, and Resolve fills it in, so both give the same bits.
func DefaultSinusoidalScale(dModel int) float64 { return 1 / math.Sqrt(float64(dModel)) }

// Resolve returns o with every zero field replaced by its default for a
// model of width dModel: Defaults plus SinusoidalScale =
// DefaultSinusoidalScale(dModel) (left 0 if dModel <= 0). An encoding built
// from the resolved options computes exactly what it computes from o.
// Boolean switches (Alpha, XLUntieR) keep their value: false is their
// default.
func (o Options) Resolve(dModel int) Options {
	o = o.Defaults()
	if o.SinusoidalScale == 0 && dModel > 0 {
		o.SinusoidalScale = DefaultSinusoidalScale(dModel)
	}
	return o
}

// Defaults returns o with zero fields replaced by their defaults, all but
// SinusoidalScale, whose default depends on the model width (see Resolve).
func (o Options) Defaults() Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	deff := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.MaxLen, 64)
	deff(&o.InitStd, 0.02)
	def(&o.ShawK, 16)
	def(&o.T5Buckets, 32)
	def(&o.T5MaxDistance, 128)
	def(&o.DebertaBuckets, 32)
	def(&o.DebertaMaxPosition, 128)
	deff(&o.RopeBase, 10000)
	if o.RopePairing == "" {
		o.RopePairing = "half"
	}
	deff(&o.RopeFraction, 1)
	deff(&o.RopeScale, 1)
	def(&o.RopeTrainLen, 64)
	deff(&o.YarnBetaFast, 32)
	deff(&o.YarnBetaSlow, 1)
	def(&o.GridRows, 7)
	def(&o.GridCols, 7)
	if o.GridResample == "" {
		o.GridResample = "none"
	}
	def(&o.Rel2DBuckets, 8)
	def(&o.Rel2DMaxDistance, 32)
	deff(&o.Rope2DBase, 100)
	deff(&o.RopeMixedBase, 10)
	if o.Rope2DAxisOrder == "" {
		o.Rope2DAxisOrder = Rope2DXFirst
	}
	def(&o.CPEKernel, 3)
	def(&o.CPEAfterBlock, 1)
	def(&o.GraphMaxDist, 6)
	def(&o.GraphMaxDegree, 16)
	def(&o.TreeMaxUp, DefaultTreeMaxUp)
	def(&o.TreeMaxDown, DefaultTreeMaxDown)
	// -- KERPLE and Sandwich defaults --
	deff(&o.KerpleEps, 0.01)
	def(&o.SandwichDim, 128)

	// -- FIRE and dynamic position bias defaults --
	def(&o.FireWidth, 32)
	deff(&o.FireInitC, 0.1)
	deff(&o.FireInitL, 512)
	def(&o.DPBWidth, 32)
	def(&o.DPBDepth, 2)

	// -- xPos, Llama 3 and YaRN defaults --
	deff(&o.XPosScaleBase, 512)
	if o.XPosCentre == "" {
		o.XPosCentre = XPosCentreCeil
	}
	deff(&o.Llama3LowFreqFactor, 1)
	deff(&o.Llama3HighFreqFactor, 4)

	// -- CoPE defaults --
	def(&o.CopeNPos, 64)
	return o
}

// The kinds of Info.Kind.
const (
	KindNone     = "none"     // no position information
	KindAbsolute = "absolute" // added to the token embeddings
	KindRelative = "relative" // terms or biases of the relative distance in the scores
	KindRotary   = "rotary"   // rotations of q and k
	// KindConditional: computed from the tokens' neighbourhood (CPE).
	KindConditional = "conditional"
	// KindStructural: of a structure's relations, not of token order
	// (graph distances, syntax-tree relations).
	KindStructural = "structural"
	// KindCombined: several encodings together (see New and NewCombined).
	KindCombined = "combined"
)

// Info describes a registered encoding, so that callers (experiment plans,
// benchmarks, tables) derive their lists of encodings from the registry
// instead of keeping their own.
type Info struct {
	// Name is the name New takes.
	Name string
	// Kind is KindNone, KindAbsolute, KindRelative, KindRotary,
	// KindConditional or KindStructural (KindCombined for InfoOf of a
	// combination).
	Kind string
	// Learnable is true if the encoding has parameters.
	Learnable bool
	// EvalOnly is true for evaluation-time variants of another encoding
	// (the RoPE scalings): a model is trained with Base and evaluated with
	// the variant.
	EvalOnly bool
	// Base is the encoding an EvalOnly variant is applied to ("rope"); ""
	// otherwise.
	Base string
	// Positions lists the kinds of positions the encoding serves (see
	// PositionAccepter), derived from the encoding itself at registration.
	Positions []PosKind
	// NoDecode is empty for an encoding that serves incremental decoding
	// against a key/value cache (layers.Decoder, whose cache sits at fixed
	// positions: see decodeNotes), and otherwise says why it cannot; the
	// sampler then recomputes the window per token and prints the reason.
	NoDecode string
	// NoSlide is empty for an encoding whose decoding cache can slide past
	// its window (layers.Decoder with sinks), and otherwise says why not:
	// an absolute table (a StepAdder) decodes only while the whole context
	// fits the window; past it the sampler recomputes.
	NoSlide string
	// DecodeTrue is true for an encoding that decodes with each token's
	// true position given as real positions (NewReal, rebound by a Feed
	// at every step) instead of the re-indexed cache positions (fire).
	DecodeTrue bool
}

type factory func(o Options) (Encoding, error)

type entry struct {
	info Info
	f    factory
}

var registry = map[string]entry{}

// register adds an encoding; Info.Positions is taken from an instance
// built with the default options, so the registry and the type cannot
// disagree.
func register(info Info, f factory) {
	e, err := f(Options{}.Defaults())
	if err != nil {
		panic(errors.Wrapf(err, "posenc: registering %s with default options", info.Name))
	}
	info.Positions = Accepted(e)
	info.NoDecode = noDecode(info)
	if _, ok := e.(StepAdder); ok && info.NoDecode == "" {
		info.NoSlide = NoSlideReason
	}
	if r, ok := decodeTrue[info.Name]; ok {
		info.DecodeTrue, info.NoSlide = true, r
	}
	registry[info.Name] = entry{info, f}
}

// tableOrder is the order of Registered: absolute encodings, then relative,
// then rotary and bias (the table of docs/encodings.md), then the evaluation-time
// variants. A registered name missing here is listed after them, sorted.
var tableOrder = []string{
	"none", "sinusoidal", "learned",
	"shaw", "shaw-scalar", "t5", "xl", "deberta",
	"rope", "alibi",
	"kerple-log", "kerple-power", "sandwich", "fire", "dpb", "xpos", "cope",
	RopePI, RopeNTK, RopeDynamic, RopeYaRN, "rope-llama3",
	"learned-2d", "sinusoidal-2d", "swin", "swin-log", "alibi-2d", "rope-2d", "rope-mixed", "cpe",
	"graphormer-spatial", "graphormer-centrality", "tree",
}

// Registered returns the Info of every registered encoding in a stable
// table order: none, sinusoidal, learned, shaw, shaw-scalar, t5, xl,
// deberta, rope, alibi, the later 1-D encodings (kerple-log, kerple-power,
// sandwich, fire, dpb, xpos, cope), the RoPE scalings rope-pi, rope-ntk,
// rope-dynamic, rope-yarn, rope-llama3, then the 2-D encodings and the
// structural ones (tableOrder).
func Registered() []Info {
	out := make([]Info, 0, len(registry))
	seen := map[string]bool{}
	for _, n := range tableOrder {
		if e, ok := registry[n]; ok {
			out = append(out, e.info)
			seen[n] = true
		}
	}
	var rest []string
	for n := range registry {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	for _, n := range rest {
		out = append(out, registry[n].info)
	}
	return out
}

// InfoOf returns the Info of the encoding called name. For a combination
// "a+b" (see New) it is the combined Info: Name name, Kind KindCombined,
// Learnable if a part is, EvalOnly if a part is, and the Positions of the
// combined encoding; false if a part is unknown or the parts do not
// combine.
func InfoOf(name string) (Info, bool) {
	if e, ok := registry[name]; ok {
		return e.info, true
	}
	parts := strings.Split(name, CombineSep)
	if len(parts) < 2 {
		return Info{}, false
	}
	info := Info{Name: name, Kind: KindCombined}
	for _, n := range parts {
		e, ok := registry[n]
		if !ok {
			return Info{}, false
		}
		info.Learnable = info.Learnable || e.info.Learnable
		info.EvalOnly = info.EvalOnly || e.info.EvalOnly
		if info.NoDecode == "" && e.info.NoDecode != "" {
			info.NoDecode = n + ": " + e.info.NoDecode
		}
		if info.NoSlide == "" && e.info.NoSlide != "" {
			info.NoSlide = n + ": " + e.info.NoSlide
		}
	}
	enc, err := New(name, Options{})
	if err != nil {
		return Info{}, false
	}
	info.Positions = Accepted(enc)
	return info, true
}

// Trainable returns the names of the encodings a model can be trained with
// (every registered encoding but the EvalOnly variants), in Registered's
// order.
func Trainable() []string {
	var out []string
	for _, i := range Registered() {
		if !i.EvalOnly {
			out = append(out, i.Name)
		}
	}
	return out
}

// TrainableOn returns the names of Trainable that serve positions of kind
// k, in Registered's order: TrainableOn(PosLine) are the encodings of a
// language model, TrainableOn(PosGrid) those of a ViT (the 1-D ones
// included only if they also serve grids).
func TrainableOn(k PosKind) []string {
	var out []string
	for _, i := range Registered() {
		if !i.EvalOnly && slices.Contains(i.Positions, k) {
			out = append(out, i.Name)
		}
	}
	return out
}

// Names lists the valid encoding names, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CombineSep joins the names of a combined encoding: New("tree+rope", o).
const CombineSep = "+"

// New returns the encoding called name. A name of several registered names
// joined by CombineSep ("tree+rope", "graphormer-spatial+graphormer-centrality")
// is NewCombined of each part built from o, in order. An unknown name (or
// part) is an error that lists the valid ones; so is an empty part or a
// combination NewCombined refuses (a repeated part, two Scalers).
func New(name string, o Options) (Encoding, error) {
	if strings.Contains(name, CombineSep) {
		parts := strings.Split(name, CombineSep)
		encs := make([]Encoding, len(parts))
		for i, n := range parts {
			if n == "" {
				return nil, errors.Errorf("posenc: combined encoding %q has an empty part (write names joined by %q, e.g. tree+rope)", name, CombineSep)
			}
			if strings.Contains(n, CombineSep) {
				continue
			}
			e, err := New(n, o)
			if err != nil {
				return nil, errors.WithMessagef(err, "posenc: combined encoding %q", name)
			}
			encs[i] = e
		}
		return NewCombined(encs...)
	}
	e, ok := registry[name]
	if !ok {
		return nil, errors.Errorf("posenc: unknown encoding %q (valid: %s, or several joined by %q)", name, strings.Join(Names(), ", "), CombineSep)
	}
	return e.f(o.Defaults())
}
