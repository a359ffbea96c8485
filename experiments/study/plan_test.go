package study

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

func itoa(i int) string          { return strconv.Itoa(i) }
func ftoa(x float64) string      { return strconv.FormatFloat(x, 'g', -1, 64) }
func mathPow2(x float64) float64 { return math.Pow(2, x) }

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPresets checks the presets against the default corpus without
// training: the full preset trains every trainable encoding of posenc.
func TestPresets(t *testing.T) {
	c, err := trainer.LoadCorpus("")
	if err != nil {
		t.Skip("default corpus:", err)
	}
	var trainable []string
	for _, n := range posenc.Names() {
		if !slices.Contains(RopeScalings, n) {
			trainable = append(trainable, n)
		}
	}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !slices.Equal(p.Lengths(), []int{64, 128, 256, 512}) {
			t.Errorf("%s: lengths %v", name, p.Lengths())
		}
		for _, e := range []string{"none", "sinusoidal", "t5", "rope", "alibi"} {
			if !slices.Contains(p.Encodings, e) {
				t.Errorf("%s lacks %s", name, e)
			}
		}
		text, err := p.EvalText(c.Val)
		if err != nil || (len(text)-1)%512 != 0 {
			t.Errorf("%s: eval text %d bytes, %v", name, len(text), err)
		}
	}
	full, _ := Preset("full")
	got := slices.Clone(full.Encodings)
	slices.Sort(got)
	slices.Sort(trainable)
	if !slices.Equal(got, trainable) {
		t.Errorf("full preset trains %v; posenc's trainable encodings are %v", got, trainable)
	}
	ref := trainer.DefaultConfig()
	if full.Base.Steps != ref.Steps || full.Base.Batch != ref.Batch || len(full.Seeds) != 3 || full.MaxWindows != 0 || full.Reduced != "" {
		t.Errorf("full preset: %d steps, batch %d, seeds %v, max windows %d, reduced %q", full.Base.Steps, full.Base.Batch,
			full.Seeds, full.MaxWindows, full.Reduced)
	}
	quick, _ := Preset("quick")
	if !strings.Contains(quick.Reduced, "150 updates of batch 16") || !strings.Contains(quick.Reduced, "8192 targets") {
		t.Errorf("quick preset says %q", quick.Reduced)
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), "quick, full") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestEvalJobs(t *testing.T) {
	p := tinyPlan("learned", "rope")
	p.Seeds = []int64{1, 2}
	ms := p.ModelJobs()
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key())
		if m.Cfg.Model.Pos != m.Encoding || m.Cfg.Seed != m.Seed || m.Cfg.Model.PosOpts.MaxLen != 8 {
			t.Errorf("%s: config %+v", m.Key(), m.Cfg.Model)
		}
	}
	if !slices.Equal(keys, []string{"learned-seed1", "rope-seed1", "learned-seed2", "rope-seed2"}) {
		t.Errorf("model jobs %v", keys)
	}
	js := p.EvalJobs(ms[1])
	if len(js) != 5 || js[0].Encoding != "rope" || !slices.Equal(js[0].Factors, []int{1, 2, 4}) {
		t.Fatalf("rope eval jobs %+v", js)
	}
	for _, j := range js[1:] {
		if !slices.Equal(j.Factors, []int{2, 4}) {
			t.Errorf("%s factors %v", j.Key(), j.Factors)
		}
		cfg := p.EvalModel(j, 32)
		if cfg.Model.Pos != j.Encoding || cfg.Model.PosOpts.RopeScale != 4 || cfg.Model.PosOpts.RopeTrainLen != 8 {
			t.Errorf("%s at 32: %+v", j.Key(), cfg.Model.PosOpts)
		}
	}
	if cfg := p.EvalModel(js[0], 32); cfg.Model.Pos != "rope" || cfg.Model.PosOpts.RopeScale != 0 {
		t.Errorf("plain rope at 32: %+v", cfg.Model)
	}
	if n := p.EvalNames(); !slices.Equal(n, []string{"learned", "rope", "rope-pi", "rope-ntk", "rope-dynamic", "rope-yarn"}) {
		t.Errorf("eval names %v", n)
	}
	// Without rope the scalings are ignored.
	q := tinyPlan("none")
	if n := q.EvalNames(); !slices.Equal(n, []string{"none"}) || len(q.EvalJobs(q.ModelJobs()[0])) != 1 {
		t.Errorf("eval names without rope %v", n)
	}
}

func TestEvalText(t *testing.T) {
	p := tinyPlan("none") // Lmax = 32, at most 4 windows
	val := make([]byte, 200)
	text, err := p.EvalText(val)
	if err != nil || len(text) != 4*32+1 {
		t.Errorf("capped: %d bytes, %v", len(text), err)
	}
	p.MaxWindows = 0
	if text, _ = p.EvalText(val); len(text) != 6*32+1 {
		t.Errorf("uncapped: %d bytes, want %d", len(text), 6*32+1)
	}
	_, err = p.EvalText(val[:32])
	wantErr(t, err, "32 bytes", "33 bytes")
	if text, err = p.EvalText(val[:33]); err != nil || len(text) != 33 {
		t.Errorf("one window: %d, %v", len(text), err)
	}
}
