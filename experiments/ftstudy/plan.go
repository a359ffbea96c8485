package ftstudy

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/extrapstudy"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// Plan is a fine-tuning study: every trained model of a length study
// (Source, whose output directory is From) with base encoding b and seed s
// is fine-tuned at Len for Steps[len-1] updates once per entry whose base
// is b (one run per entry and seed, the same batches for every entry of a
// seed), and scored before fine-tuning and after each of Steps at every
// EvalLens.
type Plan struct {
	// Preset names the plan; the output directory and tables carry it.
	Preset string `json:"preset"`
	// Reduced says what the preset reduces ("" for none).
	Reduced string `json:"reduced,omitempty"`
	// Source is the length study whose models are fine-tuned, From its
	// output directory (models/<encoding>-seed<s>/ckpt.safetensors).
	Source extrapstudy.Plan `json:"source"`
	From   string           `json:"from"`
	// Entries are the encodings fine-tuned, in table order: a trained
	// encoding of Source (fine-tuned as it was trained) or a RoPE scaling
	// (fine-tuned from the rope model with rope-scale Len/L and
	// rope-train-len L: trainer.InitConfig).
	Entries []string `json:"entries"`
	// Seeds are the seeds of the source models fine-tuned (and of the
	// fine-tuning's batches).
	Seeds []int64 `json:"seeds"`
	// Len is the fine-tuning length, Batch its windows per update; LR,
	// Warmup and FloorFrac its schedule (a cosine from LR after Warmup
	// updates down to FloorFrac·LR at the last of Steps).
	Len       int     `json:"len"`
	Batch     int     `json:"batch"`
	LR        float64 `json:"lr"`
	Warmup    int     `json:"warmup"`
	FloorFrac float64 `json:"floor_frac"`
	// Steps are the numbers of fine-tuning updates after which the model is
	// scored, ascending; the run has Steps[len-1] updates. The model before
	// fine-tuning (0 updates) is always scored.
	Steps []int `json:"steps"`
	// EvalLens are the scored lengths, ascending, each a multiple of Len.
	EvalLens []int `json:"eval_lens"`
	// MaxWindows caps the evaluation text at MaxWindows windows of the
	// longest length (0: the whole validation split); EvalTokens are the
	// tokens per evaluation pass; Stream evaluates with the streamed
	// attention.
	MaxWindows int  `json:"max_windows"`
	EvalTokens int  `json:"eval_tokens"`
	Stream     bool `json:"stream"`
	// SaveEvery saves a checkpoint every SaveEvery updates.
	SaveEvery int `json:"save_every"`
	// TrainSources trains a source model that From lacks, as the source
	// plan configures it (its seed, batches and updates: the same model on
	// the same build), into the fine-tuning's own directory
	// (sources/<key>/ckpt.safetensors) instead of refusing the job: a fresh
	// clone holds the length study's rows, not its checkpoints.
	TrainSources bool `json:"train_sources,omitempty"`
}

// BibleEntries are the fine-tuned encodings of the bible preset in the
// priority order of issue #33: rope, rope-pi, rope-yarn, alibi, xl,
// kerple-log, then t5, rope-ntk and fire as the budget allows.
var BibleEntries = []string{"rope", "rope-pi", "rope-yarn", "alibi", "xl", "kerple-log", "t5", "rope-ntk", "fire"}

// PresetNames lists the built-in presets.
func PresetNames() []string { return []string{"quick", "bible"} }

