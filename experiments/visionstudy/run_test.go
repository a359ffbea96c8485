package visionstudy

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// writeSynthMNIST writes a tiny MNIST-format dataset (train and test IDX
// files) whose class is the quadrant of a bright 4×4 square in an 8×8
// image: the position of the content decides the label.
func writeSynthMNIST(t *testing.T, dir string, nTrain, nTest int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	write := func(imgName, labName string, n int) {
		img := &images.IDX{Dims: []int{n, 8, 8}, Data: make([]byte, n*64)}
		lab := &images.IDX{Dims: []int{n}, Data: make([]byte, n)}
		for i := 0; i < n; i++ {
			c := rng.IntN(4)
			lab.Data[i] = byte(c)
			r0, c0 := 4*(c/2), 4*(c%2)
			for y := 0; y < 4; y++ {
				for x := 0; x < 4; x++ {
					img.Data[i*64+(r0+y)*8+c0+x] = byte(128 + rng.IntN(128))
				}
			}
		}
		for _, f := range []struct {
			name string
			x    *images.IDX
		}{{imgName, img}, {labName, lab}} {
			fh, err := os.Create(filepath.Join(dir, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if err := images.WriteIDX(fh, f.x); err != nil {
				t.Fatal(err)
			}
			fh.Close()
		}
	}
	write(images.TrainImagesFile, images.TrainLabelsFile, nTrain)
	write(images.TestImagesFile, images.TestLabelsFile, nTest)
}

// tinyPlan is a plan of tiny models on the synthetic 8×8 data: 2×2 patches
// (a 4×4 grid), tested natively and on a 16×16 canvas (8×8 grid).
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds, p.Patch = "test", encs, []int64{1}, 2
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Model.PosOpts.GridRows, p.Base.Model.PosOpts.GridCols = 4, 4
	p.Base.Steps, p.Base.Batch, p.Base.Warmup, p.Base.EvalBatch = 6, 8, 2, 16
	p.ValImages, p.TestImages = 16, 24
	p.Resolutions = []Resolution{{Name: "8px", Kind: "native"}, {Name: "canvas16", Kind: "canvas", Size: 16}}
	return p
}

// TestRunResumes runs a tiny study, checks its outputs, interrupts a second
// study mid-training and checks that running it again resumes and gives the
// rows of an uninterrupted run (timings and memory aside).
func TestRunResumes(t *testing.T) {
	data := t.TempDir()
	writeSynthMNIST(t, data, 64, 24)
	p := tinyPlan("none", "learned")
	p.MNIST = data
	dir := t.TempDir()
	o, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 2 || o.Reused != 0 {
		t.Fatalf("trained %d, reused %d", o.Trained, o.Reused)
	}
	for _, f := range []string{FileCSV, FileJSON, FileTable, FilePlot} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// 2 models x 2 resolutions; learned (16 rows... 64 by default) serves
	// the 8x8 grid's 64 tokens, none everything.
	if len(o.Rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(o.Rows), o.Rows)
	}
	for _, r := range o.Rows {
		if r.Status != StatusOK || r.Images != 24 || r.TrainSteps != 6 {
			t.Fatalf("row %+v", r)
		}
		// the per-image outcomes agree with the accuracy
		hits, err := study.UnpackHits(r.Hits, r.Images)
		if err != nil {
			t.Fatalf("%s at %s: %v", r.Encoding, r.Resolution, err)
		}
		right := 0
		for _, h := range hits {
			if h {
				right++
			}
		}
		if got := float64(right) / float64(r.Images); got != r.Accuracy {
			t.Errorf("%s at %s: %d of %d hits, accuracy %v", r.Encoding, r.Resolution, right, r.Images, r.Accuracy)
		}
	}
	o2, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil || o2.Reused != 2 || o2.Trained != 0 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}

	// Interrupt at update 3 of the first model, then resume.
	dir2 := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p1 := p
	p1.Encodings = []string{"none"}
	r, err := newRunner(p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	js, jobs, _ := r.jobs()
	cfg, _ := p1.Config(jobs[0])
	task, err := NewTask(cfg, Data{Train: r.train, Val: r.val, Patch: p1.Patch})
	if err != nil {
		t.Fatal(err)
	}
	_, err = trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: js.CkptPath(0), SaveEvery: 100,
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
	o3, err := Run(context.Background(), p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range o3.Rows {
		want := o.Rows[i]
		if row.Encoding != want.Encoding || row.Accuracy != want.Accuracy || row.Loss != want.Loss || row.TrainLoss != want.TrainLoss {
			t.Fatalf("resumed row %d = %+v\nuninterrupted %+v", i, row, want)
		}
	}
}

// TestNA: a 1-D learned table shorter than the larger grid's sequence and
// a 2-D encoding that cannot serve it give n/a rows with the encoding's
// error as the note, and the study goes on.
func TestNA(t *testing.T) {
	data := t.TempDir()
	writeSynthMNIST(t, data, 32, 16)
	p := tinyPlan("learned")
	p.MNIST = data
	p.Base.Model.PosOpts.MaxLen = 16 // the 4x4 grid, not the 8x8 one
	p.Base.Steps, p.TestImages = 2, 16
	o, err := Run(context.Background(), p, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 2 || o.Rows[0].Status != StatusOK || o.Rows[1].Status != StatusNA || !strings.Contains(o.Rows[1].Note, "learned") {
		t.Fatalf("rows %+v", o.Rows)
	}
}

// TestNATables: learned-2d without resampling and swin beyond its offsets
// are n/a too (their errors are posenc.ErrBeyondTable), with their own
// messages as notes; learned-2d resampled serves the larger grid.
func TestNATables(t *testing.T) {
	data := t.TempDir()
	writeSynthMNIST(t, data, 32, 16)
	p := tinyPlan("learned-2d", "swin")
	p.MNIST = data
	p.Base.Steps, p.TestImages = 2, 16
	o, err := Run(context.Background(), p, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ enc, eval, status, note string }{
		{"learned-2d", "", StatusOK, ""},
		{"learned-2d", "", StatusNA, "the input grid is 8x8"},
		{"learned-2d", "resample=bicubic", StatusOK, ""},
		{"swin", "", StatusOK, ""},
		{"swin", "", StatusNA, "use swin-log"},
	}
	if len(o.Rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(o.Rows), len(want), o.Rows)
	}
	for i, w := range want {
		r := o.Rows[i]
		if r.Encoding != w.enc || r.Eval != w.eval || r.Status != w.status || !strings.Contains(r.Note, w.note) {
			t.Errorf("row %d = %s [%s] %s %q, want %s [%s] %s containing %q", i, r.Encoding, r.Eval, r.Status, r.Note, w.enc, w.eval, w.status, w.note)
		}
	}
}

// TestPlanErrors checks that bad plans are refused before anything runs.
func TestPlanErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"duplicate seed", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"resample", func(p *Plan) { p.Resample = "nearest" }, "resample"},
		{"first resolution", func(p *Plan) { p.Resolutions = p.Resolutions[1:] }, "training resolution"},
		{"causal", func(p *Plan) { p.Base.Model.Causal = true }, "causal"},
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
}

// TestSpecForwardCompatible: rows saved before an option existed (zero in
// their JSON) still match a run with that option at its default, and a
// changed option does not.
func TestSpecForwardCompatible(t *testing.T) {
	p := tinyPlan("swin-log")
	jobs, _ := p.Jobs()
	cfg, err := p.Config(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	now := spec{Config: cfg.Resolved(), Patch: 2}
	old := now
	old.Config.Model.PosOpts.Rel2DBuckets = 0 // as read back from a file written before the option existed
	if !sameSpec(old, now) {
		t.Fatal("a missing option at its default made the spec differ")
	}
	changed := now
	changed.Config.Model.PosOpts.Rel2DBuckets = 3
	if sameSpec(changed, now) {
		t.Fatal("a changed option was not noticed")
	}
}
