package graphstudy

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Data is what a graph classifier is trained and validated on.
type Data struct {
	// Train is the training set, Val the graphs Validate scores.
	Train, Val *graphdata.Dataset
	// MaxDist clips the spatial relations (graphdata.BatchOptions.MaxDist);
	// it must equal the encoding's GraphMaxDist.
	MaxDist int
	// LapK > 0 feeds LapK Laplacian eigenvectors per node (sign-flipped at
	// random in training).
	LapK int
	// PadNodes is the N every training batch is padded to (at least the
	// largest training graph): the training graph is built once.
	PadNodes int
	// MaxNodes is the model's configured maximum graph size (>= PadNodes);
	// evaluation on a larger graph is an error naming both.
	MaxNodes int
	// VirtualNode adds Graphormer's graph token.
	VirtualNode bool
	// Unreachable is what attention does with pairs of nodes in different
	// connected components (a salt's ions): UnreachableBucket ("" too,
	// the default) leaves them to the spatial bias's learned unreachable
	// row; UnreachableMask blocks them (-inf on the score, Graphormer's
	// collator), for every encoding.
	Unreachable string
	// Cache keeps each graph's distances and Laplacian encoding (nil: a
	// private one).
	Cache *graphdata.DistanceCache
}

// The choices of Data.Unreachable (and Plan.Unreachable).
const (
	// UnreachableBucket gives unreachable pairs their own learned row of
	// the spatial bias (graphdata.UnreachableRelation): attention between
	// components is allowed. The default.
	UnreachableBucket = "bucket"
	// UnreachableMask blocks attention between nodes of different
	// components, as Graphormer's collator does (attn_bias -inf for
	// spatial_pos >= spatial_pos_max, unreachable pairs being at distance
	// 510; padding keys -inf, padding query rows open to the real keys).
	UnreachableMask = "mask"
)

// checkUnreachable returns an error unless u is a choice of
// Data.Unreachable.
func checkUnreachable(u string) error {
	if u != "" && u != UnreachableBucket && u != UnreachableMask {
		return errors.Errorf("unknown unreachable-pair option %q (valid: %s, %s)", u, UnreachableBucket, UnreachableMask)
	}
	return nil
}

// GraphConfig returns the classifier of a training configuration: the
// encoder is cfg.Model, with the data's features, classes and options (a
// regression data set: one real-valued output per graph).
func (d Data) GraphConfig(cfg trainer.Config) layers.GraphConfig {
	classes := d.Train.NumClasses
	if d.Train.Regression {
		classes = 1
	}
	return layers.GraphConfig{Encoder: cfg.Model, Features: d.Train.NumFeatures, Classes: classes,
		PerNode: d.Train.PerNode, Regression: d.Train.Regression, LapK: d.LapK, VirtualNode: d.VirtualNode, MaxNodes: d.MaxNodes}
}

// Standardiser maps a regression target y to (y - Mean)/Std, the scale
// the model predicts and the loss is computed on.
type Standardiser struct {
	Mean, Std float64
}

// NewStandardiser returns the mean and the population standard deviation
// of the targets of ds (Std 1 if they are all equal).
func NewStandardiser(ds *graphdata.Dataset) Standardiser {
	var s, ss float64
	for _, ex := range ds.Examples {
		s += ex.Target
	}
	n := float64(len(ds.Examples))
	st := Standardiser{Mean: s / n, Std: 1}
	for _, ex := range ds.Examples {
		ss += (ex.Target - st.Mean) * (ex.Target - st.Mean)
	}
	if sd := math.Sqrt(ss / n); sd > 0 {
		st.Std = sd
	}
	return st
}

// Task trains a layers.GraphTransformer with the project's one engine
// (trainer.RunTask): it implements trainer.Task. Its training graph is
// built once for batches padded to Data.PadNodes nodes; the relations of
// each batch are rebound through a posenc.Feed.
type Task struct {
	cfg  trainer.Config
	gcfg layers.GraphConfig
	data Data
	std  Standardiser // the training targets' (regression)
	step uint64       // batches drawn
	in   *inputs
}

