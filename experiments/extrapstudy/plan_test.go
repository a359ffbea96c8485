package extrapstudy

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
		// the language model's encodings: every one that serves line
		// positions, but the evaluation-time RoPE scalings
		if info, _ := posenc.InfoOf(n); !slices.Contains(RopeScalings, n) && slices.Contains(info.Positions, posenc.PosLine) {
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
		want, encs := []int{64, 128, 256, 512}, []string{"none", "sinusoidal", "t5", "rope", "alibi"}
		switch name {
		case "long":
			want, encs = []int{512, 1024, 2048, 4096}, LongEncodings
		case "bible":
			want, encs = []int{512, 1024, 2048, 4096, 8192, 16384}, BibleEncodings
		case "bible-large":
			want, encs = []int{512, 1024, 2048, 4096, 8192}, LargeEncodings
		}
		if !slices.Equal(p.Lengths(), want) {
			t.Errorf("%s: lengths %v", name, p.Lengths())
		}
		for _, e := range encs {
			if !slices.Contains(p.Encodings, e) {
				t.Errorf("%s lacks %s", name, e)
			}
		}
		text, err := p.EvalText(c.Val)
		lmax := p.Lengths()[len(p.Lengths())-1]
		whole := p.MaxWindows == 0 && len(text) == len(c.Val) // the full preset: the whole split
		k := min(p.MaxWindows, (len(c.Val)-1)/lmax)           // quick: the first windows (bible: all 3 of Opticks)
		capped := p.MaxWindows > 0 && len(text) == k*lmax+1 && len(text) < len(c.Val)
		if err != nil || !whole && !capped {
			t.Errorf("%s: eval text %d of %d bytes (max windows %d), %v", name, len(text), len(c.Val), p.MaxWindows, err)
		}
	}
	full, _ := Preset("full")
	var got []string
	for _, e := range full.Encodings {
		if !strings.Contains(e, "@") {
			got = append(got, e)
		}
	}
	slices.Sort(got)
	slices.Sort(trainable)
	if !slices.Equal(got, trainable) {
		t.Errorf("full preset trains %v; posenc's trainable encodings are %v", got, trainable)
	}
	for _, v := range []string{"sinusoidal@sinusoidal-scale=1", "t5@t5-max-distance=64", "deberta@deberta-max-position=64"} {
		if !slices.Contains(full.Encodings, v) {
			t.Errorf("full preset lacks the variant %s", v)
		}
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
	long, _ := Preset("long")
	if long.Base.SeqLen != 512 || long.Base.Model.PosOpts.MaxLen != 512 || !strings.Contains(long.Reduced, "1000 updates of batch 4") ||
		strings.Contains(long.Reduced, "seed") || len(long.Seeds) != 3 || long.MaxWindows != 0 {
		t.Errorf("long preset: L %d, max len %d, max windows %d, says %q", long.Base.SeqLen, long.Base.Model.PosOpts.MaxLen, long.MaxWindows, long.Reduced)
	}
	bible, _ := Preset("bible")
	if bible.Corpus != "kjv" || !bible.Stream || !bible.ByEncoding || len(bible.LongText) != 4 || bible.Base.SeqLen != 512 ||
		len(bible.Seeds) != 3 || bible.MaxWindows != BibleMaxWindows || !strings.Contains(bible.Reduced, "131072 targets") {
		t.Errorf("bible preset: %+v", bible)
	}
	if jobs := bible.ModelJobs(); jobs[0].Key() != "rope-seed1" || jobs[1].Key() != "rope-seed2" || jobs[3].Key() != "alibi-seed1" {
		t.Errorf("bible jobs are not encoding-major: %s %s %s", jobs[0].Key(), jobs[1].Key(), jobs[3].Key())
	}
	if got := bible.ProtocolNames(); !slices.Equal(got, []string{"all", "last-L", "chunks:512", "stride:512:256", "memory:512:512", "sinks:512:4"}) {
		t.Errorf("bible protocols %v", got)
	}
	large, _ := Preset("bible-large")
	if large.Base.Model.DModel != 256 || large.Base.Model.FFN != 1024 || !slices.Equal(large.Scalings, []string{"rope-yarn"}) ||
		large.Corpus != "kjv" || len(large.LongText) != 0 || len(large.Seeds) != 3 || large.MaxWindows*8192 != bible.MaxWindows*16384 {
		t.Errorf("bible-large preset: %+v", large)
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), "quick, full, long") {
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
	if len(js) != 1+len(RopeScalings) || js[0].Encoding != "rope" || !slices.Equal(js[0].Factors, []int{1, 2, 4}) {
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
	if n := p.EvalNames(); !slices.Equal(n, append([]string{"learned", "rope"}, RopeScalings...)) {
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
	if text, _ = p.EvalText(val); len(text) != len(val) {
		t.Errorf("uncapped: %d bytes, want the whole split, %d", len(text), len(val))
	}
	_, err = p.EvalText(val[:32])
	wantErr(t, err, "32 bytes", "33 bytes")
	if text, err = p.EvalText(val[:33]); err != nil || len(text) != 33 {
		t.Errorf("one window: %d, %v", len(text), err)
	}
}

// TestVariantJobs checks that a variant's overrides reach the training and
// the evaluation configurations, and that it is validated, labelled and
// keyed by its canonical label.
func TestVariantJobs(t *testing.T) {
	p := tinyPlan("t5", "t5@t5-max-distance=8@t5-buckets=8", "sinusoidal@sinusoidal-scale=1.0", "learned@max-len=32", "rope")
	if err := p.Validate(tinyCorpus(t)); err != nil {
		t.Fatal(err)
	}
	want := map[string]func(c trainer.Config) bool{
		"t5-seed1": func(c trainer.Config) bool { return c.Model.PosOpts.T5MaxDistance == 0 },
		"t5@t5-max-distance=8@t5-buckets=8-seed1": func(c trainer.Config) bool { o := c.Model.PosOpts; return o.T5MaxDistance == 8 && o.T5Buckets == 8 },
		"sinusoidal@sinusoidal-scale=1-seed1":     func(c trainer.Config) bool { return c.Model.PosOpts.SinusoidalScale == 1 },
		"learned@max-len=32-seed1":                func(c trainer.Config) bool { return c.Model.PosOpts.MaxLen == 32 },
		"rope-seed1":                              func(c trainer.Config) bool { return c.Model.PosOpts.MaxLen == 8 },
	}
	ms := p.ModelJobs()
	if len(ms) != len(want) {
		t.Fatalf("%d model jobs", len(ms))
	}
	for _, m := range ms {
		ok, found := want[m.Key()]
		if !found {
			t.Errorf("unexpected model key %q", m.Key())
			continue
		}
		base, _, _ := strings.Cut(m.Encoding, "@")
		if m.Cfg.Model.Pos != base || !ok(m.Cfg) {
			t.Errorf("%s: pos %q, options %+v", m.Key(), m.Cfg.Model.Pos, m.Cfg.Model.PosOpts)
		}
		for _, j := range p.EvalJobs(m) {
			for _, f := range j.Factors {
				cfg := p.EvalModel(j, f*p.Base.SeqLen)
				if j.Encoding == m.Encoding && (cfg.Model.Pos != base || !ok(cfg)) {
					t.Errorf("%s at %dL: pos %q, options %+v", j.Key(), f, cfg.Model.Pos, cfg.Model.PosOpts)
				}
			}
		}
	}
	names := p.EvalNames()
	if !slices.Contains(names, "sinusoidal@sinusoidal-scale=1") || !slices.Contains(names, "rope-yarn") || len(names) != 5+len(RopeScalings) {
		t.Errorf("eval names %v", names)
	}
	for _, c := range []struct {
		encs []string
		want []string
	}{
		{[]string{"t5@t5-max-distanse=8"}, []string{"t5-max-distanse", "valid:"}},
		{[]string{"t5", "t5@t5-buckets=32", "t5@t5-buckets=032"}, []string{`"t5@t5-buckets=32" listed twice`}},
		{[]string{"nope@t5-buckets=8"}, []string{`unknown encoding "nope"`}},
		{[]string{"rope-pi@rope-scale=2"}, []string{"evaluation-time scaling"}},
		{[]string{"rope-2d"}, []string{`"rope-2d" does not serve a line of text`, "grid", "alibi"}},
		{[]string{"tree"}, []string{`"tree" does not serve a line of text`}},
		{[]string{"graphormer-spatial"}, []string{`"graphormer-spatial" does not serve a line of text`}},
		{[]string{"graphormer-spatial+graphormer-centrality"}, []string{"does not serve a line of text"}},
		{[]string{"t5@t5-buckets=2"}, []string{"t5@t5-buckets=2-seed1", "buckets"}},
	} {
		q := tinyPlan(c.encs...)
		wantErr(t, q.Validate(tinyCorpus(t)), c.want...)
	}
	// A learned table of 32 rows runs at 4L = 32.
	if q := tinyPlan("learned@max-len=32"); q.EvalModel(q.EvalJobs(q.ModelJobs()[0])[0], 32).Model.PosOpts.MaxLen != 32 {
		t.Error("learned@max-len=32 does not reach the evaluation")
	}
}

// TestPlanTooLarge checks that a study whose models cannot fit in memory is
// refused before anything is trained, naming the model and the estimate.
func TestPlanTooLarge(t *testing.T) {
	p := tinyPlan("none")
	p.Base.Batch = 1 << 30
	err := p.Validate(tinyCorpus(t))
	wantErr(t, err, "plan: none-seed1", "more than the", "available")
}
