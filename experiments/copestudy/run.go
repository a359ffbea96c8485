package copestudy

import (
	"context"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/copetasks"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

// DefaultDir is runs/cope/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "cope", preset) }

// Row is one result: one model (task x encoding x seed) under one test
// condition.
type Row struct {
	Preset string `json:"preset"`
	Task   string `json:"task"`
	// Encoding is the entry's label ("cope", "rope@rope-base=100"), Base
	// the posenc encoding.
	Encoding string `json:"encoding"`
	Base     string `json:"base"`
	Seed     int64  `json:"seed"`
	// Condition names the test condition, Context its context length in
	// tokens and EvalLen its sequence length T; TrainContext and TrainLen
	// are those of training.
	Condition    string `json:"condition"`
	Context      int    `json:"context"`
	EvalLen      int    `json:"eval_len"`
	TrainContext int    `json:"train_context"`
	TrainLen     int    `json:"train_len"`
	Status       string `json:"status"`
	Note         string `json:"note,omitempty"`
	// Accuracy, Exact, Bits and Majority are copetasks.Result's.
	Accuracy  float64 `json:"accuracy"`
	Exact     float64 `json:"exact"`
	Bits      float64 `json:"bits"`
	Majority  float64 `json:"majority"`
	Sequences int     `json:"sequences"`
	Answers   int     `json:"answers"`
	// Right counts each test sequence's answer tokens predicted right
	// (copetasks.Result.Right): the paired comparisons over sequences read
	// it. Not in results.csv.
	Right []int `json:"right,omitempty"`
	// EvalMsPerSeq is the wall time of the evaluation per sequence.
	EvalMsPerSeq float64 `json:"eval_ms_per_seq"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats per answer token), final validation accuracy.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValAccuracy    float64 `json:"val_accuracy"`
	Params         int     `json:"params"`
	BLAS           string  `json:"blas"`
	GoVersion      string  `json:"go_version"`
	GitRev         string  `json:"git_rev"`
	GitDirty       bool    `json:"git_dirty"`
	Machine        string  `json:"machine,omitempty"`
}

// Status values.
const (
	StatusOK = "ok"
	StatusNA = "n/a" // the encoding cannot serve the length; Note says why
)

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config            trainer.Config
	Task              TaskPlan
	ValSeqs, TestSeqs int
	ValSeed, TestSeed uint64
}

type runner struct {
	plan Plan
	opt  Options
	// val holds each task's validation sequences, test each task's test
	// sequences of every condition (in the order of its conditions).
	val  map[string][]copetasks.Example
	test map[string][][]copetasks.Example
}

// newRunner checks the plan and draws the validation and test sequences.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset)), val: map[string][]copetasks.Example{}, test: map[string][][]copetasks.Example{}}
	for _, t := range p.Tasks {
		v, err := copetasks.Set(t.Opts, p.ValSeed, p.ValSeqs, t.Train)
		if err != nil {
			return nil, errors.WithMessagef(err, "cope: %s validation sequences", t.Name())
		}
		r.val[t.Name()] = v
		for _, c := range t.Conditions {
			s, err := copetasks.Set(t.Opts, p.TestSeed, p.TestSeqs, c.Context)
			if err != nil {
				return nil, errors.WithMessagef(err, "cope: %s test sequences", t.Name())
			}
			r.test[t.Name()] = append(r.test[t.Name()], s)
		}
	}
	return r, nil
}

// sameSpec reports whether saved rows were computed under the spec of this
// run (study.SameConfig).
var sameSpec = study.SameConfig(func(s *spec) *trainer.Config { return &s.Config })

// jobs is the plan's jobs for the shared runner (study.Jobs).
func (r *runner) jobs() (*study.Jobs[spec, Row], error) {
	jobs, err := r.plan.Jobs()
	if err != nil {
		return nil, err
	}
	specOf := func(j Job) (spec, error) {
		cfg, err := r.plan.Config(j)
		if err != nil {
			return spec{}, err
		}
		t, _ := r.plan.Task(j.Task)
		p := r.plan
		return spec{Config: cfg.Resolved(), Task: t, ValSeqs: p.ValSeqs, TestSeqs: p.TestSeqs, ValSeed: p.ValSeed, TestSeed: p.TestSeed}, nil
	}
	return study.NewStudyJobs("cope", r.opt, jobs, specOf, sameSpec, r.runJob, r.render), nil
}

// opener opens the jobs of a plan (study.Opener: Run, RunJob, Render).
func opener(p Plan, opt Options) study.Opener[spec, Row] {
	return func() (*study.Jobs[spec, Row], error) {
		r, err := newRunner(p, opt)
		if err != nil {
			return nil, err
		}
		return r.jobs()
	}
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and accuracy.png under the output
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
func (r *runner) newTask(j Job) (*copetasks.Task, trainer.Config, TaskPlan, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, cfg, TaskPlan{}, err
	}
	t, _ := r.plan.Task(j.Task)
	task, err := copetasks.NewTask(cfg, copetasks.Data{Opts: t.Opts, Context: t.Train, Val: r.val[j.Task], ValSeed: r.plan.ValSeed})
	return task, cfg, t, err
}

// runJob trains (or resumes, from ckpt) and evaluates one model under
// every condition of its task.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	task, cfg, tp, err := r.newTask(j)
	if err != nil {
		return nil, err
	}
	p, tr, err := study.TrainModel(ctx, cfg, task, ckpt, j.Key(), tag, r.opt)
	if err != nil {
		return nil, err
	}
	prov := tr.Provenance
	base := Row{Preset: r.plan.Preset, Task: j.Task, Encoding: j.Label(), Base: j.Variant.Base, Seed: j.Seed,
		TrainContext: tp.Train, TrainLen: cfg.SeqLen, TrainSteps: tr.Steps, TrainMsPerStep: tr.MsPerStep, TrainLoss: tr.LastLoss,
		ValAccuracy: tr.Val, Params: tr.Params, BLAS: prov.BLAS, GoVersion: prov.GoVersion, GitRev: prov.GitRev, GitDirty: prov.Dirty,
		Machine: prov.Machine}
	at := func(i int) Row {
		row := base
		c := tp.Conditions[i]
		row.Condition, row.Context, row.EvalLen = c.Name, c.Context, tp.Opts.Len(c.Context)
		return row
	}
	return study.EvalEach(ctx, len(tp.Conditions), func(i int) (Row, error) {
		row := at(i)
		t0 := time.Now()
		res, err := copetasks.Evaluate(p, r.test[j.Task][i], task.EvalSpec(row.Context))
		if err != nil {
			return row, err
		}
		row.Status = StatusOK
		row.Accuracy, row.Exact, row.Bits, row.Majority = res.Accuracy, res.Exact, res.Bits, res.Majority
		row.Sequences, row.Answers, row.Right = res.Sequences, res.Answers, res.Right
		row.EvalMsPerSeq = time.Since(t0).Seconds() * 1000 / float64(res.Sequences)
		r.opt.Logf("%s %s %s (T = %d): answer accuracy %.4f, exact %.4f, %.4f bits per answer token\n",
			tag, j.Key(), row.Condition, row.EvalLen, row.Accuracy, row.Exact, row.Bits)
		return row, nil
	}, func(i int, err error) Row {
		row := at(i)
		row.Status, row.Note = StatusNA, err.Error()
		r.opt.Logf("%s %s %s: n/a (%v)\n", tag, j.Key(), row.Condition, err)
		return row
	})
}
