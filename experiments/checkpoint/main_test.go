package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
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
