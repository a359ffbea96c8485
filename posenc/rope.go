package posenc

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// The names of the rotary encodings: plain RoPE and its evaluation-time
// context-extension scalings.
const (
	RopePlain   = "rope"
	RopePI      = "rope-pi"
	RopeNTK     = "rope-ntk"
	RopeDynamic = "rope-dynamic"
	RopeYaRN    = "rope-yarn"
	RopeLlama3  = "rope-llama3"
)

func init() {
	for _, n := range []string{RopePlain, RopePI, RopeNTK, RopeDynamic, RopeYaRN, RopeLlama3} {
		info := Info{Name: n, Kind: KindRotary}
		if n != RopePlain {
			info.EvalOnly, info.Base = true, RopePlain
		}
		register(info, func(o Options) (Encoding, error) { return NewRope(n, o) })
	}
}

// Rope is the rotary position embedding of Su et al. 2021, "RoFormer:
// Enhanced Transformer with Rotary Position Embedding", and its long-context
// scalings. It rotates each head's query and key vectors (after the
// projections and their biases), pair of coordinates by pair, by angles
// proportional to their positions, so that q.k depends on the positions only
// through their difference:
//
//	(a, b) -> (a cos φ - b sin φ, b cos φ + a sin φ),   φ = pos·θ_p
//	θ_p = base^(-2p/rot),  p = 0 .. rot/2-1
//	⟨R(i)q, R(j)k⟩ = ⟨q, R(j-i)k⟩
//
// with pos = s.QStart+i for query i and s.KStart+j for key j. rot, the
// number of rotary dims, is RopeFraction·dh rounded down to an even number
// (partial rotary, GPT-NeoX); dims rot..dh-1 pass unchanged. Pairing
// "half" pairs (x_p, x_{p+rot/2}) (HF Llama rotate_half), "interleaved"
// pairs (x_{2p}, x_{2p+1}) (GPT-J rotate_every_two, x-transformers);
// ConvertPairing maps the q/k projection weights of one onto the other.
// q and k are [B, H, T, dh]; RoPE has no parameters.
//
// The scalings change θ, the positions or the magnitudes at evaluation time
// to stretch a model trained on RopeTrainLen = L tokens to longer inputs;
// with s = RopeScale:
//
//	rope-pi       positions divided by s (Chen et al. 2023, linear
//	              position interpolation; HF "linear")
//	rope-ntk      base' = base·s^(rot/(rot-2)) ("NTK-aware" scaling,
//	              bloc97 2023)
//	rope-dynamic  HF "dynamic" (_compute_dynamic_ntk_parameters): with
//	              T = the largest query or key position + 1 of the call,
//	              base' = base·(s·T/L - (s-1))^(rot/(rot-2)) when T > L,
//	              base otherwise. s is HF's fixed rope_scaling factor, not
//	              T/L: with the default s = 1 this is NTK scaling by T/L.
//	              Every call rotates all its keys with the current base'
//	              (HF's KV cache keeps keys rotated with the base of the
//	              step that computed them).
//	rope-yarn     YaRN (Peng et al. 2023; HF _compute_yarn_parameters):
//	              θ'_p = θ_p/s·r_p + θ_p·(1-r_p), where the ramp r_p =
//	              clamp((p - lo)/(hi - lo), 0, 1) with
//	              lo = floor(c(YarnBetaFast)), hi = ceil(c(YarnBetaSlow)),
//	              clamped to [0, rot-1], c(β) = rot·ln(L/(2πβ))/(2 ln base)
//	              (the pair index that turns β times over L tokens; hi += 0.001
//	              if lo = hi); fast pairs (p ≤ lo) keep θ, slow pairs (p ≥ hi)
//	              are interpolated. With YarnNoTruncate (HF truncate=False)
//	              lo and hi are not rounded. cos and sin, and so q and k, are
//	              multiplied by the attention factor (YarnAttentionFactor if
//	              set, else m(1)/m(YarnMscaleAllDim) with m(μ) = 0.1·μ·ln s +
//	              1 if YarnMscale and YarnMscaleAllDim are set, else
//	              0.1 ln s + 1; m = 1 if s ≤ 1), so the scores grow by its
//	              square.
//	rope-llama3   Llama 3's frequency-dependent scaling (Meta 2024, "The
//	              Llama 3 Herd of Models"; HF _compute_llama3_parameters)
//	              with factor s, original length L and the wavelength
//	              λ_p = 2π/θ_p: θ'_p = θ_p if λ_p < L/high, θ_p/s if
//	              λ_p > L/low, else (1-σ)·θ_p/s + σ·θ_p with
//	              σ = (L/λ_p - low)/(high - low); low and high are
//	              Llama3LowFreqFactor and Llama3HighFreqFactor (1 and 4).
//	              No attention factor. Llama 3.1 uses s = 8, L = 8192.
//
// Real positions (PosReal, NewReal; rope, rope-pi, rope-ntk and
// rope-llama3): query i of example b is rotated by φ = t_q[b, i]/div·θ'_p,
// key j by t_k[b, j]/div·θ'_p, so that the scores depend on t_k - t_q.
// The angles are computed on the host in float64 and reduced to [-π, π]
// (math.Remainder by 2π, so that a float32 graph keeps their precision at
// large times), and enter the graph as a node of graph.RotaryAngles:
// [TQ, rot/2] and [TK, rot/2] for shared times, [B, H, TQ, rot/2] and
// [B, H, TK, rot/2] (repeated over the heads) for per-example times; a
// constant cached per positions Key, or with a Feed an input node refilled
// by Feed.Bind. Integer times 0..T-1 give the line path's output (to
// rounding, 1e-12 in float64). rope-dynamic (its base depends on the
// largest position of the call) and rope-yarn (its attention factor scales
// the rotated dims only) refuse real positions: they do not list PosReal
// in Accepts, and TransformQK returns an error naming them.
//
// The cos/sin tables are computed on the host in float64 once per (start,
// length, rot, frequencies) and cached in the encoding; they enter graphs as
// attributes of graph.Rotary ops (whose gradient is the transposed
// rotation), converted to the graph's dtype by the kernel. A Rope built as a
// struct literal (not by NewRope) is plain RoPE and needs Base, Fraction,
// Scale and TrainLen set; one Rope value may build graphs from several
// goroutines at once.
type Rope struct {
	name string
	// Base is θ's base (RopeBase).
	Base float64
	// Pairing is graph.RotaryHalf or graph.RotaryInterleaved.
	Pairing graph.RotaryPairing
	// Fraction is the fraction of each head's dims that rotate.
	Fraction float64
	// Scale is s of the scalings; TrainLen is L.
	Scale    float64
	TrainLen int
	// BetaFast and BetaSlow bound YaRN's ramp.
	BetaFast, BetaSlow float64
	// YaRN's attention factor options (Options.YarnAttentionFactor,
	// YarnMscale, YarnMscaleAllDim; 0: unset) and NoTruncate
	// (Options.YarnNoTruncate).
	AttnFactor, Mscale, MscaleAllDim float64
	NoTruncate                       bool
	// LowFreqFactor and HighFreqFactor are rope-llama3's factors.
	LowFreqFactor, HighFreqFactor float64

	cache  tableCache[ropeKey, *graph.RotaryTable]
	rcache tableCache[realKey, *tensor.Dense]
}

