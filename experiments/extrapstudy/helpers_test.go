package extrapstudy

import (
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
)

// tinyPlan is a study small enough for unit tests: d=16, 1 layer, 2 heads,
// L=8, batch 2, 6 updates, float64; Le = 8, 16, 32; at most 4 windows of 32.
func tinyPlan(encs ...string) Plan {
	base := trainer.DefaultConfig()
	base.Model = layers.Config{Vocab: trainer.Vocab, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Eps: 1e-5, InitStd: 0.02, Causal: true}
	base.Batch, base.SeqLen, base.Steps, base.Warmup = 2, 8, 6, 2
	base.Dtype = tensor.Float64
	p := Plan{Preset: "tiny", Base: base, Encodings: encs, Seeds: []int64{1}, Factors: []int{1, 2, 4},
		Scalings: append([]string(nil), RopeScalings...), MaxWindows: 4, EvalTokens: 32, SaveEvery: 2}
	p.Reduced = DescribeReductions(p)
	return p
}

// tinyText is a deterministic text of about 4 kB.
func tinyText() []byte {
	return []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 64))
}

func tinyCorpus(t testing.TB) *trainer.Corpus {
	t.Helper()
	c, err := trainer.NewCorpus(tinyText())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}
