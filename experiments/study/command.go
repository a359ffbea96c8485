package study

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

// Command is the front end that the commands of the studies of trained
// models share (vision, graphs, code): the common flags, their checks, and
// the run with its exit status. A command registers its own flags on FlagSet
// after NewCommand, calls Parse, applies the flags to its plan, and calls
// Execute with the plan's actions.
type Command struct {
	// Name is the command's name ("vision"), its errors' prefix; Title
	// names the study in the first line of output ("vision study").
	Name, Title string
	// FlagSet holds the common flags and the command's own.
	FlagSet *flag.FlagSet
	// The common flags, after Parse.
	Preset, Encodings, Seeds, Out string
	Steps, Job, SaveEvery         int
	Fresh, Render, ListJobs       bool
	// Compare is -compare DIR: compare the results.csv of -out with DIR's
	// (CompareCSV) and exit.
	Compare string
	// Redo is -redo ENC[,ENC]: the encodings (job labels) whose models
	// are trained and evaluated again, the others being reused.
	Redo []string

	stdout, stderr io.Writer
}

// NewCommand registers the common flags: -preset (one of presets, default
// the first), -encodings (encHelp describes them), -seeds, -steps, -out
// (default shown as defaultDir), -fresh, -render, -jobs, -job,
// -save-every and -redo.
func NewCommand(name, title string, presets []string, encHelp, defaultDir string, stdout, stderr io.Writer) *Command {
	c := &Command{Name: name, Title: title, FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	fs := c.FlagSet
	fs.SetOutput(stderr)
	fs.StringVar(&c.Preset, "preset", presets[0], "preset: "+strings.Join(presets, " or "))
	fs.StringVar(&c.Encodings, "encodings", "", "comma-separated "+encHelp+" to train instead of the preset's")
	fs.StringVar(&c.Seeds, "seeds", "", "comma-separated seeds instead of the preset's")
	fs.IntVar(&c.Steps, "steps", 0, "updates per model instead of the preset's")
	fs.StringVar(&c.Out, "out", "", "output directory (default "+defaultDir+")")
	fs.BoolVar(&c.Fresh, "fresh", false, "retrain and re-evaluate every model, ignoring saved work")
	fs.BoolVar(&c.Render, "render", false, "only rewrite the tables and plot from saved results")
	fs.BoolVar(&c.ListJobs, "jobs", false, "list the models of the plan (number and key) and exit")
	fs.IntVar(&c.Job, "job", -1, "train and evaluate model N only (see -jobs), without rendering")
	fs.IntVar(&c.SaveEvery, "save-every", 100, "save a checkpoint every N updates")
	fs.StringVar(&c.Compare, "compare", "", "compare results.csv of -out with that of this directory, ignoring timings, memory and revision, and exit (status 1 if they differ)")
	fs.Func("redo", "comma-separated encodings (as in the tables) whose models are retrained and re-evaluated; the others are reused", func(s string) error {
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e == "" {
				return fmt.Errorf("empty encoding in %q", s)
			}
			c.Redo = append(c.Redo, e)
		}
		return nil
	})
	return c
}

// Parse parses args. It returns -1 if the run goes on, else the exit
// status: 0 for -h, 2 for bad flags (reported), positional arguments, a
// -steps below 1 or a negative -save-every.
func (c *Command) Parse(args []string) int {
	if err := c.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case c.FlagSet.NArg() > 0:
		return c.Usage(fmt.Errorf("unexpected arguments %q", c.FlagSet.Args()))
	case c.Given("steps") && c.Steps < 1:
		return c.Usage(fmt.Errorf("-steps %d: give a number of updates >= 1, or leave the flag out for the preset's", c.Steps))
	case c.SaveEvery < 0:
		return c.Usage(fmt.Errorf("-save-every %d must not be negative", c.SaveEvery))
	case c.Job < -1:
		return c.Usage(fmt.Errorf("-job %d: a job is a number from 0 (see -jobs); omit -job to run the whole study", c.Job))
	}
	return -1
}

// Given reports whether flag name was set on the command line (a value
// given is used or refused, never taken for "unset").
func (c *Command) Given(name string) bool {
	found := false
	c.FlagSet.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// Usage reports a bad-input error and returns exit status 2.
func (c *Command) Usage(err error) int {
	fmt.Fprintf(c.stderr, "%s: %s\n(run with -h for the flags)\n", c.Name, strings.TrimPrefix(err.Error(), c.Name+": "))
	return 2
}

// Override applies -encodings, -seeds and -steps to a preset's
// encodings, seeds and training steps (each left alone when its flag is
// not given) and reports whether any was given (the plan is then
// "<preset>-custom"), or returns an error naming a seed that is not an
// integer, with nothing changed.
func (c *Command) Override(encodings *[]string, seeds *[]int64, steps *int) (custom bool, err error) {
	var ss []int64
	if c.Seeds != "" {
		for _, s := range strings.Split(c.Seeds, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return false, fmt.Errorf("-seeds: %q is not an integer", s)
			}
			ss = append(ss, v)
		}
		*seeds = ss
	}
	if c.Encodings != "" {
		*encodings = strings.Split(c.Encodings, ",")
	}
	if c.Given("steps") {
		*steps = c.Steps
	}
	return c.Encodings != "" || ss != nil || c.Given("steps"), nil
}

