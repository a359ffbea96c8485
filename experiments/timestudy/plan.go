package timestudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// TimeSuffix marks a plan entry whose model gets the onsets as real
// positions: "rope@time" (with overrides: "rope@time@rope-base=100").
const TimeSuffix = "time"

// Plan is one time study: the encodings trained (each with index or time
// positions), the seeds, the training configuration shared by every model,
// the sequences and the evaluation.
type Plan struct {
	Preset string
	// Encodings are posenc names or variants ("name@key=value", see
	// study.ParseVariant), each with index positions, or with time
	// positions when "@time" follows the name ("rope@time").
	Encodings []string
	Seeds     []int64
	// Base is the training configuration (Base.SeqLen is T, the events per
	// training sequence; Base.Model.Vocab is Seqs.Vocab+1).
	Base trainer.Config
	// Seqs are the options of the event sequences.
	Seqs SeqOptions
	// Factors are the evaluation lengths as multiples of T, 1 first.
	Factors []int
	// ValSeqs are the validation sequences of T events the engine scores
	// at the end of training; TestSeqs the test sequences scored at every
	// length (the same sequences: a shorter one is the first events of the
	// longest).
	ValSeqs, TestSeqs int
	// ValSeed and TestSeed seed the validation and test sequences (Set).
	ValSeed, TestSeed uint64
}

// IndexEncodings are the encodings the presets train with index positions:
// no positions, T5 (a reference: its buckets are of integer distances),
// ALiBi, RoPE, KERPLE (log), FIRE and the dynamic position bias. The
// dynamic bias has one hidden layer (dpb-depth=1, x-transformers' default
// is 2): with real positions its MLP runs on every (example, query, key)
// pair, 1.3 s per update at depth 2 against 0.5 s at depth 1 on a busy
// core, which the full preset's budget cannot afford; the index model gets
// the same MLP.
var IndexEncodings = []string{"none", "t5", "alibi", "rope", "kerple-log", "fire", "dpb@dpb-depth=1"}

// TimeCandidates are the encodings (bases of IndexEncodings) the presets
// also train with time positions, those of them that serve real positions
// (posenc.Accepted).
var TimeCandidates = []string{"alibi", "rope", "kerple-log", "fire", "dpb"}

// QuickBases are the encodings of the quick preset: none, t5, alibi and
// rope (with their time variants).
var QuickBases = []string{"none", "t5", "alibi", "rope"}

// DefaultEncodings lists IndexEncodings, each followed by its time variant
// ("rope", "rope@time"; "dpb@dpb-depth=1", "dpb@time@dpb-depth=1") when its
// base is among TimeCandidates and serves real positions (decided by
// posenc.Accepted, not by name).
func DefaultEncodings() []string {
	var out []string
	for _, s := range IndexEncodings {
		out = append(out, s)
		e, err := ParseEntry(s)
		if err != nil || !slices.Contains(TimeCandidates, e.Variant.Base) {
			continue
		}
		if enc, err := posenc.New(e.Variant.Base, posenc.Options{}); err == nil && slices.Contains(posenc.Accepted(enc), posenc.PosReal) {
			e.Time = true
			out = append(out, e.Label())
		}
	}
	return out
}

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full"} }

// BaseConfig is the training configuration of the time study: a causal LM
// over V+1 ids (V = 16 tokens and BOS) with d = 64, 4 heads, 2 blocks, FFN
// 128, T = 64 events, batch 32, AdamW lr 2e-3 with betas (0.9, 0.99),
// weight decay 0.01, 50 warm-up updates then cosine to 0.1 lr, gradients
// clipped to norm 1, float32, evaluation batches of 32 sequences.
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.Vocab = DefaultSeqOptions().Vocab + 1
	c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN = 64, 4, 2, 128
	c.Model.PosOpts.MaxLen = 64
	c.Batch, c.SeqLen = 32, 64
	c.Warmup = 50
	c.EvalBatch = 32
	return c
}