// NewTask checks cfg and data and returns the task.
func NewTask(cfg trainer.Config, data Data) (*Task, error) {
	if data.Train == nil || data.Val == nil || len(data.Train.Examples) == 0 || len(data.Val.Examples) == 0 {
		return nil, errors.New("graph task: training and validation graphs are required")
	}
	if data.Cache == nil {
		data.Cache = new(graphdata.DistanceCache)
	}
	if data.MaxDist < 1 {
		return nil, errors.Errorf("graph task: maximum distance %d must be at least 1", data.MaxDist)
	}
	if n := largest(data.Train); data.PadNodes < n {
		return nil, errors.Errorf("graph task: training batches are padded to %d nodes, the largest training graph has %d", data.PadNodes, n)
	}
	if data.MaxNodes < data.PadNodes {
		return nil, errors.Errorf("graph task: the configured maximum graph size %d is below the training padding %d", data.MaxNodes, data.PadNodes)
	}
	if err := checkUnreachable(data.Unreachable); err != nil {
		return nil, errors.WithMessage(err, "graph task")
	}
	if data.Train.Regression != data.Val.Regression {
		return nil, errors.New("graph task: the training and validation graphs must both be regression or both classification data")
	}
	gc := data.GraphConfig(cfg)
	if err := gc.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.ValidateTraining(); err != nil {
		return nil, err
	}
	t := &Task{cfg: cfg, gcfg: gc, data: data}
	if data.Train.Regression {
		t.std = NewStandardiser(data.Train)
	}
	return t, nil
}

// largest is the number of nodes of the largest graph of ds (0 if it has
// none or a nil graph).
func largest(ds *graphdata.Dataset) int {
	n := 0
	for _, ex := range ds.Examples {
		if ex != nil && ex.Graph != nil {
			n = max(n, ex.Graph.N)
		}
	}
	return n
}

// Kind implements trainer.Task.
func (t *Task) Kind() string { return "graph" }

// Items implements trainer.Task: graphs per update.
func (t *Task) Items() int { return t.cfg.Batch }

// Units implements trainer.UnitNamer: losses in bits per node, items are
// graphs.
func (t *Task) Units() trainer.Units {
	if t.data.Train.Regression {
		return trainer.Units{Loss: "(mean squared error of standardised targets / ln 2)", Items: "graphs", ItemsShort: "gr"}
	}
	return trainer.Units{Loss: "bits/node", Items: "graphs", ItemsShort: "gr"}
}

// Describe implements trainer.Task.
func (t *Task) Describe() string {
	o := t.data.Train.Options
	return fmt.Sprintf("%s on %s graphs of %d-%d nodes padded to %d, batch %d; %d training, %d validation graphs",
		t.gcfg, o.Kind, o.MinNodes, o.MaxNodes, t.data.PadNodes, t.cfg.Batch, len(t.data.Train.Examples), len(t.data.Val.Examples))
}

// inputs are the input nodes of one graph of the model and their values.
type inputs struct {
	m                   *layers.GraphTransformer
	feed                *posenc.Feed
	xN, maskN, lapN, yN *G.Node
	xT, maskT, lapT, yT *tensor.Dense
	labels              []int
	logits              *G.Node
	b, n, k             int
	opts                graphdata.BatchOptions
	data                *graphdata.Dataset
	// pairN [B, N, N] is the pairwise mask of UnreachableMask (nil
	// otherwise); std standardises regression targets (yN [B] holds them,
	// standardised, in the parameters' dtype).
	pairN *G.Node
	pairT *tensor.Dense
	std   Standardiser
	// lastBatch is the batch bound last.
	lastBatch *graphdata.Batch
}