// Preset returns the built-in plan called name:
//
//   - "bible" fine-tunes the models of the extrapolation study's bible
//     preset (L = 512, runs/extrapolation/bible) at 2,048 for 400 updates
//     of one window (the 2,048 tokens per update of the source's training),
//     peak lr 2e-4 (a tenth of the source's) after 20 warm-up updates, a
//     cosine to 2e-5; scored after 0, 25, 100 and 400 updates at 2,048,
//     4,096 and 8,192 (the first 16 windows of 8,192 bytes of the
//     validation books, streamed): BibleEntries, seeds 1, 2 and 3. The
//     claims: Position Interpolation recovers a longer window in ~1,000
//     steps (Chen et al. 2023), YaRN in fewer (Peng et al. 2023), and ALiBi
//     adapts to other lengths quickly (the second document).
//   - "quick" does the same in minutes for the extrapolation study's quick
//     preset (L = 64, runs/extrapolation/quick): fine-tuned at 256 for 40
//     updates of 4 windows, scored after 0, 10 and 40 at 256 and 512; rope,
//     rope-pi, rope-yarn, alibi; seed 1.
func Preset(name string) (Plan, error) {
	var p Plan
	var src string
	switch name {
	case "bible":
		src = "bible"
		p = Plan{Entries: append([]string(nil), BibleEntries...), Seeds: []int64{1, 2, 3}, Len: 2048, Batch: 1, LR: 2e-4, Warmup: 20,
			FloorFrac: 0.1, Steps: []int{25, 100, 400}, EvalLens: []int{2048, 4096, 8192}, MaxWindows: 16, EvalTokens: 8192,
			Stream: true, SaveEvery: 50}
	case "quick":
		src = "quick"
		p = Plan{Entries: []string{"rope", "rope-pi", "rope-yarn", "alibi"}, Seeds: []int64{1}, Len: 256, Batch: 4, LR: 2e-4, Warmup: 4,
			FloorFrac: 0.1, Steps: []int{10, 40}, EvalLens: []int{256, 512}, MaxWindows: 16, EvalTokens: 2048, SaveEvery: 10}
	default:
		return Plan{}, errors.Errorf("unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	s, err := extrapstudy.Preset(src)
	if err != nil {
		return Plan{}, err
	}
	p.Preset, p.Source, p.From = name, s, extrapstudy.DefaultDir(src)
	p.Reduced = DescribeReductions(p)
	return p, nil
}

// DescribeReductions says what p leaves out of the bible preset's design:
// entries of BibleEntries, seeds (below 3), fine-tuning updates.
func DescribeReductions(p Plan) string {
	var r []string
	n := 0
	for _, e := range BibleEntries {
		if slices.Contains(p.Entries, e) {
			n++
		}
	}
	if n < len(BibleEntries) {
		r = append(r, fmt.Sprintf("%d of the %d fine-tuned encodings", n, len(BibleEntries)))
	}
	if len(p.Seeds) < 3 {
		r = append(r, fmt.Sprintf("%d seed(s) instead of 3", len(p.Seeds)))
	}
	if len(p.Steps) > 0 && p.Steps[len(p.Steps)-1] < 400 {
		r = append(r, fmt.Sprintf("%d fine-tuning updates instead of 400", p.Steps[len(p.Steps)-1]))
	}
	return strings.Join(r, "; ")
}

// Base returns the trained encoding an entry is fine-tuned from: "rope" for
// a RoPE scaling, the entry itself otherwise.
func Base(entry string) string {
	if slices.Contains(extrapstudy.RopeScalings, entry) {
		return posenc.RopePlain
	}
	return entry
}

// Job is the fine-tuning of one entry from the source model of one seed.
type Job struct {
	Entry string
	Seed  int64
}

// Key names the job's directory and result file: "<entry>-seed<s>".
func (j Job) Key() string { return fmt.Sprintf("%s-seed%d", j.Entry, j.Seed) }

// Jobs lists the fine-tunings, entry-major (every seed of the first entry
// first), so that a study cut short has complete entries from the head of
// the priority list.
func (p Plan) Jobs() []Job {
	var out []Job
	for _, e := range p.Entries {
		for _, s := range p.Seeds {
			out = append(out, Job{Entry: e, Seed: s})
		}
	}
	return out
}

// SourceKey is the key of the source model of job j in the length study
// ("rope-seed2" for rope-pi, seed 2).
func (p Plan) SourceKey(j Job) string { return fmt.Sprintf("%s-seed%d", Base(j.Entry), j.Seed) }

// SourceCkpt is the checkpoint of job j's source model.
func (p Plan) SourceCkpt(j Job) string {
	return filepath.Join(p.From, "models", p.SourceKey(j), "ckpt.safetensors")
}

// LastStep is the length of every fine-tuning run.
func (p Plan) LastStep() int { return p.Steps[len(p.Steps)-1] }

// Request is the fine-tuning configuration asked of job j, before
// trainer.InitConfig merges it into the source's: the source plan's
// configuration of the base encoding and seed with the fine-tuning length,
// batch, schedule and the entry's encoding. Explicit lists the options it
// sets.
func (p Plan) Request(j Job) trainer.Config {
	c := p.Source.Config(Base(j.Entry), j.Seed)
	c.Model.Pos = j.Entry
	c.SeqLen, c.Batch, c.Steps = p.Len, p.Batch, p.LastStep()
	c.LR, c.Warmup, c.FloorFrac = p.LR, p.Warmup, p.FloorFrac
	return c
}

// Explicit are the options Request sets (trainer.InitConfig's explicit).
var Explicit = []string{"pos", "seq-len", "batch", "steps", "lr", "warmup", "floor-frac"}

func explicit(name string) bool { return slices.Contains(Explicit, name) }

// Config is the fine-tuning configuration of job j, derived from the
// source plan's configuration of its model (trainer.InitConfig: a RoPE
// scaling gets rope-scale Len/L and rope-train-len L).
func (p Plan) Config(j Job) (trainer.Config, error) {
	return trainer.InitConfig(p.Source.Config(Base(j.Entry), j.Seed), p.Request(j), explicit)
}

// EvalModel is the model configuration scored at every length: the
// fine-tuning's (streamed if Stream).
func (p Plan) EvalModel(cfg trainer.Config) trainer.Config {
	cfg.Model.Stream = p.Stream
	return cfg
}

// Validate checks the plan: known entries whose base the source trains,
// seeds of the source, ascending positive steps, lengths that are
// multiples of Len, the configurations; and the source plan itself.
func (p Plan) Validate() error {
	if p.Preset == "" || strings.ContainsAny(p.Preset, `/\ `) {
		return errors.Errorf("plan: preset name %q must be non-empty, without spaces or slashes (it names the output directory)", p.Preset)
	}
	if len(p.Entries) == 0 || len(p.Seeds) == 0 || len(p.Steps) == 0 || len(p.EvalLens) == 0 {
		return errors.New("plan: entries, seeds, steps and evaluation lengths must not be empty")
	}
	seen := map[string]bool{}
	for _, e := range p.Entries {
		switch {
		case seen[e]:
			return errors.Errorf("plan: entry %q listed twice", e)
		case !slices.Contains(p.Source.Labels(), Base(e)):
			return errors.Errorf("plan: entry %q is fine-tuned from %q, which the source study %s does not train (it trains %s)",
				e, Base(e), p.Source.Preset, strings.Join(p.Source.Labels(), ", "))
		}
		seen[e] = true
	}
	for _, s := range p.Seeds {
		if !slices.Contains(p.Source.Seeds, s) {
			return errors.Errorf("plan: seed %d is not a seed of the source study %s (%v)", s, p.Source.Preset, p.Source.Seeds)
		}
	}
	if !sort.IntsAreSorted(p.Steps) || p.Steps[0] <= 0 || len(slices.Compact(slices.Clone(p.Steps))) != len(p.Steps) {
		return errors.Errorf("plan: steps %v must be positive, distinct and ascending", p.Steps)
	}
	if p.Len <= 0 || p.Batch <= 0 || p.MaxWindows < 0 || p.EvalTokens <= 0 || p.SaveEvery < 0 {
		return errors.Errorf("plan: len %d, batch %d and eval tokens %d must be positive, max windows %d and save every %d not negative",
			p.Len, p.Batch, p.EvalTokens, p.MaxWindows, p.SaveEvery)
	}
	if !sort.IntsAreSorted(p.EvalLens) {
		return errors.Errorf("plan: evaluation lengths %v must be ascending", p.EvalLens)
	}
	lmax := p.EvalLens[len(p.EvalLens)-1]
	for _, le := range p.EvalLens {
		if le%p.Len != 0 || lmax%le != 0 {
			return errors.Errorf("plan: evaluation length %d must be a multiple of the fine-tuning length %d and divide the longest, %d", le, p.Len, lmax)
		}
	}
	for _, j := range p.Jobs() {
		cfg, err := p.Config(j)
		if err != nil {
			return errors.WithMessagef(err, "plan: %s", j.Key())
		}
		if err := cfg.Validate(); err != nil {
			return errors.WithMessagef(err, "plan: %s", j.Key())
		}
		if err := trainer.CheckMemory(cfg, 0); err != nil {
			return errors.WithMessagef(err, "plan: %s", j.Key())
		}
	}
	return nil
}

// EvalText returns the scored text of the validation split val: its first
// k·Lmax+1 bytes, k = min(MaxWindows, whole windows of Lmax) (all of it
// with MaxWindows 0). An error if it holds no window of Lmax.
func (p Plan) EvalText(val []byte) ([]byte, error) {
	lmax := p.EvalLens[len(p.EvalLens)-1]
	k := trainer.Windows(len(val), lmax)
	switch {
	case k == 0:
		return nil, errors.Errorf("the validation split has %d bytes, too short for one evaluation window of %d bytes plus its target", len(val), lmax)
	case p.MaxWindows == 0:
		return val, nil
	}
	return val[:min(k, p.MaxWindows)*lmax+1], nil
}
