package timestudy

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
	"github.com/rpe-go/rpe/posenc"
)

// Kind is the task kind recorded in checkpoints.
const Kind = "times"

// Data is what the time-task language model trains and validates on.
type Data struct {
	// Seqs are the options of the event sequences (training batches are
	// drawn from them on the fly).
	Seqs SeqOptions
	// Time gives the model the events' onsets as real positions
	// (posenc.PosReal: queries at t_i, keys at t_{i-1}, see Example);
	// false gives it index positions 0..T-1 (the span).
	Time bool
	// Val are the sequences Validate scores (their first SeqLen events);
	// ValSeed is the seed they were drawn with (recorded in checkpoints).
	Val     []Sequence
	ValSeed uint64
}

// Task is a causal language model over event tokens (a layers.LM of
// vocabulary V+1, the last id BOS) trained by the project's one engine
// (trainer.RunTask): it implements trainer.Task and trainer.TaskConfigurer.
// Its training graph maps ids [B, T] and targets [B*T] to the mean
// cross-entropy (nats). A time model is built once with real positions
// [B, T] carrying a posenc.Feed, and Next rebinds each batch's onsets
// through it; an index model sees the 1-D span.
type Task struct {
	cfg  trainer.Config // resolved
	data Data
	trainer.BatchCounter
	m *model
}

// RealServed returns nil if encoding e (a posenc name or combination, with
// options o) serves real-valued positions (posenc.PosReal), or
// posenc.CheckKind's error naming the encoding and the kinds it serves.
func RealServed(name string, o posenc.Options) error {
	enc, err := posenc.New(name, o)
	if err != nil {
		return err
	}
	return posenc.CheckKind(enc, &posenc.Positions{Kind: posenc.PosReal})
}

// NewTask checks cfg and data and returns the task. It returns an error if
// the configuration is invalid (trainer.Config.ValidateTraining, positive
// SeqLen, a causal model of vocabulary Seqs.Vocab+1), the sequence options
// are invalid (SeqOptions.Check), there are no validation sequences or one is
// shorter than SeqLen, or Data.Time is set and the encoding does not serve
// real positions (the error names the encoding and what it serves).
func NewTask(cfg trainer.Config, data Data) (*Task, error) {
	if err := data.Seqs.Check(); err != nil {
		return nil, err
	}
	if err := cfg.ValidateTraining(); err != nil {
		return nil, err
	}
	if cfg.SeqLen <= 0 {
		return nil, errors.Errorf("time task: sequence length %d must be positive", cfg.SeqLen)
	}
	if !cfg.Model.Causal {
		return nil, errors.New("time task: the language model must be causal")
	}
	if cfg.Model.Vocab != data.Seqs.Vocab+1 {
		return nil, errors.Errorf("time task: model vocabulary %d, want %d tokens + BOS = %d", cfg.Model.Vocab, data.Seqs.Vocab, data.Seqs.Vocab+1)
	}
	if len(data.Val) == 0 {
		return nil, errors.New("time task: no validation sequences")
	}
	for i, s := range data.Val {
		if s.Len() < cfg.SeqLen {
			return nil, errors.Errorf("time task: validation sequence %d has %d events, want at least %d", i, s.Len(), cfg.SeqLen)
		}
	}
	cfg = cfg.Resolved()
	if data.Time {
		if err := RealServed(cfg.Model.Pos, cfg.Model.PosOpts); err != nil {
			return nil, errors.WithMessage(err, "time task: time positions")
		}
	}
	return &Task{cfg: cfg, data: data}, nil
}

// Kind is "times".
func (t *Task) Kind() string { return Kind }

// Items is Batch*SeqLen events.
func (t *Task) Items() int { return t.cfg.Batch * t.cfg.SeqLen }

// Units are bits per event and events.
func (t *Task) Units() trainer.Units {
	return trainer.Units{Loss: "bits/event", Items: "events", ItemsShort: "ev"}
}

// positionsName is "time" or "index".
func positionsName(time bool) string {
	if time {
		return "time"
	}
	return "index"
}

