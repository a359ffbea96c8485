package stabilitystudy

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// Options configures Run (study.RunOptions); SaveEvery, when not 0,
// replaces the plan's.
type Options = study.RunOptions

// DefaultDir is runs/stability/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "stability", preset) }

// Status values.
const (
	StatusOK       = "ok"
	StatusDiverged = "diverged"
)

// Num is a float64 that may be NaN (not measured); JSON writes NaN and
// the infinities as null and reads null as NaN, results.csv writes an
// empty cell.
type Num float64

// MarshalJSON writes null for a non-finite value.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads null as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*n = Num(f)
	return err
}

// String is "" for NaN, else the shortest form.
func (n Num) String() string {
	if math.IsNaN(float64(n)) {
		return ""
	}
	return strconv.FormatFloat(float64(n), 'g', -1, 64)
}

// Row is one run: an encoding at one grid setting and seed.
type Row struct {
	Preset string `json:"preset"`
	// Encoding is the entry's label, Base the posenc encoding.
	Encoding string `json:"encoding"`
	Base     string `json:"base"`
	// InitStd ("0.02", "1" or "n/a"), Alpha ("off", "on", "n/a"), Clip
	// ("off" or the norm) and LR are the setting.
	InitStd string  `json:"init_std"`
	Alpha   string  `json:"alpha"`
	Clip    string  `json:"clip"`
	LR      float64 `json:"lr"`
	Seed    int64   `json:"seed"`
	// Status is StatusOK or StatusDiverged. DivergedStep is the update at
	// which the run diverged (0 if it did not): the update whose loss,
	// gradient norm or weights were not finite (the run stopped there), or
	// the first update after warm-up whose training loss exceeded
	// DivergedBits (the run went on); Why says which.
	Status       string `json:"status"`
	DivergedStep int    `json:"diverged_step"`
	Why          string `json:"why,omitempty"`
	// Steps is the number of updates completed.
	Steps int `json:"steps"`
	// Spikes and GradSpikes count the loss and gradient-norm spikes
	// (Spikes, GradSpikes); MaxGradNorm is the largest global gradient
	// norm before clipping, FinalTrain the mean training loss of the last
	// FinalWindow updates (bits per byte).
	Spikes      int `json:"spikes"`
	GradSpikes  int `json:"grad_spikes"`
	MaxGradNorm Num `json:"max_grad_norm"`
	FinalTrain  Num `json:"final_train_bpb"`
	// Val is the validation bits per byte at L (NaN for a run stopped by a
	// non-finite update; a run diverged by the loss rule trained on and
	// keeps it).
	Val Num `json:"val_bpb"`
	// The attention monitor's figures over every head, layer and recorded
	// update (finite values only; NaN without records): the smallest
	// entropy (the minimum over queries), the largest |pre-softmax score|,
	// the largest RMS of the position bias or terms, the largest fraction
	// of nearly one-hot queries.
	MinEntropy  Num `json:"min_entropy"`
	MaxAbsScore Num `json:"max_abs_score"`
	MaxPosRMS   Num `json:"max_pos_rms"`
	MaxOneHot   Num `json:"max_one_hot"`
	// MsPerUpdate is the mean wall time of an update.
	MsPerUpdate float64 `json:"ms_per_update"`
	Params      int     `json:"params"`
	BLAS        string  `json:"blas"`
	GoVersion   string  `json:"go_version"`
	GitRev      string  `json:"git_rev"`
	GitDirty    bool    `json:"git_dirty"`
	// Machine is trainer.ProvenanceInfo.Machine ("" in rows made before it).
	Machine string `json:"machine,omitempty"`
	// Loss and GradNorm are the curves of the run: the training loss (bits
	// per byte, 5 significant digits) and the gradient norm before
	// clipping (5 digits) of updates 1..Steps. They are kept in the job's
	// file (results/<key>.json), not in results.csv or results.json.
	Loss     []float64 `json:"loss,omitempty"`
	GradNorm []float64 `json:"grad_norm,omitempty"`
	// Monitor is the attention monitor's curve: per recorded update, the
	// figures over every layer and head (kept in the job's file only), so
	// that how early they announce instability can be read from the
	// committed results without the models.
	Monitor []MonitorPoint `json:"monitor,omitempty"`
}

// MonitorPoint is one recorded update of the attention monitor reduced
// over layers and heads (finite values; NaN when none): the smallest
// entropy (the minimum over queries), the mean entropy (mean over heads),
// the largest |pre-softmax score|, the largest RMS of the position bias or
// terms, the largest fraction of nearly one-hot queries.
type MonitorPoint struct {
	Step        int `json:"step"`
	MinEntropy  Num `json:"min_entropy"`
	MeanEntropy Num `json:"mean_entropy"`
	MaxAbsScore Num `json:"max_abs_score"`
	MaxPosRMS   Num `json:"max_pos_rms"`
	MaxOneHot   Num `json:"max_one_hot"`
}

// Diverged reports whether the run diverged.
func (r Row) Diverged() bool { return r.Status == StatusDiverged }

