// Command vision runs the vision study of issue #13: a small ViT classifier
// trained on MNIST once per position encoding (the 2-D encodings of posenc
// and the 1-D baselines on the raster order of the patches; same seed, same
// batches), tested at the training resolution (28×28 pixels, a 7×7 grid of
// 4×4 patches) and after two resolution changes that grow the grid to
// 14×14: the digit centred on a 56×56 canvas, and the digit upscaled 2×.
// It writes results.csv, results.json, table.md and accuracy.png under
// runs/vision/<preset>/.
//
//	go run ./experiments/vision                  # quick preset (minutes on 2 cores)
//	go run ./experiments/vision -preset full     # 3 seeds, longer training
//	go run ./experiments/vision -render          # rewrite tables and plots from saved results
//
// -encodings, -seeds, -steps, -test-images and -patch change the plan (its output
// directory becomes runs/vision/<preset>-custom); -mnist DIR reads the four
// standard IDX files from DIR instead of the copy the GoMNIST module ships.
// -jobs lists the models (one per line), -job N trains and evaluates model
// N only (for a Slurm array), -render merges what is done. An interrupted
// study (Ctrl-C saves the current checkpoint) resumes when run again. Bad
// flags exit with status 2 before anything runs, a failed run with 1, an
// interrupted one with 130.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/visionstudy"
	"github.com/rpe-go/rpe/graph"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "quick", "preset: "+strings.Join(visionstudy.PresetNames(), " or "))
	encs := fs.String("encodings", "", "comma-separated encodings or variants (name@key=value) to train instead of the preset's")
	seeds := fs.String("seeds", "", "comma-separated seeds instead of the preset's")
	steps := fs.Int("steps", 0, "updates per model instead of the preset's")
	testN := fs.Int("test-images", -1, "test images per resolution instead of the preset's (0: all 10,000)")
	patch := fs.Int("patch", 0, "patch side in pixels instead of the preset's 4 (must divide the image side)")
	out := fs.String("out", "", "output directory (default runs/vision/<preset>)")
	mnist := fs.String("mnist", "", "directory of MNIST-format IDX files (default: the GoMNIST module's copy)")
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
		fmt.Fprintf(stderr, "vision: %v\n(run with -h for the flags)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	p, err := visionstudy.Preset(*preset)
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
	if *testN >= 0 {
		p.TestImages, custom = *testN, true
	}
	if *patch != 0 {
		p.Patch, custom = *patch, true
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
	opt := visionstudy.Options{Dir: *out, MNIST: *mnist, Fresh: *fresh, Progress: stderr, Log: stdout, SaveEvery: *saveEvery}
	if opt.Dir == "" {
		opt.Dir = visionstudy.DefaultDir(p.Preset)
	}
	fmt.Fprintf(stdout, "vision study, %s preset -> %s (BLAS %s)\n", p.Preset, opt.Dir, graph.BLASName())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *render:
		_, err = visionstudy.Render(p, opt)
	case *job >= 0:
		err = visionstudy.RunJob(ctx, p, opt, *job)
	default:
		var o *visionstudy.Outcome
		if o, err = visionstudy.Run(ctx, p, opt); err == nil {
			fmt.Fprintf(stdout, "%d models trained, %d reused, in %s\n", o.Trained, o.Reused, o.Wall.Round(1e9))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "vision: %v\n", err)
		if errors.Is(err, trainer.ErrInterrupted) {
			return 130
		}
		return 1
	}
	if !*jobs && *job < 0 {
		if b, err := os.ReadFile(opt.Dir + "/" + visionstudy.FileTable); err == nil {
			fmt.Fprintf(stdout, "\n%s", b)
		}
	}
	return 0
}