type ropeKey struct {
	start, n, rot int
	freq          uint64 // FNV-1a of θ, the position divisor and the factor
}

// NewRope returns the rotary encoding called name (RopePlain, RopePI,
// RopeNTK, RopeDynamic, RopeYaRN or RopeLlama3) configured by o (defaults applied). It
// returns an error naming the encoding for an unknown name or pairing or an
// out-of-range option.
func NewRope(name string, o Options) (*Rope, error) {
	o = o.Defaults()
	switch name {
	case RopePlain, RopePI, RopeNTK, RopeDynamic, RopeYaRN, RopeLlama3:
	default:
		return nil, errors.Errorf("posenc: %q is not a rotary encoding (want rope, rope-pi, rope-ntk, rope-dynamic, rope-yarn or rope-llama3)", name)
	}
	pr, err := ParsePairing(o.RopePairing)
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s", name)
	}
	switch {
	case !(o.RopeBase > 1) || math.IsInf(o.RopeBase, 0):
		return nil, errors.Errorf("posenc %s: base %g must be a finite number > 1", name, o.RopeBase)
	case !(o.RopeFraction > 0 && o.RopeFraction <= 1):
		return nil, errors.Errorf("posenc %s: rotary fraction %g must be in (0, 1]", name, o.RopeFraction)
	case !(o.RopeScale > 0) || math.IsInf(o.RopeScale, 0):
		return nil, errors.Errorf("posenc %s: scale %g must be a finite number > 0", name, o.RopeScale)
	case o.RopeTrainLen <= 0:
		return nil, errors.Errorf("posenc %s: training length %d must be positive", name, o.RopeTrainLen)
	case !(o.YarnBetaFast > 0 && o.YarnBetaSlow > 0):
		return nil, errors.Errorf("posenc %s: YaRN betas fast %g and slow %g must be positive", name, o.YarnBetaFast, o.YarnBetaSlow)
	case !(o.YarnAttentionFactor >= 0) || math.IsInf(o.YarnAttentionFactor, 0):
		return nil, errors.Errorf("posenc %s: YaRN attention factor %g must be a finite number > 0 (0: derived from the scale)", name, o.YarnAttentionFactor)
	case !(o.Llama3LowFreqFactor > 0 && o.Llama3HighFreqFactor > o.Llama3LowFreqFactor) || math.IsInf(o.Llama3HighFreqFactor, 0):
		return nil, errors.Errorf("posenc %s: Llama 3 frequency factors low %g and high %g must satisfy 0 < low < high < ∞", name, o.Llama3LowFreqFactor, o.Llama3HighFreqFactor)
	}
	e := &Rope{name: name, Base: o.RopeBase, Pairing: pr, Fraction: o.RopeFraction, Scale: o.RopeScale,
		TrainLen: o.RopeTrainLen, BetaFast: o.YarnBetaFast, BetaSlow: o.YarnBetaSlow,
		AttnFactor: o.YarnAttentionFactor, Mscale: o.YarnMscale, MscaleAllDim: o.YarnMscaleAllDim, NoTruncate: o.YarnNoTruncate,
		LowFreqFactor: o.Llama3LowFreqFactor, HighFreqFactor: o.Llama3HighFreqFactor}
	e.canonical()
	if name == RopeYaRN {
		if (o.YarnMscale == 0) != (o.YarnMscaleAllDim == 0) {
			return nil, errors.Errorf("posenc %s: YaRN mscale %g and mscale-all-dim %g must be set together", name, o.YarnMscale, o.YarnMscaleAllDim)
		}
		if a := e.yarnAttention(); !(a > 0) || math.IsInf(a, 0) {
			return nil, errors.Errorf("posenc %s: YaRN attention factor %g from mscale %g and mscale-all-dim %g at scale %g is not a finite number > 0", name, a, o.YarnMscale, o.YarnMscaleAllDim, o.RopeScale)
		}
	}
	return e, nil
}

