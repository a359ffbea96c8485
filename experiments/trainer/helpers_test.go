package trainer

import (
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/layers"
)

// tinyConfig is a model small enough for unit tests: d=16, 1 layer, 2 heads,
// T=8, batch 2, float64.
func tinyConfig() Config {
	c := DefaultConfig()
	c.Model = layers.Config{Vocab: Vocab, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Eps: 1e-5, InitStd: 0.02, Causal: true, Pos: "none"}
	c.Batch, c.SeqLen, c.Steps, c.Warmup = 2, 8, 6, 2
	c.EvalBatch = 4
	c.Dtype = tensor.Float64
	return c
}

// tinyText is a deterministic text of about 1 kB.
func tinyText() []byte {
	return []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 16))
}

func tinyCorpus(t testing.TB) *Corpus {
	t.Helper()
	c, err := NewCorpus(tinyText())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTiny(t testing.TB, cfg Config) *Trainer {
	t.Helper()
	tr, err := New(cfg, tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// trainN runs n updates and returns their losses.
func trainN(t testing.TB, tr *Trainer, n int) []float64 {
	t.Helper()
	var out []float64
	for i := 0; i < n; i++ {
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Loss)
	}
	return out
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
