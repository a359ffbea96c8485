package layers_test

import (
	"fmt"
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// BenchmarkDecoderStep times one step of layers.Decoder once its cache is
// full (the sliding steady state), per window and encoding, float32, B=1,
// reference model (d=128, 2 layers).
func BenchmarkDecoderStep(b *testing.B) {
	for _, pos := range []string{"none", "rope", "alibi", "t5", "xl"} {
		for _, w := range benchWindows() {
			b.Run(fmt.Sprintf("%s/W=%d", pos, w), func(b *testing.B) {
				cfg := layers.DefaultConfig()
				cfg.Pos = pos
				p := graph.NewParams(tensor.Float32, 1)
				dec, err := layers.NewDecoder(p, cfg, 1, w, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer dec.Close()
				for i := 0; i < w; i++ { // fill the cache
					if _, err := dec.Step([]int{i % 256}); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := dec.Step([]int{i % 256}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchWindows are the windows of BenchmarkDecoderStep: 512 and 2048, and
// 8192 with RPE_BENCH_LONG=1 (filling its cache takes about 20 s per
// encoding).
func benchWindows() []int {
	if os.Getenv("RPE_BENCH_LONG") == "1" {
		return []int{512, 2048, 8192}
	}
	return []int{512, 2048}
}