// KeysOf returns the keys of a plan's jobs.
func KeysOf[J Keyed](jobs []J) []string {
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = j.Key()
	}
	return keys
}

// Actions are what a command runs, for its plan.
type Actions struct {
	// Keys are the plan's job keys (-jobs lists them; -job is checked
	// against them).
	Keys []string
	// Dir is the output directory.
	Dir string
	// Table is the file of Dir printed after a full run or a render.
	Table string
	// Render re-renders, Job runs job n, All runs every job and renders
	// and returns a one-line summary ("12 models trained, 0 reused, in
	// 14m2s").
	Render func() error
	Job    func(ctx context.Context, n int) error
	All    func(ctx context.Context) (summary string, err error)
}

// Execute lists the jobs (-jobs), or runs -render, -job N or the whole
// study with Ctrl-C and SIGTERM cancelling it (the running model saves its
// checkpoint), and returns the exit status: 0, 1 for a failed run, 130 for
// an interrupted one, 2 for a -job outside the plan.
func (c *Command) Execute(preset string, a Actions) int {
	if c.Compare != "" {
		diffs, notes, err := CompareCSV(a.Dir, c.Compare)
		if err != nil {
			return c.Usage(err)
		}
		for _, n := range notes {
			fmt.Fprintln(c.stdout, "note:", n)
		}
		for _, d := range diffs {
			fmt.Fprintln(c.stdout, d)
		}
		if len(diffs) > 0 {
			fmt.Fprintf(c.stderr, "%s: %s and %s differ in %d places\n", c.Name, a.Dir, c.Compare, len(diffs))
			return 1
		}
		fmt.Fprintf(c.stdout, "%s and %s agree: every field but timings, memory and revision equal\n", a.Dir, c.Compare)
		return 0
	}
	if c.ListJobs {
		for i, k := range a.Keys {
			fmt.Fprintf(c.stdout, "%d %s\n", i, k)
		}
		return 0
	}
	if c.Job >= len(a.Keys) {
		return c.Usage(fmt.Errorf("-job %d: the plan has %d jobs (0..%d; see -jobs)", c.Job, len(a.Keys), len(a.Keys)-1))
	}
	if err := CheckOut(a.Dir, c.Render); err != nil {
		return c.Usage(err)
	}
	if err := c.checkRedo(a.Keys); err != nil {
		return c.Usage(err)
	}
	fmt.Fprintf(c.stdout, "%s, %s preset -> %s (BLAS %s)\n", c.Title, preset, abs(a.Dir), graph.BLASName())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case c.Render:
		err = a.Render()
	case c.Job >= 0:
		err = a.Job(ctx, c.Job)
	default:
		var sum string
		if sum, err = a.All(ctx); err == nil {
			fmt.Fprintln(c.stdout, sum)
		}
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %s\n", c.Name, strings.TrimPrefix(err.Error(), c.Name+": "))
		if errors.Is(err, trainer.ErrInterrupted) {
			return 130
		}
		return 1
	}
	if c.Job < 0 {
		if b, err := os.ReadFile(filepath.Join(a.Dir, a.Table)); err == nil {
			fmt.Fprintf(c.stdout, "\n%s", b)
		}
	}
	return 0
}

// checkRedo refuses a -redo entry that labels no job of the plan
// (DefaultLabel of its keys), before any data is loaded.
func (c *Command) checkRedo(keys []string) error {
	var labels []string
	for _, k := range keys {
		if l := DefaultLabel(k); !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	var bad []string
	for _, r := range c.Redo {
		if !slices.Contains(labels, r) {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("-redo %s: no such encoding in the plan (it has %s)", strings.Join(bad, ","), strings.Join(labels, ", "))
	}
	return nil
}

// RunOptions are the run options of the common flags: -out (dir if not
// given), -fresh, -redo and -save-every, with progress bars to the
// command's stderr and log lines to its stdout.
func (c *Command) RunOptions(dir string) RunOptions {
	o := RunOptions{Dir: c.Out, Fresh: c.Fresh, Redo: c.Redo, Progress: c.stderr, Log: c.stdout, SaveEvery: c.SaveEvery}
	if o.Dir == "" {
		o.Dir = dir
	}
	return o
}

// ExecuteStudy is Execute for a study package of trained models, through
// its entry points run, runJob and render on plan p with options opt: the
// jobs are keys, the table printed is table (of opt.Dir).
func ExecuteStudy[P any, O fmt.Stringer, R any](c *Command, preset string, p P, keys []string, opt RunOptions, table string,
	run func(context.Context, P, RunOptions) (O, error), runJob func(context.Context, P, RunOptions, int) error,
	render func(P, RunOptions) ([]R, error)) int {
	return c.Execute(preset, Actions{Keys: keys, Dir: opt.Dir, Table: table,
		Render: func() error { _, err := render(p, opt); return err },
		Job:    func(ctx context.Context, n int) error { return runJob(ctx, p, opt, n) },
		All: func(ctx context.Context) (string, error) {
			o, err := run(ctx, p, opt)
			if err != nil {
				return "", err
			}
			return o.String(), nil
		},
	})
}
