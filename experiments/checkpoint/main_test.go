package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/codestudy"
	"github.com/rpe-go/rpe/experiments/copetasks"
	"github.com/rpe-go/rpe/experiments/graphstudy"
	"github.com/rpe-go/rpe/experiments/timestudy"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/visionstudy"
	"github.com/rpe-go/rpe/layers"
)

// TestSubcommands trains a tiny model and runs every subcommand on its
// checkpoint, with good and bad usage.
func TestSubcommands(t *testing.T) {
	dir := t.TempDir()
	text := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 20))
	corpus := filepath.Join(dir, "c.txt")
	os.WriteFile(corpus, text, 0o644)
	c, err := trainer.LoadCorpus(corpus)
	if err != nil {
		t.Fatal(err)
	}
	cfg := trainer.DefaultConfig()
	cfg.Model = layers.Config{Vocab: 256, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Eps: 1e-5, InitStd: 0.02, Causal: true, Pos: "learned"}
	cfg.Model.PosOpts.MaxLen = 8
	cfg.Batch, cfg.SeqLen, cfg.Steps, cfg.Warmup, cfg.EvalBatch, cfg.Dtype = 2, 8, 3, 1, 4, tensor.Float64
	ck := filepath.Join(dir, "ck.safetensors")
	if _, err := trainer.Run(context.Background(), cfg, c, trainer.RunOptions{Ckpt: ck}); err != nil {
		t.Fatal(err)
	}
	do := func(want int, args ...string) string {
		t.Helper()
		var out, errw bytes.Buffer
		if got := run(args, &out, &errw); got != want {
			t.Errorf("checkpoint %q: exit %d, want %d\n%s%s", args, got, want, out.String(), errw.String())
		}
		return out.String() + errw.String()
	}
	out := do(0, "eval", "-ckpt", ck, "-len", "8,16", "-last-n", "4")
	for _, s := range []string{"BLAS", "Le=8 all targets:", "Le=8 last 4 of each window:", "Le=16: n/a"} {
		if !strings.Contains(out, s) {
			t.Errorf("eval output lacks %q:\n%s", s, out)
		}
	}
	out = do(0, "eval", "-ckpt", ck, "-protocol", "full", "-protocol", "chunks:4", "-protocol", "stride:8:2", "-protocol", "memory:4")
	for _, s := range []string{"Le=8 full all targets:", "Le=8 chunks:4 all targets:", "Le=8 stride:8:2 all targets:", "Le=8 memory:4:4 all targets:",
		"Le=8 chunks:4 time:", "(independent chunks of 4)"} {
		if !strings.Contains(out, s) {
			t.Errorf("eval -protocol output lacks %q:\n%s", s, out)
		}
	}
	// every protocol scores the same targets
	if n := strings.Count(out, "all targets: "); n != 4 {
		t.Errorf("%d protocol lines, want 4:\n%s", n, out)
	}
	for _, c := range []struct{ arg, want string }{
		{"sinks:4:0", "learned cannot slide past the window"},
		{"stride:8:9", "stride 9 must be in [1, 8]"},
		{"memory:3", "window 3 must divide the document length"},
		{"chunk", `unknown name "chunk"`},
	} {
		code := 2
		if c.arg == "sinks:4:0" {
			code = 1
		}
		if out := do(code, "eval", "-ckpt", ck, "-protocol", c.arg); !strings.Contains(out, c.want) {
			t.Errorf("-protocol %s: output lacks %q:\n%s", c.arg, c.want, out)
		}
	}
	// Another text at the recorded path is refused unless given explicitly.
	os.WriteFile(corpus, bytes.ToUpper(text), 0o644)
	if out := do(1, "eval", "-ckpt", ck); !strings.Contains(out, "pass -corpus explicitly") {
		t.Errorf("changed corpus:\n%s", out)
	}
	do(0, "eval", "-ckpt", ck, "-corpus", corpus)
	if out := do(0, "sample", "-ckpt", ck, "-len", "10", "-prompt", "The ", "-temp", "0.5"); !strings.Contains(out, "The ") {
		t.Errorf("sample: %s", out)
	}
	w := filepath.Join(dir, "w.safetensors")
	do(0, "export", "-ckpt", ck, "-out", w)
	if _, err := os.Stat(w); err != nil {
		t.Error(err)
	}
	out = do(0, "info", "-ckpt", ck)
	for _, s := range []string{"step: 3 of 3", "SHA-256 " + c.Hash(), "pos_emb", "rpe-go/trainer/v2", `"Pos": "learned"`} {
		if !strings.Contains(out, s) {
			t.Errorf("info lacks %q:\n%s", s, out)
		}
	}
	do(2)
	do(2, "frobnicate")
	do(2, "eval")
	do(2, "eval", "-ckpt", ck, "-len", "0")
	do(2, "export", "-ckpt", ck)
	do(2, "info", "-ckpt", ck, "extra")
	do(1, "info", "-ckpt", filepath.Join(dir, "none"))
}

