package graphstudy

import (
	"context"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/molecules"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// samplePath is 60 molecules of the Debian TPSA file with their TPSA.
var samplePath = filepath.Join("..", "..", "testdata", "molecules", "tpsa_sample.csv")

// sampleTask is the molecule task on the sample: the largest 10% (6
// molecules) tested, the other 54 split 80/10/10.
func sampleTask() *MoleculeTask {
	return &MoleculeTask{Path: samplePath, TestPercent: 10, Fracs: []float64{0.8, 0.1, 0.1}}
}

// tinyMoleculePlan is a plan of tiny models on the sample.
func tinyMoleculePlan(encs ...string) Plan {
	p := MoleculesPreset()
	p.Preset, p.Encodings, p.Seeds, p.Molecules = "test-molecules", encs, []int64{1}, sampleTask()
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.Warmup, p.Base.EvalBatch = 4, 4, 2, 8
	p.LapK = 3
	return p
}

// TestMoleculeDatasets builds the sample's data: sizes, the size split,
// the features and targets of a molecule.
func TestMoleculeDatasets(t *testing.T) {
	md, err := LoadMolecules(*sampleTask())
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{len(md.Train.Examples), len(md.Val.Examples), len(md.Test.Examples), len(md.OOD.Examples)}
	if !slices.Equal(sizes, []int{43, 5, 6, 6}) {
		t.Fatalf("train/val/test/ood sizes %v, want [43 5 6 6]", sizes)
	}
	set, err := molecules.LoadTPSA(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	heavy := set.HeavyAtoms()
	byID := map[string]int{}
	for i, r := range set.Records {
		byID["tpsa/"+set.SHA256[:12]+"/"+itoa(r.Line)] = i
	}
	maxSmall, minOOD := 0, math.MaxInt
	seen := map[string]bool{}
	for _, ds := range []*graphdata.Dataset{md.Train, md.Val, md.Test, md.OOD} {
		if !ds.Regression || ds.PerNode || ds.NumFeatures != molecules.OneHotWidth || ds.Options.Kind != KindTPSA {
			t.Fatalf("data set %+v", ds.Options)
		}
		for _, ex := range ds.Examples {
			i, ok := byID[ex.ID]
			if !ok || seen[ex.ID] {
				t.Fatalf("example id %q unknown or repeated", ex.ID)
			}
			seen[ex.ID] = true
			r := set.Records[i]
			if ex.Target != r.TPSA || ex.Graph.N != len(r.Molecule.Atoms) || len(ex.Features) != ex.Graph.N*molecules.OneHotWidth {
				t.Fatalf("%s: target %v (TPSA %v), %d nodes, %d features", ex.ID, ex.Target, r.TPSA, ex.Graph.N, len(ex.Features))
			}
			if ds == md.OOD {
				minOOD = min(minOOD, heavy[i])
			} else {
				maxSmall = max(maxSmall, heavy[i])
			}
		}
	}
	if maxSmall > minOOD || md.Split.MinTest != minOOD {
		t.Fatalf("largest small molecule %d heavy atoms, smallest tested %d (split %+v)", maxSmall, minOOD, md.Split)
	}
	if md.Heavy["ood"] != itoa(md.Split.MinTest)+"-"+itoa(slices.Max(heavy)) {
		t.Fatalf("heavy-atom ranges %v", md.Heavy)
	}
	// methyl-p-benzoquinone CC1=CC(=O)C=CC1=O, line 3 of the sample: 9
	// atoms, 9 bonds, TPSA 34.14
	ex := md.Train.Examples[0]
	if ex.Graph.N != 9 || ex.Target != 34.14 || ex.Graph.NumEdges() != 9 {
		t.Fatalf("first molecule: %d atoms, %d bonds, target %v", ex.Graph.N, ex.Graph.NumEdges(), ex.Target)
	}
	mt := *sampleTask()
	mt.SHA256 = strings.Repeat("0", 64)
	if _, err := LoadMolecules(mt); err == nil || !strings.Contains(err.Error(), "the plan wants 0000") {
		t.Fatalf("wrong hash: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMoleculesInstalled checks the molecules preset's data on the
// installed TPSA file (Debian's rdkit-data; skipped without it): 4,999
// molecules, the 500 largest (26-122 heavy atoms) tested, the others of
// 2-26 heavy atoms, every graph within the model's maximum.
func TestMoleculesInstalled(t *testing.T) {
	if _, err := os.Stat(molecules.DefaultTPSAPath); err != nil {
		t.Skipf("%s is not installed (rdkit-data): %v", molecules.DefaultTPSAPath, err)
	}
	p := MoleculesPreset()
	md, err := LoadMolecules(*p.Molecules)
	if err != nil {
		t.Fatal(err)
	}
	n := len(md.Train.Examples) + len(md.Val.Examples) + len(md.Test.Examples)
	if n != 4499 || len(md.OOD.Examples) != 500 || md.Heavy["ood"] != "26-122" || md.Heavy["train"] != "2-26" {
		t.Fatalf("%d small molecules, %d tested, heavy atoms %v", n, len(md.OOD.Examples), md.Heavy)
	}
	if largest(md.OOD) > p.MaxNodes {
		t.Fatalf("largest tested molecule has %d atoms, the model's maximum is %d", largest(md.OOD), p.MaxNodes)
	}
}

// TestMSEGrad gradient-checks MSE (float64, central differences) and its
// value against a hand computation.
func TestMSEGrad(t *testing.T) {
	g := G.NewGraph()
	pv := []float64{0.5, -1, 2}
	yv := []float64{1, 0.25, 2.5}
	pred := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 1), G.WithName("pred"),
		G.WithValue(tensor.New(tensor.WithShape(3, 1), tensor.WithBacking(slices.Clone(pv)))))
	y := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("y"),
		G.WithValue(tensor.New(tensor.WithShape(3), tensor.WithBacking(slices.Clone(yv)))))
	loss, err := MSE(pred, y)
	if err != nil {
		t.Fatal(err)
	}
	if err := graph.GradCheck(g, loss, G.Nodes{pred, y}, graph.GradCheckOpts{}); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := (0.25 + 1.5625 + 0.25) / 3
	if got := loss.Value().Data().(float64); math.Abs(got-want) > 1e-12 {
		t.Fatalf("MSE %v, want %v", got, want)
	}
	if _, err := MSE(pred, G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("y2"))); err == nil {
		t.Fatal("MSE of 3 predictions and 2 targets: no error")
	}
}

// moleculeBatch is a float64 task input of the sample's first b training
// molecules and a salt: a model of configuration gc with MSE.
func moleculeBatch(t *testing.T, gc layers.GraphConfig, unreachable string, ds *graphdata.Dataset, idx []int) (*G.ExprGraph, *graph.Params, *inputs, *G.Node) {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	o := graphdata.BatchOptions{MaxDist: 6, MaxNodes: gc.MaxNodes, LapK: gc.LapK}
	n := 0
	for _, i := range idx {
		n = max(n, ds.Examples[i].Graph.N)
	}
	in, err := newInputs(g, p, gc, ds, len(idx), n, o, modelInputs{unreachable: unreachable, std: NewStandardiser(ds)})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := in.batch(idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.fill(bt); err != nil {
		t.Fatal(err)
	}
	var loss *G.Node
	if gc.Regression && !gc.PerNode {
		if loss, err = MSE(in.logits, in.yN); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(3))
	for _, name := range p.Names() {
		d := p.Float64s(name)
		for i := range d {
			d[i] = rng.NormFloat64() * 0.5
		}
		if err := p.Set(name, d); err != nil {
			t.Fatal(err)
		}
	}
	return g, p, in, loss
}

// saltIndex returns the index of a disconnected molecule of ds.
func saltIndex(t *testing.T, ds *graphdata.Dataset) int {
	t.Helper()
	for i, ex := range ds.Examples {
		if _, k := graphdata.Components(ex.Graph); k > 1 {
			return i
		}
	}
	t.Fatal("no disconnected molecule")
	return -1
}

// tinyRegression is a 2-block, 2-head, d=8 regression model of the
// molecule features.
func tinyRegression(pos string, lapK int) layers.GraphConfig {
	c := layers.DefaultGraphConfig(1)
	c.Encoder.DModel, c.Encoder.Heads, c.Encoder.Layers, c.Encoder.FFN, c.Encoder.InitStd = 8, 2, 2, 12, 0.5
	c.Encoder.Pos, c.Encoder.PosOpts.GraphMaxDist = pos, 6
	c.Features, c.PerNode, c.Regression, c.LapK, c.MaxNodes = molecules.OneHotWidth, false, true, lapK, 64
	return c
}

// TestRegressionGrad gradient-checks the regression model and its MSE
// (float64, central differences) on padded molecules with a salt, with the
// learned unreachable bucket and with the unreachable mask, with and
// without the virtual token.
func TestRegressionGrad(t *testing.T) {
	md, err := LoadMolecules(*sampleTask())
	if err != nil {
		t.Fatal(err)
	}
	salt := saltIndex(t, md.Train)
	idx := []int{0, salt, 2}
	for _, c := range []struct {
		name, unreachable string
		gc                layers.GraphConfig
	}{
		{"spatial+centrality/bucket", UnreachableBucket, tinyRegression("graphormer-spatial+graphormer-centrality", 0)},
		{"spatial/mask", UnreachableMask, tinyRegression("graphormer-spatial", 0)},
		{"laplacian/mask", UnreachableMask, tinyRegression("none", 3)},
		{"spatial/mask/virtual", UnreachableMask, func() layers.GraphConfig {
			c := tinyRegression("graphormer-spatial", 0)
			c.VirtualNode = true
			return c
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _, in, loss := moleculeBatch(t, c.gc, c.unreachable, md.Train, idx)
			if err := graph.GradCheck(g, loss, in.m.Learnables(), graph.GradCheckOpts{MaxPerNode: 8, Seed: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPairMask checks the mask of a hand-made batch: a salt of two
// components and a padded graph.
func TestPairMask(t *testing.T) {
	// graph 0: 0-1, 2 alone (3 nodes); graph 1: 0-1 (2 nodes, 1 padding)
	g0, _ := graphdata.NewGraph(3, [][2]int{{0, 1}})
	g1, _ := graphdata.NewGraph(2, [][2]int{{0, 1}})
	ds := &graphdata.Dataset{NumFeatures: 1, Regression: true, Examples: []*graphdata.Example{
		{ID: "a", Graph: g0, Features: []float32{1, 1, 1}, Target: 1}, {ID: "b", Graph: g1, Features: []float32{1, 1}, Target: 2}}}
	bt, err := graphdata.NewBatch(ds, []int{0, 1}, graphdata.BatchOptions{MaxDist: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bt.Targets, []float64{1, 2}) || bt.Labels != nil {
		t.Fatalf("targets %v, labels %v", bt.Targets, bt.Labels)
	}
	want := []float64{
		1, 1, 0, // graph 0: node 0 sees its component
		1, 1, 0,
		0, 0, 1, // the lone node only itself
		1, 1, 0, // graph 1
		1, 1, 0,
		1, 1, 0, // the padding query: the real keys
	}
	if got := PairMask(bt); !slices.Equal(got, want) {
		t.Fatalf("pair mask\n%v\nwant\n%v", got, want)
	}
}

// TestUnreachableMask: with the mask, the node states of one component do
// not depend on another component's features; with the default bucket
// they do (per-node outputs of a model without positions).
func TestUnreachableMask(t *testing.T) {
	md, err := LoadMolecules(*sampleTask())
	if err != nil {
		t.Fatal(err)
	}
	salt := saltIndex(t, md.Train)
	ex := md.Train.Examples[salt]
	comp, _ := graphdata.Components(ex.Graph)
	for _, c := range []struct {
		unreachable string
		independent bool
	}{{UnreachableMask, true}, {UnreachableBucket, false}} {
		gc := tinyRegression("none", 0)
		gc.PerNode = true
		ds := *md.Train
		ds.Examples = []*graphdata.Example{ex}
		out := func(x []float32) []float64 {
			e := *ex
			e.Features = x
			d := ds
			d.Examples = []*graphdata.Example{&e}
			g, _, _, _ := moleculeBatch(t, gc, c.unreachable, &d, []int{0})
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			var nodes *G.Node
			for _, n := range g.AllNodes() {
				if n.Shape().Dims() == 2 && n.Shape()[0] == ex.Graph.N && n.Shape()[1] == 1 {
					nodes = n
				}
			}
			return graph.ToFloat64s(nodes.Value())
		}
		a := out(ex.Features)
		x := slices.Clone(ex.Features)
		for i, k := range comp { // change every feature outside component 0
			if k != 0 {
				for f := 0; f < molecules.OneHotWidth; f++ {
					x[i*molecules.OneHotWidth+f] = 1 - x[i*molecules.OneHotWidth+f]
				}
			}
		}
		b := out(x)
		same := true
		for i, k := range comp {
			if k == 0 && math.Abs(a[i]-b[i]) > 1e-12 {
				same = false
			}
		}
		if same != c.independent {
			t.Errorf("%s: component 0 unchanged by the others' features: %v, want %v (%v vs %v)", c.unreachable, same, c.independent, a, b)
		}
	}
}

// TestMoleculeRun runs the molecule task end to end on the sample (a few
// updates of tiny models, one with the unreachable mask) and checks the
// rows and outputs.
func TestMoleculeRun(t *testing.T) {
	for _, c := range []struct {
		unreachable string
		encs        []string
		seeds       []int64
	}{{"", []string{"graphormer-spatial+graphormer-centrality", "laplacian"}, []int64{1, 2}}, {UnreachableMask, []string{"graphormer-spatial"}, []int64{1}}} {
		p := tinyMoleculePlan(c.encs...)
		p.Unreachable, p.Seeds = c.unreachable, c.seeds
		dir := t.TempDir()
		o, err := Run(context.Background(), p, Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Rows) != 2*len(c.encs)*len(c.seeds) {
			t.Fatalf("%d rows", len(o.Rows))
		}
		for _, r := range o.Rows {
			n := map[string]int{"test": 6, "ood": 6}[r.TestSet]
			if r.Graphs != n || len(r.AbsErr) != n || !(r.RMSE > 0) || !(r.MAE > 0) || r.MAE > r.RMSE || math.IsNaN(r.R2) || r.R2 > 1 ||
				r.TrainSteps != 4 || !(r.ValRMSE > 0) || r.Accuracy != 0 {
				t.Fatalf("row %+v", r)
			}
			mae := 0.0
			for _, e := range r.AbsErr {
				mae += e
			}
			if math.Abs(mae/float64(n)-r.MAE) > 1e-9 {
				t.Fatalf("MAE %v, mean absolute error of the molecules %v", r.MAE, mae/float64(n))
			}
			if r.Sizes == "" || !strings.Contains(r.Sizes, "-") {
				t.Fatalf("ood heavy atoms %q", r.Sizes)
			}
		}
		table, err := os.ReadFile(filepath.Join(dir, FileTable))
		if err != nil {
			t.Fatal(err)
		}
		csv, err := os.ReadFile(filepath.Join(dir, FileCSV))
		if err != nil {
			t.Fatal(err)
		}
		unreach := c.unreachable
		if unreach == "" {
			unreach = UnreachableBucket
		}
		wants := []string{"RMSE Å², ood", "R²", "unreachable pairs (salts): " + unreach}
		if len(c.seeds) > 1 {
			wants = append(wants, "## Paired comparisons", "over seeds and molecules")
		}
		for _, want := range wants {
			if !strings.Contains(string(table), want) {
				t.Fatalf("table.md lacks %q:\n%s", want, table)
			}
		}
		if !strings.HasPrefix(string(csv), strings.Join(regressionCSVHeader, ",")) {
			t.Fatalf("results.csv:\n%s", csv)
		}
		if st, err := os.Stat(filepath.Join(dir, FilePlot)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", FilePlot, err)
		}
		// a second run reuses every row
		if o, err = Run(context.Background(), p, Options{Dir: dir}); err != nil || o.Reused != len(c.encs)*len(c.seeds) {
			t.Fatalf("rerun: %v, %+v", err, o)
		}
	}
}

// TestMoleculePlan checks the molecules preset and the plan's new errors.
func TestMoleculePlan(t *testing.T) {
	p, err := Preset("molecules")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	jobs, _ := p.Jobs()
	if len(jobs) != 15 || p.Molecules.SHA256 != TPSASHA256 || p.Unreachable != "" {
		t.Fatalf("%d jobs, plan %+v", len(jobs), p)
	}
	for _, c := range []struct {
		edit func(*Plan)
		want string
	}{
		{func(p *Plan) { p.Unreachable = "drop" }, `unknown unreachable-pair option "drop"`},
		{func(p *Plan) { p.Molecules.TestPercent = 100 }, "test percentage 100 outside"},
		{func(p *Plan) { p.Molecules.Fracs = []float64{1} }, "1 split fractions"},
		{func(p *Plan) { p.Unreachable, p.Base.Model.Stream = UnreachableMask, true }, "needs the attention without streaming"},
	} {
		q := MoleculesPreset()
		c.edit(&q)
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	q := tinyMoleculePlan("none")
	q.MaxNodes = 20
	if _, err := newRunner(q, Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "configured maximum is 20") {
		t.Fatalf("molecules larger than the maximum: %v", err)
	}
}
