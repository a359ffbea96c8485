package stabilitystudy

import (
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// tinyPlan is a study of tiny models: d=8, 2 heads, 1 block, L=8, batch
// 2, 8 updates, all of them warm-up (so that a loss still near 8 bits/byte
// is not a divergence), float64, monitor every 2 updates, saves every
// 2; the grid of the presets at lrs 2e-3 and 1e-2.
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds = "test", encs, []int64{1}
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.SeqLen, p.Base.Warmup, p.Base.EvalBatch = 8, 2, 8, 8, 4
	p.Base.Model.PosOpts.MaxLen = 8
	p.Base.Dtype = tensor.Float64
	p.LRs = []float64{2e-3, 1e-2}
	p.MonitorEvery, p.SaveEvery = 2, 2
	return p
}

// tinyCorpus is a deterministic text of about 4 kB.
func tinyCorpus(t testing.TB) *trainer.Corpus {
	t.Helper()
	c, err := trainer.NewCorpus([]byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 64)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withCorpus is p training on c.
func withCorpus(p Plan, c *trainer.Corpus) Plan {
	p.Corpus = c
	return p
}
