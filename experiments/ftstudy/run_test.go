package ftstudy

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/corpora"
	"github.com/rpe-go/rpe/experiments/extrapstudy"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
)

// tinySource trains a tiny length study (rope and alibi, seeds 1 and 2,
// L = 8, d = 16, float64) on a text file in dir and returns its plan, its
// output directory and the corpus path.
func tinySource(t *testing.T, dir string) (extrapstudy.Plan, string, string) {
	t.Helper()
	path := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; light is refracted. ", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	base := trainer.DefaultConfig()
	base.Model = layers.Config{Vocab: trainer.Vocab, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Eps: 1e-5, InitStd: 0.02, Causal: true}
	base.Batch, base.SeqLen, base.Steps, base.Warmup = 2, 8, 6, 2
	base.Dtype = tensor.Float64
	p := extrapstudy.Plan{Preset: "tiny", Base: base, Encodings: []string{"rope", "alibi"}, Seeds: []int64{1, 2}, Factors: []int{1, 2},
		MaxWindows: 4, EvalTokens: 32, SaveEvery: 2, Corpus: path}
	c, err := corpora.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "source")
	if _, err := extrapstudy.Run(context.Background(), p, c, extrapstudy.Options{Dir: out}); err != nil {
		t.Fatal(err)
	}
	return p, out, path
}

func tinyPlan(src extrapstudy.Plan, from string) Plan {
	return Plan{Preset: "tiny", Source: src, From: from, Entries: []string{"rope", "rope-pi", "alibi"}, Seeds: []int64{1, 2},
		Len: 16, Batch: 2, LR: 1e-3, Warmup: 1, FloorFrac: 0.1, Steps: []int{2, 4}, EvalLens: []int{16, 32}, MaxWindows: 4,
		EvalTokens: 64, SaveEvery: 2}
}

