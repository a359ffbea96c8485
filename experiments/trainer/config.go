package trainer

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Config is everything a training run depends on. DefaultConfig is the
// reference configuration shared by every experiment.
type Config struct {
	// Model is the language model; Model.Vocab must be Vocab (256). For
	// another task (RunTask) it is that task's model configuration, checked
	// by ValidateTraining and recorded in checkpoints; Vocab may be 0.
	Model layers.Config
	// Batch is the number of windows (items) per update, SeqLen (L) their
	// length (unused by tasks other than the language model).
	Batch, SeqLen int
	// Steps is the number of optimizer updates of a full run.
	Steps int
	// LR is the peak learning rate of AdamW (Loshchilov & Hutter 2019) with
	// coefficients Beta1, Beta2, denominator AdamEps and decoupled weight
	// decay WeightDecay, applied to weight matrices and embeddings only.
	LR, Beta1, Beta2, AdamEps, WeightDecay float64
	// Warmup is the number of linear warm-up updates (lr*(s+1)/Warmup at
	// update s); then the rate follows a cosine from LR down to FloorFrac*LR
	// at update Steps.
	Warmup    int
	FloorFrac float64
	// ClipNorm is the maximal global gradient norm (0: no clipping).
	ClipNorm float64
	// Seed seeds the initial weights and the batch generator.
	Seed int64
	// Dtype is tensor.Float32 or tensor.Float64.
	Dtype tensor.Dtype `json:"-" opt:"-"`
	// EvalEvery evaluates the validation bits per byte every EvalEvery
	// updates (0: only at the end); EvalBatch is the evaluation batch size.
	EvalEvery, EvalBatch int
}

// DefaultConfig returns the reference configuration: the reference model of
// layers.DefaultConfig over bytes, L = 64, batch 32, AdamW with lr 2e-3,
// betas (0.9, 0.99), eps 1e-8 and weight decay 0.01 on matrices and
// embeddings, 100 warm-up updates then a cosine down to 0.1*lr at update
// 2000, 2000 updates, gradients clipped to global norm 1, float32, seed 1.
func DefaultConfig() Config {
	m := layers.DefaultConfig()
	m.Vocab = Vocab
	m.PosOpts.MaxLen = 64 // a learned table covers the training length
	return Config{
		Model:       m,
		Batch:       32,
		SeqLen:      64,
		Steps:       2000,
		LR:          2e-3,
		Beta1:       0.9,
		Beta2:       0.99,
		AdamEps:     1e-8,
		WeightDecay: 0.01,
		Warmup:      100,
		FloorFrac:   0.1,
		ClipNorm:    1.0,
		Seed:        1,
		Dtype:       tensor.Float32,
		EvalEvery:   0,
		EvalBatch:   32,
	}
}

// ParseDtype maps "float32" and "float64" to their tensor dtypes.
func ParseDtype(s string) (tensor.Dtype, error) {
	switch s {
	case "float32", "f32":
		return tensor.Float32, nil
	case "float64", "f64":
		return tensor.Float64, nil
	}
	return tensor.Dtype{}, errors.Errorf("unknown dtype %q (valid: float32, float64)", s)
}

// Validate returns an error naming the first invalid field of a
// configuration of the byte-level language model: the engine's settings
// (ValidateTraining) plus the LM's own rules (Model.Vocab = Vocab, SeqLen
// positive). An unknown position encoding gives posenc's error, which lists
// the valid names.
func (c Config) Validate() error { return c.validate(true) }

// ValidateTraining returns an error naming the first invalid field among
// those the engine uses for every task (RunTask, NewTaskTrainer): the model
// dimensions and position encoding (Model.Vocab may be 0: a task without a
// vocabulary), batch, steps, eval batch, the optimizer, the schedule,
// clipping and the dtype. SeqLen and the vocabulary are the task's to check.
func (c Config) ValidateTraining() error { return c.validate(false) }