// canonical sets the fields that e's variant does not read to their
// defaults, so that the encoding's value depends only on the options it
// reads (Info.Options, derived by comparing values): plain RoPE reads the
// base, pairing and fraction; PI and NTK the scale too; dynamic NTK the
// training length too; YaRN its betas and attention options; Llama 3 its
// frequency factors.
func (e *Rope) canonical() {
	d := Options{}.Defaults()
	uses := func(names ...string) bool { return slices.Contains(names, e.name) }
	if !uses(RopePI, RopeNTK, RopeDynamic, RopeYaRN, RopeLlama3) {
		e.Scale = d.RopeScale
	}
	if !uses(RopeDynamic, RopeYaRN, RopeLlama3) {
		e.TrainLen = d.RopeTrainLen
	}
	if !uses(RopeYaRN) {
		e.BetaFast, e.BetaSlow = d.YarnBetaFast, d.YarnBetaSlow
		e.AttnFactor, e.Mscale, e.MscaleAllDim, e.NoTruncate = d.YarnAttentionFactor, d.YarnMscale, d.YarnMscaleAllDim, d.YarnNoTruncate
	}
	if !uses(RopeLlama3) {
		e.LowFreqFactor, e.HighFreqFactor = d.Llama3LowFreqFactor, d.Llama3HighFreqFactor
	}
}

