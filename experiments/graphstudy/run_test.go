package graphstudy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// tinyPlan is a plan of tiny models on few small graphs: 60 graphs of 4-8
// nodes, tested on 10 graphs of 10-12 nodes.
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds = "test", encs, []int64{1}
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.Warmup, p.Base.EvalBatch = 6, 4, 2, 8
	p.Task.MinNodes, p.Task.MaxNodes, p.Task.Count = 4, 8, 60
	p.OOD.MinNodes, p.OOD.MaxNodes, p.OOD.Count = 10, 12, 10
	p.LapK, p.MaxNodes = 3, 16
	return p
}

// setup returns the runner of plan p (data generated, output in a temporary
// directory), the configuration of its first job and that job's Laplacian
// size.
func setup(t *testing.T, p Plan) (*runner, trainer.Config, int) {
	t.Helper()
	r, err := newRunner(p, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := p.Jobs()
	cfg, k, err := p.Config(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	return r, cfg, k
}

// newTask is the task of setup's job.
func newTask(t *testing.T, r *runner, cfg trainer.Config, k int) *Task {
	t.Helper()
	task, err := NewTask(cfg, r.data(k))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestRunResumes runs a tiny study, checks its outputs, interrupts a second
// study mid-training and checks that running it again resumes and gives the
// rows of an uninterrupted run (timings aside).
func TestRunResumes(t *testing.T) {
	p := tinyPlan("none", "laplacian", "graphormer-spatial+graphormer-centrality")
	dir := t.TempDir()
	o, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 3 || o.Reused != 0 {
		t.Fatalf("trained %d, reused %d", o.Trained, o.Reused)
	}
	for _, f := range []string{FileCSV, FileJSON, FileTable, FilePlot} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if len(o.Rows) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(o.Rows), o.Rows)
	}
	for i, r := range o.Rows {
		set := []string{"test", "ood"}[i%2]
		if r.TestSet != set || r.TrainSteps != 6 || r.Nodes == 0 || r.Accuracy < 0 || r.Accuracy > 1 || math.IsNaN(r.Loss) {
			t.Fatalf("row %d %+v", i, r)
		}
	}
	if o.Rows[2].Params <= o.Rows[0].Params {
		t.Fatalf("laplacian model has %d parameters, none %d: no lap_proj?", o.Rows[2].Params, o.Rows[0].Params)
	}
	tab, _ := os.ReadFile(filepath.Join(dir, FileTable))
	if !strings.Contains(string(tab), "| graphormer-spatial+graphormer-centrality |") {
		t.Fatalf("table:\n%s", tab)
	}
	o2, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil || o2.Reused != 3 || o2.Trained != 0 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}

	// Interrupt at update 3 of a model, then resume.
	dir2 := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p1 := p
	p1.Encodings = []string{"graphormer-spatial+graphormer-centrality"}
	r, err := newRunner(p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	js, jobs, _ := r.jobs()
	cfg, k, _ := p1.Config(jobs[0])
	task, err := NewTask(cfg, r.data(k))
	if err != nil {
		t.Fatal(err)
	}
	_, err = trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: js.CkptPath(0), SaveEvery: 100,
		BeforeStep: func(step int) error {
			if step == 3 {
				cancel()
				return context.Canceled
			}
			return nil
		}})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupt: %v", err)
	}
	o3, err := Run(context.Background(), p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range o3.Rows {
		want := o.Rows[4+i]
		if row.Encoding != want.Encoding || row.Accuracy != want.Accuracy || row.Loss != want.Loss || row.TrainLoss != want.TrainLoss {
			t.Fatalf("resumed row %d = %+v\nuninterrupted %+v", i, row, want)
		}
	}
}

