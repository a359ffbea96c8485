// Command graphs runs the graph study of issue #14: a small graph
// Transformer trained once per position encoding (none, the Laplacian
// eigenvector input, Graphormer's spatial bias, spatial bias plus
// centrality; same seed, same batches) on a task where the answer depends
// on the graph's structure and not on node order (per node, its
// shortest-path distance to a marked node, in randomly shuffled
// Erdős–Rényi graphs of 8-24 nodes), tested on held-out graphs of the
// training sizes and on larger graphs (32-48 nodes). It writes
// results.csv, results.json, table.md and accuracy.png under
// runs/graphs/<preset>/.
//
//	go run ./experiments/graphs                  # quick preset (minutes on 2 cores)
//	go run ./experiments/graphs -preset full     # 3 seeds, longer training
//	go run ./experiments/graphs -render          # rewrite tables and plots from saved results
//
// -encodings, -seeds and -steps change the plan (its output directory
// becomes runs/graphs/<preset>-custom). -jobs lists the models (one per
// line), -job N trains and evaluates model N only (for a Slurm array),
// -render merges what is done. An interrupted study (Ctrl-C saves the
// current checkpoint) resumes when run again. Bad flags exit with status 2
// before anything runs, a failed run with 1, an interrupted one with 130.
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

	"github.com/rpe-go/rpe/experiments/graphstudy"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("graphs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "quick", "preset: "+strings.Join(graphstudy.PresetNames(), " or "))
	encs := fs.String("encodings", "", "comma-separated encodings or variants (name@key=value; \"laplacian\" for the Laplacian input) instead of the preset's")
	seeds := fs.String("seeds", "", "comma-separated seeds instead of the preset's")
	steps := fs.Int("steps", 0, "updates per model instead of the preset's")
	out := fs.String("out", "", "output directory (default runs/graphs/<preset>)")
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
		fmt.Fprintf(stderr, "graphs: %v\n(run with -h for the flags)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	p, err := graphstudy.Preset(*preset)
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
	js, _ := p.Jobs()
	if *jobs {
		for i, j := range js {
			fmt.Fprintf(stdout, "%d %s\n", i, j.Key())
		}
		return 0
	}
	if *job >= len(js) {
		return usage(fmt.Errorf("-job %d: the plan has %d jobs (0..%d; see -jobs)", *job, len(js), len(js)-1))
	}
	opt := graphstudy.Options{Dir: *out, Fresh: *fresh, Progress: stderr, Log: stdout, SaveEvery: *saveEvery}
	if opt.Dir == "" {
		opt.Dir = graphstudy.DefaultDir(p.Preset)
	}
	fmt.Fprintf(stdout, "graph study, %s preset -> %s (BLAS %s)\n", p.Preset, opt.Dir, graph.BLASName())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *render:
		_, err = graphstudy.Render(p, opt)
	case *job >= 0:
		err = graphstudy.RunJob(ctx, p, opt, *job)
	default:
		var o *graphstudy.Outcome
		if o, err = graphstudy.Run(ctx, p, opt); err == nil {
			fmt.Fprintf(stdout, "%d models trained, %d reused, in %s\n", o.Trained, o.Reused, o.Wall.Round(1e9))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "graphs: %v\n", err)
		if errors.Is(err, trainer.ErrInterrupted) {
			return 130
		}
		return 1
	}
	if *job < 0 {
		if b, err := os.ReadFile(filepath.Join(opt.Dir, graphstudy.FileTable)); err == nil {
			fmt.Fprintf(stdout, "\n%s", b)
		}
	}
	return 0
}
