package fields

import (
	"strings"
	"testing"
)

type inner struct {
	MaxDistance int
	Scale       float64
	Pairing     string
	InitStd     float64 `opt:"pos-init-std"`
	Hidden      int     `opt:"-"`
	unexported  int
}

type outer struct {
	DModel  int
	InitStd float64
	Causal  bool
	Seed    int64
	Pos     inner
	Slice   []int
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{
		"DModel": "d-model", "T5MaxDistance": "t5-max-distance", "FFN": "ffn", "LR": "lr",
		"YarnBetaFast": "yarn-beta-fast", "EvalEvery": "eval-every", "SeqLen": "seq-len",
		"RopeTrainLen": "rope-train-len", "XLUntieR": "xl-untie-r", "AdamEps": "adam-eps",
	} {
		if got := Kebab(in); got != want {
			t.Errorf("Kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWalkAndSet(t *testing.T) {
	var o outer
	fs, err := Walk(&o)
	if err != nil {
		t.Fatal(err)
	}
	want := "d-model init-std causal seed max-distance scale pairing pos-init-std"
	var got []string
	for _, f := range fs {
		got = append(got, f.Name)
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("names %q, want %q", strings.Join(got, " "), want)
	}
	for _, c := range []struct{ name, val string }{
		{"d-model", "64"}, {"init-std", "0.5"}, {"causal", "true"}, {"seed", "-3"},
		{"max-distance", "32"}, {"scale", "1e-3"}, {"pairing", "interleaved"}, {"pos-init-std", "2"},
	} {
		if err := Set(&o, c.name, c.val); err != nil {
			t.Fatalf("Set(%s=%s): %v", c.name, c.val, err)
		}
	}
	if o.DModel != 64 || o.InitStd != 0.5 || !o.Causal || o.Seed != -3 || o.Pos.MaxDistance != 32 ||
		o.Pos.Scale != 1e-3 || o.Pos.Pairing != "interleaved" || o.Pos.InitStd != 2 {
		t.Fatalf("values not set: %+v", o)
	}
	f, _ := Lookup(&o, "scale")
	if f.String() != "0.001" || f.Path != "Pos.Scale" {
		t.Fatalf("String %q Path %q", f.String(), f.Path)
	}
}

func TestErrors(t *testing.T) {
	var o outer
	for _, c := range []struct{ name, val, msg string }{
		{"nope", "1", `unknown option "nope" (valid: causal, d-model`},
		{"d-model", "x", "d-model: \"x\" is not an integer"},
		{"causal", "maybe", "not a boolean"},
		{"scale", "1,5", "not a number"},
		{"hidden", "1", "unknown option"},
	} {
		err := Set(&o, c.name, c.val)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Set(%s=%s) = %v, want an error containing %q", c.name, c.val, err, c.msg)
		}
	}
	if _, err := Walk(o); err == nil {
		t.Error("Walk of a non-pointer: no error")
	}
	type clash struct {
		InitStd float64
		Pos     struct{ InitStd float64 }
	}
	if _, err := Walk(&clash{}); err == nil || !strings.Contains(err.Error(), `both named "init-std"`) {
		t.Errorf("clash: %v", err)
	}
}