// TestFeedRebinds: after Next, the training graph (built once, relations
// rebound through the Feed) computes the loss of a graph built from scratch
// for that batch, so every batch's own structure reaches the model.
func TestFeedRebinds(t *testing.T) {
	for _, c := range []struct {
		enc     string
		virtual bool
	}{{"graphormer-spatial", false}, {"graphormer-spatial+graphormer-centrality", false}, {"laplacian+graphormer-spatial", false},
		{"graphormer-spatial+graphormer-centrality", true}} {
		t.Run(fmt.Sprintf("%s/virtual=%v", c.enc, c.virtual), func(t *testing.T) {
			p := tinyPlan(c.enc)
			p.Base.Dtype, p.VirtualNode = tensor.Float64, c.virtual
			r, cfg, k := setup(t, p)
			task := newTask(t, r, cfg, k)
			g := G.NewGraph()
			params := graph.NewParams(tensor.Float64, 1)
			loss, _, err := task.Build(g, params)
			if err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			for step := 0; step < 3; step++ {
				if err := task.Next(); err != nil {
					t.Fatal(err)
				}
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				got := graph.ToFloat64s(loss.Value())[0]
				vm.Reset()
				want := freshLoss(t, task, params)
				if math.Abs(got-want) > 1e-9 {
					t.Fatalf("step %d: training graph loss %v, a graph built for the batch %v", step, got, want)
				}
			}
		})
	}
}

// freshLoss builds the model for the task's current batch without a Feed
// (relations baked in) and returns its loss.
func freshLoss(t *testing.T, task *Task, p *graph.Params) float64 {
	t.Helper()
	in := task.in
	g := G.NewGraph()
	defer p.Forget(g)
	m, err := layers.NewGraphTransformer(g, p, task.gcfg)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := in.lastBatch.Positions()
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string, v *tensor.Dense) *G.Node {
		if v == nil {
			return nil
		}
		return G.NewTensor(g, v.Dtype(), v.Dims(), G.WithShape(v.Shape()...), G.WithName(name), G.WithValue(v.Clone().(*tensor.Dense)))
	}
	logits, err := m.Fwd(node("x", in.xT), pos, node("mask", in.maskT), node("lap", in.lapT))
	if err != nil {
		t.Fatal(err)
	}
	y := G.NewVector(g, tensor.Int, G.WithShape(len(in.labels)), G.WithName("y"), G.WithValue(in.yT.Clone().(*tensor.Dense)))
	loss, err := graph.CrossEntropy(logits, y)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(loss.Value())[0]
}

