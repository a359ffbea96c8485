package graphstudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Laplacian is the study-level encoding name of the Laplacian-eigenvector
// input (Dwivedi & Bresson 2020): not a posenc encoding but the model's
// LapK input, LapK = Plan.LapK. It may stand alone ("laplacian": no
// attention encoding) or be one part of a "+" combination
// ("laplacian+graphormer-spatial").
const Laplacian = "laplacian"

// DefaultEncodings are the encodings the presets compare.
var DefaultEncodings = []string{"none", Laplacian, "graphormer-spatial", "graphormer-spatial+graphormer-centrality"}

// MoleculeEncodings are the encodings the molecules preset compares: the
// default ones and the combination of the Laplacian input with both of
// Graphormer's encodings.
var MoleculeEncodings = []string{"none", Laplacian, "graphormer-spatial", "graphormer-spatial+graphormer-centrality",
	Laplacian + "+graphormer-spatial+graphormer-centrality"}

// TPSASHA256 is the SHA-256 of molecules.DefaultTPSAPath as Debian's
// rdkit-data (2022.09.3) installs it: the molecules preset refuses another
// file.
const TPSASHA256 = "7c3dbaa546a317bcf8239e979d829b230b4d02b02cfe92ecffe5de2c8b222b7f"

// TestSet is one evaluation condition.
type TestSet struct {
	// Name is "test" (the held-out split, trained sizes) or "ood" (larger
	// graphs).
	Name string `json:"name"`
	// MinNodes and MaxNodes give the sizes of its graphs.
	MinNodes int `json:"min_nodes"`
	MaxNodes int `json:"max_nodes"`
}

// Plan is one graph study: the encodings trained, the seeds, the training
// configuration shared by every model, and the data.
type Plan struct {
	Preset string
	// Encodings are posenc names or variants ("name@key=value", as
	// study.ParseVariant), with Laplacian as a study-level name or part.
	Encodings []string
	Seeds     []int64
	// Base is the training configuration; Base.Model is the encoder.
	Base trainer.Config
	// Task generates the graphs of the training, validation and test
	// splits (Fracs); OOD the larger graphs of the out-of-distribution
	// test (another seed).
	Task  graphdata.TaskOptions
	Fracs []float64
	OOD   graphdata.TaskOptions
	// MaxDist clips the spatial relations; it must equal
	// Base.Model.PosOpts.GraphMaxDist.
	MaxDist int
	// LapK is the number of Laplacian eigenvectors of the Laplacian
	// encoding.
	LapK int
	// MaxNodes is the model's configured maximum graph size (at least
	// OOD.MaxNodes); training batches are padded to Task.MaxNodes.
	MaxNodes int
	// VirtualNode adds Graphormer's graph token to every model.
	VirtualNode bool
	// Unreachable is what attention does with pairs of nodes in different
	// components: UnreachableBucket ("", the default: the spatial bias's
	// learned unreachable row) or UnreachableMask (blocked, Graphormer's
	// collator). See Data.Unreachable.
	Unreachable string `json:",omitempty"`
	// Molecules, if set, replaces the synthetic task (Task, Fracs and OOD
	// are then unused) by TPSA regression on real molecules: "test" is the
	// held-out small molecules, "ood" the largest.
	Molecules *MoleculeTask `json:",omitempty"`
}

// PresetNames lists the presets.
func PresetNames() []string { return []string{"quick", "full", "molecules"} }

// BaseConfig is the training configuration of the graph study: an encoder
// of d = 64, 4 heads, 3 blocks, FFN 128, bidirectional; AdamW lr 1e-3,
// betas (0.9, 0.99), weight decay 0.01, 50 warm-up updates then cosine to
// 0.1 lr, gradients clipped to norm 1, batch 32 graphs, float32, seed 1.
func BaseConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.Model = layers.DefaultGraphConfig(2).Encoder
	c.Batch, c.SeqLen = 32, 0
	c.LR, c.WeightDecay, c.Warmup = 1e-3, 0.01, 50
	c.EvalBatch = 100
	return c
}

