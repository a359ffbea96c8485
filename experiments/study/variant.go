package study

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// ServedKinds names the position kinds the encoding name serves, for an
// error ("grid positions"); "no positions" if it cannot be built.
func ServedKinds(name string) string {
	info, ok := posenc.InfoOf(name)
	if !ok || len(info.Positions) == 0 {
		return "no positions (it cannot be built: check its parts)"
	}
	ks := make([]string, len(info.Positions))
	for i, k := range info.Positions {
		ks[i] = fmt.Sprint(k)
	}
	return strings.Join(ks, ", ") + " positions"
}

// CheckServes returns nil if the encoding (or combination) name serves one
// of kinds; otherwise an error that lists only the encodings a study of
// those kinds trains (posenc.TrainableOn, plus the study-level names
// extra): an unknown name, or one that serves other positions.
func CheckServes(name string, kinds []posenc.PosKind, extra ...string) error {
	var valid []string
	for _, i := range posenc.Registered() {
		if !i.EvalOnly && slices.ContainsFunc(kinds, func(k posenc.PosKind) bool { return slices.Contains(i.Positions, k) }) {
			valid = append(valid, i.Name)
		}
	}
	valid = append(valid, extra...)
	list := strings.Join(valid, ", ")
	info, ok := posenc.InfoOf(name)
	if !ok {
		if _, err := posenc.New(name, posenc.Options{}); err != nil && !strings.Contains(err.Error(), "unknown encoding") {
			return errors.New(strings.TrimPrefix(err.Error(), "posenc: "))
		}
		return errors.Errorf("encoding %q is unknown (valid here: %s, or several joined by %q)", name, list, posenc.CombineSep)
	}
	if !slices.ContainsFunc(kinds, func(k posenc.PosKind) bool { return slices.Contains(info.Positions, k) }) {
		ks := make([]string, len(kinds))
		for i, k := range kinds {
			ks[i] = string(k) + " positions"
		}
		return errors.Errorf("encoding %s serves %s; this study's models take %s (valid here: %s)", name, ServedKinds(name), strings.Join(ks, " or "), list)
	}
	return nil
}

// ScaledLengths returns the evaluation lengths f·l of each factor f, in
// order: every study's lengths from its factors and training length.
func ScaledLengths(factors []int, l int) []int {
	out := make([]int, len(factors))
	for i, f := range factors {
		out[i] = f * l
	}
	return out
}

// Variant is a plan entry: an encoding of posenc trained with some options
// of the training configuration overridden. It is written
// "name@key=value@key=value...", the keys being the internal/fields names of
// trainer.Config ("t5@t5-max-distance=64", "sinusoidal@sinusoidal-scale=1");
// a plain name is a variant without overrides.
type Variant struct {
	// Base is the encoding's name in posenc ("t5").
	Base string
	// Overrides are the options set, in the order written, each value in
	// the canonical form of fields.Field.String ("1" for "1.0").
	Overrides []Override
}

// Override sets the option Key (a fields name of trainer.Config) to Value.
type Override struct{ Key, Value string }

// forbiddenKeys are options a variant may not override: they are set by the
// plan for every model.
var forbiddenKeys = map[string]string{
	"pos":     "the encoding is the name before the first @",
	"seed":    "seeds are the plan's",
	"seq-len": "every model of a study trains at the same L",
}

// ParseVariant parses a plan entry "name@key=value@key=value...". Errors
// name the problem: an empty name, an override without "=", an unknown key
// (the error lists the valid ones, from package fields), a key the plan
// sets itself (pos, seed, seq-len), a key given twice, a value of the wrong
// kind, or a value with characters other than letters, digits and "._+-"
// (labels name files). It does not check that the name is an encoding of
// posenc (Plan.Validate does).
func ParseVariant(spec string) (Variant, error) {
	parts := strings.Split(spec, "@")
	v := Variant{Base: parts[0]}
	if v.Base == "" {
		return Variant{}, errors.Errorf("variant %q: no encoding name before the first @", spec)
	}
	var cfg trainer.Config
	for _, kv := range parts[1:] {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || key == "" || val == "" {
			return Variant{}, errors.Errorf("variant %q: override %q is not key=value", spec, kv)
		}
		if why, bad := forbiddenKeys[key]; bad {
			return Variant{}, errors.Errorf("variant %q: option %q cannot be overridden (%s)", spec, key, why)
		}
		f, err := fields.Lookup(&cfg, key)
		if err != nil {
			return Variant{}, errors.WithMessagef(err, "variant %q", spec)
		}
		for _, o := range v.Overrides {
			if o.Key == key {
				return Variant{}, errors.Errorf("variant %q: option %q given twice", spec, key)
			}
		}
		if strings.Trim(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") != "" {
			return Variant{}, errors.Errorf("variant %q: value %q of %s may hold only letters, digits and . _ + - (it names files)", spec, val, key)
		}
		if err := f.Set(val); err != nil {
			return Variant{}, errors.WithMessagef(err, "variant %q", spec)
		}
		v.Overrides = append(v.Overrides, Override{Key: key, Value: f.String()})
	}
	// A value given is used or refused: a 0 that stands for the default is
	// refused, and so is a value outside its range.
	keys := make([]string, len(v.Overrides))
	for i, o := range v.Overrides {
		keys[i] = o.Key
	}
	if err := cfg.Model.PosOpts.CheckGiven(1, keys); err != nil {
		return Variant{}, errors.Errorf("variant %q: %v", spec, err)
	}
	if err := cfg.Model.PosOpts.Resolve(1).Validate(); err != nil {
		return Variant{}, errors.Errorf("variant %q: %s", spec, strings.TrimPrefix(err.Error(), "posenc: "))
	}
	return v, nil
}

// Label is the variant's name in tables, plots, result rows and file names:
// "name@key=value@..." with canonical values (the name alone without
// overrides). It holds only letters, digits and "@=._+-".
func (v Variant) Label() string {
	if o := v.OverridesString(); o != "" {
		return v.Base + "@" + o
	}
	return v.Base
}

// OverridesString is "key=value@key=value..." ("" without overrides), the
// label without the name.
func (v Variant) OverridesString() string {
	s := make([]string, len(v.Overrides))
	for i, o := range v.Overrides {
		s[i] = o.Key + "=" + o.Value
	}
	return strings.Join(s, "@")
}

// Apply sets Model.Pos = Base and the overrides on cfg. The values were
// checked by ParseVariant, so it does not fail on a parsed Variant.
func (v Variant) Apply(cfg *trainer.Config) error {
	cfg.Model.Pos = v.Base
	for _, o := range v.Overrides {
		if err := fields.Set(cfg, o.Key, o.Value); err != nil {
			return errors.WithMessagef(err, "variant %q", v.Label())
		}
	}
	return nil
}