// yarnAttention is rope-yarn's attention factor (see the type's
// documentation); HF _compute_yarn_parameters' get_mscale.
func (e *Rope) yarnAttention() float64 {
	s := e.Scale
	if e.AttnFactor != 0 {
		return e.AttnFactor
	}
	if e.Mscale != 0 && e.MscaleAllDim != 0 {
		m := func(mu float64) float64 {
			if s <= 1 {
				return 1
			}
			return 0.1*mu*math.Log(s) + 1
		}
		return m(e.Mscale) / m(e.MscaleAllDim)
	}
	if s > 1 {
		return 0.1*math.Log(s) + 1
	}
	return 1
}

// Name implements Encoding ("rope" for a Rope built without NewRope).
func (e *Rope) Name() string {
	if e.name == "" {
		return RopePlain
	}
	return e.name
}

// ParsePairing maps "half" and "interleaved" to the graph's pairings.
func ParsePairing(s string) (graph.RotaryPairing, error) {
	switch s {
	case "half":
		return graph.RotaryHalf, nil
	case "interleaved":
		return graph.RotaryInterleaved, nil
	}
	return 0, errors.Errorf("unknown rotary pairing %q (want half or interleaved)", s)
}

// RotaryDims returns rot, the number of rotary dims of a head of dHead dims:
// Fraction·dHead rounded down to an even number. It is an error if that is
// less than 2.
func (e *Rope) RotaryDims(dHead int) (int, error) {
	rot := int(math.Floor(e.Fraction*float64(dHead)+1e-9)) &^ 1
	if rot < 2 || rot > dHead {
		return 0, errors.Errorf("posenc %s: rotary fraction %g of head dim %d leaves %d rotary dims, want an even number in [2, %d]", e.name, e.Fraction, dHead, rot, dHead)
	}
	return rot, nil
}

// Frequencies returns what the encoding rotates rot dims with when the
// largest position of the call is seqLen-1: the inverse frequencies θ'_p
// [rot/2], the divisor of the positions (s for rope-pi, else 1) and the
// attention factor multiplying cos and sin (0.1 ln s + 1 for rope-yarn with
// s > 1 unless set by the YaRN options, else 1); the angle of pair p at position pos is pos/div·θ'_p. See
// the type's documentation for the formulas. It is an error if rot is odd
// or < 2, or if base scaling (rope-ntk, rope-dynamic) is needed with
// rot = 2, where the exponent rot/(rot-2) is infinite.
func (e *Rope) Frequencies(rot, seqLen int) (theta []float64, posDiv, attn float64, err error) {
	if rot < 2 || rot%2 != 0 {
		return nil, 0, 0, errors.Errorf("posenc %s: %d rotary dims, want an even number >= 2", e.name, rot)
	}
	base, s, l := e.Base, e.Scale, float64(e.TrainLen)
	posDiv, attn = 1, 1
	scaleBase := func(f float64) error {
		if f == 1 {
			return nil
		}
		if rot == 2 {
			return errors.Errorf("posenc %s: base scaling needs more than 2 rotary dims (exponent rot/(rot-2))", e.name)
		}
		base *= math.Pow(f, float64(rot)/float64(rot-2))
		return nil
	}
	switch e.name {
	case RopePI:
		posDiv = s
	case RopeNTK:
		err = scaleBase(s)
	case RopeDynamic:
		if t := float64(seqLen); t > l {
			err = scaleBase(s*t/l - (s - 1))
		}
	}
	if err != nil {
		return nil, 0, 0, err
	}
	half := rot / 2
	theta = make([]float64, half)
	for p := range theta {
		theta[p] = 1 / math.Pow(base, float64(2*p)/float64(rot))
	}
	switch e.name {
	case RopeYaRN:
		lo, hi := yarnCorrectionRange(e.BetaFast, e.BetaSlow, rot, base, l, !e.NoTruncate)
		for p := range theta {
			r := math.Min(math.Max((float64(p)-lo)/(hi-lo), 0), 1)
			theta[p] = theta[p]/s*r + theta[p]*(1-r)
		}
		attn = e.yarnAttention()
	case RopeLlama3:
		lowW, highW := l/e.LowFreqFactor, l/e.HighFreqFactor
		for p, th := range theta {
			switch w := 2 * math.Pi / th; {
			case w < highW:
			case w > lowW:
				theta[p] = th / s
			default:
				sm := (l/w - e.LowFreqFactor) / (e.HighFreqFactor - e.LowFreqFactor)
				theta[p] = (1-sm)*th/s + sm*th
			}
		}
	}
	return theta, posDiv, attn, nil
}

