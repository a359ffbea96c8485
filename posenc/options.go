package posenc

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/internal/fields"
)

// OptionDoc documents one field of Options: the one table from which the
// commands' flag help, the range checks of Validate and the docs' table of
// options derive.
type OptionDoc struct {
	// Name is the option's kebab-case name, the flag and variant key
	// ("t5-max-distance"; see package internal/fields).
	Name string
	// Help is one sentence with the unit.
	Help string
	// Range describes the valid values of the resolved option
	// ("an integer >= 1").
	Range string
	// ZeroUnset is true if the zero value stands for the default (Defaults
	// replaces it), so that an explicit 0 cannot be told from an unset
	// field: callers that know a value was given refuse it (see
	// CheckGiven).
	ZeroUnset bool

	ok func(v reflect.Value) bool
}

// Value checks.
func posInt(v reflect.Value) bool   { return v.Int() >= 1 }
func posFloat(v reflect.Value) bool { f := v.Float(); return f > 0 && !math.IsInf(f, 0) }
func nonNegF(v reflect.Value) bool  { f := v.Float(); return f >= 0 && !math.IsInf(f, 0) }
func above1(v reflect.Value) bool   { f := v.Float(); return f > 1 && !math.IsInf(f, 0) }
func anyBool(reflect.Value) bool    { return true }
func fraction(v reflect.Value) bool { f := v.Float(); return f > 0 && f <= 1 }
func openUnit(v reflect.Value) bool { f := v.Float(); return f > 0 && f < 1 }
func oddPos(v reflect.Value) bool   { return v.Int() >= 1 && v.Int()%2 == 1 }
func evenPos(v reflect.Value) bool  { return v.Int() >= 2 && v.Int()%2 == 0 }
func oneOf(vals ...string) func(reflect.Value) bool {
	return func(v reflect.Value) bool { return slices.Contains(vals, v.String()) }
}

const (
	rPosInt   = "an integer >= 1"
	rPosFloat = "a finite number > 0"
	rNonNeg   = "a finite number >= 0 (0: unset)"
	rAbove1   = "a finite number > 1"
	rBool     = "true or false"
)

