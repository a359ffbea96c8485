package codestudy

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

// DefaultDir is runs/code/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "code", preset) }

// Row is one result: one model (encoding x seed) at one evaluation length.
type Row struct {
	Preset   string `json:"preset"`
	Encoding string `json:"encoding"` // the trained encoding or variant label
	Seed     int64  `json:"seed"`
	// Factor is EvalLen / TrainLen.
	Factor   int    `json:"factor"`
	EvalLen  int    `json:"eval_len"`
	TrainLen int    `json:"train_len"`
	Status   string `json:"status"`
	Note     string `json:"note,omitempty"`
	// BitsPerByte is the mean over every target of the test windows,
	// BitsPerByteLast over their last TrainLen targets (the same bytes at
	// every length).
	BitsPerByte     float64 `json:"bits_per_byte"`
	BitsPerByteLast float64 `json:"bits_per_byte_last"`
	Windows         int     `json:"windows"`
	Targets         int     `json:"targets"`
	TargetsLast     int     `json:"targets_last"`
	// WindowBPB and WindowBPBLast are each test window's bits per byte
	// (Result.WindowBPB): the paired comparisons over windows read them.
	// Not in results.csv.
	WindowBPB     []float32 `json:"window_bpb,omitempty"`
	WindowBPBLast []float32 `json:"window_bpb_last,omitempty"`
	// EvalMsPerByte is the wall time of the evaluation per target.
	EvalMsPerByte float64 `json:"eval_ms_per_byte"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats), final validation bits per byte.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValBPB         float64 `json:"val_bpb"`
	Params         int     `json:"params"`
	// Skipped counts the corpus files that did not parse or could not be
	// read (gocode.Corpus.Skipped).
	Skipped   int    `json:"skipped_files"`
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	GitRev    string `json:"git_rev"`
	GitDirty  bool   `json:"git_dirty"`
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
	Config      trainer.Config
	Corpus      gocode.Options
	Factors     []int
	ValWindows  int
	TestWindows int
	WindowSeed  uint64
	CorpusHash  string
}

// Outcome is what Run produced: the study's outcome, with the corpus's
// count of files that did not parse (Skipped) and the time LoadCorpus took.
type Outcome struct {
	study.JobsOutcome[Row]
	Skipped    int
	CorpusLoad time.Duration
}

// String is the one-line summary of a run.
func (o *Outcome) String() string {
	return fmt.Sprintf("%d models trained, %d reused, in %s; corpus loaded in %s, %d files skipped (did not parse)",
		o.Trained, o.Reused, o.Wall.Round(time.Second), o.CorpusLoad.Round(time.Millisecond), o.Skipped)
}

type runner struct {
	plan     Plan
	opt      Options
	corpus   *gocode.Corpus
	val      []Anchor
	test     []Anchor
	load     time.Duration
	hash     string
	testDesc string
}

func (r *runner) logf(format string, args ...any) { r.opt.Logf(format, args...) }

// newRunner checks the plan, loads the corpus and draws the windows.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset))}
	t0 := time.Now()
	c, err := gocode.LoadCorpus(p.Src, p.Corpus)
	if err != nil {
		return nil, err
	}
	r.corpus, r.load, r.hash = c, time.Since(t0), c.Hash()
	r.logf("%s\nloaded in %s; %d files skipped (did not parse or could not be read)\n", c.Summary(), r.load.Round(time.Millisecond), c.Skipped)
	if r.val, err = Anchors(c.Files[gocode.Validation], p.ValWindows, p.TrainLen(), p.WindowSeed); err != nil {
		return nil, errors.WithMessage(err, "code: validation windows")
	}
	if r.test, err = Anchors(c.Files[gocode.Test], p.TestWindows, p.MaxLen(), p.WindowSeed+1); err != nil {
		return nil, errors.WithMessagef(err, "code: test windows (each needs a test file of at least %d bytes)", p.MaxLen()+1)
	}
	files := map[string]bool{}
	for _, a := range r.test {
		files[a.File.Path] = true
	}
	r.testDesc = fmt.Sprintf("%d test windows in %d files of %d test packages", len(r.test), len(files), c.Packages(gocode.Test))
	return r, nil
}

func (r *runner) spec(cfg trainer.Config) spec {
	return spec{Config: cfg.Resolved(), Corpus: r.plan.Corpus, Factors: r.plan.Factors, ValWindows: r.plan.ValWindows,
		TestWindows: r.plan.TestWindows, WindowSeed: r.plan.WindowSeed, CorpusHash: r.hash}
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
		return r.spec(cfg), err
	}
	return study.NewStudyJobs("code", r.opt, jobs, spec, sameSpec, r.runJob, r.render), jobs, nil
}

// open returns the runner of a plan and its jobs.
func open(p Plan, opt Options) (*runner, *study.Jobs[spec, Row], []Job, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, nil, nil, err
	}
	js, jobs, err := r.jobs()
	return r, js, jobs, err
}

// opener opens the jobs of a plan (study.Opener: Run, RunJob, Render).
func opener(p Plan, opt Options) study.Opener[spec, Row] {
	return func() (*study.Jobs[spec, Row], error) {
		_, js, _, err := open(p, opt)
		return js, err
	}
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and bpb.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
// A source directory without Go files is gocode's error.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) {
	r, js, _, err := open(p, opt)
	if err != nil {
		return nil, err
	}
	out := &Outcome{Skipped: r.corpus.Skipped, CorpusLoad: r.load}
	o, err := js.RunAll(ctx)
	if o != nil {
		out.JobsOutcome = *o
	}
	return out, err
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	return opener(p, opt).RunJob(ctx, n)
}

// Render rewrites the tables and plot from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) { return opener(p, opt).Render() }

// runJob trains (or resumes, from ckpt) and evaluates one model.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, err
	}
	task, err := NewTask(cfg, Data{Corpus: r.corpus, Val: r.val})
	if err != nil {
		return nil, err
	}
	p, tr, err := study.TrainModel(ctx, cfg, task, ckpt, j.Key(), tag, r.opt)
	if err != nil {
		return nil, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainLen: r.plan.TrainLen(), TrainSteps: tr.Steps,
		ValBPB: tr.Val, Params: tr.Params, Skipped: r.corpus.Skipped}
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
		row.Status, row.BitsPerByte, row.BitsPerByteLast = StatusOK, res.BitsPerByte, res.BitsPerByteLast
		row.Windows, row.Targets, row.TargetsLast = res.Windows, res.Targets, res.TargetsLast
		row.WindowBPB, row.WindowBPBLast = res.WindowBPB, res.WindowBPBLast
		row.EvalMsPerByte = time.Since(t0).Seconds() * 1000 / float64(res.Targets)
		r.logf("%s %s at length %d (%dL): %.4f bits/byte over %d windows (%d bytes), last %d: %.4f\n",
			tag, j.Key(), row.EvalLen, row.Factor, row.BitsPerByte, row.Windows, row.Targets, row.TrainLen, row.BitsPerByteLast)
		return row, nil
	}, func(i int, err error) Row {
		row := base
		row.Factor, row.EvalLen, row.Status, row.Note = r.plan.Factors[i], lengths[i], StatusNA, err.Error()
		r.logf("%s %s at length %d: n/a (%v)\n", tag, j.Key(), lengths[i], err)
		return row
	})
}
