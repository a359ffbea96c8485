package study

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rpe-go/rpe/experiments/trainer"
)

func TestScratchTiming(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	c, err := trainer.LoadCorpus("")
	if err != nil {
		t.Fatal(err)
	}
	for _, pos := range strings.Split(os.Getenv("SCRATCH"), ",") {
		for _, b := range []int{32, 16} {
			cfg := trainer.DefaultConfig()
			cfg.Model.Pos = pos
			cfg.Batch = b
			tr, err := trainer.New(cfg, c)
			if err != nil {
				t.Fatal(err)
			}
			tr.TrainStep()
			t0 := time.Now()
			n := 5
			for i := 0; i < n; i++ {
				if _, err := tr.TrainStep(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s batch %d: %.0f ms/step", pos, b, float64(time.Since(t0).Milliseconds())/float64(n))
			if b == 16 {
				for _, le := range []int{64, 128, 256, 512} {
					if pos == "learned" && le > 64 {
						continue
					}
					t0 = time.Now()
					r, err := trainer.Evaluate(tr.Params, cfg.Model, c.Val[:8193], trainer.EvalOptions{Len: le, Batch: 4})
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("  eval %d: %.1f us/token (%d tokens)", le, float64(time.Since(t0).Microseconds())/float64(r.Tokens), r.Tokens)
				}
			}
			tr.Close()
		}
	}
}
