package timestudy

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// Options configures Run.
type Options struct {
	// Dir is the output directory (DefaultDir(preset) if "").
	Dir string
	// Fresh retrains and re-evaluates every model, ignoring saved work.
	Fresh bool
	// Redo lists the encodings (job labels) retrained and re-evaluated,
	// the others being reused (study.Jobs.Redo).
	Redo []string
	// Progress receives progress bars, Log messages (nil: discarded).
	Progress, Log io.Writer
	// SaveEvery saves checkpoints every SaveEvery updates (default 100).
	SaveEvery int
}

// DefaultDir is runs/times/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "times", preset) }

// Row is one result: one model (encoding x positions x seed) at one
// evaluation length.
type Row struct {
	Preset string `json:"preset"`
	// Encoding is the entry's label ("rope@time"), Base the posenc
	// encoding, Positions "index" or "time".
	Encoding  string `json:"encoding"`
	Base      string `json:"base"`
	Positions string `json:"positions"`
	Seed      int64  `json:"seed"`
	// Factor is EvalLen / TrainLen (lengths in events).
	Factor   int    `json:"factor"`
	EvalLen  int    `json:"eval_len"`
	TrainLen int    `json:"train_len"`
	Status   string `json:"status"`
	Note     string `json:"note,omitempty"`
	// RepeatAccuracy and RepeatBits score the repeated events, Bits every
	// event, NewBits the new ones (see Result).
	RepeatAccuracy float64 `json:"repeat_accuracy"`
	RepeatBits     float64 `json:"repeat_bits"`
	Bits           float64 `json:"bits"`
	NewBits        float64 `json:"new_bits"`
	Sequences      int     `json:"sequences"`
	Events         int     `json:"events"`
	Repeats        int     `json:"repeats"`
	// EvalMsPerEvent is the wall time of the evaluation per event.
	EvalMsPerEvent float64 `json:"eval_ms_per_event"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats), final validation repeat accuracy.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValRepeatAcc   float64 `json:"val_repeat_accuracy"`
	Params         int     `json:"params"`
	BLAS           string  `json:"blas"`
	GoVersion      string  `json:"go_version"`
	GitRev         string  `json:"git_rev"`
	GitDirty       bool    `json:"git_dirty"`
}

// Status values.
const (
	StatusOK = "ok"
	StatusNA = "n/a" // the encoding cannot serve the length; Note says why
)

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config            trainer.Config
	Time              bool
	Seqs              SeqOptions
	Factors           []int
	ValSeqs, TestSeqs int
	ValSeed, TestSeed uint64
}

type runner struct {
	plan      Plan
	opt       Options
	val, test []Sequence
	logw      io.Writer
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.logw, format, args...) }

// newRunner checks the plan and draws the validation and test sequences.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if opt.Dir == "" {
		opt.Dir = DefaultDir(p.Preset)
	}
	if opt.SaveEvery == 0 {
		opt.SaveEvery = 100
	}
	r := &runner{plan: p, opt: opt, logw: opt.Log}
	if r.logw == nil {
		r.logw = io.Discard
	}
	var err error
	if r.val, err = Set(p.Seqs, p.ValSeed, p.ValSeqs, p.TrainLen()); err != nil {
		return nil, errors.WithMessage(err, "times: validation sequences")
	}
	if r.test, err = Set(p.Seqs, p.TestSeed, p.TestSeqs, p.MaxLen()); err != nil {
		return nil, errors.WithMessage(err, "times: test sequences")
	}
	return r, nil
}

func (r *runner) spec(cfg trainer.Config, time bool) spec {
	p := r.plan
	return spec{Config: cfg.Resolved(), Time: time, Seqs: p.Seqs, Factors: p.Factors, ValSeqs: p.ValSeqs, TestSeqs: p.TestSeqs,
		ValSeed: p.ValSeed, TestSeed: p.TestSeed}
}

// sameSpec reports whether saved rows were computed under the spec of this
// run (configurations compared resolved).
func sameSpec(saved, now spec) bool {
	saved.Config, now.Config = saved.Config.Resolved(), now.Config.Resolved()
	return study.JSONEqual(saved, now)
}

// jobs is the plan's jobs for the shared runner (study.Jobs).
func (r *runner) jobs() (*study.Jobs[spec, Row], []Job, error) {
	jobs, err := r.plan.Jobs()
	if err != nil {
		return nil, nil, err
	}
	spec := func(j Job) (spec, error) {
		cfg, err := r.plan.Config(j)
		return r.spec(cfg, j.Time), err
	}
	js := study.NewJobs("times", r.opt.Dir, r.opt.Fresh, r.logw, jobs, spec, sameSpec, r.runJob, r.render)
	js.Redo = r.opt.Redo
	return js, jobs, nil
}

// open returns the runner of a plan and its jobs.
func open(p Plan, opt Options) (*runner, *study.Jobs[spec, Row], error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, nil, err
	}
	js, _, err := r.jobs()
	return r, js, err
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and repeats.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*study.JobsOutcome[Row], error) {
	_, js, err := open(p, opt)
	if err != nil {
		return nil, err
	}
	return js.RunAll(ctx)
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	_, js, err := open(p, opt)
	if err != nil {
		return err
	}
	return js.RunJob(ctx, n)
}

// Render rewrites the tables and plot from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) {
	_, js, err := open(p, opt)
	if err != nil {
		return nil, err
	}
	return js.RenderSaved()
}

// newTask is the task of job j.
func (r *runner) newTask(j Job) (*Task, trainer.Config, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, cfg, err
	}
	task, err := NewTask(cfg, Data{Seqs: r.plan.Seqs, Time: j.Time, Val: r.val, ValSeed: r.plan.ValSeed})
	return task, cfg, err
}

// runJob trains (or resumes, from ckpt) and evaluates one model.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	task, cfg, err := r.newTask(j)
	if err != nil {
		return nil, err
	}
	r.logf("%s training %s (%d updates)\n", tag, j.Key(), cfg.Steps)
	sum, err := trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: ckpt, Fresh: r.opt.Fresh,
		SaveEvery: r.opt.SaveEvery, Progress: r.opt.Progress, Log: r.logw})
	if err != nil {
		return nil, err
	}
	p, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Label(), Base: j.Variant.Base, Positions: positionsName(j.Time), Seed: j.Seed,
		TrainLen: r.plan.TrainLen(), TrainSteps: sum.Steps, ValRepeatAcc: sum.Val.Value, Params: p.Count()}
	base.TrainMsPerStep, base.TrainLoss = study.TrainMs(ckpt), study.LastLoss(ckpt)
	prov := trainer.Provenance()
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty
	var rows []Row
	for i, le := range r.plan.Lengths() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
		}
		row := base
		row.Factor, row.EvalLen = r.plan.Factors[i], le
		t0 := time.Now()
		res, err := Evaluate(p, r.test, task.EvalSpec(le))
		el := time.Since(t0)
		if err != nil {
			if errors.Is(err, posenc.ErrBeyondTable) {
				row.Status, row.Note = StatusNA, err.Error()
				rows = append(rows, row)
				r.logf("%s %s at %d events: n/a (%v)\n", tag, j.Key(), le, err)
				continue
			}
			return nil, err
		}
		row.Status = StatusOK
		row.RepeatAccuracy, row.RepeatBits, row.Bits, row.NewBits = res.RepeatAccuracy, res.RepeatBits, res.Bits, res.NewBits
		row.Sequences, row.Events, row.Repeats = res.Sequences, res.Events, res.Repeats
		row.EvalMsPerEvent = el.Seconds() * 1000 / float64(res.Events)
		rows = append(rows, row)
		r.logf("%s %s at %d events (%dT): repeat accuracy %.4f, %.4f bits on repeats, %.4f bits/event\n",
			tag, j.Key(), le, row.Factor, row.RepeatAccuracy, row.RepeatBits, row.Bits)
	}
	return rows, nil
}