// newInputs builds the model for batches of b graphs padded to n nodes on
// g, with its inputs, positions from the first b graphs of ds (any graphs
// do: the relations are rebound per batch through the Feed).
func newInputs(g *G.ExprGraph, p *graph.Params, gc layers.GraphConfig, ds *graphdata.Dataset, b, n int, o graphdata.BatchOptions, mo modelInputs) (*inputs, error) {
	m, err := layers.NewGraphTransformer(g, p, gc)
	if err != nil {
		return nil, errors.WithMessage(err, "graph task: building the model")
	}
	dt := p.Dtype()
	in := &inputs{m: m, feed: posenc.NewFeed(), b: b, n: n, k: gc.LapK, opts: o, data: ds, std: mo.std}
	if mo.unreachable == UnreachableMask {
		in.pairT = tensor.New(tensor.WithShape(b, n, n), tensor.Of(dt))
		in.pairN = G.NewTensor(g, dt, 3, G.WithShape(b, n, n), G.WithName("graph_pair_mask"), G.WithValue(in.pairT))
	}
	f := ds.NumFeatures
	in.xT = tensor.New(tensor.WithShape(b, n, f), tensor.Of(dt))
	in.xN = G.NewTensor(g, dt, 3, G.WithShape(b, n, f), G.WithName("graph_x"), G.WithValue(in.xT))
	in.maskT = tensor.New(tensor.WithShape(b, n), tensor.Of(dt))
	in.maskN = G.NewTensor(g, dt, 2, G.WithShape(b, n), G.WithName("graph_mask"), G.WithValue(in.maskT))
	if gc.LapK > 0 {
		in.lapT = tensor.New(tensor.WithShape(b, n, gc.LapK), tensor.Of(dt))
		in.lapN = G.NewTensor(g, dt, 3, G.WithShape(b, n, gc.LapK), G.WithName("graph_lap"), G.WithValue(in.lapT))
	}
	nl := b
	if ds.PerNode {
		nl = b * n
	}
	if ds.Regression {
		in.yT = tensor.New(tensor.WithShape(b), tensor.Of(dt))
		in.yN = G.NewVector(g, dt, G.WithShape(b), G.WithName("graph_targets"), G.WithValue(in.yT))
	} else {
		in.labels = make([]int, nl)
		in.yT = tensor.New(tensor.WithShape(nl), tensor.WithBacking(in.labels))
		in.yN = G.NewVector(g, tensor.Int, G.WithShape(nl), G.WithName("graph_labels"), G.WithValue(in.yT))
	}
	idx := make([]int, b)
	for i := range idx {
		idx[i] = i % len(ds.Examples)
	}
	first, err := in.batch(idx, nil)
	if err != nil {
		return nil, err
	}
	pos, err := first.Positions()
	if err != nil {
		return nil, err
	}
	pos.Feed = in.feed
	if err := in.fill(first); err != nil {
		return nil, err
	}
	if in.logits, err = m.FwdPairMask(in.xN, pos, in.maskN, in.pairN, in.lapN); err != nil {
		return nil, err
	}
	return in, nil
}

// modelInputs are the task's settings newInputs needs besides the model's
// configuration.
type modelInputs struct {
	unreachable string
	std         Standardiser
}

// PairMask returns the pairwise mask of UnreachableMask for batch bt [B*N*N],
// row-major [B, N, N]: 1 where a real query node may attend to a key node
// of its own component (Rel is not the unreachable relation), 0 for the
// other pairs of a real query (other components, padding); a padding
// query's row is 1 on the real keys, as Graphormer's collator leaves it
// (its output is never read). The key mask blocks padding keys anyway.
func PairMask(bt *graphdata.Batch) []float64 {
	n, unreach := bt.N, bt.NumRel-1
	pm := make([]float64, bt.B*n*n)
	for b := 0; b < bt.B; b++ {
		for i := 0; i < n; i++ {
			row := pm[(b*n+i)*n : (b*n+i+1)*n]
			rel := bt.Rel[(b*n+i)*n : (b*n+i+1)*n]
			for j := range row {
				if !bt.Valid[b][j] {
					continue
				}
				if !bt.Valid[b][i] || rel[j] != unreach {
					row[j] = 1
				}
			}
		}
	}
	return pm
}