// Describe implements trainer.Task.
func (t *Task) Describe() string {
	c := t.cfg.Model
	return fmt.Sprintf("time-task LM pos=%s with %s positions, d=%d heads=%d layers=%d ffn=%d, T=%d events, batch %d; %s; %d validation sequences",
		c.Pos, positionsName(t.data.Time), c.DModel, c.Heads, c.Layers, c.FFN, t.cfg.SeqLen, t.cfg.Batch, t.data.Seqs, len(t.data.Val))
}

// model is one graph of the LM for [B, T] examples: its inputs, their
// values, and the real positions with their Feed (time models).
type model struct {
	lm         *layers.LM
	b, t, bos  int
	period     float64
	ids, tgts  []int
	idsT, tgtT *tensor.Dense
	idsN, tgtN *G.Node
	pos        *posenc.Positions // build positions with their Feed, nil for index positions
	q, k       []float64         // the onsets of the batch bound last
	logits     *G.Node           // [B*T, V+1]
}

// newModel builds the LM of cfg in g on p for b examples of t positions
// (time: real positions through a Feed); targets adds the target input.
func newModel(g *G.ExprGraph, p *graph.Params, cfg layers.Config, b, t int, time bool, period float64) (*model, error) {
	m := &model{b: b, t: t, bos: cfg.Vocab - 1, period: period, ids: make([]int, b*t), tgts: make([]int, b*t)}
	if time {
		m.q, m.k = make([]float64, b*t), make([]float64, b*t)
		for i := range m.q { // any valid onsets: the Feed rebinds them
			m.q[i], m.k[i] = float64(i%t), float64(i%t)-1
		}
		pos, err := posenc.NewReal(b, m.q, m.k)
		if err != nil {
			return nil, err
		}
		pos.Feed = posenc.NewFeed()
		m.pos = pos
	}
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		return nil, errors.WithMessage(err, "time task: building the model")
	}
	m.lm = lm
	m.idsT = tensor.New(tensor.WithShape(b, t), tensor.WithBacking(m.ids))
	m.tgtT = tensor.New(tensor.WithShape(b*t), tensor.WithBacking(m.tgts))
	m.idsN = G.NewMatrix(g, tensor.Int, G.WithShape(b, t), G.WithName(graph.UniqueName(g, "times_ids")), G.WithValue(m.idsT))
	m.tgtN = G.NewVector(g, tensor.Int, G.WithShape(b*t), G.WithName(graph.UniqueName(g, "times_targets")), G.WithValue(m.tgtT))
	if m.logits, err = lm.FwdWith(m.idsN, layers.Options{Pos: m.pos}); err != nil {
		return nil, errors.WithMessagef(err, "time task: model at %d events", t)
	}
	return m, nil
}

// fill lays out the first t events of each sequence (one per example) into
// the inputs and binds them; the onsets through the Feed (time models).
// It returns the examples.
func (m *model) fill(seqs []Sequence) ([]Example, error) {
	if len(seqs) != m.b {
		return nil, errors.Errorf("time task: %d sequences for a batch of %d", len(seqs), m.b)
	}
	exs := make([]Example, m.b)
	for i, s := range seqs {
		e, err := Layout(s, m.t, m.period, m.bos)
		if err != nil {
			return nil, err
		}
		exs[i] = e
		copy(m.ids[i*m.t:], e.IDs)
		copy(m.tgts[i*m.t:], e.Targets)
		if m.pos != nil {
			copy(m.q[i*m.t:], e.QTimes)
			copy(m.k[i*m.t:], e.KTimes)
		}
	}
	if m.pos != nil {
		next, err := posenc.NewReal(m.b, m.q, m.k)
		if err != nil {
			return nil, err
		}
		if err := m.pos.Feed.Bind(next); err != nil {
			return nil, errors.WithMessage(err, "time task: binding the onsets")
		}
	}
	if err := G.Let(m.idsN, m.idsT); err != nil {
		return nil, errors.Wrap(err, "time task: binding ids")
	}
	return exs, errors.Wrap(G.Let(m.tgtN, m.tgtT), "time task: binding targets")
}