// validate checks c; lm adds the language model's rules in place, so that
// Validate reports the same first error as before the split.
func (c Config) validate(lm bool) error {
	pos := c.Model.Pos
	if pos == "" {
		pos = "none" // layers' convention
	}
	if _, err := posenc.New(pos, c.Model.PosOpts); err != nil {
		return err
	}
	m := c.Model
	if !lm && m.Vocab == 0 {
		m.Vocab = 1 // unused by the task: checked neither way
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if lm && c.Model.Vocab != Vocab {
		return errors.Errorf("config: model vocab %d, byte-level training needs %d", c.Model.Vocab, Vocab)
	}
	sizes := []struct {
		name string
		v    int
	}{{"batch", c.Batch}, {"seq len", c.SeqLen}, {"steps", c.Steps}, {"eval batch", c.EvalBatch}}
	for _, f := range sizes {
		if f.name == "seq len" && !lm {
			continue
		}
		if f.v <= 0 {
			return errors.Errorf("config: %s is %d, must be positive", f.name, f.v)
		}
	}
	if c.Warmup < 0 || c.EvalEvery < 0 {
		return errors.Errorf("config: warmup %d and eval every %d must not be negative", c.Warmup, c.EvalEvery)
	}
	if !(c.LR > 0) || math.IsInf(c.LR, 0) {
		return errors.Errorf("config: learning rate %g must be positive and finite", c.LR)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1) {
		return errors.Errorf("config: betas (%g, %g) must be in [0, 1)", c.Beta1, c.Beta2)
	}
	if !(c.AdamEps > 0) || !(c.WeightDecay >= 0) || !(c.ClipNorm >= 0) {
		return errors.Errorf("config: adam eps %g must be positive, weight decay %g and clip norm %g non-negative",
			c.AdamEps, c.WeightDecay, c.ClipNorm)
	}
	if !(c.FloorFrac >= 0 && c.FloorFrac <= 1) {
		return errors.Errorf("config: floor fraction %g must be in [0, 1]", c.FloorFrac)
	}
	if c.Dtype != tensor.Float32 && c.Dtype != tensor.Float64 {
		return errors.Errorf("config: dtype %v, want float32 or float64", c.Dtype)
	}
	return nil
}

// configJSON is Config with the dtype spelled as a string.
type configJSON struct {
	configAlias
	DtypeName string `json:"Dtype"`
}

type configAlias Config

// MarshalJSON writes c with Dtype as "float32" or "float64".
func (c Config) MarshalJSON() ([]byte, error) {
	j := configJSON{configAlias: configAlias(c)}
	if c.Dtype.Type != nil {
		j.DtypeName = c.Dtype.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; unknown fields are ignored
// (see DecodeConfig for the strict reading of configuration files).
func (c *Config) UnmarshalJSON(b []byte) error {
	*c = Config{}
	return c.decode(b, false)
}

// DecodeConfig reads a JSON configuration (the format of MarshalJSON and of
// -dump-config) over base: fields absent from the JSON keep base's values.
// Unknown fields, trailing data and an unknown dtype are errors naming the
// problem.
func DecodeConfig(b []byte, base Config) (Config, error) {
	c := base
	if err := c.decode(b, true); err != nil {
		return base, err
	}
	return c, nil
}

// decode reads JSON over c.
func (c *Config) decode(b []byte, strict bool) error {
	j := configJSON{configAlias: configAlias(*c)}
	if c.Dtype.Type != nil {
		j.DtypeName = c.Dtype.String()
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&j); err != nil {
		return errors.Wrap(err, "config")
	}
	if dec.More() {
		return errors.New("config: trailing data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("config: trailing data after the JSON object")
	}
	dt, err := ParseDtype(j.DtypeName)
	if err != nil {
		return errors.WithMessage(err, "config")
	}
	*c = Config(j.configAlias)
	c.Dtype = dt
	return nil
}

// Resolved returns c with every "zero means default" field replaced by the
// value it stands for (Model.Pos "" -> "none", the posenc.Options
// defaults), so that a checkpoint or a summary records what actually ran.
// A resolved configuration trains exactly like the original.
func (c Config) Resolved() Config {
	c.Model = c.Model.Resolved()
	return c
}

// ResumeRules lists what a resumed run may change with respect to its
// checkpoint: Refused fields (the model, batch, seq-len, seed, dtype, and
// the corpus, checked by hash) must be equal; Allowed fields (the length of
// the run, the learning-rate schedule, the optimizer settings, clipping,
// evaluation, and Model.Stream, which changes how the attention is computed
// but not the model) take this run's values and are listed in the log when
// they differ. Names are the kebab-case option names (fields.Walk).
var ResumeRules = struct{ Allowed, Refused []string }{
	Allowed: []string{"steps", "lr", "warmup", "floor-frac", "beta1", "beta2", "adam-eps", "weight-decay", "clip-norm",
		"eval-every", "eval-batch", "stream"},
	Refused: []string{"every model option but stream (vocab, d-model, heads, layers, ffn, eps, init-std, causal, pos and every position-encoding option)",
		"batch", "seq-len", "seed", "dtype", "corpus (SHA-256 of its bytes)"},
}

// optionValues returns the kebab-case name and value of every option of the
// resolved c, plus "dtype", in declaration order.
func (c Config) optionValues() ([]string, map[string]string) {
	r := c.Resolved()
	fs, err := fields.Walk(&r)
	if err != nil {
		panic(err) // a name clash in Config: caught by every test
	}
	names := make([]string, 0, len(fs)+1)
	kv := map[string]string{}
	for _, f := range fs {
		names = append(names, f.Name)
		kv[f.Name] = f.String()
	}
	names = append(names, "dtype")
	kv["dtype"] = "?"
	if c.Dtype.Type != nil {
		kv["dtype"] = c.Dtype.String()
	}
	return names, kv
}

var resumeAllowed = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range ResumeRules.Allowed {
		m[n] = true
	}
	return m
}()

// diff compares c (this run) with ck (a checkpoint's) over the resolved
// options: refused lists "name=ck value" / "name=c value" of the fields
// that must agree, changed "name a -> b" of those a resumption may change.
func (c Config) diff(ck Config) (have, want, changed []string) {
	names, a := c.optionValues()
	_, b := ck.optionValues()
	// pos first: it is what one most often gets wrong.
	sort.SliceStable(names, func(i, j int) bool { return names[i] == "pos" && names[j] != "pos" })
	for _, k := range names {
		if a[k] == b[k] {
			continue
		}
		if resumeAllowed[k] {
			changed = append(changed, k+" "+b[k]+" -> "+a[k])
			continue
		}
		have = append(have, k+"="+b[k])
		want = append(want, k+"="+a[k])
	}
	return have, want, changed
}

// Mismatch returns nil if a run configured with c can resume a checkpoint
// trained with ck (see ResumeRules), and otherwise an error listing the
// fields that differ under their option names, e.g. "checkpoint was trained
// with pos=rope, d-model=128; this run asks for pos=none, d-model=64".
func (c Config) Mismatch(ck Config) error {
	have, want, _ := c.diff(ck)
	if len(have) == 0 {
		return nil
	}
	return errors.Errorf("checkpoint was trained with %s; this run asks for %s", strings.Join(have, ", "), strings.Join(want, ", "))
}

// Changes lists the settings a resumption from a checkpoint trained with ck
// changes ("lr 0.002 -> 0.001"), in option order.
func (c Config) Changes(ck Config) []string {
	_, _, ch := c.diff(ck)
	return ch
}
