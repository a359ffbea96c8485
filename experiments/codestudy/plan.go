package codestudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Plan is one code study: the encodings trained, the seeds, the training
// configuration shared by every model, the corpus options and the
// evaluation windows.
type Plan struct {
	Preset string
	// Encodings are posenc names, combinations ("tree+rope") or variants
	// ("name@key=value", study.ParseVariant).
	Encodings []string
	Seeds     []int64
	// Base is the training configuration (Base.SeqLen is L).
	Base trainer.Config
	// Corpus are the options of gocode.LoadCorpus: the byte cap, the
	// split fractions and the relation bounds (MaxUp, MaxDown), which the
	// tree encodings' tree-max-up and tree-max-down follow.
	Corpus gocode.Options
	// Factors are the evaluation lengths as multiples of L, 1 first.
	Factors []int
	// ValWindows are the validation windows of length L the engine scores
	// at the end of training; TestWindows the test windows scored at every
	// length (their anchors leave room for the longest).
	ValWindows, TestWindows int
	// WindowSeed seeds the draw of the validation and test windows.
	WindowSeed uint64
	// Src is the source root of the corpus ("": gocode.DefaultRoot(),
	// GOROOT/src). The corpus's hash, not this path, decides whether
	// saved rows are reused.
	Src string `json:",omitempty"`
}

// Encodings are the encodings of the study: the 1-D baselines t5, alibi
// and rope, the tree-relative bias alone, and the tree bias combined with
// a 1-D encoding.
var Encodings = []string{"none", "t5", "alibi", "rope", "tree", "tree+rope", "tree+alibi"}

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full"} }

// BaseConfig is the training configuration of the code study: a causal
// byte-level LM with d = 64, 4 heads, 2 blocks, FFN 256, L = 128, batch
// 16, AdamW lr 2e-3 with betas (0.9, 0.99), weight decay 0.01, 50 warm-up
// updates then cosine to 0.1 lr, gradients clipped to norm 1, float32,
// evaluation batches of 8 windows.
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN = 64, 4, 2, 256
	c.Model.PosOpts.MaxLen = 128
	c.Batch, c.SeqLen = 16, 128
	c.Warmup = 50
	c.EvalBatch = 8
	return c
}

// CorpusOptions are the corpus options of the presets: GOROOT/src capped
// at 8 MiB (about 6.7 MB of training source, 0.8 MB each of validation and
// test packages), 10% of the packages for validation and 10% for test,
// relations clipped at 4 steps up and 4 down (25 ids), no comments nodes,
// no _test.go files.
func CorpusOptions() gocode.Options {
	o := gocode.DefaultOptions()
	o.MaxBytes = 8 << 20
	o.MaxUp, o.MaxDown = 4, 4
	return o
}

