package trainer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/posenc"
)

// sourceRun trains cfg for its steps into a checkpoint and returns its path.
func sourceRun(t *testing.T, cfg Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src.safetensors")
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInitFrom: a run with InitFrom at another sequence length starts from
// the source's weights (checked before its first update), with a fresh
// optimizer and step 0; its checkpoints record the source; resuming it
// checks the source's bytes; a resumption without InitFrom is accepted.
func TestInitFrom(t *testing.T) {
	src := tinyConfig()
	src.Model.Pos = posenc.RopePlain
	src.Steps = 3
	srcPath := sourceRun(t, src)
	srcCk, err := LoadCheckpoint(srcPath)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := InitConfig(srcCk.Config, Config{SeqLen: 16, Steps: 2, Model: srcCk.Config.Model}, func(n string) bool { return n == "seq-len" || n == "steps" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SeqLen != 16 || cfg.Steps != 2 || cfg.Batch != src.Batch || cfg.Model.Pos != posenc.RopePlain {
		t.Fatalf("InitConfig: %+v", cfg)
	}
	path := filepath.Join(t.TempDir(), "ft.safetensors")
	var log bytes.Buffer
	checked := false
	opt := RunOptions{Ckpt: path, InitFrom: srcPath, NoEval: true, Log: &log, SaveEvery: 1,
		testHook: func(tr *Trainer) {
			if tr.Step() != 0 || checked {
				return
			}
			checked = true
			for n, w := range srcCk.Params {
				if !reflect.DeepEqual(tr.Params.Float64s(n), w.Data) {
					t.Errorf("parameter %s is not the source's before the first update", n)
				}
			}
			if st := tr.Opt.State(); len(st) != 1 { // a new AdamW holds only its learning rate
				t.Errorf("optimizer state is not fresh: %d entries", len(st))
			}
		}}
	sum, err := Run(context.Background(), cfg, tinyCorpus(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	if !checked || sum.StartStep != 0 || sum.Steps != 2 || sum.Init == nil || sum.Init.Step != 3 {
		t.Fatalf("checked %v start %d steps %d init %+v", checked, sum.StartStep, sum.Steps, sum.Init)
	}
	wantErr(t, errorOf(log.String()), "initialised from "+srcPath+" (step 3", "seq-len 8 -> 16", "steps 3 -> 2")
	ck, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fileHash(srcPath)
	if ck.Init == nil || ck.Init.SHA256 != want || ck.Init.Path != srcPath || ck.Init.Kind != "checkpoint" ||
		ck.Init.Config.SeqLen != 8 || ck.Config.SeqLen != 16 {
		t.Fatalf("recorded init %+v, config seq-len %d", ck.Init, ck.Config.SeqLen)
	}

	// Resuming with the same source, or without one, continues; another
	// source is refused.
	cfg.Steps = 3
	log.Reset()
	if sum, err = Run(context.Background(), cfg, tinyCorpus(t), opt); err != nil || sum.StartStep != 2 || sum.Init == nil {
		t.Fatalf("resume with -init-from: %v start %d", err, sum.StartStep)
	}
	wantErr(t, errorOf(log.String()), "resumed from", "a run initialised from "+srcPath)
	cfg.Steps = 4
	opt.InitFrom = ""
	if sum, err = Run(context.Background(), cfg, tinyCorpus(t), opt); err != nil || sum.StartStep != 3 {
		t.Fatalf("resume without -init-from: %v", err)
	}
	other := sourceRun(t, src) // the same training again: a different file, equal weights
	os.WriteFile(other, append(mustRead(t, other), 0), 0o644)
	opt.InitFrom = other
	cfg.Steps = 5
	_, err = Run(context.Background(), cfg, tinyCorpus(t), opt)
	wantErr(t, err, "was initialised from "+srcPath, "-init-from "+other, "-fresh")

	// A checkpoint from scratch resumed with -init-from is refused.
	scratch := sourceRun(t, src)
	_, err = Run(context.Background(), src, tinyCorpus(t), RunOptions{Ckpt: scratch, InitFrom: srcPath, NoEval: true})
	wantErr(t, err, "is not a run initialised from other weights", "drop -init-from")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// errorOf turns a log into an error so wantErr can check its content.
func errorOf(s string) error { return &logText{s} }

type logText struct{ s string }

func (l *logText) Error() string { return l.s }

// TestInitFromWeights: an exported weights file starts a run as a
// checkpoint does (step -1 recorded), in another dtype.
func TestInitFromWeights(t *testing.T) {
	src := tinyConfig()
	tr := newTiny(t, src)
	trainN(t, tr, 2)
	wpath := filepath.Join(t.TempDir(), "w.safetensors")
	if err := ExportWeights(wpath, tr.Params, tr.Cfg); err != nil {
		t.Fatal(err)
	}
	cfg := src
	cfg.Dtype = tensor.Float32
	cfg.Steps = 1
	sum, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{InitFrom: wpath, NoEval: true,
		testHook: func(tr2 *Trainer) {
			if tr2.Step() == 0 {
				for _, n := range tr.Params.Names() {
					a, b := tr.Params.Float64s(n), tr2.Params.Float64s(n)
					for i := range a {
						if float32(a[i]) != float32(b[i]) {
							t.Fatalf("%s[%d] = %v, want float32(%v)", n, i, b[i], a[i])
						}
					}
				}
			}
		}})
	if err != nil || sum.Init == nil || sum.Init.Kind != "weights" || sum.Init.Step != -1 {
		t.Fatalf("%v %+v", err, sum)
	}
}

// TestInitFromRefused: every refusal names its cause, and nothing is
// written.
func TestInitFromRefused(t *testing.T) {
	src := tinyConfig()
	src.Model.Pos = "learned"
	src.Model.PosOpts.MaxLen = src.SeqLen
	src.Steps = 1
	srcPath := sourceRun(t, src)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ft.safetensors")
	run := func(cfg Config, opt RunOptions) error {
		if opt.Ckpt == "" {
			opt.Ckpt = ckpt
		}
		opt.NoEval = true
		_, err := Run(context.Background(), cfg, tinyCorpus(t), opt)
		return err
	}
	heads := src
	heads.Model.Heads = 4
	wantErr(t, run(heads, RunOptions{InitFrom: srcPath}), "was trained with heads=2", "this run asks for heads=4")
	longer := src
	longer.SeqLen, longer.Model.PosOpts.MaxLen = 16, 16
	wantErr(t, run(longer, RunOptions{InitFrom: srcPath}), "-init-from "+srcPath, "pos_emb", "(8, 16)", "(16, 16)")
	t5 := src
	t5.Model.Pos = "t5"
	wantErr(t, run(t5, RunOptions{InitFrom: srcPath}), "missing parameter")
	wantErr(t, run(src, RunOptions{InitFrom: srcPath, Resume: srcPath}), "-init-from and -resume contradict")
	wantErr(t, run(src, RunOptions{InitFrom: srcPath, Ckpt: srcPath}), "is the run's own checkpoint")
	wantErr(t, run(src, RunOptions{InitFrom: filepath.Join(dir, "missing")}), "-init-from", "missing")
	if _, err := os.Stat(ckpt); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote %s", ckpt)
	}
	_, err := InitConfig(src, heads, func(n string) bool { return n == "heads" })
	wantErr(t, err, "-heads 4 conflicts with the source's heads=2", "keeps vocab, d-model, heads")
}

// TestInitConfigRope: from plain RoPE trained at L, a scaling at L' gets
// rope-train-len L and rope-scale L'/L unless given; max-len follows
// seq-len; given values are kept.
func TestInitConfigRope(t *testing.T) {
	src := DefaultConfig()
	src.Model.Pos = posenc.RopePlain
	src.SeqLen, src.Model.PosOpts.MaxLen = 512, 512
	asked := src
	asked.SeqLen, asked.Model.Pos = 2048, posenc.RopePI
	given := map[string]bool{"seq-len": true, "pos": true}
	cfg, err := InitConfig(src, asked, func(n string) bool { return given[n] })
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Model.PosOpts
	if cfg.SeqLen != 2048 || cfg.Model.Pos != posenc.RopePI || o.RopeTrainLen != 512 || o.RopeScale != 4 || o.MaxLen != 2048 {
		t.Fatalf("%+v", cfg)
	}
	asked.Model.PosOpts.RopeScale = 8
	given["rope-scale"] = true
	if cfg, _ = InitConfig(src, asked, func(n string) bool { return given[n] }); cfg.Model.PosOpts.RopeScale != 8 {
		t.Errorf("given rope-scale replaced: %v", cfg.Model.PosOpts.RopeScale)
	}
	asked.Model.Pos = posenc.RopePlain
	delete(given, "rope-scale")
	if cfg, _ = InitConfig(src, asked, func(n string) bool { return given[n] }); cfg.Model.PosOpts.RopeScale != 1 || cfg.Model.PosOpts.RopeTrainLen != 64 {
		t.Errorf("plain rope changed: %+v", cfg.Model.PosOpts)
	}
}

// TestKeepAt: KeepAt keeps the checkpoint of each listed step beside the
// run's own, equal to what the run saved at that step, also across a
// resumption; bad values are refused.
func TestKeepAt(t *testing.T) {
	cfg := tinyConfig()
	cfg.Steps = 5
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.safetensors")
	stop := RunOptions{Ckpt: ck, KeepAt: []int{1, 4}, NoEval: true,
		BeforeStep: func(s int) error {
			if s == 2 {
				return context.Canceled
			}
			return nil
		}}
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), stop); err == nil {
		t.Fatal("no interruption")
	}
	stop.BeforeStep = nil
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), stop); err != nil {
		t.Fatal(err)
	}
	ref := newTiny(t, cfg)
	for _, step := range []int{1, 4} {
		trainN(t, ref, map[int]int{1: 1, 4: 3}[step])
		got, err := LoadCheckpoint(KeepPath(ck, step))
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != step {
			t.Fatalf("kept checkpoint of step %d is at step %d", step, got.Step)
		}
		for _, n := range ref.Params.Names() {
			if !reflect.DeepEqual(got.Params[n].Data, ref.Params.Float64s(n)) {
				t.Fatalf("kept checkpoint of step %d: %s differs from an uninterrupted run's", step, n)
			}
		}
	}
	if _, err := os.Stat(KeepPath(ck, 2)); !os.IsNotExist(err) {
		t.Errorf("a checkpoint kept at step 2, which KeepAt does not list")
	}
	if KeepPath("a/ckpt.safetensors", 25) != "a/ckpt.step25.safetensors" {
		t.Errorf("KeepPath %s", KeepPath("a/ckpt.safetensors", 25))
	}
	wantErr(t, RunOptions{KeepAt: []int{3}}.Check(), "needs a checkpoint path")
	wantErr(t, RunOptions{Ckpt: ck, KeepAt: []int{0}}.Check(), "keep-at step 0 must be positive")
}