// TestFineTune: every entry and seed is fine-tuned from its source model
// and scored after 0 and each kept step at every length; the scores after
// 0 updates are the source model's under the entry's configuration; rope-pi
// gets rope-scale Len/L; a finished study is reused; the outputs are
// written.
func TestFineTune(t *testing.T) {
	dir := t.TempDir()
	src, from, _ := tinySource(t, dir)
	p := tinyPlan(src, from)
	out := filepath.Join(dir, "ft")
	o, err := Run(context.Background(), p, Options{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 3*2*3*2 || o.Trained != 6 {
		t.Fatalf("%d rows, %d trained; want 36, 6", len(o.Rows), o.Trained)
	}
	get := map[string]Row{}
	for _, r := range o.Rows {
		if r.Status != StatusOK || !(r.BitsPerByte > 0) || r.Tokens != 4*32 || len(r.WindowBits) != r.Windows || r.SourceSHA256 == "" {
			t.Fatalf("row %+v", r)
		}
		get[r.Entry+"/"+itoa(int(r.Seed))+"/"+itoa(r.FTSteps)+"/"+itoa(r.EvalLen)] = r
	}
	// After 0 updates: the source model as the entry configures it.
	params, cfg, err := trainer.LoadModel(filepath.Join(from, "models", "rope-seed1", "ckpt.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := trainer.ScoreText(params, cfg.Model, mustText(t, p), []int{0}, trainer.EvalOptions{Len: 16, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := get["rope/1/0/16"].BitsPerByte; math.Abs(got-s[0].BitsPerByte()) > 1e-12 {
		t.Errorf("rope after 0 updates: %.12f bits/byte, the source model scores %.12f", got, s[0].BitsPerByte())
	}
	pi := get["rope-pi/1/0/16"]
	if pi.RopeScale != 2 || pi.RopeTrainLen != 8 || pi.BitsPerByte == get["rope/1/0/16"].BitsPerByte {
		t.Errorf("rope-pi: scale %v train len %d, %.6f bits/byte (rope %.6f)", pi.RopeScale, pi.RopeTrainLen, pi.BitsPerByte, get["rope/1/0/16"].BitsPerByte)
	}
	if get["alibi/2/4/32"].BitsPerByte == get["alibi/2/0/32"].BitsPerByte || get["alibi/2/2/32"].BitsPerByte == get["alibi/2/4/32"].BitsPerByte {
		t.Errorf("alibi's scores do not change with fine-tuning")
	}
	if _, err := os.Stat(trainer.KeepPath(filepath.Join(out, "models", "alibi-seed2", "ckpt.safetensors"), 2)); err != nil {
		t.Errorf("kept checkpoint: %v", err)
	}
	md, _ := os.ReadFile(filepath.Join(out, FileTable))
	for _, want := range []string{"## Bits per byte at 32", "| rope-pi |", "Paired comparisons at 16", "rope-scale 16/8"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("table.md lacks %q", want)
		}
	}
	for _, f := range []string{FileCSV, FileJSON, FilePlot} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	o2, err := Run(context.Background(), p, Options{Dir: out})
	if err != nil || o2.Reused != 6 || o2.Trained != 0 {
		t.Fatalf("rerun: %v, reused %d trained %d", err, o2.Reused, o2.Trained)
	}
	// A fresh clone holds the rows, not the source models: the rows stand.
	if err := os.Rename(filepath.Join(from, "models"), filepath.Join(from, "models.away")); err != nil {
		t.Fatal(err)
	}
	o3, err := Run(context.Background(), p, Options{Dir: out})
	if err != nil || o3.Reused != 6 || o3.Trained != 0 || len(o3.Rows) != len(o.Rows) {
		t.Fatalf("rerun without the source models: %v, reused %d trained %d", err, o3.Reused, o3.Trained)
	}
	// A source model present but another one than the rows came from: they do not.
	if err := os.Rename(filepath.Join(from, "models.away"), filepath.Join(from, "models")); err != nil {
		t.Fatal(err)
	}
	src1 := filepath.Join(from, "models", "rope-seed1", "ckpt.safetensors")
	src2 := filepath.Join(from, "models", "rope-seed2", "ckpt.safetensors")
	b2, err := os.ReadFile(src2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src1, b2, 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := opener(p, Options{Dir: out})()
	if err != nil {
		t.Fatal(err)
	}
	_, pending, err := jobs.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 { // rope-seed1 and rope-pi-seed1
		t.Errorf("with another rope-seed1 source, pending %v; want its two entries", pending)
	}
}

// TestFineTuneSourceMissing: a source model that is not trained is an
// error naming it and the command that trains it; a plan entry whose base
// the source does not train, or a seed it lacks, is refused.
func TestFineTuneSourceMissing(t *testing.T) {
	dir := t.TempDir()
	src, _, _ := tinySource(t, dir)
	p := tinyPlan(src, filepath.Join(dir, "nothing"))
	_, err := Run(context.Background(), p, Options{Dir: filepath.Join(dir, "ft")})
	if err == nil || !strings.Contains(err.Error(), "is not trained") || !strings.Contains(err.Error(), "go run ./experiments/extrapolation -preset tiny") {
		t.Fatalf("missing source: %v", err)
	}
	bad := p
	bad.Entries = []string{"t5"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "does not train") {
		t.Errorf("entry without a source: %v", err)
	}
	bad = p
	bad.Seeds = []int64{7}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "seed 7") {
		t.Errorf("seed without a source: %v", err)
	}
}

// TestPresets: the built-in presets validate and keep the design of issue
// #33 (bible: 2,048, steps 25/100/400, scored at 2K/4K/8K, 3 seeds).
func TestPresets(t *testing.T) {
	for _, n := range PresetNames() {
		p, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	b, _ := Preset("bible")
	if b.Len != 2048 || b.LastStep() != 400 || len(b.Seeds) != 3 || b.Reduced != "" || b.Source.Preset != "bible" ||
		b.Jobs()[0].Key() != "rope-seed1" || b.Jobs()[3].Key() != "rope-pi-seed1" {
		t.Errorf("bible preset: %+v", b)
	}
	cfg, err := b.Config(Job{Entry: "rope-yarn", Seed: 2})
	if err != nil || cfg.SeqLen != 2048 || cfg.Model.PosOpts.RopeScale != 4 || cfg.Model.PosOpts.RopeTrainLen != 512 || cfg.Seed != 2 || cfg.Steps != 400 {
		t.Errorf("rope-yarn config: %v %+v", err, cfg)
	}
}

func mustText(t *testing.T, p Plan) []byte {
	t.Helper()
	c, err := corpora.Open(p.Source.Corpus)
	if err != nil {
		t.Fatal(err)
	}
	text, err := p.EvalText(c.Val)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFineTuneTrainSources: with TrainSources, a source model the length
// study's directory lacks is trained into the fine-tuning's directory, the
// same model (its scores before fine-tuning equal those from the length
// study's checkpoint); without it the job is refused naming the flag.
func TestFineTuneTrainSources(t *testing.T) {
	dir := t.TempDir()
	src, from, _ := tinySource(t, dir)
	p := tinyPlan(src, from)
	p.Entries, p.Seeds = []string{"alibi"}, []int64{1}
	o, err := Run(context.Background(), p, Options{Dir: filepath.Join(dir, "ft1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(from, "models"), filepath.Join(from, "models.away")); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), p, Options{Dir: filepath.Join(dir, "ft2")}); err == nil || !strings.Contains(err.Error(), "-train-sources") {
		t.Fatalf("missing source without TrainSources: %v", err)
	}
	p.TrainSources = true
	o2, err := Run(context.Background(), p, Options{Dir: filepath.Join(dir, "ft3")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ft3", "sources", "alibi-seed1", "ckpt.safetensors")); err != nil {
		t.Errorf("trained source: %v", err)
	}
	if len(o2.Rows) != len(o.Rows) {
		t.Fatalf("%d rows, want %d", len(o2.Rows), len(o.Rows))
	}
	for i := range o.Rows {
		if a, b := o.Rows[i], o2.Rows[i]; a.FTSteps == 0 && a.BitsPerByte != b.BitsPerByte {
			t.Errorf("after 0 updates at %d: %.12f from the retrained source, %.12f from the study's", a.EvalLen, b.BitsPerByte, a.BitsPerByte)
		}
	}
}
