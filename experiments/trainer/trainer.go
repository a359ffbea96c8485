package trainer

import (
	"io"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/optim"
)

// Trainer applies the engine's updates to a Task: AdamW with a warm-up
// cosine schedule, global-norm clipping and non-finite checks. The task's
// training graph (with its gradients) is built once, for one batch, and
// reused by every update. New makes the trainer of the byte-level language
// model (LMTask), NewTaskTrainer that of any task.
type Trainer struct {
	Cfg Config
	// Corpus is the language model's corpus (nil for other tasks).
	Corpus *Corpus
	// Task is what is trained.
	Task Task
	// Params holds the model's weights; graphs built from it (evaluation at
	// other lengths, sampling) share them.
	Params *graph.Params
	Opt    optim.Optimizer
	Sched  optim.WarmupCosine
	// Init is the source of the initial weights of a run started from
	// other weights (RunOptions.InitFrom), nil otherwise; checkpoints
	// record it.
	Init *InitInfo

	step int
	// broken is set when an update left non-finite weights: the trainer
	// refuses further updates and saves.
	broken error

	g     *G.ExprGraph
	lm    *LMTask // Task, if it is the language model
	loss  *G.Node
	learn G.Nodes
	vm    G.VM
}

// StepResult describes one update.
type StepResult struct {
	// Step is the number of completed updates after this one (1-based
	// index of the update).
	Step int
	// Loss is the mean training loss of the batch in nats (for the language
	// model, the cross-entropy), before the update.
	Loss float64
	// GradNorm is the global gradient norm before clipping.
	GradNorm float64
	// LR is the learning rate used.
	LR float64
	// Seconds is the wall time of the update (set by Run).
	Seconds float64
}

// New validates cfg, checks that the corpus is long enough and that the
// estimated memory of the run (EstimateMemory) fits in the available memory,
// creates the model's parameters (seeded with cfg.Seed) and builds the
// training graph of the language model: NewTaskTrainer(cfg, NewLMTask(cfg,
// c)). Trainer.Cfg is cfg.Resolved().
func New(cfg Config, c *Corpus) (*Trainer, error) {
	task, err := NewLMTask(cfg, c)
	if err != nil {
		return nil, err
	}
	return NewTaskTrainer(cfg, task)
}