// Preset returns a built-in plan: "quick" (the four encodings, one seed,
// 1,000 updates), "full" (three seeds, 2,000 updates) or "molecules"
// (MoleculesPreset). An update takes
// about 35-45 ms on one core (d = 64, 32 graphs padded to 24 nodes,
// OpenBLAS): a full preset is about 12 x 1.5 minutes on one core. Both
// train on
// distance-to-marked graphs of 8 to 24 nodes (2,000 graphs split
// 80/10/10) and test on the held-out split and on 500 graphs of 32 to 48
// nodes (another seed).
func Preset(name string) (Plan, error) {
	task := graphdata.DefaultTaskOptions(graphdata.KindDistance)
	ood := task
	ood.MinNodes, ood.MaxNodes, ood.Seed, ood.Count = 32, 48, 2, 500
	p := Plan{Preset: name, Encodings: slices.Clone(DefaultEncodings), Seeds: []int64{1}, Base: BaseConfig(),
		Task: task, Fracs: []float64{0.8, 0.1, 0.1}, OOD: ood, MaxDist: 6, LapK: 8, MaxNodes: 64}
	p.Base.Model.PosOpts.GraphMaxDist = p.MaxDist
	switch name {
	case "quick":
		p.Base.Steps = 1000
	case "full":
		p.Base.Steps, p.Seeds = 2000, []int64{1, 2, 3}
	case "molecules":
		return MoleculesPreset(), nil
	default:
		return Plan{}, errors.Errorf("graphs: unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

// MoleculesPreset is the "molecules" plan: TPSA regression (issue #34) on
// the 4,999 molecules of molecules.DefaultTPSAPath (TPSASHA256), trained
// on the small ones and tested on the largest 10% by heavy atoms (500
// molecules of 26-122 heavy atoms; the other 4,499 have 2-26 and are
// split 80/10/10 into training, validation and the in-distribution test),
// with the atoms' one-hot features as node inputs and no bond features;
// the five MoleculeEncodings, seeds 1-3, 3,000 updates of 32 molecules
// (about 21 epochs), the graph study's model and optimiser (BaseConfig),
// relations clipped at distance 6, the model's maximum 128 nodes.
func MoleculesPreset() Plan {
	p := Plan{Preset: "molecules", Encodings: slices.Clone(MoleculeEncodings), Seeds: []int64{1, 2, 3}, Base: BaseConfig(),
		MaxDist: 6, LapK: 8, MaxNodes: 128,
		Molecules: &MoleculeTask{SHA256: TPSASHA256, TestPercent: 10, Fracs: []float64{0.8, 0.1, 0.1}}}
	p.Base.Model.PosOpts.GraphMaxDist = p.MaxDist
	p.Base.Steps = 3000
	return p
}

// TestSets are the plan's evaluation conditions: the held-out split, then
// the larger graphs. A molecule plan's sizes are known only with its data
// (0 here; MoleculeData.Heavy).
func (p Plan) TestSets() []TestSet {
	if p.Molecules != nil {
		return []TestSet{{Name: "test"}, {Name: "ood"}}
	}
	return []TestSet{{Name: "test", MinNodes: p.Task.MinNodes, MaxNodes: p.Task.MaxNodes},
		{Name: "ood", MinNodes: p.OOD.MinNodes, MaxNodes: p.OOD.MaxNodes}}
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

// splitLaplacian removes the Laplacian part from an encoding name: the
// posenc name of the rest ("none" if nothing is left) and whether it was
// there.
func splitLaplacian(name string) (string, bool) {
	var rest []string
	lap := false
	for _, part := range strings.Split(name, "+") {
		if part == Laplacian {
			lap = true
			continue
		}
		rest = append(rest, part)
	}
	if len(rest) == 0 {
		return "none", lap
	}
	return strings.Join(rest, "+"), lap
}

// Config is the training configuration of job j and its Laplacian size (0
// without the Laplacian input).
func (p Plan) Config(j Job) (trainer.Config, int, error) {
	c := p.Base
	c.Seed = j.Seed
	if err := j.Variant.Apply(&c); err != nil {
		return c, 0, err
	}
	pos, lap := splitLaplacian(j.Variant.Base)
	c.Model.Pos = pos
	k := 0
	if lap {
		k = p.LapK
	}
	return c, k, nil
}

// Validate checks the plan before anything runs: the encodings and
// variants exist, the seeds are distinct, the data options are valid, the
// test graphs fit the configured maximum and every model configuration is
// valid.
func (p Plan) Validate() error {
	if len(p.Encodings) == 0 || len(p.Seeds) == 0 {
		return errors.New("graphs: the plan needs encodings and seeds")
	}
	seen := map[int64]bool{}
	for _, s := range p.Seeds {
		if seen[s] {
			return errors.Errorf("graphs: seed %d given twice", s)
		}
		seen[s] = true
	}
	if err := checkUnreachable(p.Unreachable); err != nil {
		return errors.WithMessage(err, "graphs")
	}
	if m := p.Molecules; m != nil {
		if !(m.TestPercent > 0 && m.TestPercent < 100) {
			return errors.Errorf("graphs: molecules: test percentage %v outside (0, 100)", m.TestPercent)
		}
		if len(m.Fracs) != 3 {
			return errors.Errorf("graphs: molecules: %d split fractions, want 3 (train, validation, test)", len(m.Fracs))
		}
		if p.MaxNodes < 1 {
			return errors.Errorf("graphs: molecules: the configured maximum graph size %d must be positive", p.MaxNodes)
		}
	} else {
		for _, o := range []graphdata.TaskOptions{p.Task, p.OOD} {
			if err := o.Validate(); err != nil {
				return errors.WithMessage(err, "graphs")
			}
		}
		if p.Task.Kind != p.OOD.Kind || p.Task.MaxDist != p.OOD.MaxDist || p.Task.MaxTriangles != p.OOD.MaxTriangles {
			return errors.New("graphs: the out-of-distribution task must be the training task on other graphs (same kind and label clipping)")
		}
		if len(p.Fracs) != 3 {
			return errors.Errorf("graphs: %d split fractions, want 3 (train, validation, test)", len(p.Fracs))
		}
		if p.MaxNodes < max(p.Task.MaxNodes, p.OOD.MaxNodes) {
			return errors.Errorf("graphs: the configured maximum graph size %d is below the test graphs' %d nodes", p.MaxNodes, max(p.Task.MaxNodes, p.OOD.MaxNodes))
		}
	}
	if p.MaxDist < 1 || p.LapK < 1 {
		return errors.Errorf("graphs: maximum distance %d and Laplacian size %d must be positive", p.MaxDist, p.LapK)
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	labels := map[string]bool{}
	for _, j := range jobs {
		if labels[j.Key()] {
			return errors.Errorf("graphs: %s given twice", j.Key())
		}
		labels[j.Key()] = true
		if n := slices.Index(strings.Split(j.Variant.Base, "+"), Laplacian); n >= 0 && slices.Contains(strings.Split(j.Variant.Base, "+")[n+1:], Laplacian) {
			return errors.Errorf("graphs: %s: %s appears twice (one Laplacian input per model)", j.Variant.Base, Laplacian)
		}
		c, k, err := p.Config(j)
		if err != nil {
			return err
		}
		if err := study.CheckServes(c.Model.Pos, []posenc.PosKind{posenc.PosPairwise}, Laplacian); err != nil {
			return errors.WithMessagef(err, "graphs: %s", j.Key())
		}
		if c.Model.PosOpts.GraphMaxDist != p.MaxDist {
			return errors.Errorf("graphs: %s: graph-max-dist %d differs from the plan's relation clipping %d", j.Key(), c.Model.PosOpts.GraphMaxDist, p.MaxDist)
		}
		if err := c.ValidateTraining(); err != nil {
			return errors.WithMessagef(err, "graphs: %s", j.Key())
		}
		gc := layers.GraphConfig{Encoder: c.Model, Features: 1, Classes: 2, PerNode: true, LapK: k, VirtualNode: p.VirtualNode, MaxNodes: p.MaxNodes}
		if p.Molecules != nil {
			gc.Classes, gc.PerNode, gc.Regression = 1, false, true
		}
		if p.Unreachable == UnreachableMask && c.Model.Stream {
			return errors.Errorf("graphs: %s: the unreachable mask needs the attention without streaming (stream)", j.Key())
		}
		if err := gc.Validate(); err != nil {
			return errors.WithMessagef(err, "graphs: %s", j.Key())
		}
		enc, err := posenc.New(c.Model.Pos, c.Model.PosOpts)
		if err != nil {
			return errors.WithMessagef(err, "graphs: %s", j.Key())
		}
		if !slices.Contains(posenc.Accepted(enc), posenc.PosPairwise) {
			return errors.Errorf("graphs: %s: encoding %s does not serve graph (pairwise) positions", j.Key(), c.Model.Pos)
		}
	}
	return nil
}