// tinyLM trains a tiny language model for 2 updates in dir and returns its
// checkpoint.
func tinyLM(t *testing.T, dir string) string {
	t.Helper()
	corpus := filepath.Join(dir, "c.txt")
	os.WriteFile(corpus, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)), 0o644)
	c, err := trainer.LoadCorpus(corpus)
	if err != nil {
		t.Fatal(err)
	}
	cfg := trainer.DefaultConfig()
	cfg.Model = layers.Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 1, FFN: 16, Eps: 1e-5, InitStd: 0.02, Causal: true, Pos: "rope"}
	cfg.Batch, cfg.SeqLen, cfg.Steps, cfg.Warmup, cfg.EvalBatch = 2, 8, 2, 1, 4
	ck := filepath.Join(dir, "lm.ckpt")
	if _, err := trainer.Run(context.Background(), cfg, c, trainer.RunOptions{Ckpt: ck}); err != nil {
		t.Fatal(err)
	}
	return ck
}

// writeViT writes a checkpoint of kind "vit" (as the vision study's
// trainer.RunTask does: task "vit", a task configuration, an encoder
// config without a vocabulary) to path.
func writeViT(t *testing.T, path string) *trainer.Checkpoint {
	t.Helper()
	cfg := trainer.DefaultConfig()
	cfg.Model = layers.Config{DModel: 4, Heads: 1, Layers: 1, FFN: 8, Eps: 1e-5, InitStd: 0.02, Pos: "rope-2d"}
	cfg.Steps = 3
	ck := &trainer.Checkpoint{Config: cfg, Step: 3, Task: "vit", TaskConfig: []byte(`{"patch":4,"classes":10}`), Params: map[string]trainer.Tensor{
		"patch_embed/w": {Shape: []int{16, 4}, Data: make([]float64, 64)},
		"patch_embed/b": {Shape: []int{4}, Data: []float64{1, 2, 3, 4}},
		"head/w":        {Shape: []int{4, 10}, Data: make([]float64, 40)},
	}}
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	return ck
}

// runCmd runs the command and checks its exit status; it returns stdout and
// stderr.
func runCmd(t *testing.T, want int, args ...string) (string, string) {
	t.Helper()
	var out, errw bytes.Buffer
	if got := run(args, &out, &errw); got != want {
		t.Errorf("checkpoint %q: exit %d, want %d\n%s%s", args, got, want, out.String(), errw.String())
	}
	return out.String(), errw.String()
}

