// Command extrapolation runs the length-extrapolation study: it trains the
// reference byte-level model once per position encoding (same seed, same
// batches), evaluates each at L, 2L, 4L and 8L with two protocols (every
// target of the validation split in non-overlapping windows; only the last L
// targets of each window), the RoPE scalings on the trained RoPE model,
// measures speed and peak memory, and writes results.csv, results.json,
// table.md and PNG plots under runs/extrapolation/<preset>/.
//
//	go run ./experiments/extrapolation                # quick preset (see README for its measured time)
//	go run ./experiments/extrapolation -preset full   # reference study: every encoding and variant x 3 seeds x 2000 updates
//	go run ./experiments/extrapolation -preset long   # long context: L = 512, evaluated at 512 ... 4096 bytes (rope, alibi, t5, xl)
//	go run ./experiments/extrapolation -preset bible  # the King James Bible, L = 512, evaluated at 512 ... 16,384 bytes with the long-text protocols
//	go run ./experiments/extrapolation -render        # rewrite tables and plots from saved results
//
// Every option of the training configuration is a flag (-lr, -batch,
// -d-model, -t5-max-distance, ...: -h lists them), applied to every model of
// the study; -config starts from a JSON configuration (as the train
// command's -dump-config prints it). -encodings takes encoding names and
// variants with option overrides, such as t5@t5-max-distance=64. Any change
// to the preset makes another study, "<preset>-custom", with its own output
// directory.
//
// The study splits into independent jobs, one per trained model: -jobs lists
// them (one line each: number, model), -job N runs job N only (train and
// evaluate that model into the output directory, no rendering), and -render
// merges whatever jobs have finished. scripts/slurm/ runs them as a Slurm job
// array; without -job, one process runs them all and renders. -compare DIR
// checks that two output directories hold the same rows (timings aside);
// -redo ENC[,ENC] retrains and re-evaluates those encodings' models only.
//
// An interrupted study (Ctrl-C saves the current checkpoint) resumes where
// it stopped when run again; a finished one only re-renders. Two processes
// never write the same files: each locks the model it works on and the
// rendered files, and a second one gets an error naming the holder. Bad
// flags or input exit with status 2 before anything is trained, a failed run
// with status 1, an interrupted one with status 130.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/corpora"
	"github.com/rpe-go/rpe/experiments/extrapstudy"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// presetArg returns the value of -preset in args (default "quick"), found
