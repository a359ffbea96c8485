package timestudy

import (
	"context"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

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
	// RepeatRight counts each test sequence's repeated events predicted
	// right (Result.RepeatRight): the paired comparisons over sequences
	// read it. Not in results.csv.
	RepeatRight []int `json:"repeat_right,omitempty"`
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
	// Machine is trainer.ProvenanceInfo.Machine ("" in rows made before it).
	Machine string `json:"machine,omitempty"`
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
}

func (r *runner) logf(format string, args ...any) { r.opt.Logf(format, args...) }

// newRunner checks the plan and draws the validation and test sequences.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset))}
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
// run (study.SameConfig).
var sameSpec = study.SameConfig(func(s *spec) *trainer.Config { return &s.Config })

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
	return study.NewStudyJobs("times", r.opt, jobs, spec, sameSpec, r.runJob, r.render), jobs, nil
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

// opener opens the jobs of a plan (study.Opener: Run, RunJob, Render).
func opener(p Plan, opt Options) study.Opener[spec, Row] {
	return func() (*study.Jobs[spec, Row], error) {
		_, js, err := open(p, opt)
		return js, err
	}
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and repeats.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*study.JobsOutcome[Row], error) {
	return opener(p, opt).Run(ctx)
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	return opener(p, opt).RunJob(ctx, n)
}

// Render rewrites the tables and plot from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) { return opener(p, opt).Render() }

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
	p, tr, err := study.TrainModel(ctx, cfg, task, ckpt, j.Key(), tag, r.opt)
	if err != nil {
		return nil, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Label(), Base: j.Variant.Base, Positions: positionsName(j.Time), Seed: j.Seed,
		TrainLen: r.plan.TrainLen(), TrainSteps: tr.Steps, ValRepeatAcc: tr.Val, Params: tr.Params}
	base.TrainMsPerStep, base.TrainLoss = tr.MsPerStep, tr.LastLoss
	prov := tr.Provenance
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty, base.Machine = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty, prov.Machine
	lengths := r.plan.Lengths()
	return study.EvalEach(ctx, len(lengths), func(i int) (Row, error) {
		row := base
		row.Factor, row.EvalLen = r.plan.Factors[i], lengths[i]
		t0 := time.Now()
		res, err := Evaluate(p, r.test, task.EvalSpec(lengths[i]))
		if err != nil {
			return row, err
		}
		row.Status = StatusOK
		row.RepeatAccuracy, row.RepeatBits, row.Bits, row.NewBits = res.RepeatAccuracy, res.RepeatBits, res.Bits, res.NewBits
		row.Sequences, row.Events, row.Repeats, row.RepeatRight = res.Sequences, res.Events, res.Repeats, res.RepeatRight
		row.EvalMsPerEvent = time.Since(t0).Seconds() * 1000 / float64(res.Events)
		r.logf("%s %s at %d events (%dT): repeat accuracy %.4f, %.4f bits on repeats, %.4f bits/event\n",
			tag, j.Key(), row.EvalLen, row.Factor, row.RepeatAccuracy, row.RepeatBits, row.Bits)
		return row, nil
	}, func(i int, err error) Row {
		row := base
		row.Factor, row.EvalLen, row.Status, row.Note = r.plan.Factors[i], lengths[i], StatusNA, err.Error()
		r.logf("%s %s at %d events: n/a (%v)\n", tag, j.Key(), lengths[i], err)
		return row
	})
}