func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, w := range subs {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

// TestExportRefusesSource: export -out naming the checkpoint itself (by
// another path too), another training checkpoint or another file is
// refused with status 2 naming -out and -force, the file unchanged; a
// directory is refused even with -force; -force overwrites; an existing
// weights file is replaced (atomically: a new file renamed over it).
func TestExportRefusesSource(t *testing.T) {
	dir := t.TempDir()
	ck := tinyLM(t, dir)
	orig, _ := os.ReadFile(ck)
	unchanged := func(path string, want []byte) {
		t.Helper()
		if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
			t.Errorf("%s changed (%d bytes, was %d)", path, len(b), len(want))
		}
	}
	_, e := runCmd(t, 2, "export", "-ckpt", ck, "-out", ck)
	contains(t, "export -out = -ckpt", e, "-out "+ck, "is the checkpoint", "-force")
	unchanged(ck, orig)
	// The same file by another name.
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	_, e = runCmd(t, 2, "export", "-ckpt", ck, "-out", filepath.Join(dir, "sub", "..", "lm.ckpt"))
	contains(t, "export -out = -ckpt by another path", e, "is the checkpoint", "-force")
	unchanged(ck, orig)
	other := filepath.Join(dir, "other.ckpt")
	os.WriteFile(other, orig, 0o644)
	_, e = runCmd(t, 2, "export", "-ckpt", ck, "-out", other)
	contains(t, "export over another checkpoint", e, "-out "+other, "holds a training checkpoint", "-force")
	unchanged(other, orig)
	text := filepath.Join(dir, "c.txt")
	before, _ := os.ReadFile(text)
	_, e = runCmd(t, 2, "export", "-ckpt", ck, "-out", text)
	contains(t, "export over a text", e, "-out "+text, "not an exported weights file", "-force")
	unchanged(text, before)
	_, e = runCmd(t, 2, "export", "-ckpt", ck, "-out", dir, "-force")
	contains(t, "export -out DIR", e, "-out "+dir, "is a directory")
	unchanged(ck, orig)

	// A weights file is replaced, by rename.
	w := filepath.Join(dir, "w.safetensors")
	runCmd(t, 0, "export", "-ckpt", ck, "-out", w)
	st1, _ := os.Stat(w)
	runCmd(t, 0, "export", "-ckpt", ck, "-out", w)
	st2, err := os.Stat(w)
	if err != nil || os.SameFile(st1, st2) {
		t.Errorf("the second export did not replace %s by a new file (err %v)", w, err)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".w.safetensors.tmp-*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	// -force overwrites another checkpoint.
	runCmd(t, 0, "export", "-ckpt", ck, "-out", other, "-force")
	if k, _, _ := trainer.FileFormat(other); k != trainer.FormatWeights {
		t.Errorf("after -force, %s holds %s", other, k)
	}
	unchanged(ck, orig)
}

// TestCheckpointKindMessage: eval and sample of a ViT checkpoint exit with
// status 2 naming its kind and the command that serves it (not "vocab 0");
// export writes its weights with the kind; info names the kind.
func TestCheckpointKindMessage(t *testing.T) {
	dir := t.TempDir()
	vit := filepath.Join(dir, "vit.ckpt")
	ck := writeViT(t, vit)
	for _, sub := range []string{"eval", "sample"} {
		_, e := runCmd(t, 2, sub, "-ckpt", vit)
		contains(t, sub+" of a vit checkpoint", e, "checkpoint "+sub+": "+vit+" holds a vit model", "ViT image classifier",
			"not a byte language model", "go run ./experiments/vision", "checkpoint info -ckpt "+vit)
		if strings.Contains(e, "vocab") {
			t.Errorf("%s: %s", sub, e)
		}
	}
	w := filepath.Join(dir, "vit.weights")
	o, _ := runCmd(t, 0, "export", "-ckpt", vit, "-out", w)
	contains(t, "export of a vit checkpoint", o, "the weights of a vit model (a ViT image classifier", "step 3", "108 parameters in 3 tensors")
	o, _ = runCmd(t, 0, "info", "-ckpt", vit)
	contains(t, "info of a vit checkpoint", o, "kind: vit (a ViT image classifier", "go run ./experiments/vision", "patch_embed/w")
	got, err := trainer.LoadWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	if got.Task != "vit" || string(got.TaskConfig) != string(ck.TaskConfig) || len(got.Params) != 3 || got.Params["patch_embed/b"].Data[3] != 4 {
		t.Errorf("exported %+v", got)
	}
	// A kind this build does not know is named too.
	ck.Task = "audio"
	ck.Save(vit)
	_, e := runCmd(t, 2, "eval", "-ckpt", vit)
	contains(t, "eval of an unknown kind", e, "holds a audio model", "no command of this build evaluates it")
}

// TestInfoReadsExport: info of an exported weights file prints its format,
// kind, configuration and parameters; eval of it names what it is.
func TestInfoReadsExport(t *testing.T) {
	dir := t.TempDir()
	ck := tinyLM(t, dir)
	w := filepath.Join(dir, "w.safetensors")
	runCmd(t, 0, "export", "-ckpt", ck, "-out", w)
	o, _ := runCmd(t, 0, "info", "-ckpt", w)
	contains(t, "info of weights", o, "weights "+w, "rpe-go/weights/v1 (exported weights", "kind: lm (a byte-level language model",
		`"Pos": "rope"`, "tok_emb", "[256 8]", "head/w")
	_, e := runCmd(t, 1, "eval", "-ckpt", w)
	contains(t, "eval of weights", e, "exported weights file", "not a training checkpoint")
}

// TestKindsCoverTasks: every task of the project has its kind in
// trainer.Kinds, with a command.
func TestKindsCoverTasks(t *testing.T) {
	for _, task := range []trainer.Task{(*trainer.LMTask)(nil), (*visionstudy.Task)(nil), (*graphstudy.Task)(nil), (*timestudy.Task)(nil),
		(*codestudy.Task)(nil), (*copetasks.Task)(nil)} {
		k := trainer.KindOf(task.Kind())
		if !k.Known || k.Command == "" || k.Model == "" {
			t.Errorf("task %T of kind %q: %+v", task, task.Kind(), k)
		}
	}
	if n := len(trainer.Kinds()); n != 6 {
		t.Errorf("%d kinds, the test knows 6 tasks", n)
	}
}

// TestInfoInitFrom: info of a run started from other weights names its
// source (path, kind, step, hash, training length); one from scratch does
// not.
func TestInfoInitFrom(t *testing.T) {
	dir := t.TempDir()
	src := tinyLM(t, dir)
	o, _ := runCmd(t, 0, "info", "-ckpt", src)
	if strings.Contains(o, "initialised from") {
		t.Errorf("info of a run from scratch names a source:\n%s", o)
	}
	ck, err := trainer.LoadCheckpoint(src)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ck.Config
	cfg.SeqLen, cfg.Steps = 16, 1
	c, err := trainer.LoadCorpus(filepath.Join(dir, "c.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ft := filepath.Join(dir, "ft.ckpt")
	if _, err := trainer.Run(context.Background(), cfg, c, trainer.RunOptions{Ckpt: ft, InitFrom: src, NoEval: true}); err != nil {
		t.Fatal(err)
	}
	o, _ = runCmd(t, 0, "info", "-ckpt", ft)
	contains(t, "info of a fine-tuned run", o, "initialised from: "+src+" (checkpoint, step 2, SHA-256 ", "trained at seq-len 8 with pos=rope")
}