// before the flags are parsed, since the preset gives the other flags their
// defaults.
func presetArg(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "preset" {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return "quick"
}

func run(args []string, stdout, stderr io.Writer) int {
	usage := func(err error) int {
		fmt.Fprintf(stderr, "extrapolation: %v\n(run with -h for the flags)\n", err)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "extrapolation:", err)
		if errors.Is(err, extrapstudy.ErrInterrupted) {
			return 130
		}
		return 1
	}
	preset, err := extrapstudy.Preset(presetArg(args))
	if err != nil {
		return usage(err)
	}
	plan := preset
	fs := flag.NewFlagSet("extrapolation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := trainer.BindFlags(fs, &plan.Base, posenc.PosLine)
	fs.String("preset", "quick", "study preset: "+strings.Join(extrapstudy.PresetNames(), ", ")+" (sets the defaults of the other flags)")
	corpus := fs.String("corpus", "", corpora.FlagHelp+" (default: the preset's, opticks but for the bible preset's kjv)")
	out := fs.String("out", "", "output directory (default runs/extrapolation/<preset>)")
	encodings := fs.String("encodings", "", "comma-separated trained encodings or variants name@option=value@..., overriding the preset's (encodings: "+
		strings.Join(extrapstudy.TrainableEncodings, ", ")+")")
	seeds := fs.String("seeds", "", "comma-separated seeds, overriding the preset's")
	maxWindows := fs.Int("max-windows", plan.MaxWindows, "score only the first N windows of the longest length (0: the whole validation split)")
	saveEvery := fs.Int("save-every", plan.SaveEvery, "save a training checkpoint every N updates")
	fresh := fs.Bool("fresh", false, "delete the saved models and results of the output directory first")
	render := fs.Bool("render", false, "only rewrite the tables and plots from the saved results")
	listJobs := fs.Bool("jobs", false, "list the study's independent jobs, one line each (number, model), and exit")
	job := fs.Int("job", -1, "run only job N of -jobs (its training and evaluations; no rendering) and exit")
	var redo []string
	fs.Func("redo", "comma-separated encodings (as in the tables) whose models are retrained and re-evaluated; the others are reused", func(v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e == "" {
				return fmt.Errorf("empty encoding in %q", v)
			}
			redo = append(redo, e)
		}
		return nil
	})
	compare := fs.String("compare", "", "compare the rendered results of -out with those of this directory, ignoring timings and memory, and exit (status 1 if they differ)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *compare != "" {
		return compareDirs(*out, *compare, stdout, stderr)
	}
	if plan.Base, err = cf.Resolve(); err != nil {
		return usage(err)
	}
	if cf.Explicit("steps") && !cf.Explicit("warmup") {
		plan.Base.Warmup = min(plan.Base.Warmup, plan.Base.Steps/10)
	}
	if cf.Dump() {
		if err := trainer.DumpJSON(stdout, plan.Base); err != nil {
			return usage(err)
		}
		return 0
	}
	if *encodings != "" {
		plan.Encodings = splitList(*encodings)
	}
	if *seeds != "" {
		plan.Seeds = nil
		for _, s := range splitList(*seeds) {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return usage(fmt.Errorf("-seeds: %q is not an integer", s))
			}
			plan.Seeds = append(plan.Seeds, v)
		}
	}
	plan.MaxWindows, plan.SaveEvery = *maxWindows, *saveEvery
	if *corpus != "" {
		plan.Corpus = *corpus
	}
	if err := cf.CheckApplies(plan.EncodingNames()); err != nil {
		return usage(err)
	}
	if !reflect.DeepEqual(plan, preset) {
		// Overrides make another study: keep its files apart.
		plan.Preset += "-custom"
		plan.Reduced = extrapstudy.DescribeReductions(plan)
	}
	if *job < -1 {
		return usage(fmt.Errorf("-job %d: a job is a number from 0 (see -jobs); omit -job to run the whole study", *job))
	}
	if *job >= 0 && (*render || *listJobs) {
		return usage(errors.New("-job runs one job; it does not go with -render or -jobs"))
	}
	if *fresh && (*render || *listJobs || *job >= 0) {
		return usage(errors.New("-fresh deletes the saved results; it goes only with a whole run (not with -render, -jobs or -job)"))
	}

	if len(redo) > 0 && (*render || *listJobs || *fresh) {
		return usage(errors.New("-redo retrains some models of a run; it does not go with -render, -jobs or -fresh"))
	}
	for _, e := range redo {
		if !slices.Contains(plan.Labels(), e) {
			return usage(fmt.Errorf("-redo %s: no such encoding in the plan (it has %s)", e, strings.Join(plan.Labels(), ", ")))
		}
	}
	opt := extrapstudy.Options{Dir: *out, Redo: redo, Progress: stderr, Log: stdout,
		Command: "go run ./experiments/extrapolation " + strings.Join(args, " ")}
	if len(args) == 0 {
		opt.Command = "go run ./experiments/extrapolation"
	}
	if opt.Dir == "" {
		opt.Dir = extrapstudy.DefaultDir(plan.Preset)
	}
	if !*listJobs { // the output directory before the corpus is read
		if err := study.CheckOut(opt.Dir, *render); err != nil {
			return usage(err)
		}
	}
	c, err := corpora.Open(plan.Corpus)
	if err != nil {
		return usage(err)
	}
	if err := plan.Validate(c); err != nil {
		return usage(err)
	}
	if n := len(plan.Jobs()); *job >= n {
		return usage(fmt.Errorf("-job %d: the plan has %d jobs, numbered 0 to %d (list them with -jobs)", *job, n, n-1))
	}
	if *listJobs {
		for i, m := range plan.Jobs() {
			fmt.Fprintf(stdout, "%d %s\n", i, m.Key())
		}
		return 0
	}
	fmt.Fprintln(stdout, "extrapolation:", trainer.Provenance()) // the first line of the log, which is stdout
	if *render {
		o, err := extrapstudy.Render(plan, c, opt)
		if err != nil {
			return fail(err)
		}
		if len(o.Pending) > 0 {
			fmt.Fprintf(stdout, "%d model job(s) are not done yet (%s); run without -render to do them\n", len(o.Pending), strings.Join(o.Pending, ", "))
		}
		return 0
	}
	if *fresh {
		if err := extrapstudy.Clean(opt.Dir); err != nil {
			return fail(err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C kills
	if *job >= 0 {
		o, err := extrapstudy.RunJob(ctx, plan, c, opt, *job)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "job %d done: %s\n", *job, o)
		return 0
	}
	o, err := extrapstudy.Run(ctx, plan, c, opt)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "done: %s\n", o)
	return 0
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

// compareDirs compares the results of two output directories (see
// extrapstudy.Compare): exit status 0 if they agree, 1 if they differ, 2 if one
// cannot be read.
func compareDirs(a, b string, stdout, stderr io.Writer) int {
	if a == "" {
		fmt.Fprintln(stderr, "extrapolation: -compare needs -out, the other directory")
		return 2
	}
	fa, err := extrapstudy.LoadResults(a)
	if err != nil {
		fmt.Fprintln(stderr, "extrapolation:", err)
		return 2
	}
	fb, err := extrapstudy.LoadResults(b)
	if err != nil {
		fmt.Fprintln(stderr, "extrapolation:", err)
		return 2
	}
	d := extrapstudy.Compare(fa, fb)
	for _, line := range d {
		fmt.Fprintln(stdout, line)
	}
	if len(d) > 0 {
		fmt.Fprintf(stdout, "%s and %s differ in %d places (timings and memory ignored)\n", a, b, len(d))
		return 1
	}
	fmt.Fprintf(stdout, "%s and %s agree: %d rows, every field but timings and memory equal\n", a, b, len(fa.Rows))
	return 0
}