// batch builds the batch of examples idx padded to in.n nodes (flip: the
// sign-flip generator or nil).
func (in *inputs) batch(idx []int, flip *rand.Rand) (*graphdata.Batch, error) {
	o := in.opts
	o.Flip = flip
	bt, err := graphdata.NewBatch(in.data, idx, o)
	if err != nil {
		return nil, err
	}
	return padBatch(bt, in.n)
}

// fill writes the batch into the input values and binds them (the
// positions through the Feed).
func (in *inputs) fill(bt *graphdata.Batch) error {
	if bt.B != in.b || bt.N != in.n {
		return errors.Errorf("graph task: batch of %d graphs of %d nodes for a model of %d x %d", bt.B, bt.N, in.b, in.n)
	}
	in.lastBatch = bt
	graph.CopyFloat32s(in.xT, bt.X)
	graph.CopyFloat32s(in.maskT, bt.Mask)
	if in.lapT != nil {
		graph.CopyFloat32s(in.lapT, bt.LapPE)
	}
	if in.data.Regression {
		z := make([]float64, len(bt.Targets))
		for i, y := range bt.Targets {
			z[i] = (y - in.std.Mean) / in.std.Std
		}
		copyFloat64s(in.yT, z)
	} else {
		copy(in.labels, bt.Labels)
	}
	if in.pairT != nil {
		copyFloat64s(in.pairT, PairMask(bt))
	}
	for _, c := range []struct {
		n *G.Node
		v *tensor.Dense
	}{{in.xN, in.xT}, {in.maskN, in.maskT}, {in.lapN, in.lapT}, {in.yN, in.yT}, {in.pairN, in.pairT}} {
		if c.n == nil {
			continue
		}
		if err := G.Let(c.n, c.v); err != nil {
			return errors.Wrapf(err, "graph task: binding %s", c.n.Name())
		}
	}
	pos, err := bt.Positions()
	if err != nil {
		return err
	}
	sp, err := in.m.SitePositions(pos)
	if err != nil {
		return err
	}
	return errors.WithMessage(in.feed.Bind(sp), "graph task: binding the relations")
}

// padBatch pads bt to n nodes (n >= bt.N): padding nodes have zero
// features and Laplacian rows, are invalid, unreachable from everything and
// labelled -1 (per-node tasks).
func padBatch(bt *graphdata.Batch, n int) (*graphdata.Batch, error) {
	if n < bt.N {
		return nil, errors.Errorf("graph task: a batch of graphs of up to %d nodes cannot be padded to %d", bt.N, n)
	}
	if n == bt.N {
		return bt, nil
	}
	B, N, F, K := bt.B, bt.N, bt.F, bt.LapK
	unreach := bt.NumRel - 1 // graphdata.UnreachableRelation: the last relation id
	out := *bt
	out.N = n
	out.X = make([]float32, B*n*F)
	out.Mask = make([]float32, B*n)
	out.Valid = make([][]bool, B)
	out.Rel = make([]int, B*n*n)
	out.Degrees = make([]int, B*n)
	if K > 0 {
		out.LapPE = make([]float32, B*n*K)
	}
	if bt.PerNode {
		out.Labels = make([]int, B*n)
		for i := range out.Labels {
			out.Labels[i] = -1
		}
	}
	for i := range out.Rel {
		out.Rel[i] = unreach
	}
	for b := 0; b < B; b++ {
		copy(out.X[b*n*F:], bt.X[b*N*F:(b+1)*N*F])
		copy(out.Mask[b*n:], bt.Mask[b*N:(b+1)*N])
		out.Valid[b] = make([]bool, n)
		copy(out.Valid[b], bt.Valid[b])
		copy(out.Degrees[b*n:], bt.Degrees[b*N:(b+1)*N])
		if K > 0 {
			copy(out.LapPE[b*n*K:], bt.LapPE[b*N*K:(b+1)*N*K])
		}
		if bt.PerNode {
			copy(out.Labels[b*n:], bt.Labels[b*N:(b+1)*N])
		}
		for i := 0; i < N; i++ {
			copy(out.Rel[(b*n+i)*n:], bt.Rel[(b*N+i)*N:(b*N+i+1)*N])
		}
	}
	return &out, nil
}

