package copestudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/copetasks"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// Condition is one test condition of a task: its name and the context
// length of its sequences in tokens (copy: data tokens and blanks; count:
// statements and passes).
type Condition struct {
	Name    string `json:"name"`
	Context int    `json:"context"`
}

// The condition names of the presets. IID is the training distribution
// (and its first condition); Longer holds more blanks or passes than
// training, the same content (the paper's "sparse" out-of-distribution
// test); Dense fewer blanks (the paper's "dense" one).
const (
	IID    = "iid"
	Dense  = "dense"
	Longer = "longer"
)

// TaskPlan is one task of the study: its sequences, the training context
// length and the test conditions (the first is the training one, IID).
type TaskPlan struct {
	Opts       copetasks.Options `json:"opts"`
	Train      int               `json:"train_context"`
	Conditions []Condition       `json:"conditions"`
}

// Name is the task's name ("copy", "count").
func (t TaskPlan) Name() string { return t.Opts.Task }

// Plan is one study: the tasks, the encodings trained on each, the seeds,
// the training configuration shared by every model and the data sets.
type Plan struct {
	Preset string
	Tasks  []TaskPlan
	// Encodings are posenc names or variants ("name@key=value", see
	// study.ParseVariant).
	Encodings []string
	Seeds     []int64
	// Base is the training configuration; each task sets its vocabulary
	// (Model.Vocab) and sequence length (SeqLen) in Config.
	Base trainer.Config
	// ValSeqs are the validation sequences (training context) the engine
	// scores at the end of training; TestSeqs the test sequences of every
	// condition.
	ValSeqs, TestSeqs int
	// ValSeed and TestSeed seed the validation and test sequences
	// (copetasks.Set).
	ValSeed, TestSeed uint64
}

// DefaultEncodings are CoPE and the encodings the paper's claim is
// against: RoPE, ALiBi and no positions.
var DefaultEncodings = []string{"cope", "rope", "alibi", "none"}

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full"} }

// DefaultTasks are the presets' tasks, scaled down from the paper's
// (doc.go): selective copy of n = 16 data tokens (V = 16) in contexts of
// 32 tokens (16 blanks: the paper's in-distribution ratio of one blank per
// data token), tested also in contexts of 24 (dense: 8 blanks) and 64
// tokens (longer: 48 blanks); counting over 3 variables, 8 assignments and
// increments among passes in contexts of 32 tokens, tested also in
// contexts of 64 tokens (longer: the same kind of program among more
// passes). Longer is twice the training context in both.
func DefaultTasks() []TaskPlan {
	return []TaskPlan{
		{Opts: copetasks.DefaultCopy(), Train: 32, Conditions: []Condition{{IID, 32}, {Dense, 24}, {Longer, 64}}},
		{Opts: copetasks.DefaultCount(), Train: 32, Conditions: []Condition{{IID, 32}, {Longer, 64}}},
	}
}

// BaseConfig is the training configuration of the study: a causal LM with
// d = 64, 4 heads, 2 blocks, FFN 128, batch 32, AdamW lr 2e-3 with betas
// (0.9, 0.99), weight decay 0.01, 50 warm-up updates then cosine to 0.1
// lr, gradients clipped to norm 1, float32, evaluation batches of 32
// sequences (the vocabulary and length are the task's).
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN = 64, 4, 2, 128
	c.Batch = 32
	c.Warmup = 50
	c.EvalBatch = 32
	return c
}

