package layers

import (
	"reflect"
	"testing"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// TestConfigFieldNames walks Config with internal/fields, as flags, study
// variants and config files do: no two options may get the same kebab name
// (posenc.Options is flattened into Config, so a position option named like
// a model field needs an opt tag, as InitStd -> pos-init-std), every leaf of
// posenc.Options must be reachable, and the names other packages use must
// stay stable.
func TestConfigFieldNames(t *testing.T) {
	var c Config
	fs, err := fields.Walk(&c)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]string{}
	for _, f := range fs {
		byPath[f.Path] = f.Name
	}
	ot := reflect.TypeOf(posenc.Options{})
	for i := 0; i < ot.NumField(); i++ {
		sf := ot.Field(i)
		if sf.Tag.Get("opt") == "-" {
			continue
		}
		if _, ok := byPath["PosOpts."+sf.Name]; !ok {
			t.Errorf("posenc.Options.%s is not reachable through fields.Walk(&layers.Config{})", sf.Name)
		}
	}
	want := map[string]string{
		"InitStd":                    "init-std",
		"PosOpts.InitStd":            "pos-init-std",
		"PosOpts.XLUntieR":           "xl-untie-r",
		"PosOpts.SinusoidalScale":    "sinusoidal-scale",
		"PosOpts.DebertaBuckets":     "deberta-buckets",
		"PosOpts.DebertaMaxPosition": "deberta-max-position",
		"PosOpts.T5MaxDistance":      "t5-max-distance",
		"PosOpts.YarnBetaFast":       "yarn-beta-fast",
	}
	for path, name := range want {
		if byPath[path] != name {
			t.Errorf("%s is named %q, want %q", path, byPath[path], name)
		}
	}
	// set by name, as a flag would
	for name, val := range map[string]string{"xl-untie-r": "true", "deberta-buckets": "256", "deberta-max-position": "512", "pos-init-std": "0.01"} {
		if err := fields.Set(&c, name, val); err != nil {
			t.Fatal(err)
		}
	}
	if o := c.PosOpts; !o.XLUntieR || o.DebertaBuckets != 256 || o.DebertaMaxPosition != 512 || o.InitStd != 0.01 || c.InitStd != 0 {
		t.Fatalf("fields.Set gave %+v (model InitStd %v)", o, c.InitStd)
	}
}