// copyFloat64s writes v into the float32 or float64 tensor t.
func copyFloat64s(t *tensor.Dense, v []float64) {
	switch d := t.Data().(type) {
	case []float64:
		copy(d, v)
	case []float32:
		for i, x := range v {
			d[i] = float32(x)
		}
	}
}

func (t *Task) batchOptions() graphdata.BatchOptions {
	return graphdata.BatchOptions{MaxDist: t.data.MaxDist, MaxNodes: t.data.MaxNodes, LapK: t.data.LapK, Cache: t.data.Cache}
}

func (t *Task) modelInputs() modelInputs {
	return modelInputs{unreachable: t.data.Unreachable, std: t.std}
}

// Build implements trainer.Task: the model for batches of Batch graphs
// padded to PadNodes nodes, and the mean cross-entropy over real nodes
// (classification) or the mean squared error of the standardised targets
// (regression, MSE).
func (t *Task) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	in, err := newInputs(g, p, t.gcfg, t.data.Train, t.cfg.Batch, t.data.PadNodes, t.batchOptions(), t.modelInputs())
	if err != nil {
		return nil, nil, err
	}
	t.in = in
	var loss *G.Node
	if t.data.Train.Regression {
		loss, err = MSE(in.logits, in.yN)
	} else {
		loss, err = graph.CrossEntropy(in.logits, in.yN)
	}
	if err != nil {
		return nil, nil, err
	}
	return loss, in.m.Learnables(), nil
}

// MSE is the mean squared error of predictions pred [B, 1] (or [B])
// against targets y [B]: mean_b (pred_b - y_b)², a scalar, from
// Gorgonia's differentiable Sub, Square and Mean.
func MSE(pred, y *G.Node) (*G.Node, error) {
	b := y.Shape().TotalSize()
	if pred.Shape().TotalSize() != b || y.Dims() != 1 {
		return nil, errors.Errorf("graph task: mean squared error of predictions %v and targets %v, want [B, 1] and [B]", pred.Shape(), y.Shape())
	}
	p, err := graph.Reshape(pred, b)
	if err != nil {
		return nil, err
	}
	d, err := G.Sub(p, y)
	if err != nil {
		return nil, errors.Wrap(err, "graph task: mean squared error")
	}
	sq, err := G.Square(d)
	if err != nil {
		return nil, errors.Wrap(err, "graph task: mean squared error")
	}
	m, err := G.Mean(sq)
	return m, errors.Wrap(err, "graph task: mean squared error")
}

// trainStream separates the batch streams of the graph task from other
// streams of the same seed.
const trainStream = 0x6772617068426174 // "graphBat"

// Next implements trainer.Task: batch k (k = the number drawn so far) holds
// Batch training graphs drawn uniformly with replacement by a generator
// seeded with (Seed, k), which also draws the Laplacian sign flips; it
// depends only on the seed and k, so a resumed run draws the batches of an
// uninterrupted one.
func (t *Task) Next() error {
	if t.in == nil {
		return errors.New("graph task: Next before Build")
	}
	rng := rand.New(rand.NewPCG(uint64(t.cfg.Seed), trainStream+t.step))
	idx := make([]int, t.cfg.Batch)
	for i := range idx {
		idx[i] = rng.IntN(len(t.data.Train.Examples))
	}
	bt, err := t.in.batch(idx, rng)
	if err != nil {
		return err
	}
	if err := t.in.fill(bt); err != nil {
		return err
	}
	t.step++
	return nil
}

// taskState is the batch generator's state.
type taskState struct {
	Step  uint64 `json:"step"`
	Train int    `json:"train_graphs"`
}

// State implements trainer.Task.
func (t *Task) State() ([]byte, error) {
	return json.Marshal(taskState{Step: t.step, Train: len(t.data.Train.Examples)})
}

// SetState implements trainer.Task.
func (t *Task) SetState(s []byte) error {
	var st taskState
	if err := json.Unmarshal(s, &st); err != nil {
		return errors.Wrap(err, "graph task: corrupt batch state")
	}
	if st.Train != len(t.data.Train.Examples) {
		return errors.Errorf("graph task: batch state is for %d training graphs, this run has %d", st.Train, len(t.data.Train.Examples))
	}
	t.step = st.Step
	return nil
}

