package stabilitystudy

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Plan is one stability study: the encodings, the axes of the grid (init
// std, alpha, clipping, learning rate), the seeds and the training
// configuration shared by every run.
type Plan struct {
	Preset string
	// Encodings are posenc names or variants ("name@key=value", see
	// study.ParseVariant), in table order.
	Encodings []string
	Seeds     []int64
	// Base is the training configuration of every run (Model.Pos, Seed,
	// PosOpts.InitStd, PosOpts.Alpha, ClipNorm and LR are set per run).
	Base trainer.Config
	// InitStds are the init standard deviations of the position
	// parameters (option pos-init-std), the remedy (small) first.
	InitStds []float64
	// Alphas are the settings of the learnable scale (option alpha): off
	// then on.
	Alphas []bool
	// Clips are the global gradient-norm clips (option clip-norm; 0 = no
	// clipping): off then on.
	Clips []float64
	// LRs are the peak learning rates: the reference, then the high one.
	LRs []float64
	// MonitorEvery is trainer.RunOptions.MonitorEvery of every run.
	MonitorEvery int
	// SaveEvery saves a checkpoint every SaveEvery updates (Options.SaveEvery,
	// when not 0, instead).
	SaveEvery int
	// Corpus is the text the LMs train on (nil: trainer.LoadCorpus of the
	// default, Newton's Opticks). Its hash, in every job's spec, decides
	// whether saved rows are reused.
	Corpus *trainer.Corpus `json:"-"`
}

// Baselines are trained on the lr x clip axes only: they have no position
// parameters (their init std and alpha axes are n/a, decided like any
// other encoding's).
var Baselines = []string{"none", "rope"}

// GridEncodings lists the encodings of the grid, from the registry: every
// trainable encoding that serves line positions (posenc.TrainableOn
// PosLine, the causal 1-D LM's) with learnable parameters (Info.Learnable)
// of kind posenc.KindRelative, in registry order. The learned absolute
// table is left out: the survey's advice is about relative biases.
func GridEncodings() []string {
	var out []string
	for _, n := range posenc.TrainableOn(posenc.PosLine) {
		if i, ok := posenc.InfoOf(n); ok && i.Learnable && i.Kind == posenc.KindRelative {
			out = append(out, n)
		}
	}
	return out
}

// DefaultEncodings are GridEncodings then Baselines.
func DefaultEncodings() []string { return append(GridEncodings(), Baselines...) }

// QuickEncodings are the encodings of the quick preset.
var QuickEncodings = []string{"t5", "shaw-scalar", "none"}

// ReferenceLR is the reference learning rate (trainer.DefaultConfig).
const ReferenceLR = 2e-3

// HighLR is the high learning rate of the presets, at which some runs
// spike or diverge; see Preset for how it was chosen.
const HighLR = 0.3

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full"} }

// BaseConfig is the training configuration of the study:
// trainer.DefaultConfig (the byte-level LM, AdamW with betas (0.9, 0.99),
// weight decay 0.01, cosine to 0.1 lr, float32) with d = 64, 4 heads, 2
// blocks, FFN 256, L = 64, batch 16, 30 warm-up updates, 300 updates, and
// the final validation at L.
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN = 64, 4, 2, 256
	c.SeqLen, c.Batch, c.Warmup, c.Steps = 64, 16, 30, 300
	c.Model.PosOpts.MaxLen = c.SeqLen
	return c
}

