package main

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkTrainStep times one training step (forward, backward, clipping,
// AdamW) of the reference configuration for every encoding:
//
//	go test ./bench -run XXX -bench TrainStep -benchtime 10x
//	go test ./bench -run XXX -bench TrainStep/rope -cpuprofile cpu.prof
func BenchmarkTrainStep(b *testing.B) {
	sh := ReferenceShape()
	for _, pos := range Encodings {
		b.Run(pos, func(b *testing.B) {
			r, err := newGoRunner(sh, pos)
			if err != nil {
				b.Fatal(err)
			}
			defer r.close()
			if _, _, err := r.time(1, 0); err != nil { // warm-up: buffers, tables
				b.Fatal(err)
			}
			b.ResetTimer()
			if _, _, err := r.time(0, b.N); err != nil {
				b.Fatal(err)
			}
			s := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(1000*s, "ms/step")
			b.ReportMetric(float64(sh.Tokens())/s, "tokens/s")
			b.ReportMetric(StepFLOPs(sh, pos)/s/1e9, "GFLOP/s")
		})
	}
}

// TestGoSteps runs two training steps of a small model per encoding and
// checks that the loss is finite (the benchmark's Go side works).
func TestGoSteps(t *testing.T) {
	sh := Shape{Batch: 2, Seq: 16, DModel: 32, Heads: 4, Layers: 2, FFN: 64, Vocab: 256}
	for _, pos := range Encodings {
		r, err := newGoRunner(sh, pos)
		if err != nil {
			t.Fatal(err)
		}
		times, loss, err := r.time(1, 1)
		r.close()
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		if len(times) != 1 || math.IsNaN(loss) || math.IsInf(loss, 0) || loss <= 0 {
			t.Fatalf("%s: times %v, loss %v", pos, times, loss)
		}
	}
}

// TestStepFLOPs checks the FLOP count of the reference configuration by
// hand: per layer 4 projections 2·2048·128·128, FFN 2·2·2048·128·512,
// attention 2·2·32·4·64·64·32; head 2·2048·128·256; times 3.
func TestStepFLOPs(t *testing.T) {
	sh := Shape{Batch: 32, Seq: 64, DModel: 128, Heads: 4, Layers: 2, FFN: 512, Vocab: 256}
	layer := 4*2*2048*128*128.0 + 2*2*2048*128*512.0 + 2*2*32*4*64*64*32.0
	want := 3 * (2*layer + 2*2048*128*256.0)
	if got := StepFLOPs(sh, "none"); got != want {
		t.Fatalf("StepFLOPs(none) = %v, want %v", got, want)
	}
	if StepFLOPs(sh, "xl") <= want || StepFLOPs(sh, "shaw") <= want || StepFLOPs(sh, "deberta") <= want {
		t.Fatal("relative encodings must count their extra products")
	}
	if StepFLOPs(sh, "rope") != want || StepFLOPs(sh, "alibi") != want {
		t.Fatal("rope and alibi add no products")
	}
}

// TestEvalChild runs the Go side of -eval on a small model: one report with
// the timed passes of every thread count, a finite loss near ln 256 (random
// weights), and a peak RSS at least the baseline.
func TestEvalChild(t *testing.T) {
	sh := Shape{Batch: 2, Seq: 32, DModel: 32, Heads: 4, Layers: 2, FFN: 64, Vocab: 256}
	var buf strings.Builder
	if err := evalChild(&buf, sh, "alibi", []int{1, 2}, 1, 2); err != nil {
		t.Fatal(err)
	}
	var rep evalReport
	if err := json.Unmarshal([]byte(buf.String()), &rep); err != nil {
		t.Fatalf("report %q: %v", buf.String(), err)
	}
	if len(rep.Times["1t"]) != 2 || len(rep.Times["2t"]) != 2 {
		t.Fatalf("times %v, want 2 passes at 1t and 2t", rep.Times)
	}
	if math.Abs(rep.Loss-math.Log(256)) > 0.5 {
		t.Fatalf("loss %v, want about ln 256 = %.3f", rep.Loss, math.Log(256))
	}
	if rep.PeakRSS != 0 && rep.PeakRSS < rep.BaseRSS { // 0 where /proc is missing
		t.Fatalf("peak RSS %d below the baseline %d", rep.PeakRSS, rep.BaseRSS)
	}
	o, err := parseFlags([]string{"-eval"})
	if err != nil {
		t.Fatal(err)
	}
	if o.shape.Batch != 4 || o.shape.Seq != 512 {
		t.Fatalf("-eval geometry %d x %d, want 4 x 512", o.shape.Batch, o.shape.Seq)
	}
}

// BenchmarkEval8L times one evaluation pass at 8L (EvalShape: 4 windows of
// 512 tokens, forward only, as the extrapolation study scores them) for
// every encoding:
//
//	go test ./bench -run XXX -bench Eval8L -benchtime 10x
func BenchmarkEval8L(b *testing.B) {
	sh := EvalShape()
	for _, pos := range Encodings {
		b.Run(pos, func(b *testing.B) {
			var sink strings.Builder
			if err := evalChild(&sink, sh, pos, []int{runtime.GOMAXPROCS(0)}, 1, b.N); err != nil {
				b.Fatal(err)
			}
			var rep evalReport
			if err := json.Unmarshal([]byte(sink.String()), &rep); err != nil {
				b.Fatal(err)
			}
			_, s := bestTime(rep.Times)
			b.ReportMetric(1000*s/float64(sh.Tokens()), "ms/token")
			b.ReportMetric(float64(sh.Tokens())/s, "tokens/s")
		})
	}
}

// TestStreamKeepsPyTorch: -stream is how the Go side computes attention,
// not a model option, so -eval -stream keeps the PyTorch side; a real model
// option still needs -go-only.
func TestStreamKeepsPyTorch(t *testing.T) {
	o, err := parseFlags([]string{"-eval", "-stream"})
	if err != nil {
		t.Fatalf("-eval -stream: %v", err)
	}
	if o.goOnly || !o.shape.Base.Model.Stream {
		t.Fatalf("-eval -stream: go-only %v, stream %v", o.goOnly, o.shape.Base.Model.Stream)
	}
	if _, err := parseFlags([]string{"-eval", "-t5-max-distance", "64"}); err == nil || !strings.Contains(err.Error(), "-go-only") {
		t.Fatalf("-eval -t5-max-distance 64: error %v, want one asking for -go-only", err)
	}
}
