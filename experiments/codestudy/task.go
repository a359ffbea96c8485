package codestudy

import (
	"encoding/json"
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Kind is the task kind recorded in checkpoints.
const Kind = "code"

// Data is what the code language model trains and validates on.
type Data struct {
	// Corpus is the parsed Go source (gocode.LoadCorpus); training windows
	// are drawn from its train split, relations clipped at its
	// Opts.MaxUp and Opts.MaxDown.
	Corpus *gocode.Corpus
	// Val are the windows of length SeqLen Validate scores (Anchors over
	// the validation split).
	Val []Anchor
}

// Task is a byte-level causal language model on Go source (a layers.LM)
// trained by the project's one engine (trainer.RunTask): it implements
// trainer.Task and trainer.TaskConfigurer. Its training graph maps ids
// [B, L] and next-byte targets [B*L] to the mean cross-entropy (nats).
// An encoding that serves pairwise positions (Pairwise: tree, tree+rope)
// receives the tree relations [B, L, L] of each batch through a
// posenc.Feed, so the graph is built once; the others see the 1-D span.
type Task struct {
	cfg      trainer.Config // resolved
	data     Data
	pairwise bool
	numRel   int

	sampler        *gocode.Sampler
	params         *graph.Params
	ids, tgts, rel []int
	idsN, tgtN     *G.Node
	idsT, tgtT     *tensor.Dense
	pos            *posenc.Positions // build positions with the Feed (pairwise only)
	maxUp, maxDown int
}

// NewTask checks cfg and data and returns the task. It returns an error if
// the configuration is invalid (trainer.Config.ValidateTraining, vocab 256,
// causal, positive SeqLen), the corpus or the validation windows are
// missing, a validation window is shorter than SeqLen, or the encoding
// takes pairwise positions and its tree bounds (tree-max-up,
// tree-max-down) differ from the corpus's relation bounds.
func NewTask(cfg trainer.Config, data Data) (*Task, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Model.Causal {
		return nil, errors.New("code task: the language model must be causal")
	}
	if data.Corpus == nil {
		return nil, errors.New("code task: no corpus")
	}
	if len(data.Val) == 0 {
		return nil, errors.New("code task: no validation windows")
	}
	for i, a := range data.Val {
		if a.File == nil || a.End < cfg.SeqLen || a.End >= len(a.File.Src) {
			return nil, errors.Errorf("code task: validation window %d does not hold %d+1 bytes", i, cfg.SeqLen)
		}
	}
	cfg = cfg.Resolved()
	enc, err := posenc.New(cfg.Model.Pos, cfg.Model.PosOpts)
	if err != nil {
		return nil, err
	}
	o := data.Corpus.Opts
	t := &Task{cfg: cfg, data: data, pairwise: Pairwise(enc), maxUp: o.MaxUp, maxDown: o.MaxDown,
		numRel: gocode.NumTreeRelations(o.MaxUp, o.MaxDown)}
	if t.pairwise {
		if up, down := treeBounds(cfg.Model.PosOpts); up != o.MaxUp || down != o.MaxDown {
			return nil, errors.Errorf("code task: encoding %s has tree bounds up %d down %d, the corpus relations are clipped at up %d down %d",
				cfg.Model.Pos, up, down, o.MaxUp, o.MaxDown)
		}
	}
	return t, nil
}

// Kind is "code".
func (t *Task) Kind() string { return Kind }

// Items is Batch*SeqLen bytes.
func (t *Task) Items() int { return t.cfg.Batch * t.cfg.SeqLen }

// Pairwise reports whether the model is given the tree relations.
func (t *Task) Pairwise() bool { return t.pairwise }

// Describe implements trainer.Task.
func (t *Task) Describe() string {
	n := 0
	if t.params != nil {
		n = t.params.Count()
	}
	rel := "1-D positions"
	if t.pairwise {
		rel = fmt.Sprintf("tree relations (up %d, down %d: %d ids)", t.maxUp, t.maxDown, t.numRel)
	}
	c := t.data.Corpus
	return fmt.Sprintf("code LM pos=%s d=%d heads=%d layers=%d ffn=%d L=%d batch %d, %s: %d parameters; Go corpus %s: %d training bytes, %d validation windows, %d files skipped",
		t.cfg.Model.Pos, t.cfg.Model.DModel, t.cfg.Model.Heads, t.cfg.Model.Layers, t.cfg.Model.FFN, t.cfg.SeqLen, t.cfg.Batch, rel, n,
		c.Root, c.Bytes(gocode.Train), len(t.data.Val), c.Skipped)
}

// Build creates the window sampler of the train split (seeded with
// Config.Seed) and the graph ids [B, L] -> logits [B*L, 256] -> mean
// cross-entropy against targets [B*L]. A pairwise encoding is built once
// with zero relations and a posenc.Feed that Next rebinds.
func (t *Task) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	b, l := t.cfg.Batch, t.cfg.SeqLen
	s, err := gocode.NewSampler(t.data.Corpus, gocode.Train, b, l, uint64(t.cfg.Seed))
	if err != nil {
		return nil, nil, err
	}
	t.sampler, t.params = s, p
	t.ids, t.tgts, t.rel = make([]int, b*l), make([]int, b*l), make([]int, b*l*l)
	t.pos = nil
	if t.pairwise {
		pos, err := posenc.NewPairwise(b, l, l, s.NumRelations(), t.rel)
		if err != nil {
			return nil, nil, err
		}
		t.pos = withFeed(pos)
	}
	lm, err := layers.NewLM(g, p, t.cfg.Model)
	if err != nil {
		return nil, nil, errors.WithMessage(err, "code task: building the model")
	}
	t.idsT = tensor.New(tensor.WithShape(b, l), tensor.WithBacking(t.ids))
	t.tgtT = tensor.New(tensor.WithShape(b*l), tensor.WithBacking(t.tgts))
	t.idsN = G.NewMatrix(g, tensor.Int, G.WithShape(b, l), G.WithName("code_ids"), G.WithValue(t.idsT))
	t.tgtN = G.NewVector(g, tensor.Int, G.WithShape(b*l), G.WithName("code_targets"), G.WithValue(t.tgtT))
	logits, err := fwd(lm, t.idsN, t.pos) // [B*L, V]
	if err != nil {
		return nil, nil, errors.WithMessagef(err, "code task: model at length %d", l)
	}
	loss, err := graph.CrossEntropy(logits, t.tgtN)
	if err != nil {
		return nil, nil, err
	}
	return loss, lm.Learnables(), nil
}