// Preset returns a built-in plan: "quick" (t5, shaw-scalar and none, one
// seed, 150 updates) or "full" (DefaultEncodings, seeds 1-3, 300
// updates). Both cross init std {0.02, 1.0}, alpha {off, on}, clipping
// {off, global norm 1} and lr {ReferenceLR, HighLR}, monitor the
// attention every 10 updates and save every 50.
//
// HighLR was chosen by probing (the full preset's model, 300 updates,
// seed 1, GOMAXPROCS=1) t5 and xl at init std 1.0 without clipping or
// alpha at lr 0.1, 0.2, 0.3 and 1.0, and shaw-scalar and deberta at 0.3:
// at 0.1 no run had a loss spike (t5: 3 grad-norm spikes, val 3.92; xl:
// none, 3.68); at 1.0 every run spiked (17 and 18 spikes) and its loss
// rose to 342 and 394 bits/byte before falling back to 4.6-4.8; at 0.3
// some runs spiked and others did not: t5 had 5 spikes and a loss of 8.57
// bits/byte at update 37 (diverged by the 8-bit rule), 2 spikes with
// clipping and none with init std 0.02, while xl, shaw-scalar and deberta
// had none. So HighLR is 0.3, where the remedies can make a difference.
func Preset(name string) (Plan, error) {
	p := Plan{Preset: name, Encodings: DefaultEncodings(), Seeds: []int64{1, 2, 3}, Base: BaseConfig(),
		InitStds: []float64{0.02, 1.0}, Alphas: []bool{false, true}, Clips: []float64{0, 1},
		LRs: []float64{ReferenceLR, HighLR}, MonitorEvery: 10, SaveEvery: 50}
	switch name {
	case "quick":
		p.Encodings, p.Seeds = slices.Clone(QuickEncodings), []int64{1}
		p.Base.Steps = 150
	case "full":
	default:
		return Plan{}, errors.Errorf("stability: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// NA is the value of an axis that does not change an encoding.
const NA = "n/a"

// Axes says which remedies change an encoding (see Plan.Axes).
type Axes struct {
	// InitStd: the plan's init stds give different initial parameters.
	// Alpha: alpha on adds parameters.
	InitStd, Alpha bool
}

// Axes decides, for the plan entry enc, which remedy axes change the
// model, without looking at its name: it builds the LM's parameters
// (graph.Params with the first seed, the forward graph of one window, so
// that lazily created position parameters exist) once per value and
// compares them. The init-std axis applies if the initial values of some
// parameter differ between InitStds[0] and InitStds[1] (with Alphas[0]);
// the alpha axis if the parameter names differ between Alphas[0] and
// Alphas[1] (with InitStds[0]). A plan with one value on an axis does not
// apply it; a plan without seeds, init stds or alphas is an error.
func (p Plan) Axes(enc string) (Axes, error) {
	var a Axes
	if len(p.Seeds) == 0 || len(p.InitStds) == 0 || len(p.Alphas) == 0 {
		return a, errors.New("stability: the plan needs seeds, init stds and alphas")
	}
	v, err := study.ParseVariant(enc)
	if err != nil {
		return a, err
	}
	cfg := p.Base
	cfg.Seed = p.Seeds[0]
	if err := v.Apply(&cfg); err != nil {
		return a, err
	}
	// pair builds the parameters with (std, alpha) and with the second
	// value of the axis.
	pair := func(std1 float64, alpha1 bool, std2 float64, alpha2 bool) (x, y *graph.Params, err error) {
		c := cfg
		c.Model.PosOpts.InitStd, c.Model.PosOpts.Alpha = std1, alpha1
		if x, err = buildParams(c); err != nil {
			return nil, nil, err
		}
		c.Model.PosOpts.InitStd, c.Model.PosOpts.Alpha = std2, alpha2
		y, err = buildParams(c)
		return x, y, err
	}
	if len(p.InitStds) > 1 {
		x, y, err := pair(p.InitStds[0], p.Alphas[0], p.InitStds[1], p.Alphas[0])
		if err != nil {
			return a, err
		}
		a.InitStd = !sameValues(x, y)
	}
	if len(p.Alphas) > 1 {
		x, y, err := pair(p.InitStds[0], p.Alphas[0], p.InitStds[0], p.Alphas[1])
		if err != nil {
			return a, err
		}
		a.Alpha = !slices.Equal(x.Names(), y.Names())
	}
	return a, nil
}

// buildParams creates the parameters of cfg's LM: the model and the
// forward graph of one window of SeqLen ids, never run.
func buildParams(cfg trainer.Config) (*graph.Params, error) {
	g := G.NewGraph()
	p := graph.NewParams(cfg.Dtype, cfg.Seed)
	lm, err := layers.NewLM(g, p, cfg.Model)
	if err != nil {
		return nil, err
	}
	ids := G.NewMatrix(g, tensor.Int, G.WithShape(1, cfg.SeqLen), G.WithName("stability_ids"))
	if _, err := lm.Fwd(ids); err != nil {
		return nil, err
	}
	p.Forget(g)
	return p, nil
}

// sameValues reports whether x and y hold the same parameters with the
// same values.
func sameValues(x, y *graph.Params) bool {
	if !slices.Equal(x.Names(), y.Names()) {
		return false
	}
	for _, n := range x.Names() {
		if !slices.Equal(x.Float64s(n), y.Float64s(n)) {
			return false
		}
	}
	return true
}

// Setting is one point of the grid for one encoding: the init std and
// alpha ("" when the axis is n/a for the encoding), the clip and the lr.
type Setting struct {
	// InitStd is the init std, or NaN when n/a.
	InitStd float64
	// Alpha is "on", "off" or NA.
	Alpha string
	// Clip is the clip norm (0 = off), LR the peak learning rate.
	Clip, LR float64
}

// InitName is the init std as written in tables and keys ("0.02", "1",
// "n/a").
func (s Setting) InitName() string {
	if math.IsNaN(s.InitStd) {
		return NA
	}
	return strconv.FormatFloat(s.InitStd, 'g', -1, 64)
}

// ClipName is "off" or the clip norm ("1").
func (s Setting) ClipName() string {
	if s.Clip == 0 {
		return "off"
	}
	return strconv.FormatFloat(s.Clip, 'g', -1, 64)
}

// LRName is the learning rate in %g form ("0.002").
func (s Setting) LRName() string { return strconv.FormatFloat(s.LR, 'g', -1, 64) }

// String is "init=0.02 alpha=off clip=1 lr=0.002".
func (s Setting) String() string {
	return fmt.Sprintf("init=%s alpha=%s clip=%s lr=%s", s.InitName(), s.Alpha, s.ClipName(), s.LRName())
}

// key is the setting's part of a job key: "init0.02-alphaoff-clip1-lr0.002"
// ("initna", "alphana" for n/a axes).
func (s Setting) key() string {
	na := func(v string) string { return strings.ReplaceAll(v, NA, "na") }
	return fmt.Sprintf("init%s-alpha%s-clip%s-lr%s", na(s.InitName()), na(s.Alpha), s.ClipName(), s.LRName())
}

// Job is one training run of the plan.
type Job struct {
	// Encoding is the entry's label, Variant the parsed entry.
	Encoding string
	Variant  study.Variant
	Setting
	Seed int64
}

// Key names the job's files: "<encoding>-<setting>-seed<s>",
// e.g. "t5-init0.02-alphaoff-clip1-lr0.002-seed1".
func (j Job) Key() string { return fmt.Sprintf("%s-%s-seed%d", j.Encoding, j.Setting.key(), j.Seed) }

// Settings lists the grid points of an encoding with axes a: lr-major,
// then clip, init std and alpha, each in the plan's order; an axis that
// does not apply has the one value n/a.
func (p Plan) Settings(a Axes) []Setting {
	inits := []float64{math.NaN()}
	if a.InitStd {
		inits = p.InitStds
	}
	alphas := []string{NA}
	if a.Alpha {
		alphas = nil
		for _, b := range p.Alphas {
			alphas = append(alphas, onOff(b))
		}
	}
	var out []Setting
	for _, lr := range p.LRs {
		for _, c := range p.Clips {
			for _, s := range inits {
				for _, al := range alphas {
					out = append(out, Setting{InitStd: s, Alpha: al, Clip: c, LR: lr})
				}
			}
		}
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Jobs lists the runs, encoding-major, then Settings, then seeds.
func (p Plan) Jobs() ([]Job, error) {
	var out []Job
	for _, e := range p.Encodings {
		v, err := study.ParseVariant(e)
		if err != nil {
			return nil, errors.WithMessage(err, "stability")
		}
		a, err := p.Axes(e)
		if err != nil {
			return nil, errors.WithMessagef(err, "stability: %s", v.Label())
		}
		for _, s := range p.Settings(a) {
			for _, seed := range p.Seeds {
				out = append(out, Job{Encoding: v.Label(), Variant: v, Setting: s, Seed: seed})
			}
		}
	}
	return out, nil
}

// Config is the training configuration of job j: Base with the job's
// encoding, seed, init std (InitStds[0] when n/a), alpha (off when n/a),
// clip and lr.
func (p Plan) Config(j Job) (trainer.Config, error) {
	c := p.Base
	c.Seed = j.Seed
	if err := j.Variant.Apply(&c); err != nil {
		return c, err
	}
	c.Model.PosOpts.InitStd = p.InitStds[0]
	if !math.IsNaN(j.InitStd) {
		c.Model.PosOpts.InitStd = j.InitStd
	}
	c.Model.PosOpts.Alpha = j.Alpha == "on"
	c.ClipNorm, c.LR = j.Clip, j.LR
	return c, nil
}

// Validate checks the plan before anything runs: encodings (known, serving
// line positions, each once), seeds (distinct), the axes (one or two
// values each: InitStds positive, Clips non-negative, LRs positive),
// MonitorEvery and SaveEvery non-negative, and every run's configuration
// (trainer.Config.Validate, a causal LM).
func (p Plan) Validate() error {
	if p.Preset == "" || strings.ContainsAny(p.Preset, `/\ `) {
		return errors.Errorf("stability: preset name %q must be non-empty, without spaces or slashes (it names the output directory)", p.Preset)
	}
	if len(p.Encodings) == 0 || len(p.Seeds) == 0 {
		return errors.New("stability: the plan needs encodings and seeds")
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("stability: seed %d given twice", s)
		}
		seen[s] = true
	}
	labels := map[string]bool{}
	for _, e := range p.Encodings {
		v, err := study.ParseVariant(e)
		if err != nil {
			return errors.WithMessage(err, "stability")
		}
		if labels[v.Label()] {
			return errors.Errorf("stability: encoding %s given twice", v.Label())
		}
		labels[v.Label()] = true
		enc, err := posenc.New(v.Base, p.Base.Model.PosOpts)
		if err != nil {
			return errors.WithMessage(err, "stability")
		}
		if err := posenc.CheckKind(enc, nil); err != nil {
			return errors.WithMessagef(err, "stability: %s", v.Label())
		}
	}
	axis := func(name string, n int) error {
		if n < 1 || n > 2 {
			return errors.Errorf("stability: the %s axis has %d values, want 1 or 2", name, n)
		}
		return nil
	}
	for _, ax := range []struct {
		name string
		n    int
	}{{"init std", len(p.InitStds)}, {"alpha", len(p.Alphas)}, {"clip", len(p.Clips)}, {"lr", len(p.LRs)}} {
		if err := axis(ax.name, ax.n); err != nil {
			return err
		}
	}
	for _, s := range p.InitStds {
		if !(s > 0) || math.IsInf(s, 0) {
			return errors.Errorf("stability: init std %g must be positive and finite", s)
		}
	}
	for _, c := range p.Clips {
		if !(c >= 0) || math.IsInf(c, 0) {
			return errors.Errorf("stability: clip norm %g must be non-negative and finite (0: off)", c)
		}
	}
	for _, lr := range p.LRs {
		if !(lr > 0) || math.IsInf(lr, 0) {
			return errors.Errorf("stability: learning rate %g must be positive and finite", lr)
		}
	}
	if len(p.InitStds) == 2 && p.InitStds[0] == p.InitStds[1] || len(p.Clips) == 2 && p.Clips[0] == p.Clips[1] ||
		len(p.LRs) == 2 && p.LRs[0] == p.LRs[1] || len(p.Alphas) == 2 && p.Alphas[0] == p.Alphas[1] {
		return errors.New("stability: the two values of an axis must differ")
	}
	if p.MonitorEvery < 0 || p.SaveEvery < 0 {
		return errors.Errorf("stability: monitor every %d and save every %d must not be negative", p.MonitorEvery, p.SaveEvery)
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		c, err := p.Config(j)
		if err != nil {
			return errors.WithMessagef(err, "stability: %s", j.Key())
		}
		if err := c.Validate(); err != nil {
			return errors.WithMessagef(err, "stability: %s", j.Key())
		}
		if !c.Model.Causal {
			return errors.Errorf("stability: %s: the language model must be causal", j.Key())
		}
	}
	return nil
}
