package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Config is everything a training run depends on. DefaultConfig is the
// reference configuration shared by every experiment.
type Config struct {
	// Model is the language model; Model.Vocab must be Vocab (256).
	Model layers.Config
	// Batch is the number of windows per update, SeqLen (L) their length.
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

// Validate returns an error naming the first invalid field. An unknown
// position encoding gives posenc's error, which lists the valid names.
func (c Config) Validate() error {
	pos := c.Model.Pos
	if pos == "" {
		pos = "none" // layers' convention
	}
	if _, err := posenc.New(pos, c.Model.PosOpts); err != nil {
		return err
	}
	if err := c.Model.Validate(); err != nil {
		return err
	}
	if c.Model.Vocab != Vocab {
		return errors.Errorf("config: model vocab %d, byte-level training needs %d", c.Model.Vocab, Vocab)
	}
	sizes := []struct {
		name string
		v    int
	}{{"batch", c.Batch}, {"seq len", c.SeqLen}, {"steps", c.Steps}, {"eval batch", c.EvalBatch}}
	for _, f := range sizes {
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
	return json.Marshal(configJSON{configAlias: configAlias(c), DtypeName: c.Dtype.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Config) UnmarshalJSON(b []byte) error {
	var j configJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	dt, err := ParseDtype(j.DtypeName)
	if err != nil {
		return err
	}
	*c = Config(j.configAlias)
	c.Dtype = dt
	return nil
}

// identity lists, as "key=value", the fields a checkpoint must agree on to
// be loaded into a run: the whole model configuration, the batch size, the
// sequence length and the dtype. Keys are snake_case field names, nested
// ones dotted ("pos_opts.max_len"); "pos" comes first.
func (c Config) identity() (map[string]string, []string) {
	kv := map[string]string{}
	flatten("", reflect.ValueOf(c.Model), kv)
	if kv["pos"] == "" {
		kv["pos"] = "none"
	}
	kv["batch"] = fmt.Sprint(c.Batch)
	kv["seq_len"] = fmt.Sprint(c.SeqLen)
	kv["dtype"] = c.Dtype.String()
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "pos") != (keys[j] == "pos") {
			return keys[i] == "pos"
		}
		return keys[i] < keys[j]
	})
	return kv, keys
}

func flatten(prefix string, v reflect.Value, kv map[string]string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key := prefix + snake(f.Name)
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			flatten(key+".", fv, kv)
			continue
		}
		kv[key] = fmt.Sprint(fv.Interface())
	}
}

// snake converts a Go field name to snake_case: DModel -> d_model,
// FFN -> ffn, InitStd -> init_std.
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// Mismatch returns nil if a run configured with c can load a checkpoint
// trained with ck, and otherwise an error listing the fields that differ,
// e.g. "checkpoint was trained with pos=rope, d_model=128; this run asks for
// pos=none, d_model=64".
func (c Config) Mismatch(ck Config) error {
	want, keys := c.identity()
	have, _ := ck.identity()
	var a, b []string
	for _, k := range keys {
		if want[k] != have[k] {
			a = append(a, k+"="+have[k])
			b = append(b, k+"="+want[k])
		}
	}
	if len(a) == 0 {
		return nil
	}
	return errors.Errorf("checkpoint was trained with %s; this run asks for %s", strings.Join(a, ", "), strings.Join(b, ", "))
}
