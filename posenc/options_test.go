package posenc_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// TestOptionDocs: every field of Options has one OptionDoc, in order, with
// a sentence of help that is not a Go field path, and the defaults are in
// range.
func TestOptionDocs(t *testing.T) {
	var o posenc.Options
	fs, err := fields.Walk(&o)
	if err != nil {
		t.Fatal(err)
	}
	docs := posenc.OptionDocs()
	if len(docs) != len(fs) {
		t.Fatalf("%d OptionDocs for %d fields of Options", len(docs), len(fs))
	}
	for i, f := range fs {
		d := docs[i]
		if d.Name != f.Name {
			t.Errorf("OptionDoc %d is %q, field %s is %q", i, d.Name, f.Path, f.Name)
		}
		if len(strings.Fields(d.Help)) < 3 || strings.Contains(d.Help, f.Path) || d.Range == "" {
			t.Errorf("%s: help %q / range %q is not a sentence", d.Name, d.Help, d.Range)
		}
	}
	if err := (posenc.Options{}).Resolve(128).Validate(); err != nil {
		t.Fatalf("defaults out of range: %v", err)
	}
}

// TestValidate: each rule refuses a value outside its range, naming the
// option.
func TestValidate(t *testing.T) {
	for _, c := range []struct{ name, val string }{
		{"t5-max-distance", "-1"}, {"cpe-kernel", "4"}, {"sandwich-dim", "7"}, {"rope-base", "1"}, {"rope-fraction", "1.5"},
		{"rope-pairing", "diagonal"}, {"grid-resample", "nearest"}, {"kerple-eps", "1"}, {"pos-init-std", "-0.1"},
		{"yarn-mscale", "1"}, {"llama3-high-freq-factor", "0.5"}, {"deberta-max-position", "10"}, {"sinusoidal-scale", "+Inf"},
	} {
		o := posenc.Options{}.Resolve(128)
		if err := fields.Set(&o, c.name, c.val); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%s: Validate = %v, want an error naming it", c.name, c.val, err)
		}
	}
}

// TestCheckGiven: an explicit 0 that Resolve would replace is refused with
// the default it would have run with; a meaningful 0 is kept.
func TestCheckGiven(t *testing.T) {
	var o posenc.Options
	for _, n := range []string{"t5-max-distance", "rope-base", "cpe-kernel", "sinusoidal-scale", "max-len"} {
		err := o.CheckGiven(128, []string{n})
		if err == nil || !strings.Contains(err.Error(), n+" 0 would run with the default") {
			t.Errorf("explicit %s 0: %v", n, err)
		}
	}
	if err := o.CheckGiven(128, []string{"yarn-attention-factor", "alpha", "d-model"}); err != nil {
		t.Errorf("meaningful zeros refused: %v", err)
	}
	o.T5MaxDistance = 64
	if err := o.CheckGiven(128, []string{"t5-max-distance"}); err != nil {
		t.Error(err)
	}
}

// TestOptionsOf: the options an encoding reads, derived from the
// encodings.
func TestOptionsOf(t *testing.T) {
	for _, c := range []struct {
		name      string
		want, not []string
	}{
		{"none", nil, []string{"max-len"}},
		{"learned", []string{"max-len", "pos-init-std"}, []string{"t5-buckets", "grid-rows"}},
		{"t5", []string{"t5-buckets", "t5-max-distance", "alpha"}, []string{"shaw-k", "max-len"}},
		{"rope", []string{"rope-base", "rope-pairing"}, []string{"grid-rows", "rope2d-base"}},
		{"cpe", []string{"cpe-kernel", "cpe-after-block"}, []string{"rope-base"}},
		{"tree+rope", []string{"tree-max-up", "rope-base"}, []string{"graph-max-dist"}},
		{"graphormer-centrality", []string{"graph-max-degree"}, []string{"graph-max-dist", "alpha"}},
	} {
		got := posenc.OptionsOf(c.name)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("OptionsOf(%s) = %v lacks %s", c.name, got, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(got, n) {
				t.Errorf("OptionsOf(%s) = %v holds %s", c.name, got, n)
			}
		}
	}
	if posenc.OptionsOf("nope") != nil {
		t.Error("unknown encoding has options")
	}
	// Building an encoding twice gives equal values: the derivation's
	// premise.
	for _, n := range posenc.Names() {
		a, _ := posenc.New(n, posenc.Options{})
		b, _ := posenc.New(n, posenc.Options{})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s built twice differs: OptionsOf cannot tell which options it reads", n)
		}
	}
	// No option is read by nobody.
	all := posenc.OptionsFor(posenc.Names())
	for _, d := range posenc.OptionDocs() {
		if !slices.Contains(all, d.Name) {
			t.Errorf("option %s is read by no encoding", d.Name)
		}
	}
}
