package layers

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// TestResolvedBitIdentical builds the tiny LM from a config and from its
// Resolved() form, for every registered encoding, and requires bit-identical
// logits in float32 and float64: recording resolved options must not change
// what a model computes.
func TestResolvedBitIdentical(t *testing.T) {
	data := []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}
	for _, name := range posenc.Names() {
		if info, _ := posenc.InfoOf(name); !slices.Contains(info.Positions, posenc.PosLine) {
			continue // an encoding of grid positions only: no LM
		}
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig(name)
			res := cfg.Resolved()
			if reflect.DeepEqual(cfg, res) {
				t.Fatalf("Resolved changed nothing: %+v", res.PosOpts)
			}
			for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				a := runLM(t, cfg, dt, nil, data, 2, 6)
				b := runLM(t, res, dt, nil, data, 2, 6)
				for i := range a {
					if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
						t.Fatalf("%v logit %d: config %v, resolved config %v", dt, i, a[i], b[i])
					}
				}
			}
		})
	}
}

// TestResolvedFillsEveryDefault: after Resolved, no numeric or string field
// of the position options is zero (booleans are switches whose default is
// false), the sinusoidal scale is 1/√d_model, Pos is named, and resolving
// twice changes nothing.
func TestResolvedFillsEveryDefault(t *testing.T) {
	cfg := Config{Vocab: 256, DModel: 128, Heads: 4, Layers: 2, FFN: 512, Eps: 1e-5, InitStd: 0.02, Causal: true}
	res := cfg.Resolved()
	if res.Pos != "none" {
		t.Fatalf("Pos %q, want none", res.Pos)
	}
	if want := 1 / math.Sqrt(128); res.PosOpts.SinusoidalScale != want {
		t.Fatalf("SinusoidalScale %v, want %v", res.PosOpts.SinusoidalScale, want)
	}
	fs, err := fields.Walk(&res.PosOpts)
	if err != nil {
		t.Fatal(err)
	}
	// 0 means "unset" (HF's None) for YaRN's attention factor and mscales:
	// the factor derives from RopeScale, which an evaluation sets after the
	// trained model's options were resolved, so it cannot be filled in.
	unset := map[string]bool{"yarn-attention-factor": true, "yarn-mscale": true, "yarn-mscale-all-dim": true}
	for _, f := range fs {
		if !f.IsBool() && f.Value.IsZero() && !unset[f.Name] {
			t.Errorf("option %s (%s) is still zero after Resolved", f.Name, f.Path)
		}
	}
	if again := res.Resolved(); !reflect.DeepEqual(again, res) {
		t.Fatalf("Resolved is not idempotent:\n%+v\n%+v", res, again)
	}
}