// hashData identifies a data set: its options and example ids.
func hashData(ds *graphdata.Dataset) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v|%v|%d|%d|", ds.Options, ds.PerNode, ds.NumFeatures, ds.NumClasses)
	for _, ex := range ds.Examples {
		fmt.Fprintf(h, "%s;", ex.ID)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// DataHash implements trainer.Task: the training set's hash.
func (t *Task) DataHash() string { return hashData(t.data.Train) }

// taskConfig is what a checkpoint of this task must agree on besides the
// training configuration.
type taskConfig struct {
	Kind                 string
	MaxDist, LapK        int
	PadNodes, MaxNodes   int
	Features, Classes    int
	PerNode, VirtualNode bool
	// Regression, Unreachable and Standardiser are omitted when zero, so
	// the checkpoints of classification runs made before them still load.
	Regression   bool         `json:",omitempty"`
	Unreachable  string       `json:",omitempty"`
	Standardiser Standardiser `json:",omitzero"`
}

func (t *Task) taskConfig() taskConfig {
	u := t.data.Unreachable
	if u == UnreachableBucket {
		u = ""
	}
	return taskConfig{Kind: t.data.Train.Options.Kind, MaxDist: t.data.MaxDist, LapK: t.data.LapK, PadNodes: t.data.PadNodes,
		MaxNodes: t.data.MaxNodes, Features: t.gcfg.Features, Classes: t.gcfg.Classes, PerNode: t.gcfg.PerNode, VirtualNode: t.gcfg.VirtualNode,
		Regression: t.gcfg.Regression, Unreachable: u, Standardiser: t.std}
}

// TaskConfig implements trainer.TaskConfigurer.
func (t *Task) TaskConfig() ([]byte, error) { return json.Marshal(t.taskConfig()) }

// CheckTaskConfig implements trainer.TaskConfigurer: a checkpoint of
// another task, relation clipping, Laplacian size, padding, classes or
// virtual token is refused.
func (t *Task) CheckTaskConfig(saved []byte) error {
	var s taskConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return errors.Wrap(err, "graph task: checkpoint task configuration")
	}
	if w := t.taskConfig(); s != w {
		return errors.Errorf("graph task: checkpoint was trained with %+v; this run has %+v", s, w)
	}
	return nil
}

// Validate implements trainer.Task: the node accuracy on the validation
// graphs.
func (t *Task) Validate(p *graph.Params) (trainer.Validation, error) {
	if t.data.Train.Regression {
		r, err := t.Evaluate(p, t.data.Val)
		if err != nil {
			return trainer.Validation{}, err
		}
		return trainer.Validation{Name: "rmse", Value: r.RMSE,
			Text: fmt.Sprintf("validation: RMSE %.3f, MAE %.3f, R² %.4f (%d graphs)", r.RMSE, r.MAE, r.R2, r.Graphs)}, nil
	}
	r, err := Evaluate(p, t.gcfg, t.data.Val, t.batchOptions(), t.cfg.EvalBatch)
	if err != nil {
		return trainer.Validation{}, err
	}
	return trainer.Validation{Name: "accuracy", Value: r.Accuracy,
		Text: fmt.Sprintf("validation: node accuracy %.4f (%d/%d nodes), graphs all right %.4f, loss %.4f nats", r.Accuracy, r.Correct, r.Nodes, r.GraphAccuracy, r.Loss)}, nil
}