// Preset returns a built-in plan: "quick" (every encoding, one seed, 300
// updates, 64 test windows; 5.5 minutes on 2 cores of a loaded machine) or
// "full" (three seeds, 700 updates, 128 test windows), sized for at most 40
// minutes on one core: with GOMAXPROCS=1 an update takes 65 to 120 ms of
// CPU (measured over 100 updates on a loaded machine: none 69, t5 65,
// alibi 82, rope 98, tree 120, tree+rope 101, tree+alibi 103), 91 ms on
// average over the seven encodings, so the full preset needs about 22
// minutes of training, 2 of evaluation and the corpus load (under a
// second), some 25 minutes of CPU in all.
func Preset(name string) (Plan, error) {
	p := Plan{Preset: name, Encodings: slices.Clone(Encodings), Seeds: []int64{1}, Base: BaseConfig(),
		Corpus: CorpusOptions(), Factors: []int{1, 2, 4}, ValWindows: 64, TestWindows: 64, WindowSeed: 1}
	switch name {
	case "quick":
		p.Base.Steps = 300
	case "full":
		p.Base.Steps, p.Seeds, p.TestWindows = 700, []int64{1, 2, 3}, 128
	default:
		return Plan{}, errors.Errorf("code: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// TrainLen is L.
func (p Plan) TrainLen() int { return p.Base.SeqLen }

// Lengths are the evaluation lengths f*L.
func (p Plan) Lengths() []int { return study.ScaledLengths(p.Factors, p.Base.SeqLen) }

// MaxLen is the longest evaluation length.
func (p Plan) MaxLen() int { return slices.Max(p.Lengths()) }

// Job is one trained model of the plan.
type Job struct {
	Variant study.Variant
	Seed    int64
}

// Key names the job's files: "<label>-seed<s>".
func (j Job) Key() string { return fmt.Sprintf("%s-seed%d", j.Variant.Label(), j.Seed) }

// Jobs lists the models, encoding-major.
func (p Plan) Jobs() ([]Job, error) {
	var out []Job
	for _, e := range p.Encodings {
		v, err := study.ParseVariant(strings.TrimSpace(e))
		if err != nil {
			return nil, err
		}
		for _, s := range p.Seeds {
			out = append(out, Job{Variant: v, Seed: s})
		}
	}
	return out, nil
}

// Config is the training configuration of job j: the base with the job's
// seed and encoding, and the tree bounds of the corpus.
func (p Plan) Config(j Job) (trainer.Config, error) {
	c := p.Base
	c.Seed = j.Seed
	setTreeBounds(&c.Model.PosOpts, p.Corpus.MaxUp, p.Corpus.MaxDown)
	if err := j.Variant.Apply(&c); err != nil {
		return c, err
	}
	return c, nil
}

// Validate checks the plan before anything runs: the encodings and
// variants exist, seeds are distinct, the factors start at 1 and grow,
// window counts are positive, and every model configuration is a valid
// causal byte-level LM whose tree bounds (if it takes relations) are the
// corpus's.
func (p Plan) Validate() error {
	if len(p.Encodings) == 0 || len(p.Seeds) == 0 {
		return errors.New("code: the plan needs encodings and seeds")
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("code: seed %d given twice", s)
		}
		seen[s] = true
	}
	if len(p.Factors) == 0 || p.Factors[0] != 1 {
		return errors.Errorf("code: evaluation factors %v must start with 1 (the training length)", p.Factors)
	}
	for i := 1; i < len(p.Factors); i++ {
		if p.Factors[i] <= p.Factors[i-1] {
			return errors.Errorf("code: evaluation factors %v must increase", p.Factors)
		}
	}
	if p.ValWindows <= 0 || p.TestWindows <= 0 {
		return errors.Errorf("code: validation windows %d and test windows %d must be positive", p.ValWindows, p.TestWindows)
	}
	if p.Base.SeqLen <= 0 {
		return errors.Errorf("code: training length %d must be positive", p.Base.SeqLen)
	}
	if p.Corpus.MaxUp < 0 || p.Corpus.MaxDown < 0 {
		return errors.Errorf("code: relation bounds up %d down %d must not be negative", p.Corpus.MaxUp, p.Corpus.MaxDown)
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	labels := map[string]bool{}
	for _, j := range jobs {
		if j.Seed == p.Seeds[0] {
			if labels[j.Variant.Label()] {
				return errors.Errorf("code: encoding %s given twice", j.Variant.Label())
			}
			labels[j.Variant.Label()] = true
		}
		c, err := p.Config(j)
		if err != nil {
			return err
		}
		if err := study.CheckServes(c.Model.Pos, []posenc.PosKind{posenc.PosLine, posenc.PosPairwise}); err != nil {
			return errors.WithMessagef(err, "code: %s", j.Key())
		}
		if err := c.Validate(); err != nil {
			return errors.WithMessagef(err, "code: %s", j.Key())
		}
		if !c.Model.Causal {
			return errors.Errorf("code: %s: the language model must be causal", j.Key())
		}
		enc, err := posenc.New(c.Model.Pos, c.Model.PosOpts)
		if err != nil {
			return errors.WithMessagef(err, "code: %s", j.Key())
		}
		if Pairwise(enc) {
			if up, down := treeBounds(c.Model.PosOpts.Resolve(c.Model.DModel)); up != p.Corpus.MaxUp || down != p.Corpus.MaxDown {
				return errors.Errorf("code: %s: tree bounds up %d down %d differ from the corpus relation bounds up %d down %d (set the plan's corpus bounds instead)",
					j.Key(), up, down, p.Corpus.MaxUp, p.Corpus.MaxDown)
			}
			if err := servesTreeRelations(c); err != nil {
				return errors.WithMessagef(err, "code: %s cannot serve the syntax-tree relations", j.Key())
			}
		} else if err := posenc.CheckKind(enc, nil); err != nil {
			return errors.WithMessagef(err, "code: %s", j.Key())
		}
	}
	return nil
}

// servesTreeRelations builds the model of c on one window of two bytes
// whose relations are the largest tree relation id: an encoding of other
// pairwise relations (graphormer-spatial's distance table) fails here, at
// planning, rather than at its first batch.
func servesTreeRelations(c trainer.Config) error {
	n := gocode.NumTreeRelations(treeBounds(c.Model.PosOpts))
	pos, err := posenc.NewPairwise(1, 2, 2, n, []int{n - 1, n - 1, n - 1, n - 1})
	if err != nil {
		return err
	}
	g := G.NewGraph()
	lm, err := layers.NewLM(g, graph.NewParams(tensor.Float32, 1), c.Model)
	if err != nil {
		return err
	}
	ids := G.NewTensor(g, tensor.Int, 2, G.WithShape(1, 2), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int{0, 0}))))
	_, err = lm.FwdWith(ids, layers.Options{Pos: pos})
	return err
}
