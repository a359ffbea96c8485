package trainer

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/optim"
)

// Trainer trains a layers.LM on a byte corpus with AdamW. Its training graph
// (ids -> logits -> cross-entropy, with gradients) is built once, for
// [Batch, SeqLen], and reused by every update.
type Trainer struct {
	Cfg    Config
	Corpus *Corpus
	// Params holds the model's weights; graphs built from it (evaluation at
	// other lengths, sampling) share them.
	Params *graph.Params
	Opt    optim.Optimizer
	Sched  optim.WarmupCosine

	step    int
	batcher *Batcher
	// broken is set when an update left non-finite weights: the trainer
	// refuses further updates and saves.
	broken error

	g          *G.ExprGraph
	lm         *layers.LM
	idsN, tgtN *G.Node
	loss       *G.Node
	learn      G.Nodes
	vm         G.VM
	idsT, tgtT *tensor.Dense
	ids, tgts  []int
}

// StepResult describes one update.
type StepResult struct {
	// Step is the number of completed updates after this one (1-based
	// index of the update).
	Step int
	// Loss is the mean training cross-entropy of the batch in nats, before
	// the update.
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
// training graph. Trainer.Cfg is cfg.Resolved().
func New(cfg Config, c *Corpus) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckMemory(cfg, 0); err != nil {
		return nil, err
	}
	cfg = cfg.Resolved()
	if c == nil {
		return nil, errors.New("trainer: nil corpus")
	}
	if err := c.CheckWindow(cfg.SeqLen); err != nil {
		return nil, err
	}
	bt, err := NewBatcher(c.Train, cfg.Batch, cfg.SeqLen, uint64(cfg.Seed))
	if err != nil {
		return nil, err
	}
	t := &Trainer{
		Cfg:     cfg,
		Corpus:  c,
		Params:  graph.NewParams(cfg.Dtype, cfg.Seed),
		Opt:     optim.NewAdamW(cfg.LR, cfg.Beta1, cfg.Beta2, cfg.AdamEps, cfg.WeightDecay),
		Sched:   optim.WarmupCosine{Peak: cfg.LR, Warmup: cfg.Warmup, Total: cfg.Steps, Floor: cfg.FloorFrac},
		batcher: bt,
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	return t, nil
}

// build creates the training graph and its tape machine.
func (t *Trainer) build() error {
	b, l := t.Cfg.Batch, t.Cfg.SeqLen
	t.g = G.NewGraph()
	lm, err := layers.NewLM(t.g, t.Params, t.Cfg.Model)
	if err != nil {
		return errors.WithMessage(err, "trainer: building the model")
	}
	t.lm = lm
	t.ids, t.tgts = make([]int, b*l), make([]int, b*l)
	t.idsT = tensor.New(tensor.WithShape(b, l), tensor.WithBacking(t.ids))
	t.tgtT = tensor.New(tensor.WithShape(b*l), tensor.WithBacking(t.tgts))
	t.idsN = G.NewMatrix(t.g, tensor.Int, G.WithShape(b, l), G.WithName("trainer_ids"), G.WithValue(t.idsT))
	t.tgtN = G.NewVector(t.g, tensor.Int, G.WithShape(b*l), G.WithName("trainer_targets"), G.WithValue(t.tgtT))
	logits, err := lm.Fwd(t.idsN) // [B*L, V]
	if err != nil {
		return errors.WithMessagef(err, "trainer: model at length %d", l)
	}
	if t.loss, err = graph.CrossEntropy(logits, t.tgtN); err != nil {
		return err
	}
	t.learn = lm.Learnables()
	if len(t.learn) != len(t.Params.Names()) {
		return errors.Errorf("trainer: the model has %d learnable nodes but %d parameters", len(t.learn), len(t.Params.Names()))
	}
	if _, err := G.Grad(t.loss, t.learn...); err != nil {
		return errors.Wrap(err, "trainer: gradient of the loss")
	}
	t.vm = G.NewTapeMachine(t.g, G.BindDualValues(t.learn...))
	return nil
}

// Step returns the number of completed updates.
func (t *Trainer) Step() int { return t.step }

// LM returns the model of the training graph.
func (t *Trainer) LM() *layers.LM { return t.lm }

// Close releases the training graph's machine.
func (t *Trainer) Close() error {
	t.Params.Forget(t.g)
	return t.vm.Close()
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

// TrainStep draws a batch and applies one update: forward and backward
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
	t.batcher.Next(t.ids, t.tgts)
	if err := G.Let(t.idsN, t.idsT); err != nil {
		return res, errors.Wrap(err, "trainer: binding ids")
	}
	if err := G.Let(t.tgtN, t.tgtT); err != nil {
		return res, errors.Wrap(err, "trainer: binding targets")
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
		return res, errors.Errorf("trainer: step %d: training loss is %v; stopping", s+1, res.Loss)
	}
	if t.Cfg.ClipNorm > 0 {
		res.GradNorm = optim.ClipGradNorm(ps, t.Cfg.ClipNorm)
	} else {
		res.GradNorm = optim.GradNorm(ps)
	}
	if math.IsNaN(res.GradNorm) || math.IsInf(res.GradNorm, 0) {
		optim.ZeroGrad(ps)
		return res, errors.Errorf("trainer: step %d: gradient norm is %v (loss %.4f); stopping", s+1, res.GradNorm, res.Loss)
	}
	res.LR = t.Sched.LR(s)
	t.Opt.SetLR(res.LR)
	if err := t.Opt.Step(ps); err != nil {
		return res, errors.Wrapf(err, "trainer: step %d", s+1)
	}
	if err := t.checkFinite(); err != nil {
		t.broken = errors.WithMessagef(err, "trainer: step %d (learning rate %g) made the weights non-finite; stopping", s+1, res.LR)
		return res, t.broken
	}
	t.step++
	return res, nil
}

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
// parameters and optimizer state.
func (t *Trainer) Checkpoint() (*Checkpoint, error) {
	if t.broken != nil {
		return nil, t.broken
	}
	rng, err := t.batcher.State()
	if err != nil {
		return nil, errors.Wrap(err, "trainer: batch generator state")
	}
	return &Checkpoint{
		Config:     t.Cfg,
		Step:       t.step,
		RNG:        rng,
		Params:     paramsFrom(t.Params),
		Optim:      t.Opt.State(),
		CorpusHash: t.Corpus.Hash(),
		CorpusPath: t.Corpus.Path,
		Provenance: Provenance(),
		Format:     checkpointFormat,
	}, nil
}

// Save writes the trainer's checkpoint to path atomically.
func (t *Trainer) Save(path string) error {
	ck, err := t.Checkpoint()
	if err != nil {
		return err
	}
	return ck.Save(path)
}

// Restore resumes from ck: it checks that ck was trained on the same corpus
// (same Corpus.Hash; not checked for a v1 checkpoint, which has none) and
// with the same model, batch, sequence length, seed and dtype (see
// ResumeRules; the error lists the differing options), then restores the
// weights, the optimizer state, the batch generator and the step. Other
// settings (steps, learning rate, ...) are this run's (Config.Changes lists
// them).
func (t *Trainer) Restore(ck *Checkpoint) error {
	if err := t.Cfg.Mismatch(ck.Config); err != nil {
		return err
	}
	if h := t.Corpus.Hash(); ck.CorpusHash != "" && ck.CorpusHash != h {
		return errors.Errorf("checkpoint was trained on a corpus with SHA-256 %s; this run's corpus %s has SHA-256 %s",
			ck.CorpusHash, t.Corpus.name(), h)
	}
	if err := ck.RestoreParams(t.Params); err != nil {
		return err
	}
	if err := t.Opt.LoadState(ck.Optim); err != nil {
		return errors.WithMessage(err, "checkpoint: optimizer state")
	}
	if err := t.batcher.SetState(ck.RNG); err != nil {
		return errors.WithMessage(err, "checkpoint")
	}
	t.step = ck.Step
	t.broken = nil
	return nil
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
