// Command train trains the reference byte-level language model on a text
// (default: Newton's Opticks from GOROOT), shows progress, evaluates the
// validation bits per byte, saves and resumes checkpoints, prints a sample
// and a summary line. Losses are printed in bits per byte (nats / ln 2).
//
//	go run ./experiments/train                 # reference run, pos=none
//	go run ./experiments/train -pos rope -steps 500 -eval-every 100
//	go run ./experiments/train -config run.json -lr 1e-3
//	go run ./experiments/train -pos t5 -t5-max-distance 64 -dump-config
//	go run ./experiments/train -pos t5 -monitor 50    # attention monitor
//	go run ./experiments/train -seq-len 4096 -batch 1 -stream -steps 8 -sample 0 -no-eval  # memory and time (docs/training.md)
//
// Every option of trainer.Config, layers.Config and posenc.Options is a
// flag (go run ./experiments/train -h lists them grouped); -config starts
// from a JSON configuration, -dump-config prints the resolved one. The run
// locks its checkpoint (<ckpt>.lock) and writes logs named after it
// (X.safetensors -> X.metrics.jsonl); with -monitor N also X.monitor.csv
// (attention entropy, score extremes, position bias RMS, one-hot fraction
// per layer and head, the gradient norm before clipping) and its figure
// X.monitor.png.
// Ctrl-C stops before the next update and saves the checkpoint; running
// the same command again resumes, and so does "go run ./experiments/train
// -ckpt X" alone: a resumed run takes its configuration and corpus from the
// checkpoint (trainer.ResumeConfig). Flags given on resume may change only
// what resuming allows (trainer.ResumeRules.Allowed: -steps, the
// learning-rate schedule, the optimizer settings, -clip-norm, -eval-every,
// -eval-batch, -stream); another flag whose value differs from the
// checkpoint's is an error naming both values.
//
// Bad flags, a configuration that cannot fit in memory and an unusable
// corpus exit with status 2; a failed or interrupted run with status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rpe-go/rpe/experiments/corpora"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	cf := trainer.BindFlags(fs, &cfg, posenc.PosLine)
	corpus := fs.String("corpus", "", "the "+corpora.FlagHelp+" to train on (default: opticks)")
	ckpt := fs.String("ckpt", "", "checkpoint file (default runs/train/<pos>/ckpt.safetensors)")
	resume := fs.String("resume", "", "resume from this checkpoint instead of -ckpt")
	fresh := fs.Bool("fresh", false, "start from scratch even if the checkpoint exists")
	initFrom := fs.String("init-from", "", "start a new run from the weights of this checkpoint or exported weights file (fine-tuning, e.g. at another -seq-len): its configuration, with the flags given; a fresh optimizer and step 0")
	saveEvery := fs.Int("save-every", 100, "save a checkpoint every N steps (0: only at the end)")
	sample := fs.Int("sample", 200, "bytes of sample text to generate at the end (0: none)")
	prompt := fs.String("prompt", "Light ", "prompt of the sample")
	temp := fs.Float64("temp", 0.8, "sampling temperature (<= 0: greedy)")
	noEval := fs.Bool("no-eval", false, "skip the final validation (periodic ones, -eval-every, still run): a training measurement without the evaluator's graph")
	monitor := fs.Int("monitor", 0, "record attention statistics per layer and head every N updates to <ckpt stem>.monitor.csv and draw <ckpt stem>.monitor.png (0: off)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	var err error
	if cfg, err = cf.Resolve(); err != nil {
		return usage(err)
	}
	if err := cf.CheckApplies([]string{cfg.Resolved().Model.Pos}); err != nil {
		return usage(err)
	}
	if !cf.Explicit("max-len") {
		cfg.Model.PosOpts.MaxLen = cfg.SeqLen // a learned table covers the training length
	}
	opt := trainer.RunOptions{
		Ckpt: *ckpt, Resume: *resume, Fresh: *fresh, InitFrom: *initFrom, SaveEvery: *saveEvery,
		SampleLen: *sample, Prompt: *prompt, Temperature: *temp,
		Progress: os.Stderr, Log: os.Stdout, MonitorEvery: *monitor, NoEval: *noEval,
	}
	if err := opt.Check(); err != nil {
		return usage(err)
	}
	if opt.Ckpt == "" {
		opt.Ckpt = filepath.Join("runs", "train", cfg.Resolved().Model.Pos, "ckpt.safetensors")
	}
	if a, err := filepath.Abs(opt.Ckpt); err == nil {
		opt.Ckpt = a // the paths printed name the file wherever the reader stands
	}
	// Resuming takes the configuration (and the corpus) from the
	// checkpoint; explicit flags may change only what resuming allows.
	from := *resume
	if from == "" && !*fresh {
		if _, err := os.Stat(opt.Ckpt); err == nil {
			from = opt.Ckpt
		}
	}
	if from != "" {
		ck, err := trainer.LoadCheckpoint(from)
		if err != nil {
			return usage(fmt.Errorf("resuming: %v (start over with -fresh, or choose another -ckpt)", err))
		}
		if cfg, err = trainer.ResumeConfig(ck.Config, cfg, cf.Explicit); err != nil {
			return usage(fmt.Errorf("resuming %s: %v", from, err))
		}
		if *corpus == "" && ck.CorpusPath != "" {
			*corpus = ck.CorpusPath
		}
	} else if *initFrom != "" {
		// A new run from other weights: the source's configuration with the
		// flags given, the length-dependent options re-resolved.
		src, err := trainer.ReadInit(*initFrom)
		if err != nil {
			return usage(err)
		}
		if cfg, err = trainer.InitConfig(src.Config, cfg, cf.Explicit); err != nil {
			return usage(fmt.Errorf("-init-from %s: %v", *initFrom, err))
		}
	}
	if cf.Dump() {
		if err := trainer.DumpJSON(os.Stdout, cfg); err != nil {
			return usage(err)
		}
		return 0
	}
	if err := cfg.Validate(); err != nil {
		return usage(err)
	}
	if err := trainer.CheckMemory(cfg, 0); err != nil {
		return usage(err)
	}
	if err := trainer.CheckDir(filepath.Dir(opt.Ckpt)); err != nil { // before the corpus is read
		return usage(fmt.Errorf("-ckpt %s: %v", opt.Ckpt, err))
	}
	c, err := corpora.Open(*corpus)
	if err != nil {
		return usage(err)
	}
	if err := c.CheckWindow(cfg.SeqLen); err != nil {
		return usage(err)
	}
	fmt.Printf("train: %s\n", trainer.Provenance())

	// Ctrl-C (or SIGTERM) stops before the next update and saves the
	// checkpoint; a second signal kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	_, err = trainer.Run(ctx, cfg, c, opt)
	if *monitor > 0 { // also after a failed run: the figure shows where it broke
		if png, perr := trainer.WriteMonitorPNG(opt.Ckpt, "pos="+cfg.Resolved().Model.Pos); perr != nil {
			fmt.Fprintln(os.Stderr, "train: monitor plot:", perr)
		} else {
			fmt.Printf("monitor: %s and %s\n", trainer.MonitorPath(opt.Ckpt), png)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		return 1
	}
	return 0
}

// usage reports a bad invocation; the exit status is 2.
func usage(err error) int {
	fmt.Fprintf(os.Stderr, "train: %v\n(run with -h for the flags)\n", err)
	return 2
}