// yarnCorrectionRange is HF's find_correction_range: the ramp's ends lo
// and hi in pair indices, rounded out (floor, ceil) if truncate, clamped to
// [0, rot-1] (hi nudged by 0.001 when equal).
func yarnCorrectionRange(betaFast, betaSlow float64, rot int, base, l float64, truncate bool) (lo, hi float64) {
	dim := func(rotations float64) float64 {
		return float64(rot) * math.Log(l/(rotations*2*math.Pi)) / (2 * math.Log(base))
	}
	lo, hi = dim(betaFast), dim(betaSlow)
	if truncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo = math.Max(lo, 0)
	hi = math.Min(hi, float64(rot-1))
	if lo == hi {
		hi += 0.001
	}
	return lo, hi
}

// YarnRamp returns YaRN's ramp r_p [rot/2] for the encoding's betas, base
// and training length: 0 for pairs that keep their frequency, 1 for pairs
// that are interpolated by s, linear in between.
func (e *Rope) YarnRamp(rot int) []float64 {
	lo, hi := yarnCorrectionRange(e.BetaFast, e.BetaSlow, rot, e.Base, float64(e.TrainLen), !e.NoTruncate)
	r := make([]float64, rot/2)
	for p := range r {
		r[p] = math.Min(math.Max((float64(p)-lo)/(hi-lo), 0), 1)
	}
	return r
}

// RopeAngles returns the cos and sin tables [n, len(theta)] of positions
// start..start+n-1: cos(pos/div·θ_p)·attn and sin(pos/div·θ_p)·attn.
func RopeAngles(start, n int, theta []float64, posDiv, attn float64) (cos, sin []float64) {
	h := len(theta)
	cos, sin = make([]float64, n*h), make([]float64, n*h)
	for t := 0; t < n; t++ {
		pos := float64(start + t)
		if posDiv != 1 {
			pos /= posDiv
		}
		for p, th := range theta {
			s, c := math.Sincos(pos * th)
			cos[t*h+p], sin[t*h+p] = c*attn, s*attn
		}
	}
	return cos, sin
}

