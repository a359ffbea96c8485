package trainer

import (
	"runtime"
	"runtime/debug"
	"testing"

	"gorgonia.org/tensor"
)

// TestEstimateMemory compares EstimateMemory with the bytes New and the
// first update allocate (the garbage collector off, so this is the peak
// such a run could reach), on two small float64 configurations: they must
// agree within a factor of 2.
func TestEstimateMemory(t *testing.T) {
	for _, c := range []struct{ d, ffn, layers, batch, seq, heads int }{{32, 64, 1, 4, 32, 2}, {16, 64, 1, 16, 128, 2}} {
		cfg := tinyConfig()
		cfg.Model.DModel, cfg.Model.FFN, cfg.Model.Layers, cfg.Model.Heads = c.d, c.ffn, c.layers, c.heads
		cfg.Batch, cfg.SeqLen, cfg.Dtype = c.batch, c.seq, tensor.Float64
		corp, err := NewCorpus(make([]byte, 3000))
		if err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		old := debug.SetGCPercent(-1)
		runtime.ReadMemStats(&m0)
		tr, err := New(cfg, corp)
		if err == nil {
			_, err = tr.TrainStep()
		}
		runtime.ReadMemStats(&m1)
		debug.SetGCPercent(old)
		if err != nil {
			t.Fatal(err)
		}
		tr.Close()
		got, est := float64(m1.HeapAlloc-m0.HeapAlloc), EstimateMemory(cfg).Total
		if est > 2*got || got > 2*est {
			t.Errorf("%+v: estimate %.0f bytes, allocated %.0f", c, est, got)
		}
	}
}

// TestCheckMemory: absurd sizes are refused with the estimate, and nothing
// overflows.
func TestCheckMemory(t *testing.T) {
	cfg := DefaultConfig()
	if err := CheckMemory(cfg, 1<<30); err != nil {
		t.Errorf("reference config in 1 GiB: %v", err)
	}
	for _, f := range []func(*Config){
		func(c *Config) { c.Batch = 1000000000 },
		func(c *Config) { c.Model.DModel = 1000000 },
		func(c *Config) { c.Model.Layers = 100000 },
	} {
		c := DefaultConfig()
		f(&c)
		wantErr(t, CheckMemory(c, 24<<30), "training needs about", "more than the 24.0 GiB available", "reduce batch")
	}
	// Batch 1 at 16K tokens: the materialised scores alone are 3·4·2·16384²
	// floats (25.8 GB); the streaming attention has none.
	long := DefaultConfig()
	long.Batch, long.SeqLen = 1, 16384
	wantErr(t, CheckMemory(long, 24<<30), "training needs about")
	long.Model.Stream = true
	if err := CheckMemory(long, 24<<30); err != nil {
		t.Errorf("16K tokens with Stream in 24 GiB: %v", err)
	}
	if _, ok := MemAvailable(); !ok {
		t.Log("MemAvailable unknown here")
	}
}