// Build creates the training graph: ids [B, T] -> logits [B*T, V+1] ->
// mean cross-entropy against the targets [B*T].
func (t *Task) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	m, err := newModel(g, p, t.cfg.Model, t.cfg.Batch, t.cfg.SeqLen, t.data.Time, t.data.Seqs.Period)
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
// same seed ("timeBat").
const trainStream = 0x74696d65426174

// Next draws batch k (k = the batches drawn so far): Batch sequences of
// SeqLen events from a generator seeded with (Seed, k), so a resumed run
// draws the batches of an uninterrupted one; it binds their tokens and,
// for a time model, their onsets.
func (t *Task) Next() error {
	if t.m == nil {
		return errors.New("time task: Next before Build")
	}
	rng := rand.New(rand.NewPCG(uint64(t.cfg.Seed), trainStream+t.Step))
	seqs := make([]Sequence, t.cfg.Batch)
	for i := range seqs {
		var err error
		if seqs[i], err = Generate(t.data.Seqs, rng, t.cfg.SeqLen); err != nil {
			return err
		}
	}
	if _, err := t.m.fill(seqs); err != nil {
		return err
	}
	t.Step++
	return nil
}

// DataHash identifies the training data: the sequence options (the
// batches are a function of them, the seed and the batch index).
func (t *Task) DataHash() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v", t.data.Seqs)
	return fmt.Sprintf("%016x", h.Sum64())
}

// taskConfig is what a checkpoint of this task must agree on besides the
// training configuration.
type taskConfig struct {
	Seqs      SeqOptions
	Positions string
	ValSeqs   int
	ValSeed   uint64
}

func (t *Task) taskConfig() taskConfig {
	return taskConfig{Seqs: t.data.Seqs, Positions: positionsName(t.data.Time), ValSeqs: len(t.data.Val), ValSeed: t.data.ValSeed}
}

// TaskConfig implements trainer.TaskConfigurer.
func (t *Task) TaskConfig() ([]byte, error) { return json.Marshal(t.taskConfig()) }

// CheckTaskConfig implements trainer.TaskConfigurer: a checkpoint of other
// sequences, positions (index or time) or validation sequences is refused.
func (t *Task) CheckTaskConfig(saved []byte) error {
	var s taskConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return errors.Wrap(err, "time task: checkpoint task configuration")
	}
	if w := t.taskConfig(); s != w {
		return errors.Errorf("time task: checkpoint was trained with %s positions, sequences of %s, %d validation sequences (seed %d); this run has %s positions, sequences of %s, %d validation sequences (seed %d)",
			s.Positions, s.Seqs, s.ValSeqs, s.ValSeed, w.Positions, w.Seqs, w.ValSeqs, w.ValSeed)
	}
	return nil
}

// EvalSpec returns the evaluation of the task's model on the first n events
// of each sequence.
func (t *Task) EvalSpec(n int) EvalSpec {
	return EvalSpec{Model: t.cfg.Model, Time: t.data.Time, Length: n, Batch: t.cfg.EvalBatch, Period: t.data.Seqs.Period}
}

// Validate scores p on the validation sequences at SeqLen events: Value is
// the accuracy on the repeated events.
func (t *Task) Validate(p *graph.Params) (trainer.Validation, error) {
	r, err := Evaluate(p, t.data.Val, t.EvalSpec(t.cfg.SeqLen))
	if err != nil {
		return trainer.Validation{}, err
	}
	return trainer.Validation{Name: "repeat accuracy", Value: r.RepeatAccuracy,
		Text: fmt.Sprintf("validation: repeat accuracy %.4f (%d repeats), %.4f bits on repeats, %.4f bits/event over %d sequences of %d events",
			r.RepeatAccuracy, r.Repeats, r.RepeatBits, r.Bits, r.Sequences, r.Length)}, nil
}