// table returns the cached rotary table of positions start..start+n-1.
func (e *Rope) table(start, n, rot int, theta []float64, posDiv, attn float64) (*graph.RotaryTable, error) {
	h := fnv.New64a()
	var b [8]byte
	put := func(v float64) {
		u := math.Float64bits(v)
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, th := range theta {
		put(th)
	}
	put(posDiv)
	put(attn)
	key := ropeKey{start: start, n: n, rot: rot, freq: h.Sum64()}
	return e.cache.get(key, func() (*graph.RotaryTable, error) {
		cos, sin := RopeAngles(start, n, theta, posDiv, attn)
		tab, err := graph.NewRotaryTable(n, rot/2, cos, sin)
		return tab, errors.Wrapf(err, "posenc %s: positions %d..%d", e.name, start, start+n-1)
	})
}

// TransformQK implements QKTransformer: q [B, H, TQ, dh] rotated at positions
// s.QStart.., k [B, H, TK, dh] at s.KStart... Returns an error naming the
// encoding and the shapes if they do not match the site.
func (e *Rope) TransformQK(s *Site, q, k *G.Node) (q2, k2 *G.Node, err error) {
	qs, ks := q.Shape(), k.Shape()
	wq := tensor.Shape{s.B, s.H, s.TQ, s.DHead}
	wk := tensor.Shape{s.B, s.H, s.TK, s.DHead}
	if !qs.Eq(wq) {
		return nil, nil, errors.Errorf("posenc %s: q has shape %v, want %v", e.name, qs, wq)
	}
	if !ks.Eq(wk) {
		return nil, nil, errors.Errorf("posenc %s: k has shape %v, want %v", e.name, ks, wk)
	}
	rot, err := e.RotaryDims(s.DHead)
	if err != nil {
		return nil, nil, err
	}
	if s.Kind() == PosReal {
		return e.transformReal(s, q, k, rot)
	}
	seqLen := s.QStart + s.TQ
	if l := s.KStart + s.TK; l > seqLen {
		seqLen = l
	}
	theta, div, attn, err := e.Frequencies(rot, seqLen)
	if err != nil {
		return nil, nil, err
	}
	qt, err := e.table(s.QStart, s.TQ, rot, theta, div, attn)
	if err != nil {
		return nil, nil, err
	}
	kt, err := e.table(s.KStart, s.TK, rot, theta, div, attn)
	if err != nil {
		return nil, nil, err
	}
	if q2, err = graph.Rotary(q, qt, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: q", e.name)
	}
	if k2, err = graph.Rotary(k, kt, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: k", e.name)
	}
	return q2, k2, nil
}

// Accepts implements PositionAccepter: line positions, and real ones for
// rope, rope-pi, rope-ntk and rope-llama3 (see Rope).
func (e *Rope) Accepts() []PosKind {
	if e.realError() != nil {
		return []PosKind{PosLine}
	}
	return []PosKind{PosLine, PosReal}
}

// realError says why the encoding refuses real positions (nil if it
// serves them).
func (e *Rope) realError() error {
	switch e.Name() {
	case RopeDynamic:
		return errors.Errorf("posenc %s: real positions are not supported: its base depends on the largest integer position of the call", e.Name())
	case RopeYaRN:
		return errors.Errorf("posenc %s: real positions are not supported: its attention factor scales the rotated dims, which graph.RotaryAngles does not", e.Name())
	}
	return nil
}

// RopeAnglesTimes returns the angles [len(times), len(theta)] of positions
// at real times: t/div·θ_p reduced to [-π, π] (math.Remainder by 2π).
func RopeAnglesTimes(times, theta []float64, posDiv float64) []float64 {
	h := len(theta)
	out := make([]float64, len(times)*h)
	for t, pos := range times {
		if posDiv != 1 {
			pos /= posDiv
		}
		for p, th := range theta {
			out[t*h+p] = math.Remainder(pos*th, 2*math.Pi)
		}
	}
	return out
}

// transformReal is TransformQK for real positions (see Rope).
func (e *Rope) transformReal(s *Site, q, k *G.Node, rot int) (q2, k2 *G.Node, err error) {
	if err := e.realError(); err != nil {
		return nil, nil, err
	}
	theta, div, attn, err := e.Frequencies(rot, 1)
	if err != nil {
		return nil, nil, err
	}
	if attn != 1 {
		return nil, nil, errors.Errorf("posenc %s: real positions with attention factor %g are not supported", e.Name(), attn)
	}
	half, h := rot/2, s.H
	angles := func(which string, n int, times func(p *Positions, b int) []float64) (*G.Node, error) {
		shape := tensor.Shape{n, half}
		if s.Pos.Batch > 1 {
			shape = tensor.Shape{s.Pos.Batch, h, n, half}
		}
		fill := func(p *Positions, dst []float64) error {
			for b := 0; b < p.Batch; b++ {
				a := RopeAnglesTimes(times(p, b), theta, div)
				if p.Batch == 1 {
					copy(dst, a)
					continue
				}
				for hh := 0; hh < h; hh++ {
					copy(dst[(b*h+hh)*n*half:], a)
				}
			}
			return nil
		}
		hs := fnv.New64a()
		for _, th := range theta {
			hs.Write([]byte(fmt.Sprint(th)))
		}
		what := fmt.Sprintf("%s %s angles of real positions (rot %d, div %g, θ %x)", e.Name(), which, rot, div, hs.Sum64())
		return realInput(s, &e.rcache, e, what, e.Name()+"_"+which+"_angles", shape, fill)
	}
	qa, err := angles("query", s.TQ, func(p *Positions, b int) []float64 { t, _ := p.Times(b); return t })
	if err != nil {
		return nil, nil, err
	}
	ka, err := angles("key", s.TK, func(p *Positions, b int) []float64 { _, t := p.Times(b); return t })
	if err != nil {
		return nil, nil, err
	}
	if q2, err = graph.RotaryAngles(q, qa, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: q", e.Name())
	}
	if k2, err = graph.RotaryAngles(k, ka, e.Pairing); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s: k", e.Name())
	}
	return q2, k2, nil
}

