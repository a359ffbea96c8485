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

// BenchmarkMonitor times updates of the reference configuration with
// pos=t5, alternating unarmed attention probes (the monitor off, or
// between recorded updates) and armed ones (a recorded update), so that
// the machine's drift hits both alike: it reports both times and their
// ratio, the cost of recording.
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
	if _, err := tr.TrainStep(); err != nil { // warm-up: allocations
		b.Fatal(err)
	}
	var spent [2]time.Duration
	var n [2]int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		armed := i % 2
		if armed == 1 {
			for _, p := range tr.LM().Probes() {
				p.Arm()
			}
		}
		t0 := time.Now()
		if _, err := tr.TrainStep(); err != nil {
			b.Fatal(err)
		}
		spent[armed] += time.Since(t0)
		n[armed]++
	}
	if n[0] > 0 && n[1] > 0 {
		off := spent[0].Seconds() * 1000 / float64(n[0])
		on := spent[1].Seconds() * 1000 / float64(n[1])
		b.ReportMetric(off, "ms/unarmed")
		b.ReportMetric(on, "ms/armed")
		b.ReportMetric(on/off, "armed/unarmed")
	}
}