// TestStateResumes: a task restored from State draws the batches of the
// original.
func TestStateResumes(t *testing.T) {
	r, cfg, k := setup(t, tinyPlan("laplacian"))
	mk := func() *Task {
		task := newTask(t, r, cfg, k)
		if _, _, err := task.Build(G.NewGraph(), graph.NewParams(tensor.Float32, 1)); err != nil {
			t.Fatal(err)
		}
		return task
	}
	a, b := mk(), mk()
	for i := 0; i < 2; i++ {
		if err := a.Next(); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := a.State()
	if err := b.SetState(st); err != nil {
		t.Fatal(err)
	}
	if err := a.Next(); err != nil {
		t.Fatal(err)
	}
	if err := b.Next(); err != nil {
		t.Fatal(err)
	}
	if !equalBatch(a.in.lastBatch, b.in.lastBatch) {
		t.Fatal("a restored task drew another batch")
	}
	if err := a.Next(); err != nil {
		t.Fatal(err)
	}
	if equalBatch(a.in.lastBatch, b.in.lastBatch) {
		t.Fatal("consecutive batches are equal")
	}
	for _, bad := range []string{`{"step":1,"train_graphs":3}`, `not json`} {
		if err := b.SetState([]byte(bad)); err == nil {
			t.Errorf("state %q accepted", bad)
		}
	}
}

func equalBatch(a, b *graphdata.Batch) bool {
	if a.N != b.N || len(a.X) != len(b.X) || len(a.LapPE) != len(b.LapPE) || len(a.Rel) != len(b.Rel) {
		return false
	}
	for i := range a.Rel {
		if a.Rel[i] != b.Rel[i] {
			return false
		}
	}
	for i := range a.LapPE {
		if a.LapPE[i] != b.LapPE[i] {
			return false
		}
	}
	for i := range a.Labels {
		if a.Labels[i] != b.Labels[i] {
			return false
		}
	}
	return true
}

// TestPadBatch: padding keeps the real part and marks the rest as padding.
func TestPadBatch(t *testing.T) {
	o := graphdata.DefaultTaskOptions(graphdata.KindDistance)
	o.MinNodes, o.MaxNodes, o.Count = 3, 5, 4
	ds, err := graphdata.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := graphdata.NewBatch(ds, []int{0, 1, 2}, graphdata.BatchOptions{MaxDist: 6, LapK: 2})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := padBatch(bt, bt.N+2)
	if err != nil {
		t.Fatal(err)
	}
	n, N := pb.N, bt.N
	unreach := graphdata.UnreachableRelation(6)
	for b := 0; b < bt.B; b++ {
		for i := 0; i < n; i++ {
			real := i < N && bt.Valid[b][i]
			if pb.Valid[b][i] != real || (pb.Mask[b*n+i] == 1) != real {
				t.Fatalf("graph %d node %d: valid %v mask %v, want %v", b, i, pb.Valid[b][i], pb.Mask[b*n+i], real)
			}
			if i >= N && pb.Labels[b*n+i] != -1 {
				t.Fatalf("padding label %d", pb.Labels[b*n+i])
			}
			if i < N && pb.Labels[b*n+i] != bt.Labels[b*N+i] {
				t.Fatal("label moved")
			}
			for j := 0; j < n; j++ {
				want := unreach
				if i < N && j < N {
					want = bt.Rel[(b*N+i)*N+j]
				}
				if got := pb.Rel[(b*n+i)*n+j]; got != want {
					t.Fatalf("graph %d pair (%d, %d): relation %d, want %d", b, i, j, got, want)
				}
			}
		}
	}
	if _, err := padBatch(bt, N-1); err == nil || !strings.Contains(err.Error(), "cannot be padded") {
		t.Fatalf("padding to fewer nodes: %v", err)
	}
}

// TestBadGraphs: the errors of issue #14's "Done when" list on the study's
// path: an empty graph, a graph larger than the configured maximum, and a
// distance matrix of the wrong shape, each naming the problem.
func TestBadGraphs(t *testing.T) {
	r, cfg, k := setup(t, tinyPlan("graphormer-spatial"))
	task := newTask(t, r, cfg, k)
	params := graph.NewParams(tensor.Float32, 1)
	if _, _, err := task.Build(G.NewGraph(), params); err != nil {
		t.Fatal(err)
	}
	big, _ := graphdata.NewGraph(20, nil)
	withGraph := func(g *graphdata.Graph) *graphdata.Dataset {
		ds := *r.test
		n := 0
		if g != nil {
			n = g.N
		}
		ds.Examples = []*graphdata.Example{{ID: "bad", Graph: g, Features: make([]float32, n), Labels: make([]int, n)}}
		return &ds
	}
	for _, c := range []struct {
		name string
		ds   *graphdata.Dataset
		want string
	}{
		{"empty graph", withGraph(&graphdata.Graph{}), "empty graph: 0 nodes"},
		{"too large", withGraph(big), "the test graphs have up to 20 nodes, the model's configured maximum is 16"},
		{"no graphs", &graphdata.Dataset{}, "no graphs"},
	} {
		_, err := Evaluate(params, task.gcfg, c.ds, task.batchOptions(), 8)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A training set with a graph larger than the padding.
	d := r.data(k)
	d.PadNodes = 5
	if _, err := NewTask(cfg, d); err == nil || !strings.Contains(err.Error(), "padded to 5 nodes, the largest training graph has 8") {
		t.Errorf("small padding: %v", err)
	}
	// A distance matrix of the wrong shape (graphdata's check on the way
	// from distances to relations).
	if _, err := graphdata.DistanceRelations(make([]int, 12), 4, 6); err == nil || !strings.Contains(err.Error(), "distance matrix has 12 entries, want 4*4 = 16") {
		t.Errorf("distance matrix: %v", err)
	}
}

// TestCheckTaskConfig: a checkpoint of other data settings is refused.
func TestCheckTaskConfig(t *testing.T) {
	r, cfg, _ := setup(t, tinyPlan("graphormer-spatial"))
	a, b := newTask(t, r, cfg, 0), newTask(t, r, cfg, 3)
	saved, _ := a.TaskConfig()
	if err := a.CheckTaskConfig(saved); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckTaskConfig(saved); err == nil || !strings.Contains(err.Error(), "LapK:0") {
		t.Fatalf("other Laplacian size: %v", err)
	}
	if a.Kind() != "graph" || a.DataHash() == "" || a.DataHash() != b.DataHash() {
		t.Fatalf("kind %q, hashes %q %q", a.Kind(), a.DataHash(), b.DataHash())
	}
}

// TestPlan checks the encoding names and the errors of bad plans.
func TestPlan(t *testing.T) {
	p, _ := Preset("quick")
	for _, c := range []struct {
		enc, pos string
		lap      int
	}{
		{"none", "none", 0},
		{"laplacian", "none", 8},
		{"laplacian+graphormer-spatial", "graphormer-spatial", 8},
		{"graphormer-spatial+graphormer-centrality", "graphormer-spatial+graphormer-centrality", 0},
	} {
		p.Encodings = []string{c.enc}
		jobs, err := p.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		cfg, k, err := p.Config(jobs[0])
		if err != nil || cfg.Model.Pos != c.pos || k != c.lap {
			t.Errorf("%s: pos %q lap %d (%v), want %q %d", c.enc, cfg.Model.Pos, k, err, c.pos, c.lap)
		}
	}
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"line encoding", func(p *Plan) { p.Encodings = []string{"rope"} }, "take pairwise positions"},
		{"duplicate seed", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"duplicate encoding", func(p *Plan) { p.Encodings = []string{"none", "none"} }, "none-seed1 given twice"},
		{"max nodes", func(p *Plan) { p.MaxNodes = 40 }, "maximum graph size 40 is below the test graphs' 48 nodes"},
		{"max dist", func(p *Plan) { p.Encodings = []string{"graphormer-spatial@graph-max-dist=4"} }, "graph-max-dist 4 differs"},
		{"causal", func(p *Plan) { p.Base.Model.Causal = true }, "causal"},
		{"ood kind", func(p *Plan) { p.OOD.Kind = graphdata.KindTriangles }, "out-of-distribution task"},
		{"fracs", func(p *Plan) { p.Fracs = []float64{0.5, 0.5} }, "2 split fractions"},
	} {
		p, _ := Preset("quick")
		c.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), `unknown preset "huge"`) {
		t.Errorf("unknown preset: %v", err)
	}
}

