package trainer

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// LMTask is the byte-level language model as a Task (kind "lm"): a
// layers.LM over windows of a Corpus drawn by a Batcher, trained on the mean
// next-byte cross-entropy and validated in bits per byte over the whole
// validation text at the training length. Run and New train it.
type LMTask struct {
	cfg    Config // resolved
	corpus *Corpus

	batcher    *Batcher
	params     *graph.Params
	lm         *layers.LM
	idsN, tgtN *G.Node
	idsT, tgtT *tensor.Dense
	ids, tgts  []int

	ev    *Evaluator // built by the first Validate
	evFor *graph.Params
}

// NewLMTask returns the language-model task of cfg (checked with
// Config.Validate) on corpus c (an error if nil). The corpus length, the
// estimated memory (CheckMemory) and the batch generator are checked when
// the trainer builds the task.
func NewLMTask(cfg Config, c *Corpus) (*LMTask, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("trainer: nil corpus")
	}
	return &LMTask{cfg: cfg.Resolved(), corpus: c}, nil
}

// Kind is "lm".
func (t *LMTask) Kind() string { return "lm" }

// Corpus returns the task's corpus.
func (t *LMTask) Corpus() *Corpus { return t.corpus }

// LM returns the model of the training graph (nil before Build).
func (t *LMTask) LM() *layers.LM { return t.lm }

// Probes returns the attention probes of the training graph's blocks (nil
// before Build), for the monitor (Prober).
func (t *LMTask) Probes() []*graph.AttentionProbe {
	if t.lm == nil {
		return nil
	}
	return t.lm.Probes()
}

// Build checks the estimated memory and the corpus length, creates the batch
// generator (seeded with Config.Seed) and the graph ids [B, L] -> logits
// [B*L, 256] -> mean cross-entropy against targets [B*L].
func (t *LMTask) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	cfg := t.cfg
	if err := CheckMemory(cfg, 0); err != nil {
		return nil, nil, err
	}
	if err := t.corpus.CheckWindow(cfg.SeqLen); err != nil {
		return nil, nil, err
	}
	bt, err := NewBatcher(t.corpus.Train, cfg.Batch, cfg.SeqLen, uint64(cfg.Seed))
	if err != nil {
		return nil, nil, err
	}
	t.batcher, t.params = bt, p
	b, l := cfg.Batch, cfg.SeqLen
	lm, err := layers.NewLM(g, p, cfg.Model)
	if err != nil {
		return nil, nil, errors.WithMessage(err, "trainer: building the model")
	}
	t.lm = lm
	t.ids, t.tgts = make([]int, b*l), make([]int, b*l)
	t.idsT = tensor.New(tensor.WithShape(b, l), tensor.WithBacking(t.ids))
	t.tgtT = tensor.New(tensor.WithShape(b*l), tensor.WithBacking(t.tgts))
	t.idsN = G.NewMatrix(g, tensor.Int, G.WithShape(b, l), G.WithName("trainer_ids"), G.WithValue(t.idsT))
	t.tgtN = G.NewVector(g, tensor.Int, G.WithShape(b*l), G.WithName("trainer_targets"), G.WithValue(t.tgtT))
	logits, err := lm.Fwd(t.idsN) // [B*L, V]
	if err != nil {
		return nil, nil, errors.WithMessagef(err, "trainer: model at length %d", l)
	}
	loss, err := graph.CrossEntropy(logits, t.tgtN)
	if err != nil {
		return nil, nil, err
	}
	return loss, lm.Learnables(), nil
}

// Next draws B windows and binds their ids and targets.
func (t *LMTask) Next() error {
	t.batcher.Next(t.ids, t.tgts)
	if err := G.Let(t.idsN, t.idsT); err != nil {
		return errors.Wrap(err, "trainer: binding ids")
	}
	if err := G.Let(t.tgtN, t.tgtT); err != nil {
		return errors.Wrap(err, "trainer: binding targets")
	}
	return nil
}

// Items is Batch*SeqLen tokens.
func (t *LMTask) Items() int { return t.cfg.Batch * t.cfg.SeqLen }

// State is the batch generator's state (Batcher.State).
func (t *LMTask) State() ([]byte, error) { return t.batcher.State() }

// SetState restores the batch generator.
func (t *LMTask) SetState(s []byte) error { return t.batcher.SetState(s) }

// DataHash is Corpus.Hash.
func (t *LMTask) DataHash() string { return t.corpus.Hash() }

// DataPath is the corpus file ("" if in memory), recorded in checkpoints.
func (t *LMTask) DataPath() string { return t.corpus.Path }

// Units are bits/byte and tokens.
func (t *LMTask) Units() Units { return Units{Loss: "bits/byte", Items: "tokens", ItemsShort: "tok"} }

// Describe is "model pos=... d=... : N parameters; corpus ...: n training /
// m validation bytes".
func (t *LMTask) Describe() string {
	n := 0
	if t.params != nil {
		n = t.params.Count()
	}
	return fmt.Sprintf("model %s: %d parameters; corpus %s: %d training / %d validation bytes",
		describe(t.cfg), n, t.corpus.name(), len(t.corpus.Train), len(t.corpus.Val))
}

// Validate scores the whole validation text at length SeqLen with an
// Evaluator of EvalBatch windows (built once for p and reused); Value is the
// bits per byte. Non-finite bits per byte are an error.
func (t *LMTask) Validate(p *graph.Params) (Validation, error) {
	if t.ev == nil || t.evFor != p {
		if err := t.Close(); err != nil {
			return Validation{}, err
		}
		ev, err := NewEvaluator(p, t.cfg.Model, t.cfg.EvalBatch, t.cfg.SeqLen)
		if err != nil {
			return Validation{}, err
		}
		t.ev, t.evFor = ev, p
	}
	r, err := validate(t.ev, t.corpus.Val)
	if err != nil {
		return Validation{}, err
	}
	return Validation{Name: "bits/byte", Value: r.BitsPerByte, EvalResult: r,
		Text: fmt.Sprintf("validation: %.4f bits/byte over %d windows of %d bytes (%d targets)",
			r.BitsPerByte, r.Windows, t.cfg.SeqLen, r.Tokens)}, nil
}

// Close releases the validation graph (Trainer.Close calls it).
func (t *LMTask) Close() error {
	if t.ev == nil {
		return nil
	}
	err := t.ev.Close()
	t.ev, t.evFor = nil, nil
	return err
}

// dataMismatch is the error refusing a checkpoint of another corpus.
func (t *LMTask) dataMismatch(saved string) error {
	return errors.Errorf("checkpoint was trained on a corpus with SHA-256 %s; this run's corpus %s has SHA-256 %s",
		saved, t.corpus.name(), t.corpus.Hash())
}

// sample continues opt.Prompt with the weights p (Run's final sample).
func (t *LMTask) sample(p *graph.Params, opt RunOptions) ([]byte, error) {
	return Sample(p, t.cfg.Model, SampleOptions{Prompt: []byte(opt.Prompt), N: opt.SampleLen,
		Temperature: opt.Temperature, Seed: uint64(t.cfg.Seed), Window: t.cfg.SeqLen})
}