// EvalResult is the outcome of Evaluate.
type EvalResult struct {
	// Accuracy is Correct/Nodes over the real nodes (per-node tasks) or
	// the graphs (per-graph tasks); Loss the mean cross-entropy in nats
	// over the same items.
	Accuracy, Loss float64
	Correct, Nodes int
	// GraphAccuracy is the fraction of graphs whose nodes are all right
	// (per-node tasks; Accuracy for per-graph tasks), Graphs their number.
	GraphAccuracy float64
	Graphs        int
	// Right[g] counts the right items (nodes, or 0/1 for a per-graph
	// task) of graph g of the data set, in its order.
	Right []int
	// PadNodes is the N the graphs were padded to (the largest of ds).
	PadNodes int
	// Regression (Task.Evaluate of a regression data set): RMSE and MAE
	// of the predictions in the targets' units (the model's standardised
	// output mapped back), R2 = 1 - SSE/SST with SST about the mean of
	// ds's own targets, and the absolute error of each graph of ds, in its
	// order. Loss is then the mean squared error on the standardised
	// scale, Nodes the real nodes of the graphs, Accuracy 0.
	RMSE, MAE, R2 float64
	AbsErr        []float64
}

// Evaluate classifies every graph of ds with the weights p (a model of
// configuration gc) in batches of at most batch graphs, padded to the
// largest graph of ds: one graph of the model per batch size, the
// relations rebound per batch. o gives the relation clipping, Laplacian
// size and cache (o.Flip is ignored: no sign flips). It returns an error
// for an empty data set, an empty or malformed graph, or a graph larger
// than the model's configured maximum (naming both).
func Evaluate(p *graph.Params, gc layers.GraphConfig, ds *graphdata.Dataset, o graphdata.BatchOptions, batch int) (EvalResult, error) {
	if ds != nil && ds.Regression {
		return EvalResult{}, errors.New("graph evaluation: a regression data set is scored by Task.Evaluate (it needs the training targets' standardisation)")
	}
	return evaluate(p, gc, ds, o, batch, modelInputs{})
}

// Evaluate scores every graph of ds with the weights p as the task's model
// (its padding mask option, and for regression its standardisation of the
// training targets), in batches of EvalBatch: Evaluate's node accuracy, or
// for a regression data set RMSE, MAE and R² (EvalResult).
func (t *Task) Evaluate(p *graph.Params, ds *graphdata.Dataset) (EvalResult, error) {
	if ds != nil && ds.Regression != t.data.Train.Regression {
		return EvalResult{}, errors.New("graph evaluation: a regression model scores regression data, a classifier classification data")
	}
	return evaluate(p, t.gcfg, ds, t.batchOptions(), t.cfg.EvalBatch, t.modelInputs())
}

func evaluate(p *graph.Params, gc layers.GraphConfig, ds *graphdata.Dataset, o graphdata.BatchOptions, batch int, mo modelInputs) (EvalResult, error) {
	var r EvalResult
	if ds == nil || len(ds.Examples) == 0 {
		return r, errors.New("graph evaluation: no graphs")
	}
	if batch <= 0 {
		return r, errors.Errorf("graph evaluation: batch %d must be positive", batch)
	}
	for i, ex := range ds.Examples {
		if ex == nil {
			return r, errors.Errorf("graph evaluation: example %d is nil", i)
		}
		if err := ex.Graph.Check(0); err != nil {
			return r, errors.WithMessagef(err, "graph evaluation: example %d (%s)", i, ex.ID)
		}
	}
	n := largest(ds)
	if gc.MaxNodes > 0 && n > gc.MaxNodes {
		return r, errors.Errorf("graph evaluation: the test graphs have up to %d nodes, the model's configured maximum is %d", n, gc.MaxNodes)
	}
	r.PadNodes = n
	o.Flip, o.MaxNodes = nil, gc.MaxNodes
	batch = min(batch, len(ds.Examples))
	run := func(from, b int) error {
		g := G.NewGraph()
		defer p.Forget(g)
		in, err := newInputs(g, p, gc, ds, b, n, o, mo)
		if err != nil {
			return err
		}
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		idx := make([]int, b)
		for start := from; start+b <= len(ds.Examples) && (b == batch || start == from); start += b {
			for i := range idx {
				idx[i] = start + i
			}
			bt, err := in.batch(idx, nil)
			if err != nil {
				return err
			}
			if err := in.fill(bt); err != nil {
				return err
			}
			if err := vm.RunAll(); err != nil {
				return errors.Wrap(err, "graph evaluation")
			}
			if ds.Regression {
				scoreRegression(&r, graph.ToFloat64s(in.logits.Value()), bt, mo.std)
			} else {
				score(&r, graph.ToFloat64s(in.logits.Value()), bt, gc.Classes)
			}
			vm.Reset()
		}
		return nil
	}
	full := len(ds.Examples) / batch * batch
	if err := run(0, batch); err != nil {
		return r, err
	}
	if rest := len(ds.Examples) - full; rest > 0 {
		if err := run(full, rest); err != nil {
			return r, err
		}
	}
	if r.Nodes == 0 {
		return r, errors.New("graph evaluation: nothing scored")
	}
	if ds.Regression {
		return finishRegression(r, ds)
	}
	r.Accuracy = float64(r.Correct) / float64(r.Nodes)
	r.Loss /= float64(r.Nodes)
	r.GraphAccuracy /= float64(r.Graphs)
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		return r, errors.Errorf("graph evaluation: loss %v: the model's outputs are not finite", r.Loss)
	}
	return r, nil
}

