package codestudy

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// testEncodings are the encodings the tests train: a 1-D one and one that
// takes the tree relations through a Feed.
var testEncodings = []string{"rope", "tree+rope"}

// TestRunResumes runs a tiny study, checks its outputs (rows, CSV, JSON,
// table with the skipped-file count), runs it again (every model reused),
// then interrupts a second study mid-training and checks that running it
// again resumes and gives the rows of the uninterrupted run.
func TestRunResumes(t *testing.T) {
	src := writeSrc(t)
	p := tinyPlan(testEncodings...)
	dir := t.TempDir()
	var log strings.Builder
	o, err := Run(context.Background(), withSrc(p, src), Options{Dir: dir, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 2 || o.Reused != 0 || o.Skipped != 1 {
		t.Fatalf("trained %d, reused %d, skipped %d", o.Trained, o.Reused, o.Skipped)
	}
	if len(o.Rows) != 2*3 {
		t.Fatalf("%d rows, want 6: %+v", len(o.Rows), o.Rows)
	}
	for i, r := range o.Rows {
		want := []int{16, 32, 64}[i%3]
		if r.Status != StatusOK || r.EvalLen != want || r.Windows != 6 || r.Targets != 6*want || r.TargetsLast != 6*16 ||
			r.TrainSteps != 6 || r.Skipped != 1 || !(r.BitsPerByte > 0) {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	if !strings.Contains(log.String(), "1 files skipped") {
		t.Errorf("log does not give the skipped count:\n%s", log.String())
	}
	table, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil || !strings.Contains(string(table), "did not parse or could not be read): 1.") || !strings.Contains(string(table), "| tree+rope |") {
		t.Errorf("table.md (%v):\n%s", err, table)
	}
	f, err := LoadResults(dir)
	if err != nil || f.Skipped != 1 || len(f.Rows) != 6 || !strings.Contains(f.Corpus, "1 skipped") {
		t.Fatalf("results.json: %+v, %v", f, err)
	}
	csvRows, err := ReadCSV(filepath.Join(dir, FileCSV))
	if err != nil {
		t.Fatal(err)
	}
	for i := range csvRows {
		// results.csv has no per-window scores
		want := o.Rows[i]
		if len(want.WindowBPB) != want.Windows || len(want.WindowBPBLast) != want.Windows {
			t.Fatalf("row %d: %d and %d window scores of %d windows", i, len(want.WindowBPB), len(want.WindowBPBLast), want.Windows)
		}
		var mean float64
		for _, v := range want.WindowBPB {
			mean += float64(v) / float64(len(want.WindowBPB))
		}
		if math.Abs(mean-want.BitsPerByte) > 1e-5 {
			t.Errorf("row %d: mean window bits/byte %v, bits/byte %v", i, mean, want.BitsPerByte)
		}
		want.WindowBPB, want.WindowBPBLast = nil, nil
		if !reflect.DeepEqual(csvRows[i], want) {
			t.Fatalf("csv row %d = %+v\nwant %+v", i, csvRows[i], want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FilePlot)); err != nil {
		t.Error(err)
	}
	o2, err := Run(context.Background(), withSrc(p, src), Options{Dir: dir})
	if err != nil || o2.Reused != 2 || o2.Trained != 0 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}

	// The trained tree bias, per head (u up, d down).
	jobs, _ := p.Jobs()
	params, cfg, corpus, err := LoadModel(withSrc(p, src), Options{Dir: dir}, jobs[1])
	if err != nil || corpus.Skipped != 1 || cfg.Model.Pos != "tree+rope" || params.Count() != o.Rows[3].Params {
		t.Fatalf("LoadModel: %v, %v", cfg.Model.Pos, err)
	}
	maps, err := TreeBias(params, cfg, 0)
	if err != nil || len(maps) != 2 || maps[1].Rows != 5 || maps[1].Cols != 5 {
		t.Fatalf("tree bias: %d maps, %v", len(maps), err)
	}
	table0 := params.Float64s("block0/attn/tree_bias")
	if u, d := 2, 3; maps[1].At(u, d) != table0[gocode.RelationID(u, d, 4, 4)*2+1] {
		t.Errorf("tree bias (2, 3) of head 1 = %g, table row %v", maps[1].At(u, d), table0)
	}
	if _, err := TreeBias(params, cfg, 1); err == nil {
		t.Error("tree bias of a second block of a one-block model")
	}
	rope, ropeCfg, _, err := LoadModel(withSrc(p, src), Options{Dir: dir}, jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TreeBias(rope, ropeCfg, 0); err == nil {
		t.Error("tree bias of a rope model")
	}

	// Render from the saved rows alone.
	for _, name := range []string{FileTable, FileCSV, FileJSON, FilePlot} {
		os.Remove(filepath.Join(dir, name))
	}
	rows, err := Render(withSrc(p, src), Options{Dir: dir})
	if err != nil || len(rows) != 6 {
		t.Fatalf("render: %d rows, %v", len(rows), err)
	}
	if table2, err := os.ReadFile(filepath.Join(dir, FileTable)); err != nil || string(table2) != string(table) {
		t.Errorf("re-rendered table differs (%v):\n%s\nwant\n%s", err, table2, table)
	}

	// Interrupt the pairwise model at update 3, then resume.
	dir2 := t.TempDir()
	p1 := p
	p1.Encodings = []string{"tree+rope"}
	r, job, cfg, task := firstTask(t, p1, src, dir2)
	ctx, cancel := context.WithCancel(context.Background())
	js, _, err := r.jobs()
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := js.CkptOf(job.Key())
	if err != nil {
		t.Fatal(err)
	}
	_, err = trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: ckpt, SaveEvery: 100,
		BeforeStep: func(step int) error {
			if step == 3 {
				cancel()
				return context.Canceled
			}
			return nil
		}})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupt: %v", err)
	}
	o3, err := Run(context.Background(), withSrc(p1, src), Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range o3.Rows {
		want := o.Rows[3+i]
		if row.Encoding != want.Encoding || row.BitsPerByte != want.BitsPerByte || row.BitsPerByteLast != want.BitsPerByteLast ||
			row.ValBPB != want.ValBPB || row.TrainLoss != want.TrainLoss {
			t.Fatalf("resumed row %d = %+v\nuninterrupted %+v", i, row, want)
		}
	}
}

// TestTaskConfigRefused: a checkpoint of other relation bounds is refused.
func TestTaskConfigRefused(t *testing.T) {
	src := writeSrc(t)
	p := tinyPlan("tree")
	r, _, _, task := firstTask(t, p, src, t.TempDir())
	other := *task
	o := r.corpus.Opts
	o.MaxUp = 3
	c2 := *r.corpus
	c2.Opts = o
	other.data.Corpus = &c2
	saved, _ := other.TaskConfig()
	if err := task.CheckTaskConfig(saved); err == nil || !strings.Contains(err.Error(), "clipped at up 3 down 4") {
		t.Fatalf("other bounds accepted: %v", err)
	}
	own, _ := task.TaskConfig()
	if err := task.CheckTaskConfig(own); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput: a source directory without Go files is gocode's error,
// and bad plans are refused before anything runs.
func TestBadInput(t *testing.T) {
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("no Go here"), 0o644)
	if _, err := Run(context.Background(), withSrc(tinyPlan("none"), empty), Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no Go files under") {
		t.Errorf("empty source dir: %v", err)
	}
	if _, err := Run(context.Background(), withSrc(tinyPlan("none"), filepath.Join(empty, "missing")), Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "source root") {
		t.Errorf("missing source dir: %v", err)
	}
	// Test files too short for the longest window.
	long := tinyPlan("none")
	long.Factors = []int{1, 2, 64}
	if _, err := Run(context.Background(), withSrc(long, writeSrc(t)), Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "test windows") {
		t.Errorf("windows longer than every file: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"unknown part", func(p *Plan) { p.Encodings = []string{"tree+nope"} }, "nope"},
		{"duplicate encoding", func(p *Plan) { p.Encodings = []string{"rope", "rope"} }, "given twice"},
		{"duplicate seed", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"factors", func(p *Plan) { p.Factors = []int{2, 4} }, "must start with 1"},
		{"factors order", func(p *Plan) { p.Factors = []int{1, 4, 2} }, "must increase"},
		{"length", func(p *Plan) { p.Base.SeqLen = 0 }, "training length"},
		{"windows", func(p *Plan) { p.TestWindows = 0 }, "windows"},
		{"not causal", func(p *Plan) { p.Base.Model.Causal = false }, "causal"},
		{"grid encoding", func(p *Plan) { p.Encodings = []string{"rope-2d"} }, "line positions"},
		{"graph relations", func(p *Plan) { p.Encodings = []string{"graphormer-spatial"} },
			"graphormer-spatial-seed1 cannot serve the syntax-tree relations: posenc graphormer-spatial: positions have 25 relations, the table 9 rows"},
	} {
		p, _ := Preset("quick")
		c.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := Preset("huge"); err == nil {
		t.Error("unknown preset accepted")
	}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}

// TestAnchors: the windows are a function of the files, count, span and
// seed only, fit their files, and bad arguments are errors.
func TestAnchors(t *testing.T) {
	c, err := gocode.LoadCorpus(writeSrc(t), tinyPlan().Corpus)
	if err != nil {
		t.Fatal(err)
	}
	files := c.Files[gocode.Train]
	a1, err := Anchors(files, 20, 64, 3)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Anchors(files, 20, 64, 3)
	a3, _ := Anchors(files, 20, 64, 4)
	same := true
	for i := range a1 {
		if a1[i] != a2[i] {
			t.Fatalf("anchor %d differs between draws: %+v %+v", i, a1[i], a2[i])
		}
		if a1[i].End < 64 || a1[i].End >= len(a1[i].File.Src) {
			t.Fatalf("anchor %d = %d does not fit %s (%d bytes)", i, a1[i].End, a1[i].File.Path, len(a1[i].File.Src))
		}
		same = same && a1[i] == a3[i]
	}
	if same {
		t.Error("another seed drew the same windows")
	}
	for _, c := range []struct {
		n, span int
		want    string
	}{{0, 64, "positive"}, {3, 0, "positive"}, {3, 100000, "no file"}} {
		if _, err := Anchors(files, c.n, c.span, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Anchors(%d, %d): %v, want %q", c.n, c.span, err, c.want)
		}
	}
}

// TestNewTaskErrors: a task without corpus or validation windows, with
// windows shorter than L, a non-causal model or tree bounds other than the
// corpus's is refused with an error naming the problem; so is a job
// number outside the plan.
func TestNewTaskErrors(t *testing.T) {
	src := writeSrc(t)
	p := tinyPlan("tree")
	r, _, cfg, _ := firstTask(t, p, src, t.TempDir())
	short := []Anchor{{File: r.val[0].File, End: cfg.SeqLen - 1}}
	nonCausal := cfg
	nonCausal.Model.Causal = false
	bounds := cfg
	bounds.Model.PosOpts.TreeMaxUp = 3
	for _, c := range []struct {
		name string
		cfg  trainer.Config
		data Data
		want string
	}{
		{"no corpus", cfg, Data{Val: r.val}, "no corpus"},
		{"no windows", cfg, Data{Corpus: r.corpus}, "no validation windows"},
		{"short window", cfg, Data{Corpus: r.corpus, Val: short}, "does not hold 16+1 bytes"},
		{"not causal", nonCausal, Data{Corpus: r.corpus, Val: r.val}, "causal"},
		{"tree bounds", bounds, Data{Corpus: r.corpus, Val: r.val}, "tree bounds up 3 down 4"},
	} {
		if _, err := NewTask(c.cfg, c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := RunJob(context.Background(), withSrc(p, src), Options{Dir: t.TempDir()}, 1); err == nil || !strings.Contains(err.Error(), "job 1 does not exist") {
		t.Errorf("job 1 of 1: %v", err)
	}
}