// TestEvaluateStream: the study's evaluation of one set of weights gives the
// same loss and predictions with the streaming attention as without, on the
// out-of-distribution graphs (larger than the training padding, padded per
// batch, relations and key mask rebound per batch, a last smaller batch).
func TestEvaluateStream(t *testing.T) {
	for _, enc := range []string{"graphormer-spatial", "graphormer-spatial+graphormer-centrality", "laplacian+graphormer-spatial"} {
		t.Run(enc, func(t *testing.T) {
			p := tinyPlan(enc)
			p.Base.Dtype = tensor.Float64
			p.OOD.Count = 11 // batches of 4, 4 and 3 graphs of 10-12 nodes
			r, cfg, k := setup(t, p)
			task := newTask(t, r, cfg, k)
			params := graph.NewParams(tensor.Float64, 1)
			if _, _, err := task.Build(G.NewGraph(), params); err != nil {
				t.Fatal(err)
			}
			// Weights away from their initial values, so every bias matters.
			for _, name := range params.Names() {
				v := params.Float64s(name)
				for i := range v {
					v[i] += 0.1 * math.Sin(float64(3*i+1))
				}
				if err := params.Set(name, v); err != nil {
					t.Fatal(err)
				}
			}
			eval := func(stream bool) EvalResult {
				gc := task.gcfg
				gc.Encoder.Stream = stream
				res, err := Evaluate(params, gc, r.ood, task.batchOptions(), 4)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			off, on := eval(false), eval(true)
			if off.Nodes == 0 || on.Nodes != off.Nodes || on.Correct != off.Correct || math.Abs(on.Loss-off.Loss) > 1e-9*math.Max(1, off.Loss) {
				t.Errorf("stream: %d nodes, %d correct, loss %.12g; materialised: %d nodes, %d correct, loss %.12g", on.Nodes, on.Correct, on.Loss, off.Nodes, off.Correct, off.Loss)
			}
		})
	}
}
