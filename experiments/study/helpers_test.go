package study

import (
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
)

// tinyConfig is a language model small enough for unit tests: d=16, 1
// layer, 2 heads, L=8, batch 2, 6 updates, float64.
func tinyConfig() trainer.Config {
	base := trainer.DefaultConfig()
	base.Model = layers.Config{Vocab: trainer.Vocab, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Eps: 1e-5, InitStd: 0.02, Causal: true}
	base.Batch, base.SeqLen, base.Steps, base.Warmup = 2, 8, 6, 2
	base.Dtype = tensor.Float64
	return base
}

func tinyCorpus(t testing.TB) *trainer.Corpus {
	t.Helper()
	c, err := trainer.NewCorpus([]byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 64)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