// optionDocs is in the order of the Options fields (TestOptionDocs checks
// that every field has exactly one entry).
var optionDocs = []OptionDoc{
	{"max-len", "rows of the learned absolute table: the longest sequence it serves, in tokens", rPosInt, true, posInt},
	{"pos-init-std", "standard deviation of the N(0, std²) init of learnable position tables and biases", rPosFloat, true, posFloat},
	{"alpha", "multiply the learnable position bias or terms by a learnable scalar, initialised to 0.1", rBool, false, anyBool},
	{"sinusoidal-scale", "amplitude of the sinusoidal tables added to the embeddings (the training commands' default is 1/√d-model)", rPosFloat, true, posFloat},
	{"shaw-k", "Shaw et al.'s clipping distance K: relative distances beyond ±K share an embedding, in tokens", rPosInt, true, posInt},
	{"t5-buckets", "number of T5 relative-position buckets per direction pair (half exact, half log-spaced)", rPosInt, true, posInt},
	{"t5-max-distance", "distance where T5's log-spaced buckets end, in tokens: farther pairs share the last bucket", rPosInt, true, posInt},
	{"xl-untie-r", "Transformer-XL: give every layer its own biases u and v (untie_r) instead of shared ones", rBool, false, anyBool},
	{"deberta-buckets", "DeBERTa's bucket size k: its relative table has 2k rows", "an integer >= 2", true, func(v reflect.Value) bool { return v.Int() >= 2 }},
	{"deberta-max-position", "distance where DeBERTa's log buckets end, in tokens", "an integer > deberta-buckets/2 + 1", true, posInt},
	{"rope-base", "RoPE's frequency base b: pair p rotates by b^(-2p/d_head) radians per token", rAbove1, true, above1},
	{"rope-pairing", "which coordinates RoPE rotates together: half (HF Llama rotate_half) or interleaved (GPT-J)", "half or interleaved", true, oneOf("half", "interleaved")},
	{"rope-fraction", "fraction of each head's dimensions that RoPE rotates (partial rotary, GPT-NeoX)", "a number in (0, 1]", true, fraction},
	{"rope-scale", "context-extension factor s of rope-pi, rope-ntk, rope-yarn and rope-llama3 (1: no scaling)", rPosFloat, true, posFloat},
	{"rope-train-len", "training length L that rope-dynamic, rope-yarn and rope-llama3 extend from, in tokens", rPosInt, true, posInt},
	{"yarn-beta-fast", "YaRN's upper ramp bound β, in rotations over the training length", rPosFloat, true, posFloat},
	{"yarn-beta-slow", "YaRN's lower ramp bound α, in rotations over the training length", rPosFloat, true, posFloat},
	{"grid-rows", "rows of the patch grid that 2-D position tables are sized for, in patches", rPosInt, true, posInt},
	{"grid-cols", "columns of the patch grid that 2-D position tables are sized for, in patches", rPosInt, true, posInt},
	{"grid-resample", "how learned-2d serves another grid: none (an error), bilinear or bicubic (F.interpolate, antialias=False, as MAE), bilinear-aa or bicubic-aa (antialias=True, as timm's resample_abs_pos_embed)", "none, bilinear, bicubic, bilinear-aa or bicubic-aa", true, oneOf(ResampleModes...)},
	{"rel2d-buckets", "swin-log's log buckets per axis and sign", rPosInt, true, posInt},
	{"rel2d-max-distance", "distance where swin-log's log buckets end, in patches", rPosInt, true, posInt},
	{"rope2d-base", "frequency base of rope-2d's axial rotations", rAbove1, true, above1},
	{"rope-mixed-base", "frequency base of rope-mixed's initial learnable frequencies", rAbove1, true, above1},
	{"rope2d-axis-order", "the grid axis that the first half of rope-2d's rotation pairs turns with: x-first (the column, rope-vit) or y-first (the row, timm)", "x-first or y-first", true, oneOf(Rope2DXFirst, Rope2DYFirst)},
	{"cpe-kernel", "side of cpe's depthwise convolution, in patches (odd)", "an odd integer >= 1", true, oddPos},
	{"cpe-after-block", "the block (1-based) after which cpe adds its convolution", rPosInt, true, posInt},
	{"graph-max-dist", "graphormer-spatial's largest shortest-path distance with its own bias, in hops", rPosInt, true, posInt},
	{"graph-max-degree", "graphormer-centrality's largest node degree with its own embedding", rPosInt, true, posInt},
	{"tree-max-up", "tree's largest number of steps up to the common ancestor with its own relation", rPosInt, true, posInt},
	{"tree-max-down", "tree's largest number of steps down from the common ancestor with its own relation", rPosInt, true, posInt},
	{"kerple-eps", "lower bound of kerple-log's and kerple-power's parameters r1 and r2", "a number in (0, 1)", true, openUnit},
	{"sandwich-dim", "sandwich's d̄, the width of the sinusoids whose inner product is the bias (even)", "an even integer >= 2", true, evenPos},
	{"fire-width", "hidden width of fire's MLP, in units", rPosInt, true, posInt},
	{"fire-init-c", "initial value of fire's learnable c in ψ(x) = log(c·x + 1)", rPosFloat, true, posFloat},
	{"fire-init-l", "initial value of fire's threshold L, in tokens", rPosFloat, true, posFloat},
	{"dpb-width", "hidden width of dpb's MLP, in units", rPosInt, true, posInt},
	{"dpb-depth", "hidden layers of dpb's MLP", rPosInt, true, posInt},
	{"dpb-log-distance", "feed dpb's MLP sign(r)·log(|r|+1) instead of the distance r", rBool, false, anyBool},
	{"dpb-norm", "put a LayerNorm before every SiLU of dpb's MLP", rBool, false, anyBool},
	{"xpos-scale-base", "xPos's scale base γ, in tokens: pair p is scaled by ζ_p^(n/γ) at distance n", rPosFloat, true, posFloat},
	{"xpos-centre", "rounding of xPos's centre c in ζ^((n − c)/γ) for positions 0..N−1: ceil (⌈N/2⌉, torchscale) or floor (⌊N/2⌋, x-transformers)", "ceil or floor", true, oneOf(XPosCentreCeil, XPosCentreFloor)},
	{"llama3-low-freq-factor", "rope-llama3's low_freq_factor: pairs with wavelengths above L/low are interpolated", rPosFloat, true, posFloat},
	{"llama3-high-freq-factor", "rope-llama3's high_freq_factor (> the low one): pairs with wavelengths below L/high keep their frequency", rPosFloat, true, posFloat},
	{"yarn-attention-factor", "rope-yarn's factor on cos and sin (0: derived from rope-scale, 0.1·ln s + 1)", rNonNeg, false, nonNegF},
	{"yarn-mscale", "HF's YaRN mscale (0: unset; set together with yarn-mscale-all-dim)", rNonNeg, false, nonNegF},
	{"yarn-mscale-all-dim", "HF's YaRN mscale_all_dim (0: unset; set together with yarn-mscale)", rNonNeg, false, nonNegF},
	{"yarn-no-truncate", "use YaRN's correction range unrounded (HF truncate=False)", rBool, false, anyBool},
	{"cope-npos", "positions of cope's table: contextual positions above npos-1 share the last, in tokens", rPosInt, true, posInt},
	{"cope-divide", "add cope's position logits before the division by √d_head, as the authors' code does", rBool, false, anyBool},
}

// OptionDocs returns the documentation of every field of Options, in
// declaration order.
func OptionDocs() []OptionDoc { return slices.Clone(optionDocs) }

// OptionDocOf returns the documentation of the option called name.
func OptionDocOf(name string) (OptionDoc, bool) {
	for _, d := range optionDocs {
		if d.Name == name {
			return d, true
		}
	}
	return OptionDoc{}, false
}