// Next draws B windows (gocode.Sampler), binds their ids and targets and,
// for a pairwise encoding, their relations (Feed.Bind).
func (t *Task) Next() error {
	if t.sampler == nil {
		return errors.New("code task: Next before Build")
	}
	if err := t.sampler.Next(t.ids, t.tgts, t.rel); err != nil {
		return err
	}
	if t.pairwise {
		if err := bindFeed(t.pos, t.rel); err != nil {
			return errors.WithMessage(err, "code task: binding relations")
		}
	}
	if err := G.Let(t.idsN, t.idsT); err != nil {
		return errors.Wrap(err, "code task: binding ids")
	}
	return errors.Wrap(G.Let(t.tgtN, t.tgtT), "code task: binding targets")
}

// State is the sampler's state (gocode.Sampler.State).
func (t *Task) State() ([]byte, error) {
	if t.sampler == nil {
		return nil, errors.New("code task: State before Build")
	}
	return t.sampler.State()
}

// SetState restores the sampler.
func (t *Task) SetState(s []byte) error {
	if t.sampler == nil {
		return errors.New("code task: SetState before Build")
	}
	return t.sampler.SetState(s)
}

// DataHash is the corpus hash (gocode.Corpus.Hash).
func (t *Task) DataHash() string { return t.data.Corpus.Hash() }

// DataPath is the corpus root, recorded in checkpoints.
func (t *Task) DataPath() string { return t.data.Corpus.Root }

// Units are bits/byte and bytes.
func (t *Task) Units() trainer.Units {
	return trainer.Units{Loss: "bits/byte", Items: "bytes", ItemsShort: "B"}
}

// taskConfig is what a checkpoint of this task must agree on besides the
// training configuration: the relation bounds and comment handling of the
// corpus, and the validation windows.
type taskConfig struct {
	MaxUp, MaxDown int
	Comments       bool
	ValWindows     int
}

func (t *Task) taskConfig() taskConfig {
	o := t.data.Corpus.Opts
	return taskConfig{MaxUp: o.MaxUp, MaxDown: o.MaxDown, Comments: o.Comments, ValWindows: len(t.data.Val)}
}

// TaskConfig implements trainer.TaskConfigurer.
func (t *Task) TaskConfig() ([]byte, error) { return json.Marshal(t.taskConfig()) }

// CheckTaskConfig implements trainer.TaskConfigurer: a checkpoint of other
// relation bounds, comment handling or validation windows is refused.
func (t *Task) CheckTaskConfig(saved []byte) error {
	var s taskConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return errors.Wrap(err, "code task: checkpoint task configuration")
	}
	if w := t.taskConfig(); s != w {
		return errors.Errorf("code task: checkpoint was trained with relations clipped at up %d down %d, comments %v, %d validation windows; this run has up %d down %d, comments %v, %d windows",
			s.MaxUp, s.MaxDown, s.Comments, s.ValWindows, w.MaxUp, w.MaxDown, w.Comments, w.ValWindows)
	}
	return nil
}

// EvalSpec returns the evaluation of the task's model at length le,
// counting the last SeqLen targets of each window apart.
func (t *Task) EvalSpec(le int) EvalSpec {
	return EvalSpec{Model: t.cfg.Model, Length: le, LastN: min(t.cfg.SeqLen, le), Batch: t.cfg.EvalBatch, MaxUp: t.maxUp, MaxDown: t.maxDown}
}

// Validate scores p on the validation windows at length SeqLen: Value is
// the bits per byte of every target.
func (t *Task) Validate(p *graph.Params) (trainer.Validation, error) {
	r, err := Evaluate(p, t.data.Val, t.EvalSpec(t.cfg.SeqLen))
	if err != nil {
		return trainer.Validation{}, err
	}
	return trainer.Validation{Name: "bits/byte", Value: r.BitsPerByte,
		Text: fmt.Sprintf("validation: %.4f bits/byte over %d windows of %d bytes (%d targets)", r.BitsPerByte, r.Windows, r.Length, r.Targets)}, nil
}