// Preset returns a built-in plan, both with DefaultTasks, DefaultEncodings,
// 64 validation sequences and the test sequences of every condition:
// "quick" (one seed, 600 updates, 128 test sequences; 2 min 6 s and 2 min
// 27 s in two runs on the shared 2-core machine with another study
// running) or "full" (three seeds, 2000 updates, 256 test sequences; from
// the quick runs' ms per update, 205 to 240 ms for one update of each of
// the 8 models, 20 to 25 minutes as one process).
func Preset(name string) (Plan, error) {
	p := Plan{Preset: name, Tasks: DefaultTasks(), Encodings: slices.Clone(DefaultEncodings), Seeds: []int64{1}, Base: BaseConfig(),
		ValSeqs: 64, TestSeqs: 256, ValSeed: 101, TestSeed: 202}
	switch name {
	case "quick":
		p.Base.Steps, p.TestSeqs = 600, 128
	case "full":
		p.Base.Steps, p.Seeds = 2000, []int64{1, 2, 3}
	default:
		return Plan{}, errors.Errorf("cope: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// SelectTasks returns the tasks of ts named in list ("count",
// "copy,count"), in list's order, or an error naming a task that is not
// there or is given twice.
func SelectTasks(ts []TaskPlan, list string) ([]TaskPlan, error) {
	var out []TaskPlan
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(ts, func(t TaskPlan) bool { return t.Name() == name })
		if i < 0 {
			var names []string
			for _, t := range ts {
				names = append(names, t.Name())
			}
			return nil, errors.Errorf("-tasks: no task %q (valid: %s)", name, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(out, func(t TaskPlan) bool { return t.Name() == name }) {
			return nil, errors.Errorf("-tasks: task %s given twice", name)
		}
		out = append(out, ts[i])
	}
	return out, nil
}

// Job is one trained model of the plan: a task, an encoding, a seed.
type Job struct {
	Task    string
	Variant study.Variant
	Seed    int64
}

// Label is the encoding's label ("rope", "cope@cope-npos=32").
func (j Job) Label() string { return j.Variant.Label() }

// Key names the job's files: "<task>-<label>-seed<s>" (-redo names
// "<task>-<label>").
func (j Job) Key() string { return fmt.Sprintf("%s-%s-seed%d", j.Task, j.Label(), j.Seed) }

// Jobs lists the models, task-major, then encoding, then seed.
func (p Plan) Jobs() ([]Job, error) {
	var out []Job
	for _, t := range p.Tasks {
		for _, s := range p.Encodings {
			v, err := study.ParseVariant(strings.TrimSpace(s))
			if err != nil {
				return nil, err
			}
			for _, seed := range p.Seeds {
				out = append(out, Job{Task: t.Name(), Variant: v, Seed: seed})
			}
		}
	}
	return out, nil
}

// Task returns the plan's task named name.
func (p Plan) Task(name string) (TaskPlan, error) {
	for _, t := range p.Tasks {
		if t.Name() == name {
			return t, nil
		}
	}
	return TaskPlan{}, errors.Errorf("cope: the plan has no task %q", name)
}

// Config is the training configuration of job j: the base with the task's
// vocabulary and sequence length, the job's seed and its encoding.
func (p Plan) Config(j Job) (trainer.Config, error) {
	t, err := p.Task(j.Task)
	if err != nil {
		return trainer.Config{}, err
	}
	c := p.Base
	c.Model.Vocab, c.SeqLen, c.Seed = t.Opts.Vocab(), t.Opts.Len(t.Train), j.Seed
	err = j.Variant.Apply(&c)
	return c, err
}

// Validate checks the plan before anything runs: the tasks (valid
// options, each task once, a first condition at the training context,
// distinct condition names, contexts that hold the content), distinct
// seeds and encodings, positive sequence counts, and every model's
// configuration (an encoding of line positions, a causal LM).
func (p Plan) Validate() error {
	if len(p.Tasks) == 0 || len(p.Encodings) == 0 || len(p.Seeds) == 0 {
		return errors.New("cope: the plan needs tasks, encodings and seeds")
	}
	seenTask := map[string]bool{}
	for _, t := range p.Tasks {
		if err := t.Opts.CheckContext(t.Train); err != nil {
			return errors.WithMessage(err, "cope")
		}
		if seenTask[t.Name()] {
			return errors.Errorf("cope: task %s given twice", t.Name())
		}
		seenTask[t.Name()] = true
		if len(t.Conditions) == 0 || t.Conditions[0].Context != t.Train {
			return errors.Errorf("cope: %s: the first condition must be the training context (%d tokens)", t.Name(), t.Train)
		}
		names := map[string]bool{}
		for _, c := range t.Conditions {
			if c.Name == "" || strings.ContainsAny(c.Name, " /,") || names[c.Name] {
				return errors.Errorf("cope: %s: condition name %q empty, repeated or with a space, / or comma", t.Name(), c.Name)
			}
			names[c.Name] = true
			if err := t.Opts.CheckContext(c.Context); err != nil {
				return errors.WithMessagef(err, "cope: %s condition %s", t.Name(), c.Name)
			}
		}
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("cope: seed %d given twice", s)
		}
		seen[s] = true
	}
	if p.ValSeqs <= 0 || p.TestSeqs <= 0 {
		return errors.Errorf("cope: validation sequences %d and test sequences %d must be positive", p.ValSeqs, p.TestSeqs)
	}
	jobs, err := p.Jobs()
	if err != nil {
		return errors.WithMessage(err, "cope")
	}
	labels := map[string]bool{}
	for _, j := range jobs {
		if j.Seed == p.Seeds[0] && j.Task == p.Tasks[0].Name() {
			if labels[j.Label()] {
				return errors.Errorf("cope: encoding %s given twice", j.Label())
			}
			labels[j.Label()] = true
		}
		c, err := p.Config(j)
		if err != nil {
			return err
		}
		if err := study.CheckServes(c.Model.Pos, []posenc.PosKind{posenc.PosLine}); err != nil {
			return errors.WithMessagef(err, "cope: %s", j.Key())
		}
		if err := c.ValidateTraining(); err != nil {
			return errors.WithMessagef(err, "cope: %s", j.Key())
		}
		if !c.Model.Causal {
			return errors.Errorf("cope: %s: the language model must be causal", j.Key())
		}
	}
	return nil
}
