package graphstudy

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

// DefaultDir is runs/graphs/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "graphs", preset) }

// Row is one result: one model (encoding x seed) on one test set.
type Row struct {
	Preset   string `json:"preset"`
	Encoding string `json:"encoding"` // the trained encoding or variant label
	Seed     int64  `json:"seed"`
	TestSet  string `json:"test_set"` // "test" or "ood"
	Sizes    string `json:"sizes"`    // node counts, "8-24" (molecules: heavy atoms)
	// Accuracy is the node accuracy, GraphAccuracy the fraction of graphs
	// with every node right, Loss the mean cross-entropy per node (nats).
	Accuracy      float64 `json:"accuracy"`
	GraphAccuracy float64 `json:"graph_accuracy"`
	Loss          float64 `json:"loss_nats"`
	Graphs        int     `json:"graphs"`
	Nodes         int     `json:"nodes"`
	// Right holds the right nodes of each test graph, in the order of the
	// test set (study.PackCounts): the paired comparisons over graphs read
	// it. Not in results.csv.
	Right string `json:"right,omitempty"`
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
	// Machine is trainer.ProvenanceInfo.Machine ("" in rows made before it).
	Machine string `json:"machine,omitempty"`
	// Regression (the molecule task): RMSE and MAE in the target's units
	// (Å² for TPSA), R², the final validation RMSE, and the absolute
	// error of every test graph in the order of the test set (the paired
	// comparisons over molecules read it; not in results.csv). Accuracy,
	// GraphAccuracy and ValAccuracy are then 0, Loss the mean squared
	// error of the standardised targets.
	RMSE    float64   `json:"rmse,omitempty"`
	MAE     float64   `json:"mae,omitempty"`
	R2      float64   `json:"r2,omitempty"`
	ValRMSE float64   `json:"val_rmse,omitempty"`
	AbsErr  []float64 `json:"abs_err,omitempty"`
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
	// Omitted when zero, so that rows saved before these fields still match.
	Unreachable string        `json:",omitempty"`
	Molecules   *MoleculeTask `json:",omitempty"`
	DataSHA256  string        `json:",omitempty"`
}

// Outcome is what Run produced.
type Outcome = study.JobsOutcome[Row]

type runner struct {
	plan                  Plan
	opt                   Options
	train, val, test, ood *graphdata.Dataset
	cache                 *graphdata.DistanceCache
	mol                   *MoleculeData // the molecule task's data, nil for the synthetic task
}

func (r *runner) logf(format string, args ...any) { r.opt.Logf(format, args...) }

// Datasets generates the plan's data: the training, validation and test
// splits of Task and the out-of-distribution graphs of OOD; for a molecule
// plan, LoadMolecules's.
func (p Plan) Datasets() (train, val, test, ood *graphdata.Dataset, err error) {
	if p.Molecules != nil {
		md, err := LoadMolecules(*p.Molecules)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return md.Train, md.Val, md.Test, md.OOD, nil
	}
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
	r := &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset)), cache: new(graphdata.DistanceCache)}
	if p.Molecules != nil {
		md, err := LoadMolecules(*p.Molecules)
		if err != nil {
			return nil, err
		}
		r.mol, r.train, r.val, r.test, r.ood = md, md.Train, md.Val, md.Test, md.OOD
		if n := max(largest(md.Test), largest(md.OOD)); n > p.MaxNodes {
			return nil, errors.Errorf("graphs: the test molecules have up to %d atoms, the model's configured maximum is %d", n, p.MaxNodes)
		}
		return r, nil
	}
	var err error
	if r.train, r.val, r.test, r.ood, err = p.Datasets(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *runner) spec(cfg trainer.Config, lapK int) spec {
	p := r.plan
	s := spec{Config: cfg.Resolved(), LapK: lapK, MaxDist: p.MaxDist, MaxNodes: p.MaxNodes, VirtualNode: p.VirtualNode,
		Task: p.Task, OOD: p.OOD, Fracs: p.Fracs, TrainHash: hashData(r.train), TestHash: hashData(r.test), OODHash: hashData(r.ood),
		Molecules: p.Molecules}
	if p.Unreachable != UnreachableBucket {
		s.Unreachable = p.Unreachable
	}
	if r.mol != nil {
		s.DataSHA256 = r.mol.SHA256
	}
	return s
}

func (r *runner) data(lapK int) Data {
	pad := r.plan.Task.MaxNodes
	if r.mol != nil {
		pad = largest(r.train)
	}
	return Data{Train: r.train, Val: r.val, MaxDist: r.plan.MaxDist, LapK: lapK, PadNodes: pad,
		MaxNodes: r.plan.MaxNodes, VirtualNode: r.plan.VirtualNode, Unreachable: r.plan.Unreachable, Cache: r.cache}
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
		cfg, lapK, err := r.plan.Config(j)
		return r.spec(cfg, lapK), err
	}
	return study.NewStudyJobs("graphs", r.opt, jobs, spec, sameSpec, r.runJob, r.render), jobs, nil
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
	p, tr, err := study.TrainModel(ctx, cfg, task, ckpt, j.Key(), tag, r.opt)
	if err != nil {
		return nil, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainSteps: tr.Steps,
		TrainMsPerStep: tr.MsPerStep, TrainLoss: tr.LastLoss, ValAccuracy: tr.Val, Params: tr.Params}
	prov := tr.Provenance
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty, base.Machine = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty, prov.Machine
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
		res, err := task.Evaluate(p, ds)
		if err != nil {
			return nil, err
		}
		row := base
		row.TestSet, row.Sizes = ts.Name, fmt.Sprintf("%d-%d", ts.MinNodes, ts.MaxNodes)
		if r.mol != nil {
			row.Sizes = r.mol.Heavy[ts.Name]
			row.ValAccuracy, row.ValRMSE = 0, tr.Val
			row.RMSE, row.MAE, row.R2, row.AbsErr, row.Loss, row.Graphs, row.Nodes = res.RMSE, res.MAE, res.R2, res.AbsErr, res.Loss, res.Graphs, res.Nodes
			row.EvalMsPerGraph = time.Since(t0).Seconds() * 1000 / float64(res.Graphs)
			rows = append(rows, row)
			r.logf("%s %s on %s (%s heavy atoms): RMSE %.3f, MAE %.3f, R² %.4f\n", tag, j.Key(), ts.Name, row.Sizes, row.RMSE, row.MAE, row.R2)
			continue
		}
		row.Accuracy, row.GraphAccuracy, row.Loss, row.Graphs, row.Nodes = res.Accuracy, res.GraphAccuracy, res.Loss, res.Graphs, res.Nodes
		if row.Right, err = study.PackCounts(res.Right); err != nil {
			return nil, err
		}
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
