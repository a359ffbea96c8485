package stabilitystudy

import (
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// TestGridEncodings checks the registry's answer: the learnable relative
// 1-D encodings, without the learned absolute table or the 2-D ones.
func TestGridEncodings(t *testing.T) {
	g := GridEncodings()
	for _, want := range []string{"t5", "shaw-scalar", "shaw", "deberta", "xl", "kerple-log", "kerple-power", "fire", "dpb", "cope"} {
		if !slices.Contains(g, want) {
			t.Errorf("grid %v lacks %s", g, want)
		}
	}
	for _, not := range []string{"learned", "none", "rope", "alibi", "swin", "sandwich", "tree"} {
		if slices.Contains(g, not) {
			t.Errorf("grid %v holds %s", g, not)
		}
	}
}

// TestAxes checks the n/a decision, made by building the parameters: T5,
// Shaw (both variants), Transformer-XL and DeBERTa have tables drawn with
// the init std and an alpha; KERPLE, FIRE, the dynamic bias and CoPE draw
// their parameters with their own init but have an alpha; the baselines
// and ALiBi have no position parameters.
func TestAxes(t *testing.T) {
	p := tinyPlan("t5")
	for _, c := range []struct {
		enc  string
		want Axes
	}{
		{"t5", Axes{InitStd: true, Alpha: true}},
		{"shaw-scalar", Axes{InitStd: true, Alpha: true}},
		{"shaw", Axes{InitStd: true, Alpha: true}},
		{"xl", Axes{InitStd: true, Alpha: true}},
		{"deberta", Axes{InitStd: true, Alpha: true}},
		{"kerple-log", Axes{Alpha: true}},
		{"fire", Axes{Alpha: true}},
		{"dpb", Axes{Alpha: true}},
		{"cope", Axes{Alpha: true}},
		{"t5@t5-buckets=8", Axes{InitStd: true, Alpha: true}},
		{"none", Axes{}},
		{"rope", Axes{}},
		{"alibi", Axes{}},
	} {
		got, err := p.Axes(c.enc)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v (%v), want %+v", c.enc, got, err, c.want)
		}
	}
	// Every grid encoding has some learnable position parameter, so
	// their init std or alpha (or both) changes something unless the
	// encoding draws its parameters with its own init and has no alpha;
	// the decision must agree with building the parameters directly.
	for _, enc := range GridEncodings() {
		a, err := p.Axes(enc)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		cfg := p.Base
		cfg.Model.Pos = enc
		cfg.Model.PosOpts.InitStd = 0.02
		x, _ := buildParams(cfg)
		cfg.Model.PosOpts.InitStd = 1
		y, _ := buildParams(cfg)
		if a.InitStd == sameValues(x, y) {
			t.Errorf("%s: init std axis %v, but the parameters are the same: %v", enc, a.InitStd, sameValues(x, y))
		}
	}
	if _, err := (Plan{Encodings: []string{"t5"}}).Jobs(); err == nil || !strings.Contains(err.Error(), "needs seeds") {
		t.Errorf("empty plan: %v", err)
	}
	// One value on an axis: it does not apply.
	p.InitStds, p.Alphas = p.InitStds[:1], p.Alphas[:1]
	if a, err := p.Axes("t5"); err != nil || a != (Axes{}) {
		t.Errorf("one value per axis: %+v, %v", a, err)
	}
}

