// Command train trains the reference byte-level language model on a text
// (default: Newton's Opticks from GOROOT), shows a progress bar, evaluates
// the validation bits per byte, saves and resumes checkpoints, prints a
// sample and a summary line.
//
//	go run ./experiments/train                 # reference run, pos=none
//	go run ./experiments/train -pos rope -steps 500 -eval-every 100
//
// Bad flags exit with status 2, a failed run with status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

func main() {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ExitOnError)
	corpus := fs.String("corpus", "", "text file to train on (default: $GOROOT/src/testdata/Isaac.Newton-Opticks.txt)")
	pos := fs.String("pos", "none", "position encoding: "+strings.Join(posenc.Names(), ", "))
	dtype := fs.String("dtype", "float32", "float32 or float64")
	ckpt := fs.String("ckpt", "", "checkpoint file (default runs/train/<pos>/ckpt.safetensors)")
	resume := fs.String("resume", "", "resume from this checkpoint instead of -ckpt")
	fresh := fs.Bool("fresh", false, "start from scratch even if the checkpoint exists")
	saveEvery := fs.Int("save-every", 100, "save a checkpoint every N steps (0: only at the end)")
	sample := fs.Int("sample", 200, "bytes of sample text to generate at the end (0: none)")
	prompt := fs.String("prompt", "Light ", "prompt of the sample")
	temp := fs.Float64("temp", 0.8, "sampling temperature (<= 0: greedy)")
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "training steps")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "batch size")
	fs.IntVar(&cfg.SeqLen, "seq", cfg.SeqLen, "training sequence length L")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "peak learning rate")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed")
	fs.IntVar(&cfg.Model.DModel, "d", cfg.Model.DModel, "model width")
	fs.IntVar(&cfg.Model.Heads, "heads", cfg.Model.Heads, "attention heads")
	fs.IntVar(&cfg.Model.Layers, "layers", cfg.Model.Layers, "blocks")
	fs.IntVar(&cfg.Model.FFN, "ffn", cfg.Model.FFN, "feed-forward width")
	fs.IntVar(&cfg.EvalEvery, "eval-every", cfg.EvalEvery, "evaluate every N steps (0: only at the end)")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}

	var err error
	if cfg.Dtype, err = trainer.ParseDtype(*dtype); err != nil {
		usage(err)
	}
	cfg.Model.Pos = *pos
	cfg.Model.PosOpts.MaxLen = cfg.SeqLen // a learned table covers the training length
	if err := cfg.Validate(); err != nil {
		usage(err)
	}
	if *saveEvery < 0 || *sample < 0 {
		usage(fmt.Errorf("-save-every %d and -sample %d must not be negative", *saveEvery, *sample))
	}
	if *ckpt == "" {
		*ckpt = filepath.Join("runs", "train", *pos, "ckpt.safetensors")
	}
	c, err := trainer.LoadCorpus(*corpus)
	if err != nil {
		usage(err)
	}
	if err := c.CheckWindow(cfg.SeqLen); err != nil {
		usage(err)
	}
	// Ctrl-C (or SIGTERM) stops before the next update and saves the
	// checkpoint; a second signal kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	_, err = trainer.Run(ctx, cfg, c, trainer.RunOptions{
		Ckpt: *ckpt, Resume: *resume, Fresh: *fresh, SaveEvery: *saveEvery,
		SampleLen: *sample, Prompt: *prompt, Temperature: *temp,
		Progress: os.Stderr, Log: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

// usage reports a bad invocation and exits with status 2.
func usage(err error) {
	fmt.Fprintf(os.Stderr, "train: %v\n(run with -h for the flags)\n", err)
	os.Exit(2)
}