// NewTaskTrainer validates cfg (Config.ValidateTraining; cfg.Model is the
// task's model configuration, recorded in checkpoints), creates the
// parameter store (cfg.Dtype, seeded with cfg.Seed), AdamW and the schedule
// of cfg, lets task build its graph (Task.Build), checks that the loss is a
// scalar of cfg.Dtype and that the learnable nodes are exactly the
// parameters, and adds the gradients and the tape machine. Trainer.Cfg is
// cfg.Resolved(). Errors name the problem; the task's own errors are
// returned as they are.
func NewTaskTrainer(cfg Config, task Task) (*Trainer, error) {
	if err := cfg.ValidateTraining(); err != nil {
		return nil, err
	}
	if task == nil {
		return nil, errors.New("trainer: nil task")
	}
	cfg = cfg.Resolved()
	t := &Trainer{
		Cfg:    cfg,
		Task:   task,
		Params: graph.NewParams(cfg.Dtype, cfg.Seed),
		Opt:    optim.NewAdamW(cfg.LR, cfg.Beta1, cfg.Beta2, cfg.AdamEps, cfg.WeightDecay),
		Sched:  optim.WarmupCosine{Peak: cfg.LR, Warmup: cfg.Warmup, Total: cfg.Steps, Floor: cfg.FloorFrac},
	}
	if lm, ok := task.(*LMTask); ok {
		t.lm, t.Corpus = lm, lm.corpus
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	return t, nil
}

// build creates the training graph and its tape machine.
func (t *Trainer) build() error {
	t.g = G.NewGraph()
	loss, learn, err := t.Task.Build(t.g, t.Params)
	if err != nil {
		return err
	}
	if err := t.checkBuilt(loss, learn); err != nil {
		return errors.WithMessagef(err, "trainer: task %q", t.Task.Kind())
	}
	t.loss, t.learn = loss, learn
	if len(t.learn) != len(t.Params.Names()) {
		return errors.Errorf("trainer: the model has %d learnable nodes but %d parameters", len(t.learn), len(t.Params.Names()))
	}
	if _, err := G.Grad(t.loss, t.learn...); err != nil {
		return errors.Wrap(err, "trainer: gradient of the loss")
	}
	t.vm = G.NewTapeMachine(t.g, G.BindDualValues(t.learn...))
	return nil
}

// checkBuilt checks what Task.Build returned: a scalar loss of the run's
// dtype in the training graph, and learnable nodes that are distinct
// parameters of the store.
func (t *Trainer) checkBuilt(loss *G.Node, learn G.Nodes) error {
	if loss == nil {
		return errors.New("Build returned a nil loss")
	}
	if loss.Graph() != t.g {
		return errors.New("the loss is not a node of the training graph")
	}
	if !loss.IsScalar() && !(loss.Shape().TotalSize() == 1 && loss.Dims() == 1) {
		return errors.Errorf("the loss has shape %v, want a scalar", loss.Shape())
	}
	if dt, ok := nodeDtype(loss); !ok || dt != t.Cfg.Dtype {
		return errors.Errorf("the loss is of type %v, want %v", loss.Type(), t.Cfg.Dtype)
	}
	seen := map[string]bool{}
	for i, n := range learn {
		if n == nil {
			return errors.Errorf("learnable node %d is nil", i)
		}
		if _, ok := t.Params.Info(n.Name()); !ok {
			return errors.Errorf("learnable node %q is not a parameter of the store", n.Name())
		}
		if seen[n.Name()] {
			return errors.Errorf("learnable node %q is listed twice", n.Name())
		}
		seen[n.Name()] = true
	}
	return nil
}

// nodeDtype is n.Dtype(), which panics on a type without one.
func nodeDtype(n *G.Node) (dt tensor.Dtype, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return n.Dtype(), true
}

// Step returns the number of completed updates.
func (t *Trainer) Step() int { return t.step }

// LM returns the model of the training graph of the language model (nil if
// the task is another).
func (t *Trainer) LM() *layers.LM {
	if t.lm == nil {
		return nil
	}
	return t.lm.lm
}

// Close releases the training graph's machine, and the task's resources if
// it implements io.Closer.
func (t *Trainer) Close() error {
	var cerr error
	if c, ok := t.Task.(io.Closer); ok {
		cerr = c.Close()
	}
	t.Params.Forget(t.g)
	if err := t.vm.Close(); err != nil {
		return err
	}
	return cerr
}

// optParams pairs every parameter with its gradient after a run.
func (t *Trainer) optParams() ([]optim.Param, error) {
	ps := make([]optim.Param, len(t.learn))
	for i, n := range t.learn {
		name := n.Name()
		info, ok := t.Params.Info(name)
		if !ok {
			return nil, errors.Errorf("trainer: learnable node %q is not a parameter of the store", name)
		}
		gv, err := n.Grad()
		if err != nil {
			return nil, errors.Wrapf(err, "trainer: gradient of %q", name)
		}
		gt, ok := gv.(tensor.Tensor)
		if !ok {
			return nil, errors.Errorf("trainer: gradient of %q is a %T, not a tensor", name, gv)
		}
		ps[i] = optim.Param{Name: name, Value: t.Params.Value(name), Grad: gt, NoDecay: !info.Decay}
	}
	return ps, nil
}

// TrainStep draws a batch (Task.Next) and applies one update: forward and backward
// pass, global-norm clipping, learning rate from the schedule, AdamW step
// (which zeroes the gradients). If the loss or the gradient norm is NaN or
// infinite, the weights and the optimizer state are left untouched and the
// error names the update. If the update itself makes a weight NaN or
// infinite (a learning rate far too high), the error names the weight and
// the trainer is broken: every later TrainStep and Save returns that error,
// so non-finite weights are never saved.
func (t *Trainer) TrainStep() (StepResult, error) {
	s := t.step
	res := StepResult{Step: s + 1}
	if t.broken != nil {
		return res, t.broken
	}
	if err := t.Task.Next(); err != nil {
		return res, errors.WithMessagef(err, "trainer: step %d: next batch", s+1)
	}
	defer t.vm.Reset()
	if err := t.vm.RunAll(); err != nil {
		return res, errors.Wrapf(err, "trainer: step %d", s+1)
	}
	res.Loss = scalar(t.loss.Value())
	ps, err := t.optParams()
	if err != nil {
		return res, err
	}
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		optim.ZeroGrad(ps)
		res.GradNorm = math.NaN() // not computed
		return res, &NonFiniteError{Step: s + 1, What: "loss", Value: res.Loss,
			err: errors.Errorf("trainer: step %d: training loss is %v; stopping", s+1, res.Loss)}
	}
	if t.Cfg.ClipNorm > 0 {
		res.GradNorm = optim.ClipGradNorm(ps, t.Cfg.ClipNorm)
	} else {
		res.GradNorm = optim.GradNorm(ps)
	}
	if math.IsNaN(res.GradNorm) || math.IsInf(res.GradNorm, 0) {
		optim.ZeroGrad(ps)
		return res, &NonFiniteError{Step: s + 1, What: "gradient norm", Value: res.GradNorm,
			err: errors.Errorf("trainer: step %d: gradient norm is %v (loss %.4f); stopping", s+1, res.GradNorm, res.Loss)}
	}
	res.LR = t.Sched.LR(s)
	t.Opt.SetLR(res.LR)
	if err := t.Opt.Step(ps); err != nil {
		return res, errors.Wrapf(err, "trainer: step %d", s+1)
	}
	if err := t.checkFinite(); err != nil {
		t.broken = &NonFiniteError{Step: s + 1, What: "weights", Value: math.NaN(),
			err: errors.WithMessagef(err, "trainer: step %d (learning rate %g) made the weights non-finite; stopping", s+1, res.LR)}
		return res, t.broken
	}
	t.step++
	return res, nil
}

