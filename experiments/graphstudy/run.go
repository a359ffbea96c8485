package graphstudy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

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

type jobFile struct {
	Spec spec  `json:"spec"`
	Rows []Row `json:"rows"`
}

// Outcome is what Run produced.
type Outcome struct {
	Rows []Row
	Dir  string
	// Trained counts the models of this run; Reused those whose saved rows
	// were taken as they were.
	Trained, Reused int
	Wall            time.Duration
}

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

func (r *runner) jobDir(j Job) string   { return filepath.Join(r.opt.Dir, "models", j.Key()) }
func (r *runner) rowsPath(j Job) string { return filepath.Join(r.opt.Dir, "results", j.Key()+".json") }
func (r *runner) ckptPath(j Job) string { return filepath.Join(r.jobDir(j), "ckpt.safetensors") }
func (r *runner) lockPath(j Job) string { return filepath.Join(r.jobDir(j), "job.lock") }
func (r *runner) renderLock() string    { return filepath.Join(r.opt.Dir, "render.lock") }

func (r *runner) spec(cfg trainer.Config, lapK int) spec {
	p := r.plan
	return spec{Config: cfg.Resolved(), LapK: lapK, MaxDist: p.MaxDist, MaxNodes: p.MaxNodes, VirtualNode: p.VirtualNode,
		Task: p.Task, OOD: p.OOD, Fracs: p.Fracs, TrainHash: hashData(r.train), TestHash: hashData(r.test), OODHash: hashData(r.ood)}
}

func (r *runner) data(lapK int) Data {
	return Data{Train: r.train, Val: r.val, MaxDist: r.plan.MaxDist, LapK: lapK, PadNodes: r.plan.Task.MaxNodes,
		MaxNodes: r.plan.MaxNodes, VirtualNode: r.plan.VirtualNode, Cache: r.cache}
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
		return errors.Errorf("graphs: job %d does not exist (the plan has %d jobs, 0..%d)", n, len(jobs), len(jobs)-1)
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
	cfg, lapK, err := r.plan.Config(j)
	if err != nil {
		return false, err
	}
	sp := r.spec(cfg, lapK)
	if !r.opt.Fresh {
		if b, err := os.ReadFile(r.rowsPath(j)); err == nil {
			var jf jobFile
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
	task, err := NewTask(cfg, r.data(lapK))
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
	ms := metrics(r.ckptPath(j))
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainSteps: sum.Steps,
		TrainMsPerStep: ms.msPerStep, TrainLoss: ms.lastLoss, ValAccuracy: sum.Val.Value, Params: p.Count()}
	prov := trainer.Provenance()
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty
	var rows []Row
	for _, ts := range r.plan.TestSets() {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
		}
		ds := r.test
		if ts.Name == "ood" {
			ds = r.ood
		}
		t0 := time.Now()
		res, err := Evaluate(p, task.gcfg, ds, task.batchOptions(), cfg.EvalBatch)
		if err != nil {
			return false, err
		}
		row := base
		row.TestSet, row.Sizes = ts.Name, fmt.Sprintf("%d-%d", ts.MinNodes, ts.MaxNodes)
		row.Accuracy, row.GraphAccuracy, row.Loss, row.Graphs, row.Nodes = res.Accuracy, res.GraphAccuracy, res.Loss, res.Graphs, res.Nodes
		row.EvalMsPerGraph = time.Since(t0).Seconds() * 1000 / float64(res.Graphs)
		rows = append(rows, row)
		r.logf("%s %s on %s (%s nodes): node accuracy %.4f, graphs all right %.4f\n", tag, j.Key(), ts.Name, row.Sizes, row.Accuracy, row.GraphAccuracy)
	}
	b, err := json.MarshalIndent(jobFile{Spec: sp, Rows: rows}, "", " ")
	if err != nil {
		return false, err
	}
	return false, study.WriteFileAtomic(r.rowsPath(j), b)
}

// trainMetrics summarises the metrics log of a checkpoint.
type trainMetrics struct{ msPerStep, lastLoss float64 }

// metrics reads the metrics log of ckpt: the mean wall time per update and
// the mean training loss (nats) of the last 10 updates (zeros if it cannot
// be read).
func metrics(ckpt string) trainMetrics {
	ms, err := trainer.ReadMetrics(trainer.MetricsPath(ckpt))
	if err != nil || len(ms) == 0 {
		return trainMetrics{}
	}
	var out trainMetrics
	for _, m := range ms {
		out.msPerStep += m.Seconds
	}
	out.msPerStep *= 1000 / float64(len(ms))
	last := ms[max(0, len(ms)-10):]
	for _, m := range last {
		out.lastLoss += m.LossBPB
	}
	out.lastLoss *= 0.6931471805599453 / float64(len(last))
	return out
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
	params, _, err := trainer.LoadTaskModel(r.ckptPath(j), task)
	if err != nil {
		return nil, layers.GraphConfig{}, err
	}
	return params, task.gcfg, nil
}
