package trainer

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/optim"
)

// TestResume: 6 updates in one go and 3 + save + load + 3 give exactly the
// same losses and the same final weights.
func TestResume(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		cfg := tinyConfig()
		cfg.Dtype = dt
		full := newTiny(t, cfg)
		want := trainN(t, full, 6)

		a := newTiny(t, cfg)
		got := trainN(t, a, 3)
		path := filepath.Join(t.TempDir(), "ck.safetensors")
		if err := a.Save(path); err != nil {
			t.Fatal(err)
		}
		b := newTiny(t, cfg)
		if err := b.Load(path); err != nil {
			t.Fatal(err)
		}
		got = append(got, trainN(t, b, 3)...)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: losses %v, uninterrupted %v", dt, got, want)
			}
		}
		for _, n := range full.Params.Names() {
			x, y := full.Params.Float64s(n), b.Params.Float64s(n)
			for i := range x {
				if x[i] != y[i] {
					t.Fatalf("%v: param %s differs after resume", dt, n)
				}
			}
		}
		// Training makes progress and the losses are not all equal.
		if !(want[5] < want[0]) {
			t.Errorf("%v: loss did not decrease: %v", dt, want)
		}
	}
}

// TestTrainStepDetails checks the schedule, the weight-decay flags and the
// gradient zeroing of one update.
func TestTrainStepDetails(t *testing.T) {
	cfg := tinyConfig()
	cfg.Warmup, cfg.Steps = 4, 10
	tr := newTiny(t, cfg)
	for s := 0; s < 3; s++ {
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if want := cfg.LR * float64(s+1) / 4; math.Abs(r.LR-want) > 1e-15 || r.Step != s+1 {
			t.Errorf("update %d: lr %g step %d, want %g %d", s, r.LR, r.Step, want, s+1)
		}
		if !(r.GradNorm > 0) {
			t.Errorf("grad norm %v", r.GradNorm)
		}
	}
	ps, err := tr.optParams()
	if err != nil {
		t.Fatal(err)
	}
	if optim.GradNorm(ps) != 0 {
		t.Error("gradients not zero after an update")
	}
	decayed := map[string]bool{}
	for _, p := range ps {
		decayed[p.Name] = !p.NoDecay
	}
	for name, want := range map[string]bool{"tok_emb": true, "head/w": true, "block0/attn/wq": true,
		"block0/attn/bq": false, "block0/ln1/gamma": false, "ln_f/beta": false} {
		if got, ok := decayed[name]; !ok || got != want {
			t.Errorf("%s: decayed %v (present %v), want %v", name, got, ok, want)
		}
	}
	if sched := tr.Sched; sched.LR(cfg.Steps) != cfg.LR*cfg.FloorFrac {
		t.Errorf("final lr %g", sched.LR(cfg.Steps))
	}
}

// TestNaNStops: a NaN loss stops Run with an error naming the update, and
// the checkpoint on disk is still the last good one.
func TestNaNStops(t *testing.T) {
	cfg := tinyConfig()
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	var good []byte
	_, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, SaveEvery: 2, testHook: func(tr *Trainer) {
		if tr.Step() == 3 {
			good, _ = os.ReadFile(path)
			d := tr.Params.Value("head/w").Data().([]float64)
			d[5] = math.NaN()
		}
	}})
	wantErr(t, err, "step 4", "loss is NaN", "last good")
	if len(good) == 0 {
		t.Fatal("no checkpoint was written at step 2")
	}
	now, _ := os.ReadFile(path)
	if !bytes.Equal(now, good) {
		t.Fatal("the checkpoint changed")
	}
	ck, err := LoadCheckpoint(path)
	if err != nil || ck.Step != 2 {
		t.Fatalf("checkpoint step %v, err %v", ck, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 || filepath.Join(dir, ents[0].Name()) != MetricsPath(path) {
		t.Errorf("files in the checkpoint directory: %v (want the checkpoint and %s)", ents, MetricsPath(path))
	}

	// A NaN gradient with a finite loss is caught too, and nothing moves.
	tr := newTiny(t, cfg)
	trainN(t, tr, 1)
	before := tr.Params.Float64s("block0/attn/wq")
	tr.Params.Value("block0/ln1/gamma").Data().([]float64)[0] = math.Inf(1)
	_, err = tr.TrainStep()
	if err == nil {
		t.Fatal("an infinite weight did not stop training")
	}
	wantErr(t, err, "step 2")
	after := tr.Params.Float64s("block0/attn/wq")
	for i := range before {
		if before[i] != after[i] {
			t.Fatal("weights moved on a failed update")
		}
	}
	if tr.Step() != 1 {
		t.Errorf("step %d after a failed update", tr.Step())
	}
}

// TestRun: a run saves, a second run with more steps resumes automatically,
// and -fresh starts over.
func TestRun(t *testing.T) {
	cfg := tinyConfig()
	cfg.Steps = 3
	cfg.EvalEvery = 2
	path := filepath.Join(t.TempDir(), "run", "ck.safetensors")
	var log bytes.Buffer
	s, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, SampleLen: 20, Prompt: "The ", Temperature: 1, Log: &log, Progress: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Steps != 3 || len(s.Losses) != 3 || len(s.Sample) != 20 || !(s.Val.BitsPerByte > 0) || s.TokensPerSec <= 0 {
		t.Errorf("summary %+v", s)
	}
	for _, sub := range []string{"step 2: train loss", "val ", "bits/byte", "ms/step", "tokens/s", "sample"} {
		if !bytes.Contains(log.Bytes(), []byte(sub)) {
			t.Errorf("log lacks %q:\n%s", sub, log.String())
		}
	}
	cfg.Steps = 5
	s2, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path})
	if err != nil {
		t.Fatal(err)
	}
	if s2.StartStep != 3 || s2.Steps != 5 || len(s2.Losses) != 2 {
		t.Errorf("resumed run: %+v", s2)
	}
	// The resumed run continues the uninterrupted one exactly.
	ref := newTiny(t, cfg)
	want := trainN(t, ref, 5)
	if s.Losses[2] != want[2] || s2.Losses[0] != want[3] || s2.Losses[1] != want[4] {
		t.Errorf("losses %v + %v, uninterrupted %v", s.Losses, s2.Losses, want)
	}
	s3, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, Fresh: true})
	if err != nil || s3.StartStep != 0 || len(s3.Losses) != 5 {
		t.Errorf("fresh run: %+v %v", s3, err)
	}
	// A checkpoint of another model is refused with a hint.
	other := cfg
	other.Model.DModel = 32
	_, err = Run(context.Background(), other, tinyCorpus(t), RunOptions{Ckpt: path})
	wantErr(t, err, "d-model=16", "-fresh")
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Resume: filepath.Join(t.TempDir(), "none.safetensors")})
	wantErr(t, err, "none.safetensors")
}

// TestEvalNoGradLeak: evaluating between updates does not change training.
func TestEvalNoGradLeak(t *testing.T) {
	cfg := tinyConfig()
	a, b := newTiny(t, cfg), newTiny(t, cfg)
	want := trainN(t, a, 4)
	var got []float64
	for i := 0; i < 4; i++ {
		if _, err := Evaluate(b.Params, cfg.Model, b.Corpus.Val, EvalOptions{Len: 8}); err != nil {
			t.Fatal(err)
		}
		got = append(got, trainN(t, b, 1)...)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("losses with evaluations %v, without %v", got, want)
		}
	}
}