// rerunForward runs the training graph again on the current batch and
// weights (for the monitor, after a failed update) and discards the
// gradients; errors are ignored, as the update has already failed.
func (t *Trainer) rerunForward() {
	defer t.vm.Reset()
	t.vm.Reset()
	if t.vm.RunAll() != nil {
		return
	}
	if ps, err := t.optParams(); err == nil {
		optim.ZeroGrad(ps)
	}
}

// NonFiniteError is the error of an update that met a NaN or an infinity:
// in its training loss (What "loss"), its gradient norm ("gradient norm"),
// or, after the update, in a weight ("weights"; the trainer is then
// broken). Step is the 1-based index of the update, Value the non-finite
// value (NaN for weights). TrainStep returns it as the error; RunTask wraps
// it, so errors.As finds it: the step at which a run diverged.
type NonFiniteError struct {
	Step  int
	What  string
	Value float64
	err   error
}

func (e *NonFiniteError) Error() string { return e.err.Error() }
func (e *NonFiniteError) Unwrap() error { return e.err }

// checkFinite returns an error naming the first parameter holding a NaN or
// an infinity.
func (t *Trainer) checkFinite() error {
	for _, n := range t.Params.Names() {
		bad, at := -1, 0.0
		switch d := t.Params.Value(n).Data().(type) {
		case []float32:
			for i, x := range d {
				if y := float64(x); math.IsNaN(y) || math.IsInf(y, 0) {
					bad, at = i, y
					break
				}
			}
		case []float64:
			for i, x := range d {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					bad, at = i, x
					break
				}
			}
		}
		if bad >= 0 {
			return errors.Errorf("weight %q holds %v at index %d", n, at, bad)
		}
	}
	return nil
}

// scalar reads a 0-d (or 1-element) float value.
func scalar(v G.Value) float64 {
	switch d := v.Data().(type) {
	case float32:
		return float64(d)
	case float64:
		return d
	case []float32:
		return float64(d[0])
	case []float64:
		return d[0]
	}
	return math.NaN()
}

// Checkpoint returns the trainer's state: config, step, batch generator,
// parameters and optimizer state, and the task's kind, data hash and
// configuration (TaskConfigurer).
func (t *Trainer) Checkpoint() (*Checkpoint, error) {
	if t.broken != nil {
		return nil, t.broken
	}
	rng, err := t.Task.State()
	if err != nil {
		return nil, errors.Wrap(err, "trainer: batch generator state")
	}
	ck := &Checkpoint{
		Config:     t.Cfg,
		Step:       t.step,
		RNG:        rng,
		Params:     paramsFrom(t.Params),
		Optim:      t.Opt.State(),
		CorpusHash: t.Task.DataHash(),
		Provenance: Provenance(),
		Task:       t.Task.Kind(),
		Init:       t.Init,
	}
	if dp, ok := t.Task.(interface{ DataPath() string }); ok {
		ck.CorpusPath = dp.DataPath()
	}
	if tc, ok := t.Task.(TaskConfigurer); ok {
		if ck.TaskConfig, err = tc.TaskConfig(); err != nil {
			return nil, errors.WithMessagef(err, "trainer: configuration of task %q", ck.Task)
		}
	}
	ck.Format = ck.format()
	return ck, nil
}

// Save writes the trainer's checkpoint to path atomically.
func (t *Trainer) Save(path string) error {
	ck, err := t.Checkpoint()
	if err != nil {
		return err
	}
	return ck.Save(path)
}

