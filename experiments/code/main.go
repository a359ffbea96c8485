// Command code runs the code study of issue #14: a byte-level causal
// language model on Go source (GOROOT/src, split by package into train,
// validation and test) trained once per position encoding — none, the 1-D
// t5, alibi and rope, the tree-relative bias over Go syntax trees ("tree")
// and the tree bias combined with a 1-D encoding ("tree+rope",
// "tree+alibi"); same seed, same batches — and scored in bits per byte on
// held-out packages at 1×, 2× and 4× the training length. It writes
// results.csv, results.json, table.md and bpb.png under
// runs/code/<preset>/. Files that do not parse are skipped and counted (in
// the log and the outputs).
//
//	go run ./experiments/code                  # quick preset (minutes on 2 cores)
//	go run ./experiments/code -preset full     # 3 seeds, longer training
//	go run ./experiments/code -render          # rewrite tables and plot from saved results
//
// -encodings, -seeds and -steps change the plan (its output directory
// becomes runs/code/<preset>-custom); -src DIR reads the Go sources under
// DIR instead of $(go env GOROOT)/src. -jobs lists the models (one per
// line), -job N trains and evaluates model N only (for a Slurm array),
// -render merges what is done. An interrupted study (Ctrl-C saves the
// current checkpoint) resumes when run again. Bad flags exit with status 2
// before anything runs, a failed run (a -src directory without Go files
// among others) with 1, an interrupted one with 130.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rpe-go/rpe/experiments/codestudy"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("code", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "quick", "preset: "+strings.Join(codestudy.PresetNames(), " or "))
	encs := fs.String("encodings", "", "comma-separated encodings, combinations (tree+rope) or variants (name@key=value) to train instead of the preset's")
	seeds := fs.String("seeds", "", "comma-separated seeds instead of the preset's")
	steps := fs.Int("steps", 0, "updates per model instead of the preset's")
	src := fs.String("src", "", "directory of Go sources (default $(go env GOROOT)/src)")
	out := fs.String("out", "", "output directory (default runs/code/<preset>)")
	fresh := fs.Bool("fresh", false, "retrain and re-evaluate every model, ignoring saved work")
	render := fs.Bool("render", false, "only rewrite the tables and plot from saved results")
	jobs := fs.Bool("jobs", false, "list the models of the plan (number and key) and exit")
	job := fs.Int("job", -1, "train and evaluate model N only (see -jobs), without rendering")
	saveEvery := fs.Int("save-every", 100, "save a checkpoint every N updates")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "code: %s\n(run with -h for the flags)\n", strings.TrimPrefix(err.Error(), "code: "))
		return 2
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	p, err := codestudy.Preset(*preset)
	if err != nil {
		return usage(err)
	}
	custom := false
	if *encs != "" {
		p.Encodings, custom = strings.Split(*encs, ","), true
	}
	if *seeds != "" {
		p.Seeds = nil
		for _, s := range strings.Split(*seeds, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return usage(fmt.Errorf("-seeds: %q is not an integer", s))
			}
			p.Seeds = append(p.Seeds, v)
		}
		custom = true
	}
	if *steps != 0 {
		if *steps < 0 {
			return usage(fmt.Errorf("-steps %d must be positive", *steps))
		}
		p.Base.Steps, custom = *steps, true
	}
	if *saveEvery < 0 {
		return usage(fmt.Errorf("-save-every %d must not be negative", *saveEvery))
	}
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return usage(err)
	}
	if *jobs {
		js, _ := p.Jobs()
		for i, j := range js {
			fmt.Fprintf(stdout, "%d %s\n", i, j.Key())
		}
		return 0
	}
	opt := codestudy.Options{Dir: *out, Src: *src, Fresh: *fresh, Progress: stderr, Log: stdout, SaveEvery: *saveEvery}
	if opt.Dir == "" {
		opt.Dir = codestudy.DefaultDir(p.Preset)
	}
	fmt.Fprintf(stdout, "code study, %s preset -> %s (BLAS %s)\n", p.Preset, opt.Dir, graph.BLASName())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *render:
		_, err = codestudy.Render(p, opt)
	case *job >= 0:
		err = codestudy.RunJob(ctx, p, opt, *job)
	default:
		var o *codestudy.Outcome
		if o, err = codestudy.Run(ctx, p, opt); err == nil {
			fmt.Fprintf(stdout, "%d models trained, %d reused, in %s; corpus loaded in %s, %d files skipped (did not parse)\n",
				o.Trained, o.Reused, o.Wall.Round(1e9), o.CorpusLoad.Round(1e6), o.Skipped)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "code: %s\n", strings.TrimPrefix(err.Error(), "code: "))
		if errors.Is(err, trainer.ErrInterrupted) {
			return 130
		}
		return 1
	}
	if *job < 0 {
		if b, err := os.ReadFile(filepath.Join(opt.Dir, codestudy.FileTable)); err == nil {
			fmt.Fprintf(stdout, "\n%s", b)
		}
	}
	return 0
}