// Preset returns a built-in plan, both with DefaultSeqOptions and 64
// validation sequences, evaluated at T and 2T events: "quick" (the entries
// of DefaultEncodings whose base is in QuickBases, one seed, 100 updates,
// 64 test sequences; about a minute on one core) or "full" (every entry of
// DefaultEncodings, three seeds, 300 updates, 128 test sequences). On one
// core (GOMAXPROCS=1, on the shared development machine with another study
// running) an update of the twelve entries takes 1.1 s in all (40 to 100
// ms each, 160 ms for rope@time, 200 ms for dpb@time), up to twice that
// when the machine is busier; a run of the full preset at 200 updates took
// 11 min 53 s, so 300 updates take about 18 minutes.
func Preset(name string) (Plan, error) {
	p := Plan{Preset: name, Encodings: DefaultEncodings(), Seeds: []int64{1}, Base: BaseConfig(), Seqs: DefaultSeqOptions(),
		Factors: []int{1, 2}, ValSeqs: 64, TestSeqs: 128, ValSeed: 101, TestSeed: 202}
	switch name {
	case "quick":
		p.Base.Steps, p.TestSeqs = 100, 64
		p.Encodings = slices.DeleteFunc(p.Encodings, func(s string) bool {
			e, err := ParseEntry(s)
			return err != nil || !slices.Contains(QuickBases, e.Variant.Base)
		})
	case "full":
		p.Base.Steps, p.Seeds = 300, []int64{1, 2, 3}
	default:
		return Plan{}, errors.Errorf("times: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// TrainLen is T.
func (p Plan) TrainLen() int { return p.Base.SeqLen }

// Lengths are the evaluation lengths f*T.
func (p Plan) Lengths() []int { return study.ScaledLengths(p.Factors, p.Base.SeqLen) }

// MaxLen is the longest evaluation length.
func (p Plan) MaxLen() int { return slices.Max(p.Lengths()) }

// Entry is a parsed plan entry: an encoding variant and its positions.
type Entry struct {
	Variant study.Variant
	// Time gives the model the onsets as real positions.
	Time bool
}

// ParseEntry parses a plan entry "name[@time][@key=value...]": "@time"
// (anywhere after the name) selects time positions, the rest is a
// study.Variant. Errors name the entry: "@time" given twice, an empty
// name, or the variant's own errors.
func ParseEntry(spec string) (Entry, error) {
	parts := strings.Split(strings.TrimSpace(spec), "@")
	var e Entry
	keep := parts[:1]
	for _, s := range parts[1:] {
		if s == TimeSuffix {
			if e.Time {
				return Entry{}, errors.Errorf("entry %q: @%s given twice", spec, TimeSuffix)
			}
			e.Time = true
			continue
		}
		keep = append(keep, s)
	}
	v, err := study.ParseVariant(strings.Join(keep, "@"))
	if err != nil {
		return Entry{}, err
	}
	e.Variant = v
	return e, nil
}

// Label is the entry's name in tables, plots, rows and file names: the
// variant's label with "@time" after the name for time positions
// ("rope@time", "rope@time@rope-base=100").
func (e Entry) Label() string {
	l := e.Variant.Base
	if e.Time {
		l += "@" + TimeSuffix
	}
	if o := e.Variant.OverridesString(); o != "" {
		l += "@" + o
	}
	return l
}

// Job is one trained model of the plan.
type Job struct {
	Entry
	Seed int64
}

// Key names the job's files: "<label>-seed<s>".
func (j Job) Key() string { return fmt.Sprintf("%s-seed%d", j.Label(), j.Seed) }

// Jobs lists the models, encoding-major.
func (p Plan) Jobs() ([]Job, error) {
	var out []Job
	for _, s := range p.Encodings {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, err
		}
		for _, seed := range p.Seeds {
			out = append(out, Job{Entry: e, Seed: seed})
		}
	}
	return out, nil
}

// Config is the training configuration of job j: the base with the job's
// seed and encoding.
func (p Plan) Config(j Job) (trainer.Config, error) {
	c := p.Base
	c.Seed = j.Seed
	err := j.Variant.Apply(&c)
	return c, err
}

// Validate checks the plan before anything runs: the sequence options,
// the encodings (they exist, serve line positions, and serve real
// positions where "@time" asks for them), distinct seeds and entries,
// factors starting at 1 and growing, positive sequence counts, and every
// model configuration (a causal LM of vocabulary V+1).
func (p Plan) Validate() error {
	if err := p.Seqs.Check(); err != nil {
		return errors.WithMessage(err, "times")
	}
	if len(p.Encodings) == 0 || len(p.Seeds) == 0 {
		return errors.New("times: the plan needs encodings and seeds")
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("times: seed %d given twice", s)
		}
		seen[s] = true
	}
	if len(p.Factors) == 0 || p.Factors[0] != 1 {
		return errors.Errorf("times: evaluation factors %v must start with 1 (the training length)", p.Factors)
	}
	for i := 1; i < len(p.Factors); i++ {
		if p.Factors[i] <= p.Factors[i-1] {
			return errors.Errorf("times: evaluation factors %v must increase", p.Factors)
		}
	}
	if p.ValSeqs <= 0 || p.TestSeqs <= 0 {
		return errors.Errorf("times: validation sequences %d and test sequences %d must be positive", p.ValSeqs, p.TestSeqs)
	}
	if p.Base.SeqLen <= 0 {
		return errors.Errorf("times: training length %d must be positive", p.Base.SeqLen)
	}
	if p.Base.Model.Vocab != p.Seqs.Vocab+1 {
		return errors.Errorf("times: model vocabulary %d, want %d tokens + BOS = %d", p.Base.Model.Vocab, p.Seqs.Vocab, p.Seqs.Vocab+1)
	}
	jobs, err := p.Jobs()
	if err != nil {
		return errors.WithMessage(err, "times")
	}
	labels := map[string]bool{}
	for _, j := range jobs {
		if j.Seed == p.Seeds[0] {
			if labels[j.Label()] {
				return errors.Errorf("times: encoding %s given twice", j.Label())
			}
			labels[j.Label()] = true
		}
		c, err := p.Config(j)
		if err != nil {
			return err
		}
		if err := study.CheckServes(c.Model.Pos, []posenc.PosKind{posenc.PosLine, posenc.PosReal}); err != nil {
			return errors.WithMessagef(err, "times: %s", j.Key())
		}
		if err := c.ValidateTraining(); err != nil {
			return errors.WithMessagef(err, "times: %s", j.Key())
		}
		if !c.Model.Causal {
			return errors.Errorf("times: %s: the language model must be causal", j.Key())
		}
		enc, err := posenc.New(c.Model.Pos, c.Model.PosOpts)
		if err != nil {
			return errors.WithMessagef(err, "times: %s", j.Key())
		}
		if err := posenc.CheckKind(enc, nil); err != nil {
			return errors.WithMessagef(err, "times: %s", j.Key())
		}
		if j.Time {
			if err := RealServed(c.Model.Pos, c.Model.PosOpts); err != nil {
				return errors.WithMessagef(err, "times: %s asks for time positions", j.Key())
			}
		}
	}
	return nil
}
