package trainer

import (
	"testing"
	"time"
)

// BenchmarkTrainStep times one update of the reference configuration
// (batch 32 x 64 tokens, float32, pos=none) on the default corpus.
func BenchmarkTrainStep(b *testing.B) {
	cfg := DefaultConfig()
	c, err := LoadCorpus("")
	if err != nil {
		b.Fatal(err)
	}
	tr, err := New(cfg, c)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.TrainStep(); err != nil { // warm-up: allocations
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := tr.TrainStep(); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.ReportMetric(el.Seconds()*1000/float64(b.N), "ms/step")
	b.ReportMetric(float64(b.N*cfg.Batch*cfg.SeqLen)/el.Seconds(), "tokens/s")
}

// BenchmarkMonitor times an update of the reference configuration with
// pos=t5, with the attention probes unarmed (the monitor off, or between
// recorded updates) and armed (a recorded update): the cost of recording.
func BenchmarkMonitor(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Model.Pos = "t5"
	c, err := LoadCorpus("")
	if err != nil {
		b.Fatal(err)
	}
	tr, err := New(cfg, c)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	for _, armed := range []bool{false, true} {
		name := map[bool]string{false: "unarmed", true: "armed"}[armed]
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if armed {
					for _, p := range tr.LM().Probes() {
						p.Arm()
					}
				}
				if _, err := tr.TrainStep(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/step")
		})
	}
}