// score adds the logits [rows, k] of batch bt to r (GraphAccuracy as a
// count until Evaluate divides).
func score(r *EvalResult, out []float64, bt *graphdata.Batch, k int) {
	for b := 0; b < bt.B; b++ {
		allRight, right := true, 0
		rows := []int{b}
		if bt.PerNode {
			rows = rows[:0]
			for i := 0; i < bt.N; i++ {
				rows = append(rows, b*bt.N+i)
			}
		}
		for _, ri := range rows {
			lab := bt.Labels[ri]
			if lab < 0 {
				continue
			}
			row := out[ri*k : (ri+1)*k]
			best, mx := 0, math.Inf(-1)
			for c, v := range row {
				if v > mx {
					best, mx = c, v
				}
			}
			lse := 0.0
			for _, v := range row {
				lse += math.Exp(v - mx)
			}
			r.Loss += mx + math.Log(lse) - row[lab]
			r.Nodes++
			if best == lab {
				r.Correct++
				right++
			} else {
				allRight = false
			}
		}
		r.Right = append(r.Right, right)
		r.Graphs++
		if allRight {
			r.GraphAccuracy++
		}
	}
}

// scoreRegression adds the predictions out [B] (standardised) of batch bt
// to r: the squared standardised error to Loss, the absolute error in the
// targets' units to AbsErr and MAE, the squared one to RMSE (sums until
// finishRegression).
func scoreRegression(r *EvalResult, out []float64, bt *graphdata.Batch, std Standardiser) {
	for b := 0; b < bt.B; b++ {
		z := (bt.Targets[b] - std.Mean) / std.Std
		r.Loss += (out[b] - z) * (out[b] - z)
		e := out[b]*std.Std + std.Mean - bt.Targets[b]
		r.AbsErr = append(r.AbsErr, math.Abs(e))
		r.MAE += math.Abs(e)
		r.RMSE += e * e
		r.Graphs++
		r.Nodes += bt.Nodes[b]
	}
}

// finishRegression turns the sums of scoreRegression into means, RMSE and
// R² (about the mean of ds's targets; 0/0 when they are all equal: R² 0
// for a perfect fit is not claimed, it is NaN and an error).
func finishRegression(r EvalResult, ds *graphdata.Dataset) (EvalResult, error) {
	g := float64(r.Graphs)
	sse := r.RMSE
	r.Loss /= g
	r.MAE /= g
	r.RMSE = math.Sqrt(sse / g)
	mean := 0.0
	for _, ex := range ds.Examples {
		mean += ex.Target
	}
	mean /= float64(len(ds.Examples))
	sst := 0.0
	for _, ex := range ds.Examples {
		sst += (ex.Target - mean) * (ex.Target - mean)
	}
	r.R2 = 1 - sse/sst
	r.GraphAccuracy, r.Accuracy = 0, 0
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) || math.IsNaN(r.R2) {
		return r, errors.Errorf("graph evaluation: mean squared error %v, R² %v: the model's outputs are not finite or the targets are all equal", r.Loss, r.R2)
	}
	return r, nil
}