// TestJobs checks the grid and the collapsing of n/a axes: 16 settings
// of t5 (2 init x 2 alpha x 2 clip x 2 lr), 4 of none (clip x lr), each
// per seed, with n/a in the keys and rows.
func TestJobs(t *testing.T) {
	p := tinyPlan("t5", "none")
	p.Seeds = []int64{1, 2}
	jobs, err := p.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != (16+4)*2 {
		t.Fatalf("%d jobs, want 40", len(jobs))
	}
	keys := map[string]bool{}
	for _, j := range jobs {
		if keys[j.Key()] {
			t.Fatalf("key %s twice", j.Key())
		}
		keys[j.Key()] = true
		cfg, err := p.Config(j)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.LR != j.LR || cfg.ClipNorm != j.Clip || cfg.Seed != j.Seed || cfg.Model.Pos != j.Encoding {
			t.Fatalf("%s: config lr %g clip %g seed %d pos %s", j.Key(), cfg.LR, cfg.ClipNorm, cfg.Seed, cfg.Model.Pos)
		}
		if j.Encoding == "none" {
			if j.InitName() != NA || j.Alpha != NA || !strings.Contains(j.Key(), "initna-alphana") {
				t.Fatalf("none: %s, init %s alpha %s", j.Key(), j.InitName(), j.Alpha)
			}
			if cfg.Model.PosOpts.InitStd != 0.02 || cfg.Model.PosOpts.Alpha {
				t.Fatalf("none: n/a axes must take the first values, got %g %v", cfg.Model.PosOpts.InitStd, cfg.Model.PosOpts.Alpha)
			}
		} else if cfg.Model.PosOpts.InitStd != j.InitStd || cfg.Model.PosOpts.Alpha != (j.Alpha == "on") {
			t.Fatalf("%s: pos-init-std %g alpha %v", j.Key(), cfg.Model.PosOpts.InitStd, cfg.Model.PosOpts.Alpha)
		}
	}
	if !keys["t5-init1-alphaon-clip1-lr0.01-seed2"] || !keys["none-initna-alphana-clipoff-lr0.002-seed1"] {
		t.Errorf("keys: %v", keys)
	}
}

// TestPresets checks the presets' grids and their validation.
func TestPresets(t *testing.T) {
	q, err := Preset("quick")
	if err != nil || q.Validate() != nil {
		t.Fatalf("quick: %v %v", err, q.Validate())
	}
	jobs, _ := q.Jobs()
	if len(jobs) != 16+16+4 || q.Base.Steps != 150 {
		t.Errorf("quick: %d jobs, %d steps", len(jobs), q.Base.Steps)
	}
	f, err := Preset("full")
	if err != nil || f.Validate() != nil || len(f.Seeds) != 3 || f.Base.Steps != 300 || f.LRs[1] != HighLR {
		t.Fatalf("full: %+v %v", f, err)
	}
	if !slices.Equal(f.Encodings, append(GridEncodings(), "none", "rope")) {
		t.Errorf("full encodings %v", f.Encodings)
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), `unknown preset "huge"`) {
		t.Errorf("unknown preset: %v", err)
	}
}

// TestValidate checks that bad plans give errors naming the problem.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"2-D encoding", func(p *Plan) { p.Encodings = []string{"rope-2d"} }, "line positions"},
		{"twice", func(p *Plan) { p.Encodings = []string{"t5", "t5"} }, "t5 given twice"},
		{"seed twice", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"three lrs", func(p *Plan) { p.LRs = []float64{1, 2, 3} }, "lr axis has 3 values"},
		{"negative lr", func(p *Plan) { p.LRs = []float64{-1} }, "learning rate -1"},
		{"negative clip", func(p *Plan) { p.Clips = []float64{-1} }, "clip norm -1"},
		{"zero init", func(p *Plan) { p.InitStds = []float64{0} }, "init std 0"},
		{"equal values", func(p *Plan) { p.Clips = []float64{1, 1} }, "must differ"},
		{"bad variant", func(p *Plan) { p.Encodings = []string{"t5@nope=1"} }, "nope"},
		{"monitor", func(p *Plan) { p.MonitorEvery = -1 }, "monitor every -1"},
		{"preset name", func(p *Plan) { p.Preset = "a/b" }, "slashes"},
	} {
		p := tinyPlan("t5")
		c.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, ok := posenc.InfoOf("t5"); !ok {
		t.Fatal("t5 not registered")
	}
}