// Validate returns an error naming the first option of o (meant to be
// resolved: see Resolve) outside its range (OptionDoc.Range), plus the
// rules between options: llama3-low-freq-factor < llama3-high-freq-factor,
// yarn-mscale and yarn-mscale-all-dim set together, deberta-max-position >
// deberta-buckets/2 + 1. It is the one place that knows the ranges; the
// constructors of the encodings check what they read as well.
func (o Options) Validate() error {
	fs, err := fields.Walk(&o)
	if err != nil {
		return err
	}
	for _, f := range fs {
		d, ok := OptionDocOf(f.Name)
		if !ok {
			return errors.Errorf("posenc: option %s has no OptionDoc", f.Name)
		}
		if !d.ok(f.Value) {
			return errors.Errorf("posenc: option %s is %s, must be %s", f.Name, f.String(), d.Range)
		}
	}
	switch {
	case !(o.Llama3LowFreqFactor < o.Llama3HighFreqFactor):
		return errors.Errorf("posenc: llama3-low-freq-factor %g must be below llama3-high-freq-factor %g", o.Llama3LowFreqFactor, o.Llama3HighFreqFactor)
	case (o.YarnMscale == 0) != (o.YarnMscaleAllDim == 0):
		return errors.Errorf("posenc: yarn-mscale %g and yarn-mscale-all-dim %g must be set together", o.YarnMscale, o.YarnMscaleAllDim)
	case o.DebertaMaxPosition <= o.DebertaBuckets/2+1:
		return errors.Errorf("posenc: deberta-max-position %d must exceed deberta-buckets/2 + 1 = %d", o.DebertaMaxPosition, o.DebertaBuckets/2+1)
	}
	return nil
}

// CheckGiven returns an error if an option a caller was given explicitly
// (by name, with the value it holds in o) is one that Resolve would replace:
// an explicit 0 of a ZeroUnset option runs with the default, not with 0, so
// it is refused instead of silently replaced. The error names the option,
// the default it would have run with and the valid range. dModel is the
// model width (the sinusoidal scale's default depends on it).
func (o Options) CheckGiven(dModel int, given []string) error {
	r := o.Resolve(dModel)
	for _, name := range given {
		a, err := fields.Lookup(&o, name)
		if err != nil {
			continue // not a position option
		}
		b, _ := fields.Lookup(&r, name)
		if a.String() != b.String() {
			d, _ := OptionDocOf(name)
			return errors.Errorf("%s %s would run with the default %s (0 means unset); give %s, or leave it out for the default",
				name, a.String(), b.String(), d.Range)
		}
	}
	return nil
}

var (
	usesOnce sync.Once
	uses     map[string][]string // encoding -> option names it reads
)

// OptionsOf returns the names of the options (OptionDoc.Name) that the
// encoding called name reads, in declaration order; for a combination
// "a+b", those any part reads. It is derived from the encodings
// themselves: an option is read if building the encoding with it changed
// from its default gives another encoding (or an error). Nil for an
// unknown name.
func OptionsOf(name string) []string {
	usesOnce.Do(deriveUses)
	set := map[string]bool{}
	for _, part := range strings.Split(name, CombineSep) {
		u, ok := uses[part]
		if !ok {
			return nil
		}
		for _, o := range u {
			set[o] = true
		}
	}
	return inOrder(set)
}

// OptionsFor returns the options that at least one of the encodings names
// reads, in declaration order.
func OptionsFor(names []string) []string {
	set := map[string]bool{}
	for _, n := range names {
		for _, o := range OptionsOf(n) {
			set[o] = true
		}
	}
	return inOrder(set)
}

// inOrder returns the options of set in declaration order.
func inOrder(set map[string]bool) []string {
	var out []string
	for _, d := range optionDocs {
		if set[d.Name] {
			out = append(out, d.Name)
		}
	}
	return out
}

// perturb returns another valid-looking value of field f: the next
// integer, 1.5 times the number plus 0.25, the other boolean, or another
// value of an enumeration.
func perturb(f fields.Field) string {
	v := f.Value
	switch v.Kind() {
	case reflect.Bool:
		return fmt.Sprint(!v.Bool())
	case reflect.Int, reflect.Int64:
		return fmt.Sprint(v.Int() + 2)
	case reflect.Float64:
		return fmt.Sprint(v.Float()*1.5 + 0.25)
	case reflect.String:
		for _, s := range []string{"interleaved", "bilinear", Rope2DYFirst, XPosCentreFloor} {
			if d, _ := OptionDocOf(f.Name); d.ok(reflect.ValueOf(s)) && s != v.String() {
				return s
			}
		}
	}
	return ""
}

func deriveUses() {
	uses = map[string][]string{}
	base := Options{}.Defaults()
	fs, err := fields.Walk(&base)
	if err != nil {
		panic(err)
	}
	for name, e := range registry {
		ref, err := e.f(base)
		if err != nil {
			panic(errors.Wrapf(err, "posenc: %s with default options", name))
		}
		var used []string
		for _, f := range fs {
			o := base
			p := perturb(f)
			if p == "" {
				continue
			}
			if err := fields.Set(&o, f.Name, p); err != nil {
				panic(err)
			}
			got, err := e.f(o)
			if err != nil || !reflect.DeepEqual(got, ref) {
				used = append(used, f.Name)
			}
		}
		uses[name] = used
	}
}
