package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRunInterrupt: a BeforeStep error or a cancelled context stops the run
// before the next update, saves the checkpoint once, and returns an error
// wrapping ErrInterrupted; running again resumes and reproduces the
// uninterrupted losses. OnStep sees every update, OnSave every write.
func TestRunInterrupt(t *testing.T) {
	cfg := tinyConfig()
	cfg.Steps = 6
	want := trainN(t, newTiny(t, cfg), 6)
	path := filepath.Join(t.TempDir(), "ck.safetensors")

	var steps, saves []int
	stopAt := errors.New("stop requested")
	opt := RunOptions{Ckpt: path, SaveEvery: 2, NoEval: true,
		BeforeStep: func(s int) error {
			if s == 3 {
				return stopAt
			}
			return nil
		},
		OnStep: func(r StepResult) {
			if !(r.Seconds > 0) {
				t.Errorf("step %d: %v seconds", r.Step, r.Seconds)
			}
			steps = append(steps, r.Step)
		},
		OnSave: func(s int) error { saves = append(saves, s); return nil },
	}
	s1, err := Run(context.Background(), cfg, tinyCorpus(t), opt)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, stopAt) {
		t.Fatalf("error %v does not wrap ErrInterrupted", err)
	}
	wantErr(t, err, "update 3 of 6", "stop requested", "run the same command again to resume")
	if len(steps) != 3 || len(saves) != 2 || saves[0] != 2 || saves[1] != 3 || s1.Val.Tokens != 0 {
		t.Errorf("steps %v saves %v val %+v", steps, saves, s1.Val)
	}
	if ck, err := LoadCheckpoint(path); err != nil || ck.Step != 3 {
		t.Fatalf("checkpoint after the interruption: %v", err)
	}

	// Interrupted right after a save: nothing new to save.
	saves = nil
	ctx, cancel := context.WithCancel(context.Background())
	opt.BeforeStep = nil
	opt.OnStep = func(r StepResult) {
		if r.Step == 4 {
			cancel()
		}
	}
	started := -1
	opt.OnStart = func(s int) { started = s }
	s2, err := Run(ctx, cfg, tinyCorpus(t), opt)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if started != 3 || len(saves) != 1 || saves[0] != 4 {
		t.Errorf("started at %d, saves %v", started, saves)
	}
	// The rest, then compare with the uninterrupted run.
	opt.OnStep, opt.NoEval = nil, false
	s3, err := Run(context.Background(), cfg, tinyCorpus(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	got := append(append(append([]float64(nil), s1.Losses...), s2.Losses...), s3.Losses...)
	if len(got) != 6 || s3.Val.Tokens == 0 {
		t.Fatalf("losses %v, val %+v", got, s3.Val)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("interrupted losses %v, uninterrupted %v", got, want)
		}
	}

	// An OnSave error stops the run; an interruption without a checkpoint
	// says it cannot be resumed.
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: filepath.Join(t.TempDir(), "b.safetensors"),
		SaveEvery: 1, OnSave: func(int) error { return errors.New("disk says no") }})
	wantErr(t, err, "disk says no", "step 1")
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{BeforeStep: func(s int) error {
		if s == 1 {
			return stopAt
		}
		return nil
	}})
	wantErr(t, err, "cannot be resumed")
	_, err = Run(ctx, cfg, tinyCorpus(t), RunOptions{Ckpt: filepath.Join(t.TempDir(), "c.safetensors")})
	wantErr(t, err, "before the first update")
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "c.safetensors")); err == nil {
		t.Error("a checkpoint was written with no update")
	}
}
