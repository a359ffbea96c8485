package graphstudy

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
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

// DefaultDir is runs/graphs/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "graphs", preset) }

// Row is one result: one model (encoding x seed) on one test set.
type Row struct {
	Preset   string `json:"preset"`
	Encoding string `json:"encoding"` // the trained encoding or variant label
	Seed     int64  `json:"seed"`
	TestSet  string `json:"test_set"` // "test" or "ood"
	Sizes    string `json:"sizes"`    // node counts, "8-24"
	// Accuracy is the node accuracy, GraphAccuracy the fraction of graphs
	// with every node right, Loss the mean cross-entropy per node (nats).
	Accuracy      float64 `json:"accuracy"`
	GraphAccuracy float64 `json:"graph_accuracy"`
	Loss          float64 `json:"loss_nats"`
	Graphs        int     `json:"graphs"`
	Nodes         int     `json:"nodes"`
	// EvalMsPerGraph is the wall time of the evaluation per graph.
	EvalMsPerGraph float64 `json:"eval_ms_per_graph"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats), final validation node accuracy.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValAccuracy    float64 `json:"val_accuracy"`
	Params         int     `json:"params"`
	BLAS           string  `json:"blas"`
	GoVersion      string  `json:"go_version"`
	GitRev         string  `json:"git_rev"`
	GitDirty       bool    `json:"git_dirty"`
}

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config      trainer.Config
	LapK        int
	MaxDist     int
	MaxNodes    int
	VirtualNode bool
	Task, OOD   graphdata.TaskOptions
	Fracs       []float64
	TrainHash   string
	TestHash    string
	OODHash     string
}

// Outcome is what Run produced.
type Outcome = study.JobsOutcome[Row]

type runner struct {
	plan                  Plan
	opt                   Options
	train, val, test, ood *graphdata.Dataset
	cache                 *graphdata.DistanceCache
	logw                  io.Writer
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.logw, format, args...) }

// Datasets generates the plan's data: the training, validation and test
// splits of Task and the out-of-distribution graphs of OOD.
func (p Plan) Datasets() (train, val, test, ood *graphdata.Dataset, err error) {
	all, err := graphdata.Generate(p.Task)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	parts, err := graphdata.Split(all, p.Fracs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if ood, err = graphdata.Generate(p.OOD); err != nil {
		return nil, nil, nil, nil, err
	}
	return parts[0], parts[1], parts[2], ood, nil
}

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
	r := &runner{plan: p, opt: opt, logw: opt.Log, cache: new(graphdata.DistanceCache)}
	if r.logw == nil {
		r.logw = io.Discard
	}
	var err error
	if r.train, r.val, r.test, r.ood, err = p.Datasets(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *runner) spec(cfg trainer.Config, lapK int) spec {
	p := r.plan
	return spec{Config: cfg.Resolved(), LapK: lapK, MaxDist: p.MaxDist, MaxNodes: p.MaxNodes, VirtualNode: p.VirtualNode,
		Task: p.Task, OOD: p.OOD, Fracs: p.Fracs, TrainHash: hashData(r.train), TestHash: hashData(r.test), OODHash: hashData(r.ood)}
}

func (r *runner) data(lapK int) Data {
	return Data{Train: r.train, Val: r.val, MaxDist: r.plan.MaxDist, LapK: lapK, PadNodes: r.plan.Task.MaxNodes,
		MaxNodes: r.plan.MaxNodes, VirtualNode: r.plan.VirtualNode, Cache: r.cache}
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
		cfg, lapK, err := r.plan.Config(j)
		return r.spec(cfg, lapK), err
	}
	js := study.NewJobs("graphs", r.opt.Dir, r.opt.Fresh, r.logw, jobs, spec, sameSpec, r.runJob, r.render)
	js.Redo = r.opt.Redo
	return js, jobs, nil
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and accuracy.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) {
	_, js, _, err := open(p, opt)
	if err != nil {
		return nil, err
	}
	return js.RunAll(ctx)
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	_, js, _, err := open(p, opt)
	if err != nil {
		return err
	}
	return js.RunJob(ctx, n)
}

// Render rewrites the tables and plots from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) {
	_, js, _, err := open(p, opt)
	if err != nil {
		return nil, err
	}
	return js.RenderSaved()
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

// runJob trains (or resumes, from ckpt) and evaluates one model.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	cfg, lapK, err := r.plan.Config(j)
	if err != nil {
		return nil, err
	}
	task, err := NewTask(cfg, r.data(lapK))
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
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainSteps: sum.Steps,
		TrainMsPerStep: study.TrainMs(ckpt), TrainLoss: study.LastLoss(ckpt), ValAccuracy: sum.Val.Value, Params: p.Count()}
	prov := trainer.Provenance()
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty
	var rows []Row
	for _, ts := range r.plan.TestSets() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
		}
		ds := r.test
		if ts.Name == "ood" {
			ds = r.ood
		}
		t0 := time.Now()
		res, err := Evaluate(p, task.gcfg, ds, task.batchOptions(), cfg.EvalBatch)
		if err != nil {
			return nil, err
		}
		row := base
		row.TestSet, row.Sizes = ts.Name, fmt.Sprintf("%d-%d", ts.MinNodes, ts.MaxNodes)
		row.Accuracy, row.GraphAccuracy, row.Loss, row.Graphs, row.Nodes = res.Accuracy, res.GraphAccuracy, res.Loss, res.Graphs, res.Nodes
		row.EvalMsPerGraph = time.Since(t0).Seconds() * 1000 / float64(res.Graphs)
		rows = append(rows, row)
		r.logf("%s %s on %s (%s nodes): node accuracy %.4f, graphs all right %.4f\n", tag, j.Key(), ts.Name, row.Sizes, row.Accuracy, row.GraphAccuracy)
	}
	return rows, nil
}

// LoadModel returns the weights of job j of plan p from its checkpoint in
// the output directory and the model's configuration. It returns an error
// if the job has not been trained.
func LoadModel(p Plan, opt Options, j Job) (*graph.Params, layers.GraphConfig, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	cfg, lapK, err := p.Config(j)
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	task, err := NewTask(cfg, r.data(lapK))
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	js, _, err := r.jobs()
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	ckpt, err := js.CkptOf(j.Key())
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	params, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	return params, task.gcfg, nil
}