// Summarize sets the figures of r that come from its curves (Steps,
// Spikes, GradSpikes, MaxGradNorm, FinalTrain) and, when the loss exceeded
// DivergedBits after warm-up and no earlier divergence is recorded, its
// status; warmup is the run's number of warm-up updates. The validation is
// left alone: a run that went above DivergedBits and trained on to the end
// keeps the validation of where it ended (only a run stopped by a
// non-finite update has none). Render calls it
// again, so the definitions apply to saved rows.
func Summarize(r *Row, warmup int) {
	r.Steps = len(r.Loss)
	r.Spikes, r.GradSpikes = Spikes(r.Loss, warmup), GradSpikes(r.GradNorm, warmup)
	r.MaxGradNorm, r.FinalTrain = Num(maxFinite(r.GradNorm)), Num(FinalLoss(r.Loss))
	if s := LossDiverged(r.Loss, warmup); s > 0 && (r.DivergedStep == 0 || s < r.DivergedStep) {
		why := fmt.Sprintf("training loss above %d bits/byte", DivergedBits)
		if r.DivergedStep > 0 {
			why += fmt.Sprintf(", then %s at update %d", r.Why, r.DivergedStep)
		}
		r.Status, r.DivergedStep, r.Why = StatusDiverged, s, why
	}
}

// round5 rounds v to 5 significant digits.
func round5(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 5, 64), 64)
	return f
}

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config       trainer.Config
	Corpus       string
	MonitorEvery int
}

type runner struct {
	plan   Plan
	opt    Options
	corpus *trainer.Corpus
}

func (r *runner) logf(format string, args ...any) { r.opt.Logf(format, args...) }

// newRunner checks the plan and loads the corpus.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if opt.SaveEvery == 0 {
		opt.SaveEvery = p.SaveEvery
	}
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset)), corpus: p.Corpus}
	if r.corpus == nil {
		c, err := trainer.LoadCorpus("")
		if err != nil {
			return nil, errors.WithMessage(err, "stability")
		}
		r.corpus = c
	}
	if err := r.corpus.CheckWindow(p.Base.SeqLen); err != nil {
		return nil, errors.WithMessage(err, "stability")
	}
	return r, nil
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
	sp := func(j Job) (spec, error) {
		cfg, err := r.plan.Config(j)
		return spec{Config: cfg.Resolved(), Corpus: r.corpus.Hash(), MonitorEvery: r.plan.MonitorEvery}, err
	}
	return study.NewStudyJobs("stability", r.opt, jobs, sp, sameSpec, r.runJob, r.render), jobs, nil
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

// Run trains every run of the plan that has no saved row (resuming
// interrupted trainings from their checkpoints), then writes the outputs
// (results.csv, results.json, table.md and the figures) under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*study.JobsOutcome[Row], error) {
	return opener(p, opt).Run(ctx)
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	return opener(p, opt).RunJob(ctx, n)
}

// Render rewrites the outputs from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) { return opener(p, opt).Render() }

// runJob trains (or resumes, from ckpt) one run and measures it. A run
// that fails on a non-finite update gives a diverged row (its checkpoint
// stays the last good one); other errors are returned.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, err
	}
	task, err := trainer.NewLMTask(cfg, r.corpus)
	if err != nil {
		return nil, err
	}
	r.logf("%s training %s (%d updates)\n", tag, j.Key(), cfg.Steps)
	ro := trainer.RunOptions{Ckpt: ckpt, Fresh: r.opt.Fresh, SaveEvery: r.opt.SaveEvery, Progress: r.opt.Progress, Log: r.opt.Log}
	setMonitor(&ro, r.plan.MonitorEvery)
	row := Row{Preset: r.plan.Preset, Encoding: j.Encoding, Base: j.Variant.Base, InitStd: j.InitName(), Alpha: j.Alpha,
		Clip: j.ClipName(), LR: j.LR, Seed: j.Seed, Status: StatusOK, Val: Num(math.NaN())}
	sum, err := trainer.RunTask(ctx, cfg, task, ro)
	if err != nil {
		step, why, ok := nonFinite(err)
		if !ok || errors.Is(err, trainer.ErrInterrupted) {
			return nil, err
		}
		row.Status, row.DivergedStep, row.Why = StatusDiverged, step, why
		r.logf("%s %s diverged at update %d: %s\n", tag, j.Key(), step, why)
	} else {
		row.Val = Num(sum.Val.Value)
	}
	ms, err := trainer.ReadCheckpointMetrics(ckpt)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		row.Loss = append(row.Loss, round5(m.LossBPB))
		row.GradNorm = append(row.GradNorm, round5(m.GradNorm))
	}
	if err := monitorSummary(ckpt, &row); err != nil {
		return nil, err
	}
	row.MsPerUpdate = study.TrainMs(ckpt)
	if ps, err := buildParams(cfg); err == nil {
		row.Params = ps.Count()
	}
	prov := trainer.Provenance()
	row.BLAS, row.GoVersion, row.GitRev, row.GitDirty, row.Machine = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty, prov.Machine
	Summarize(&row, cfg.Warmup)
	r.logf("%s %s: %s, %d spikes, %d grad-norm spikes, final train %.4f, val %.4f bits/byte\n",
		tag, j.Key(), row.Status, row.Spikes, row.GradSpikes, float64(row.FinalTrain), float64(row.Val))
	return []Row{row}, nil
}
