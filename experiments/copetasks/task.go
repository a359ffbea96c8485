package copetasks

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Kind is the task kind recorded in checkpoints.
const Kind = "cope-tasks"

// Data is what the task's language model trains and validates on.
type Data struct {
	// Opts are the task's sequences (training batches are drawn from them
	// on the fly), Context the training context length in tokens (the
	// sequences are Opts.Len(Context) tokens long: Config.SeqLen).
	Opts    Options
	Context int
	// Val are the validation sequences (contexts of Context tokens);
	// ValSeed the seed they were drawn with (recorded in checkpoints).
	Val     []Example
	ValSeed uint64
}

// Task is a causal language model over a task's tokens (a layers.LM of
// vocabulary Opts.Vocab(), BOS the last id) trained by the project's one
// engine (trainer.RunTask): it implements trainer.Task and
// trainer.TaskConfigurer. Its training graph maps ids [B, T] and targets
// [B*T] to the mean cross-entropy (nats) over the answer positions only:
// the other targets are -1, which graph.CrossEntropy ignores.
type Task struct {
	cfg  trainer.Config // resolved
	data Data
	trainer.BatchCounter
	m *model
}

// NewTask checks cfg and data and returns the task. It returns an error if
// the configuration is invalid (trainer.Config.ValidateTraining, a causal
// model of vocabulary Opts.Vocab(), SeqLen = Opts.Len(Context)), the
// options or the context are (Options.CheckContext), or there are no
// validation sequences or one is not SeqLen tokens long.
func NewTask(cfg trainer.Config, data Data) (*Task, error) {
	o := data.Opts
	if err := o.CheckContext(data.Context); err != nil {
		return nil, err
	}
	if err := cfg.ValidateTraining(); err != nil {
		return nil, err
	}
	if !cfg.Model.Causal {
		return nil, errors.New("cope tasks: the language model must be causal")
	}
	if cfg.Model.Vocab != o.Vocab() {
		return nil, errors.Errorf("cope tasks: model vocabulary %d, want %d (the %s task's tokens and BOS)", cfg.Model.Vocab, o.Vocab(), o.Task)
	}
	if cfg.SeqLen != o.Len(data.Context) {
		return nil, errors.Errorf("cope tasks: sequence length %d, want %d for contexts of %d tokens", cfg.SeqLen, o.Len(data.Context), data.Context)
	}
	if len(data.Val) == 0 {
		return nil, errors.New("cope tasks: no validation sequences")
	}
	for i, e := range data.Val {
		if e.Len() != cfg.SeqLen {
			return nil, errors.Errorf("cope tasks: validation sequence %d has %d tokens, want %d", i, e.Len(), cfg.SeqLen)
		}
	}
	return &Task{cfg: cfg.Resolved(), data: data}, nil
}

// Kind is "cope-tasks".
func (t *Task) Kind() string { return Kind }

// Items is Batch*SeqLen tokens (every token is computed; only the answers
// are scored).
func (t *Task) Items() int { return t.cfg.Batch * t.cfg.SeqLen }

// Units are bits per answer token and tokens.
func (t *Task) Units() trainer.Units {
	return trainer.Units{Loss: "bits/answer token", Items: "tokens", ItemsShort: "tok"}
}

// Describe implements trainer.Task.
func (t *Task) Describe() string {
	c := t.cfg.Model
	return fmt.Sprintf("cope-task LM pos=%s, d=%d heads=%d layers=%d ffn=%d, %s, contexts of %d tokens (T=%d), batch %d; %d validation sequences",
		c.Pos, c.DModel, c.Heads, c.Layers, c.FFN, t.data.Opts, t.data.Context, t.cfg.SeqLen, t.cfg.Batch, len(t.data.Val))
}

// model is one graph of the LM for [B, T] examples: its inputs and their
// values.
type model struct {
	lm         *layers.LM
	b, t, bos  int
	ids, tgts  []int
	idsT, tgtT *tensor.Dense
	idsN, tgtN *G.Node
	logits     *G.Node // [B*T, V]
}

// newModel builds the LM of cfg in g on p for b examples of t tokens.
func newModel(g *G.ExprGraph, p *graph.Params, cfg layers.Config, b, t int) (*model, error) {
	m := &model{b: b, t: t, bos: cfg.Vocab - 1, ids: make([]int, b*t), tgts: make([]int, b*t)}
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		return nil, errors.WithMessage(err, "cope tasks: building the model")
	}
	m.lm = lm
	m.idsT = tensor.New(tensor.WithShape(b, t), tensor.WithBacking(m.ids))
	m.tgtT = tensor.New(tensor.WithShape(b*t), tensor.WithBacking(m.tgts))
	m.idsN = G.NewMatrix(g, tensor.Int, G.WithShape(b, t), G.WithName(graph.UniqueName(g, "cope_ids")), G.WithValue(m.idsT))
	m.tgtN = G.NewVector(g, tensor.Int, G.WithShape(b*t), G.WithName(graph.UniqueName(g, "cope_targets")), G.WithValue(m.tgtT))
	if m.logits, err = lm.Fwd(m.idsN); err != nil {
		return nil, errors.WithMessagef(err, "cope tasks: model at %d tokens", t)
	}
	return m, nil
}