// Restore resumes from ck: it checks that ck is of the same task (Kind; a
// v1 or v2 checkpoint is of "lm"), trained on the same data (same
// Task.DataHash, for the language model Corpus.Hash; not checked for a v1
// checkpoint, which has none) with the same task configuration
// (TaskConfigurer.CheckTaskConfig) and with the same model, batch, sequence
// length, seed and dtype (see ResumeRules; the error lists the differing
// options), then restores the weights, the optimizer state, the batch
// generator and the step. Other settings (steps, learning rate, ...) are
// this run's (Config.Changes lists them).
func (t *Trainer) Restore(ck *Checkpoint) error {
	if err := checkKind(ck, t.Task); err != nil {
		return err
	}
	if err := t.Cfg.Mismatch(ck.Config); err != nil {
		return err
	}
	if h := t.Task.DataHash(); ck.CorpusHash != "" && ck.CorpusHash != h {
		if dm, ok := t.Task.(interface{ dataMismatch(string) error }); ok {
			return dm.dataMismatch(ck.CorpusHash)
		}
		return errors.Errorf("checkpoint was trained on data with hash %s; this run's data has hash %s", ck.CorpusHash, h)
	}
	if err := checkTaskConfig(ck, t.Task); err != nil {
		return err
	}
	if err := ck.RestoreParams(t.Params); err != nil {
		return err
	}
	if err := t.Opt.LoadState(ck.Optim); err != nil {
		return errors.WithMessage(err, "checkpoint: optimizer state")
	}
	if err := t.Task.SetState(ck.RNG); err != nil {
		return errors.WithMessage(err, "checkpoint")
	}
	t.step = ck.Step
	t.Init = ck.Init
	t.broken = nil
	return nil
}

// checkKind refuses a checkpoint of another task kind.
func checkKind(ck *Checkpoint, task Task) error {
	if k := ck.kind(); k != task.Kind() {
		return errors.Errorf("checkpoint is of task %q; this run trains %q", k, task.Kind())
	}
	return nil
}

// checkTaskConfig refuses a checkpoint the task's CheckTaskConfig refuses.
func checkTaskConfig(ck *Checkpoint, task Task) error {
	if tc, ok := task.(TaskConfigurer); ok {
		if err := tc.CheckTaskConfig(ck.TaskConfig); err != nil {
			return errors.WithMessagef(err, "checkpoint of another %s configuration", task.Kind())
		}
	}
	return nil
}

// LoadTaskModel reads the checkpoint at path, checks that it is of task's
// kind and task configuration (TaskConfigurer; the data is not checked, so
// the weights can be evaluated on other data), and returns a parameter
// store of the checkpoint's dtype holding its weights, with the checkpoint.
// The store's parameters are created by task.Build on a graph that is then
// discarded, so task must not be training (Build rebinds its inputs); a
// model whose parameters differ from the checkpoint's is an error naming
// the parameter. Errors name the file.
func LoadTaskModel(path string, task Task) (*graph.Params, *Checkpoint, error) {
	if task == nil {
		return nil, nil, errors.New("trainer: nil task")
	}
	ck, err := LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	if err := checkKind(ck, task); err != nil {
		return nil, nil, errors.WithMessagef(err, "checkpoint %s", path)
	}
	if err := checkTaskConfig(ck, task); err != nil {
		return nil, nil, errors.WithMessagef(err, "checkpoint %s", path)
	}
	p := graph.NewParams(ck.Config.Dtype, ck.Config.Seed)
	g := G.NewGraph()
	_, _, err = task.Build(g, p)
	p.Forget(g)
	if err != nil {
		return nil, nil, errors.WithMessagef(err, "checkpoint %s: building the model", path)
	}
	if err := ck.RestoreParams(p); err != nil {
		return nil, nil, errors.WithMessagef(err, "checkpoint %s", path)
	}
	return p, ck, nil
}

// Load reads the checkpoint at path and restores it (see Restore); errors
// name the file.
func (t *Trainer) Load(path string) error {
	ck, err := LoadCheckpoint(path)
	if err != nil {
		return err
	}
	return errors.WithMessagef(t.Restore(ck), "checkpoint %s", path)
}

// LoadModel reads the checkpoint at path and returns its configuration and
// a parameter store (of the checkpoint's dtype) holding its weights, ready
// for NewEvaluator or Sample.
func LoadModel(path string) (*graph.Params, Config, error) {
	ck, err := LoadCheckpoint(path)
	if err != nil {
		return nil, Config{}, err
	}
	p := graph.NewParams(ck.Config.Dtype, ck.Config.Seed)
	// A forward graph at the training length creates every parameter,
	// including those a position encoding creates while building.
	e, err := NewEvaluator(p, ck.Config.Model, 1, ck.Config.SeqLen)
	if err != nil {
		return nil, Config{}, errors.WithMessagef(err, "checkpoint %s", path)
	}
	e.Close()
	if err := ck.RestoreParams(p); err != nil {
		return nil, Config{}, errors.WithMessagef(err, "checkpoint %s", path)
	}
	return p, ck.Config, nil
}
