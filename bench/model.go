package main

import (
	"math/rand"
	"runtime"
	"time"

	"github.com/pkg/errors"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Encodings is the default list of position encodings benchmarked: every
// trained encoding of posenc, in the table order of docs/encodings.md (the RoPE
// scalings cost what rope costs).
var Encodings = trainable()

// trainable returns the trained encodings of posenc in table order, as the
// extrapolation study's list does.
func trainable() []string { return posenc.TrainableOn(posenc.PosLine) }

// Shape is the model and batch geometry shared by both sides, and the Go
// side's whole configuration.
type Shape struct {
	Batch, Seq                 int
	DModel, Heads, Layers, FFN int
	Vocab                      int
	// Base is the configuration the Go side runs (its position options,
	// init, ...); the geometry above overrides its shape fields. The PyTorch
	// side implements the reference options only (see refOptions).
	Base trainer.Config
}

// benchBase is the reference configuration as both sides run it: the
// PyTorch side adds the paper's unscaled sinusoid table (the scale does not
// change the cost).
func benchBase() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.PosOpts.SinusoidalScale = 1
	return c
}

// shapeOf returns the geometry of c, with c as the Go side's configuration.
func shapeOf(c trainer.Config) Shape {
	m := c.Model
	return Shape{Batch: c.Batch, Seq: c.SeqLen, DModel: m.DModel, Heads: m.Heads, Layers: m.Layers, FFN: m.FFN, Vocab: m.Vocab, Base: c}
}

// ReferenceShape is the reference configuration of trainer.DefaultConfig.
func ReferenceShape() Shape { return shapeOf(benchBase()) }

// EvalShape is the evaluation geometry of the extrapolation study at 8L:
// windows of 8 x 64 = 512 tokens, 4 per pass (study EvalTokens 2048).
func EvalShape() Shape {
	s := ReferenceShape()
	s.Batch, s.Seq = 4, 8*s.Seq
	return s
}

// Tokens is the number of tokens of one batch.
func (s Shape) Tokens() int { return s.Batch * s.Seq }

// config returns the trainer configuration of s with encoding pos.
func (s Shape) config(pos string) trainer.Config {
	c := s.Base
	if c.Model.Vocab == 0 { // a Shape literal without a base
		c = benchBase()
	}
	c.Batch, c.SeqLen = s.Batch, s.Seq
	c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN = s.DModel, s.Heads, s.Layers, s.FFN
	c.Model.Pos = pos
	if c.Model.PosOpts.MaxLen < s.Seq {
		c.Model.PosOpts.MaxLen = s.Seq
	}
	return c
}

// refOptions returns the model options of c (other than the geometry, the
// encoding and the Go side's Stream) that differ from the reference, as "name=value", using the
// option names of the flags: the PyTorch side cannot run them.
func refOptions(c trainer.Config) []string {
	ref := benchBase().Model
	got := c.Model
	for _, m := range []*layers.Config{&ref, &got} {
		m.DModel, m.Heads, m.Layers, m.FFN, m.Pos, m.PosOpts.MaxLen = 0, 0, 0, 0, "", 0
		// Stream is how the Go side computes the attention, not a model
		// option: PyTorch still runs (it materialises).
		m.Stream = false
	}
	a, _ := fields.Walk(&ref)
	b, _ := fields.Walk(&got)
	var out []string
	for i := range a {
		if a[i].String() != b[i].String() {
			out = append(out, b[i].Name+"="+b[i].String())
		}
	}
	if c.Dtype != tensor.Float32 {
		out = append(out, "dtype="+c.Dtype.String())
	}
	return out
}

// randomCorpus is a deterministic corpus of random bytes (the content does
// not change the cost of a step).
func randomCorpus(n int) (*trainer.Corpus, error) {
	rng := rand.New(rand.NewSource(7))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.Intn(256))
	}
	return trainer.NewCorpus(data)
}

// goRunner times training steps of the Go trainer for one encoding.
type goRunner struct {
	tr *trainer.Trainer
}

func newGoRunner(s Shape, pos string) (*goRunner, error) {
	return newGoRunnerCorpus(s, pos, 1<<16)
}

// newGoRunnerCorpus is newGoRunner on a random corpus of n bytes.
func newGoRunnerCorpus(s Shape, pos string, n int) (*goRunner, error) {
	c, err := randomCorpus(n)
	if err != nil {
		return nil, err
	}
	tr, err := trainer.New(s.config(pos), c)
	if err != nil {
		return nil, errors.WithMessagef(err, "bench: Go trainer for %s", pos)
	}
	return &goRunner{tr: tr}, nil
}

// setGoThreads sets the Go scheduler's and the graph kernels' threads
// (OpenBLAS always runs single-threaded under the kernels).
func setGoThreads(n int) {
	runtime.GOMAXPROCS(n)
	graph.SetThreads(n)
}

// time runs warmup untimed steps and returns the durations of steps timed
// ones, and the last loss.
func (r *goRunner) time(warmup, steps int) ([]float64, float64, error) {
	for i := 0; i < warmup; i++ {
		if _, err := r.tr.TrainStep(); err != nil {
			return nil, 0, err
		}
	}
	times := make([]float64, 0, steps)
	var loss float64
	for i := 0; i < steps; i++ {
		t0 := time.Now()
		res, err := r.tr.TrainStep()
		if err != nil {
			return nil, 0, err
		}
		times = append(times, time.Since(t0).Seconds())
		loss = res.Loss
	}
	return times, loss, nil
}

func (r *goRunner) close() { r.tr.Close() }
