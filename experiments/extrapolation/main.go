// Command extrapolation runs the length-extrapolation study: it trains the
// reference byte-level model once per position encoding (same seed, same
// batches), evaluates each at L, 2L, 4L and 8L with two protocols (every
// target of non-overlapping windows; only the last L targets of each), the
// RoPE scalings on the trained RoPE model, measures speed and peak memory,
// and writes results.csv, results.json, table.md and PNG plots under
// runs/extrapolation/<preset>/.
//
//	go run ./experiments/extrapolation                # quick preset, ~7 min on 2 cores
//	go run ./experiments/extrapolation -preset full   # reference study: 10 encodings x 3 seeds x 2000 updates
//	go run ./experiments/extrapolation -render        # rewrite tables and plots from saved results
//
// An interrupted study (Ctrl-C saves the current checkpoint) resumes where
// it stopped when run again; a finished one only re-renders. Bad flags or
// input exit with status 2 before anything is trained, a failed run with
// status 1, an interrupted one with status 130.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

func main() {
	fs := flag.NewFlagSet("extrapolation", flag.ExitOnError)
	preset := fs.String("preset", "quick", "study preset: "+strings.Join(study.PresetNames(), ", "))
	corpus := fs.String("corpus", "", "text file (default: $GOROOT/src/testdata/Isaac.Newton-Opticks.txt)")
	out := fs.String("out", "", "output directory (default runs/extrapolation/<preset>)")
	encodings := fs.String("encodings", "", "comma-separated trained encodings, overriding the preset's (valid: "+
		strings.Join(study.TrainableEncodings, ", ")+")")
	seeds := fs.String("seeds", "", "comma-separated seeds, overriding the preset's")
	steps := fs.Int("steps", 0, "training updates, overriding the preset's")
	fresh := fs.Bool("fresh", false, "delete the saved models and results of the output directory first")
	render := fs.Bool("render", false, "only rewrite the tables and plots from the saved results")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}

	plan, err := study.Preset(*preset)
	if err != nil {
		usage(err)
	}
	custom := false
	if *encodings != "" {
		plan.Encodings = splitList(*encodings)
		custom = true
	}
	if *seeds != "" {
		plan.Seeds = nil
		for _, s := range splitList(*seeds) {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				usage(fmt.Errorf("-seeds: %q is not an integer", s))
			}
			plan.Seeds = append(plan.Seeds, v)
		}
		custom = true
	}
	if *steps != 0 {
		if *steps < 0 {
			usage(fmt.Errorf("-steps %d must be positive", *steps))
		}
		plan.Base.Steps = *steps
		plan.Base.Warmup = min(plan.Base.Warmup, *steps/10)
		custom = true
	}
	if custom {
		// Overrides make another study: keep its files apart.
		plan.Preset += "-custom"
		plan.Reduced = study.DescribeReductions(plan)
	}

	c, err := trainer.LoadCorpus(*corpus)
	if err != nil {
		usage(err)
	}
	if err := plan.Validate(c); err != nil {
		usage(err)
	}
	opt := study.Options{Dir: *out, Progress: os.Stderr, Log: os.Stdout,
		Command: "go run ./experiments/extrapolation " + strings.Join(os.Args[1:], " ")}
	if len(os.Args) == 1 {
		opt.Command = "go run ./experiments/extrapolation"
	}
	if *render {
		o, err := study.Render(plan, c, opt)
		if err != nil {
			fail(err)
		}
		if o.Pending > 0 {
			fmt.Printf("%d evaluation job(s) are not done yet; run without -render to do them\n", o.Pending)
		}
		return
	}
	if *fresh {
		dir := opt.Dir
		if dir == "" {
			dir = study.DefaultDir(plan.Preset)
		}
		if err := study.Clean(dir); err != nil {
			fail(err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C kills
	o, err := study.Run(ctx, plan, c, opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extrapolation:", err)
		if errors.Is(err, study.ErrInterrupted) {
			os.Exit(130)
		}
		os.Exit(1)
	}
	fmt.Printf("done in %s: %d trainings (%d resumed), %d evaluations run; %d models and %d evaluations were already done\n",
		o.Wall.Round(1e9), o.Trained, o.Resumed, o.Evaluated, o.SkippedModels, o.SkippedEvals)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// usage reports a bad invocation and exits with status 2.
func usage(err error) {
	fmt.Fprintf(os.Stderr, "extrapolation: %v\n(run with -h for the flags)\n", err)
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "extrapolation:", err)
	os.Exit(1)
}
