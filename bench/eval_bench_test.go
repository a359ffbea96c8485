package main

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

// BenchmarkEvalStream times the streamed forward pass of -cost's fwd cells
// (batch 1, the reference model) at T = 4096 for every encoding that
// streams, to profile the streaming attention in the whole model:
//
//	go test ./bench -run XXX -bench 'EvalStream/alibi' -benchtime 3x -cpuprofile cpu.prof
func BenchmarkEvalStream(b *testing.B) {
	const T = 4096
	for _, pos := range Encodings {
		b.Run(pos, func(b *testing.B) {
			sh := ReferenceShape()
			sh.Batch, sh.Seq = 1, T
			c := sh.config(pos)
			c.Model.Stream = true
			p := graph.NewParams(c.Dtype, c.Seed)
			ev, err := trainer.NewEvaluator(p, c.Model, sh.Batch, sh.Seq)
			if err != nil {
				b.Skip(fmt.Sprintf("%s does not stream: %v", pos, err))
			}
			defer ev.Close()
			rng := rand.New(rand.NewSource(7))
			data := make([]byte, T+1)
			for i := range data {
				data[i] = byte(rng.Intn(256))
			}
			if _, err := ev.Eval(data, 0, 0); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := ev.Eval(data, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N)/T, "ms/token")
		})
	}
}

// BenchmarkTrainStream times a streamed training step of -cost's train
// cells (batch 1, the reference model, forward, backward, clipping and
// AdamW) at T = 4096 for every encoding that streams:
//
//	go test ./bench -run XXX -bench 'TrainStream/xl' -benchtime 3x -cpuprofile cpu.prof
func BenchmarkTrainStream(b *testing.B) {
	const T = 4096
	for _, pos := range Encodings {
		b.Run(pos, func(b *testing.B) {
			sh := ReferenceShape()
			sh.Batch, sh.Seq = 1, T
			sh.Base.Model.Stream = true
			r, err := newGoRunnerCorpus(sh, pos, 16*(T+1))
			if err != nil {
				b.Skip(fmt.Sprintf("%s does not stream: %v", pos, err))
			}
			defer r.close()
			if _, _, err := r.time(1, 0); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ResetTimer()
			if _, _, err := r.time(0, b.N); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N)/T, "ms/token")
		})
	}
}
