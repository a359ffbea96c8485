package study

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// RunOptions configure a run of a study of trained models (vision, graphs,
// code, times, stability); each study's Options is this type.
type RunOptions struct {
	// Dir is the output directory (the study's DefaultDir(preset) if "").
	Dir string
	// Fresh retrains and re-evaluates every model, ignoring saved work.
	Fresh bool
	// Redo lists the encodings (job labels) retrained and re-evaluated,
	// the others being reused (Jobs.Redo).
	Redo []string
	// Progress receives progress bars, Log messages (nil: discarded).
	Progress, Log io.Writer
	// SaveEvery saves checkpoints every SaveEvery updates (0: 100).
	SaveEvery int
}

// WithDefaults returns o with Dir set to dir if empty, SaveEvery to 100 if
// 0 and Log to io.Discard if nil.
func (o RunOptions) WithDefaults(dir string) RunOptions {
	if o.Dir == "" {
		o.Dir = dir
	}
	if o.SaveEvery == 0 {
		o.SaveEvery = 100
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Logf writes a log line (to io.Discard before WithDefaults if Log is nil).
func (o RunOptions) Logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format, args...)
	}
}

// Trained is what a study's rows record of the model they evaluate: its
// training (updates, wall ms per update and mean loss in nats of the last
// 10 updates, from the checkpoint's metrics log), its size, the final
// validation of the engine (Val, in the task's metric) and the provenance
// of the process.
type Trained struct {
	Steps      int
	MsPerStep  float64
	LastLoss   float64
	Val        float64
	Params     int
	Provenance trainer.ProvenanceInfo
}

// TrainModel trains (or resumes, from ckpt) task under cfg with the
// engine (trainer.RunTask) and reloads the weights it saved; key and tag
// name the model in the log line. A cancelled ctx stops after the current
// checkpoint is saved (the error wraps trainer.ErrInterrupted).
func TrainModel(ctx context.Context, cfg trainer.Config, task trainer.Task, ckpt, key, tag string, opt RunOptions) (*graph.Params, Trained, error) {
	opt.Logf("%s training %s (%d updates)\n", tag, key, cfg.Steps)
	sum, err := trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: ckpt, Fresh: opt.Fresh,
		SaveEvery: opt.SaveEvery, Progress: opt.Progress, Log: opt.Log})
	if err != nil {
		return nil, Trained{}, err
	}
	p, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, Trained{}, err
	}
	return p, Trained{Steps: sum.Steps, MsPerStep: TrainMs(ckpt), LastLoss: LastLoss(ckpt), Val: sum.Val.Value,
		Params: p.Count(), Provenance: trainer.Provenance()}, nil
}

// SameConfig returns the comparison of saved and current specs that every
// study of trained models uses: equal as JSON once their engine
// configurations (cfg gives a spec's) are resolved, so rows saved before
// an option was added to the library (absent in their JSON, zero when read
// back) still match when the option is at its default.
func SameConfig[S any](cfg func(*S) *trainer.Config) func(saved, now S) bool {
	return func(saved, now S) bool {
		*cfg(&saved), *cfg(&now) = cfg(&saved).Resolved(), cfg(&now).Resolved()
		return JSONEqual(saved, now)
	}
}

// Opener opens the jobs of one plan of a study; its methods are the
// study's Run, RunJob and Render.
type Opener[S, R any] func() (*Jobs[S, R], error)

// Run trains and evaluates every job without valid saved rows (resuming
// interrupted trainings from their checkpoints), then renders.
func (o Opener[S, R]) Run(ctx context.Context) (*JobsOutcome[R], error) {
	js, err := o()
	if err != nil {
		return nil, err
	}
	return js.RunAll(ctx)
}

// RunJob runs job n (0-based, in plan order) without rendering.
func (o Opener[S, R]) RunJob(ctx context.Context, n int) error {
	js, err := o()
	if err != nil {
		return err
	}
	return js.RunJob(ctx, n)
}

// Render rewrites the tables and plots from the saved rows.
func (o Opener[S, R]) Render() ([]R, error) {
	js, err := o()
	if err != nil {
		return nil, err
	}
	return js.RenderSaved()
}

// EvalEach evaluates a trained model under n conditions in order (eval
// lengths, resolutions): eval(i) gives condition i's row. A condition the
// encoding cannot serve (an error wrapping posenc.ErrBeyondTable) gives
// na(i, err), a row whose status says so, and the others go on; any other
// error stops. A cancelled ctx stops between conditions with an error
// wrapping trainer.ErrInterrupted.
func EvalEach[R any](ctx context.Context, n int, eval func(i int) (R, error), na func(i int, err error) R) ([]R, error) {
	var rows []R
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
		}
		row, err := eval(i)
		if err != nil {
			if !errors.Is(err, posenc.ErrBeyondTable) {
				return nil, err
			}
			row = na(i, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// NewStudyJobs is NewJobs for a study of trained models run with opt: its
// output directory, Fresh, Log and Redo.
func NewStudyJobs[J Keyed, S, R any](name string, opt RunOptions, jobs []J, spec func(J) (S, error), same func(saved, now S) bool,
	do func(ctx context.Context, j J, ckpt, tag string) ([]R, error), render func(rows []R, pending []string) error) *Jobs[S, R] {
	js := NewJobs(name, opt.Dir, opt.Fresh, opt.Log, jobs, spec, same, do, render)
	js.Redo = opt.Redo
	return js
}