// ConvertPairing permutes the output columns of a query or key projection
// w [n, heads·dHead] (row-major, input-major: y = x W) within each head so
// that a model trained with pairing from ("half" or "interleaved") gives
// identical attention scores with pairing to: for every rotation pair p,
// the columns of head h at from's pair (a, b) move to to's pair (a', b')
// (half: (p, p+rot/2), interleaved: (2p, 2p+1)); columns rot..dHead-1 of
// each head stay. Apply it to both wq and wk (and ConvertPairingBias to bq
// and bk); values, outputs and everything else are unchanged. The rotated
// vectors of the two models are permutations of each other, so q.k is equal
// exactly (up to summation order). w is not modified. It returns an error if
// len(w) is not a multiple of heads·dHead, rot is odd or not in
// [2, dHead], or a pairing is unknown.
func ConvertPairing(w []float64, heads, dHead, rot int, from, to string) ([]float64, error) {
	d := heads * dHead
	if heads <= 0 || dHead <= 0 || len(w) == 0 || len(w)%d != 0 {
		return nil, errors.Errorf("posenc ConvertPairing: %d weights are not [n, heads·dHead] = [n, %d·%d]", len(w), heads, dHead)
	}
	if rot < 2 || rot%2 != 0 || rot > dHead {
		return nil, errors.Errorf("posenc ConvertPairing: %d rotary dims, want an even number in [2, %d]", rot, dHead)
	}
	pf, err := ParsePairing(from)
	if err != nil {
		return nil, errors.Wrap(err, "posenc ConvertPairing")
	}
	pt, err := ParsePairing(to)
	if err != nil {
		return nil, errors.Wrap(err, "posenc ConvertPairing")
	}
	// src[c] is the old column of new column c within a head.
	src := make([]int, dHead)
	for c := range src {
		src[c] = c
	}
	for p := 0; p < rot/2; p++ {
		a, b := pf.Pair(p, rot)
		a2, b2 := pt.Pair(p, rot)
		src[a2], src[b2] = a, b
	}
	out := make([]float64, len(w))
	for r := 0; r < len(w)/d; r++ {
		row, orow := w[r*d:(r+1)*d], out[r*d:(r+1)*d]
		for h := 0; h < heads; h++ {
			for c, sc := range src {
				orow[h*dHead+c] = row[h*dHead+sc]
			}
		}
	}
	return out, nil
}

// ConvertPairingBias is ConvertPairing for a projection bias b [heads·dHead].
func ConvertPairingBias(b []float64, heads, dHead, rot int, from, to string) ([]float64, error) {
	if len(b) != heads*dHead {
		return nil, errors.Errorf("posenc ConvertPairingBias: bias has %d values, want heads·dHead = %d·%d", len(b), heads, dHead)
	}
	return ConvertPairing(b, heads, dHead, rot, from, to)
}
