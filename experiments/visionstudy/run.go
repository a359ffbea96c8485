package visionstudy

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

// DefaultDir is runs/vision/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "vision", preset) }

// Row is one result: one model (encoding x seed) at one resolution, as
// evaluated (learned-2d on a larger grid: with and without resampling).
type Row struct {
	Preset string `json:"preset"`
	// Dataset is Plan.Dataset: "" for MNIST (the default; and in rows
	// made before the choice existed), "fashion" for Fashion-MNIST.
	Dataset  string `json:"dataset,omitempty"`
	Encoding string `json:"encoding"` // the trained encoding or variant label
	// Eval is the evaluation-time setting ("" or "resample=bicubic").
	Eval       string  `json:"eval,omitempty"`
	Seed       int64   `json:"seed"`
	Resolution string  `json:"resolution"`
	Grid       string  `json:"grid"` // patch grid, "7x7"
	Status     string  `json:"status"`
	Note       string  `json:"note,omitempty"`
	Accuracy   float64 `json:"accuracy"`
	Loss       float64 `json:"loss_nats"`
	Images     int     `json:"images"`
	// EvalMsPerImage is the wall time of the forward pass per image.
	EvalMsPerImage float64 `json:"eval_ms_per_image"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats), final validation accuracy.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValAccuracy    float64 `json:"val_accuracy"`
	Params         int     `json:"params"`
	// PeakHeap and PeakRSS (bytes) are measured while the first batch is
	// classified at this resolution (study.MeasureMemory).
	PeakHeap uint64 `json:"peak_heap_bytes"`
	PeakRSS  uint64 `json:"peak_rss_bytes"`
	// Hits holds whether each test image was classified right, in the
	// order of the test set (study.PackHits): the paired comparisons over
	// images read it. Not in results.csv.
	Hits      string `json:"hits,omitempty"`
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	GitRev    string `json:"git_rev"`
	GitDirty  bool   `json:"git_dirty"`
	// Machine is trainer.ProvenanceInfo.Machine ("" in rows made before it).
	Machine string `json:"machine,omitempty"`
	// DataFiles are the four IDX files read (training images and labels,
	// test images and labels) with the SHA-256 of their bytes as stored
	// (images.FileSum; none in rows made before it). Not in results.csv.
	DataFiles []images.FileSum `json:"data_files,omitempty"`
}

// Status values.
const (
	StatusOK = "ok"
	StatusNA = "n/a" // the encoding cannot serve the grid; Note says why
)

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config      trainer.Config
	Patch       int
	TestImages  int
	ValImages   int
	Resolutions []Resolution
	Resample    string
	TrainHash   string
	TestHash    string
}

// Outcome is what Run produced.
type Outcome = study.JobsOutcome[Row]

type runner struct {
	plan        Plan
	opt         Options
	train, test *images.Dataset
	val         *images.Dataset
	// files are the data files read, with their sums (Row.DataFiles).
	files []images.FileSum
}

func (r *runner) logf(format string, args ...any) { r.opt.Logf(format, args...) }

func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset))}
	var err error
	load := images.LoadMNISTFiles
	if p.DatasetName() == DatasetFashion {
		load = images.LoadFashionMNIST
	}
	if r.train, r.test, r.files, err = load(p.MNIST); err != nil {
		return nil, err
	}
	if _, _, err := images.Grid(r.train, p.Patch); err != nil {
		return nil, err
	}
	if r.val, err = images.Subset(r.test, min(p.ValImages, r.test.N)); err != nil {
		return nil, err
	}
	if p.TestImages > 0 && p.TestImages < r.test.N {
		if r.test, err = images.Subset(r.test, p.TestImages); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *runner) spec(cfg trainer.Config) spec {
	return spec{Config: cfg.Resolved(), Patch: r.plan.Patch, TestImages: r.test.N, ValImages: r.val.N,
		Resolutions: r.plan.Resolutions, Resample: r.plan.Resample, TrainHash: r.train.Hash(), TestHash: r.test.Hash()}
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
	return study.NewStudyJobs("vision", r.opt, jobs, spec, sameSpec, r.runJob, r.render), jobs, nil
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and accuracy.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) { return opener(p, opt).Run(ctx) }

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	return opener(p, opt).RunJob(ctx, n)
}

// Render rewrites the tables and plots from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) { return opener(p, opt).Render() }

// opener opens the jobs of a plan.
func opener(p Plan, opt Options) study.Opener[spec, Row] {
	return func() (*study.Jobs[spec, Row], error) {
		r, err := newRunner(p, opt)
		if err != nil {
			return nil, err
		}
		js, _, err := r.jobs()
		return js, err
	}
}

// runJob trains (or resumes, from ckpt) and evaluates one model.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, err
	}
	task, err := NewTask(cfg, Data{Train: r.train, Val: r.val, Patch: r.plan.Patch})
	if err != nil {
		return nil, err
	}
	p, tr, err := study.TrainModel(ctx, cfg, task, ckpt, j.Key(), tag, r.opt)
	if err != nil {
		return nil, err
	}
	base := Row{Preset: r.plan.Preset, Dataset: r.plan.rowDataset(), DataFiles: r.files, Encoding: j.Variant.Label(), Seed: j.Seed, TrainSteps: tr.Steps,
		TrainMsPerStep: tr.MsPerStep, TrainLoss: tr.LastLoss, ValAccuracy: tr.Val, Params: tr.Params,
		BLAS: tr.Provenance.BLAS, GoVersion: tr.Provenance.GoVersion, GitRev: tr.Provenance.GitRev, GitDirty: tr.Provenance.Dirty, Machine: tr.Provenance.Machine}
	var rows []Row
	for _, res := range r.plan.Resolutions {
		ds, err := res.Apply(r.test)
		if err != nil {
			return nil, err
		}
		for _, ev := range r.evalSettings(cfg, res) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
			}
			row := base
			row.Resolution, row.Eval = res.Name, ev.label
			vit := task.vit
			vit.Encoder.PosOpts = ev.opts
			row.Images = ds.N
			rr, cr, _ := images.Grid(ds, r.plan.Patch)
			row.Grid = fmt.Sprintf("%dx%d", rr, cr)
			t0 := time.Now()
			res, err := Accuracy(p, vit, ds, images.Norm{}, cfg.EvalBatch)
			el := time.Since(t0)
			if err != nil {
				if isServeError(err) {
					row.Status, row.Note = StatusNA, err.Error()
					rows = append(rows, row)
					r.logf("%s %s at %s%s: n/a (%v)\n", tag, j.Key(), row.Resolution, ev.suffix(), err)
					continue
				}
				return nil, err
			}
			row.Status, row.Accuracy, row.Loss, row.Hits = StatusOK, res.Accuracy, res.Loss, study.PackHits(res.Hits)
			row.EvalMsPerImage = el.Seconds() * 1000 / float64(ds.N)
			small, _ := images.Subset(ds, min(cfg.EvalBatch, ds.N))
			mem := study.MeasureMemory(func() { _, _ = Accuracy(p, vit, small, images.Norm{}, cfg.EvalBatch) })
			row.PeakHeap, row.PeakRSS = mem.PeakHeap, mem.PeakRSS
			rows = append(rows, row)
			r.logf("%s %s at %s (%s grid)%s: accuracy %.4f\n", tag, j.Key(), row.Resolution, row.Grid, ev.suffix(), row.Accuracy)
		}
	}
	return rows, nil
}

// evalSetting is one evaluation-time variant of a trained model.
type evalSetting struct {
	label string
	opts  posenc.Options
}

func (e evalSetting) suffix() string {
	if e.label == "" {
		return ""
	}
	return " [" + e.label + "]"
}

// evalSettings: the trained options; for a learnable 2-D absolute table on
// a grid other than the training grid, also the plan's resampling (the row
// without it is n/a, with the encoding's error as its note).
func (r *runner) evalSettings(cfg trainer.Config, res Resolution) []evalSetting {
	out := []evalSetting{{opts: cfg.Model.PosOpts}}
	if cfg.Model.Pos == "learned-2d" && res.Kind != "native" && r.plan.Resample != "none" {
		o := cfg.Model.PosOpts
		o.GridResample = r.plan.Resample
		out = append(out, evalSetting{label: "resample=" + r.plan.Resample, opts: o})
	}
	return out
}

// isServeError reports whether err is an encoding refusing a grid it cannot
// serve (posenc.ErrBeyondTable), as opposed to a failure of the run.
func isServeError(err error) bool { return errors.Is(err, posenc.ErrBeyondTable) }

// LoadModel returns the weights of job j of plan p from its checkpoint in
// the output directory, the model's configuration and the test images the
// plan scores (for BiasMaps and AttentionMaps). It returns an error if the
// job has not been trained.
func LoadModel(p Plan, opt Options, j Job) (*graph.Params, layers.ViTConfig, *images.Dataset, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	cfg, err := p.Config(j)
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	task, err := NewTask(cfg, Data{Train: r.train, Val: r.val, Patch: p.Patch})
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	js, _, err := r.jobs()
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	ckpt, err := js.CkptOf(j.Key())
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	params, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	return params, task.vit, r.test, nil
}