// fill lays out the examples (one per row of the batch) into the inputs
// and binds them.
func (m *model) fill(exs []Example) error {
	if len(exs) != m.b {
		return errors.Errorf("cope tasks: %d sequences for a batch of %d", len(exs), m.b)
	}
	for i, e := range exs {
		if e.Len() != m.t {
			return errors.Errorf("cope tasks: a sequence of %d tokens for a model of %d", e.Len(), m.t)
		}
		ids, tgts := e.Layout(m.bos)
		copy(m.ids[i*m.t:], ids)
		copy(m.tgts[i*m.t:], tgts)
	}
	if err := G.Let(m.idsN, m.idsT); err != nil {
		return errors.Wrap(err, "cope tasks: binding ids")
	}
	return errors.Wrap(G.Let(m.tgtN, m.tgtT), "cope tasks: binding targets")
}

// Build creates the training graph: ids [B, T] -> logits [B*T, V] -> mean
// cross-entropy over the answer targets.
func (t *Task) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	m, err := newModel(g, p, t.cfg.Model, t.cfg.Batch, t.cfg.SeqLen)
	if err != nil {
		return nil, nil, err
	}
	t.m = m
	loss, err := graph.CrossEntropy(m.logits, m.tgtN)
	if err != nil {
		return nil, nil, err
	}
	return loss, m.lm.Learnables(), nil
}

// trainStream separates the training batches from other streams of the
// same seed ("copeBat").
const trainStream = 0x636f7065426174

// Batch returns training batch k of the task under seed: Batch sequences
// with contexts of Context tokens from a generator seeded with (seed,
// k).
func (t *Task) Batch(seed int64, k uint64) ([]Example, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), trainStream+k))
	exs := make([]Example, t.cfg.Batch)
	for i := range exs {
		var err error
		if exs[i], err = Generate(t.data.Opts, rng, t.data.Context); err != nil {
			return nil, err
		}
	}
	return exs, nil
}

// Next draws batch k (k = the batches drawn so far, Batch(Seed, k)), so a
// resumed run draws the batches of an uninterrupted one, and binds it.
func (t *Task) Next() error {
	if t.m == nil {
		return errors.New("cope tasks: Next before Build")
	}
	exs, err := t.Batch(t.cfg.Seed, t.Step)
	if err != nil {
		return err
	}
	if err := t.m.fill(exs); err != nil {
		return err
	}
	t.Step++
	return nil
}

// DataHash identifies the training data: the options and the context
// length (the batches are a function of them, the seed and the batch
// index).
func (t *Task) DataHash() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v %d", t.data.Opts, t.data.Context)
	return fmt.Sprintf("%016x", h.Sum64())
}

// taskConfig is what a checkpoint of this task must agree on besides the
// training configuration.
type taskConfig struct {
	Opts    Options
	Context int
	ValSeqs int
	ValSeed uint64
}

func (t *Task) taskConfig() taskConfig {
	return taskConfig{Opts: t.data.Opts, Context: t.data.Context, ValSeqs: len(t.data.Val), ValSeed: t.data.ValSeed}
}

// TaskConfig implements trainer.TaskConfigurer.
func (t *Task) TaskConfig() ([]byte, error) { return json.Marshal(t.taskConfig()) }

// CheckTaskConfig implements trainer.TaskConfigurer: a checkpoint of
// another task, other options, another context length or other
// validation sequences is refused, naming both.
func (t *Task) CheckTaskConfig(saved []byte) error {
	var s taskConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return errors.Wrap(err, "cope tasks: checkpoint task configuration")
	}
	if w := t.taskConfig(); s != w {
		return errors.Errorf("cope tasks: checkpoint was trained on %s with contexts of %d tokens, %d validation sequences (seed %d); this run is %s with contexts of %d tokens, %d validation sequences (seed %d)",
			s.Opts, s.Context, s.ValSeqs, s.ValSeed, w.Opts, w.Context, w.ValSeqs, w.ValSeed)
	}
	return nil
}

// EvalSpec returns the evaluation of the task's model on sequences with
// contexts of context tokens.
func (t *Task) EvalSpec(context int) EvalSpec {
	return EvalSpec{Model: t.cfg.Model, Opts: t.data.Opts, Context: context, Batch: t.cfg.EvalBatch}
}

// Validate scores p on the validation sequences: Value is the accuracy on
// the answer tokens.
func (t *Task) Validate(p *graph.Params) (trainer.Validation, error) {
	r, err := Evaluate(p, t.data.Val, t.EvalSpec(t.data.Context))
	if err != nil {
		return trainer.Validation{}, err
	}
	return trainer.Validation{Name: "answer accuracy", Value: r.Accuracy,
		Text: fmt.Sprintf("validation: answer accuracy %.4f (%d answer tokens), exact answers %.4f, %.4f bits per answer token over %d sequences of %d tokens",
			r.Accuracy, r.Answers, r.Exact, r.Bits, r.Sequences, r.Len)}, nil
}
