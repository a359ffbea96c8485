package stabilitystudy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// TestRunResumes runs a tiny study (t5 on the init, alpha and clip axes at
// one lr, and none), checks its outputs, runs it again (every run reused),
// renders from the saved rows alone, and interrupts a run of a second
// study mid-training: running again resumes and gives the row of the
// uninterrupted run.
func TestRunResumes(t *testing.T) {
	p := tinyPlan("t5", "none")
	p.LRs = p.LRs[:1]
	dir := t.TempDir()
	c := tinyCorpus(t)
	var log strings.Builder
	o, err := Run(context.Background(), withCorpus(p, c), Options{Dir: dir, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 10 || o.Reused != 0 || len(o.Rows) != 10 {
		t.Fatalf("trained %d, reused %d, %d rows; want 10, 0, 10", o.Trained, o.Reused, len(o.Rows))
	}
	for _, r := range o.Rows {
		if r.Status != StatusOK || r.Steps != 8 || len(r.Loss) != 8 || len(r.GradNorm) != 8 || !(r.Val > 0) ||
			!(r.MinEntropy >= 0) || !(r.MaxOneHot >= 0) || !(r.MaxAbsScore > 0) || r.Params == 0 || !(r.MsPerUpdate > 0) {
			t.Fatalf("row %+v", r)
		}
		if (r.Encoding == "t5") != !math.IsNaN(float64(r.MaxPosRMS)) {
			t.Fatalf("%s: position RMS %v", r.Encoding, r.MaxPosRMS)
		}
		// the monitor's curve: one point per recorded update, whose extremes are the row's
		if n := len(r.Monitor); n == 0 || r.Monitor[0].Step != 1 || r.Monitor[n-1].Step > r.Steps {
			t.Fatalf("%s: monitor curve %+v", r.Encoding, r.Monitor)
		}
		minEnt, maxScore := math.Inf(1), 0.0
		for _, m := range r.Monitor {
			minEnt, maxScore = math.Min(minEnt, float64(m.MinEntropy)), math.Max(maxScore, float64(m.MaxAbsScore))
			if !(m.MeanEntropy >= m.MinEntropy) {
				t.Fatalf("%s: monitor point %+v", r.Encoding, m)
			}
		}
		if minEnt != float64(r.MinEntropy) || maxScore != float64(r.MaxAbsScore) {
			t.Fatalf("%s: monitor curve extremes %v %v, row %v %v", r.Encoding, minEnt, maxScore, r.MinEntropy, r.MaxAbsScore)
		}
	}
	for _, name := range []string{FileTable, FileCSV, FileJSON, FileLoss, FileEffects, FileMonitor} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	table, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil || !strings.Contains(string(table), "| t5 | 0.02 | off | 1 | 0.002 | 1 | 0 |") ||
		!strings.Contains(string(table), "| none | n/a | n/a | off | 0.002 | 1 | 0 |") {
		t.Errorf("table.md (%v):\n%s", err, table)
	}
	f, err := LoadResults(dir)
	if err != nil || len(f.Rows) != 10 || f.Rows[0].Loss != nil || len(f.Effects) != 2*3 || f.Unstable == "" {
		t.Fatalf("results.json: %+v, %v", f, err)
	}
	o2, err := Run(context.Background(), withCorpus(p, c), Options{Dir: dir})
	if err != nil || o2.Reused != 10 || o2.Trained != 0 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}

	// Render from the saved rows alone, without the model directories:
	// the same table, and the monitor figure from its copy.
	for _, name := range []string{FileTable, FileCSV, FileJSON, FileLoss, FileMonitor} {
		os.Remove(filepath.Join(dir, name))
	}
	if err := os.RemoveAll(filepath.Join(dir, "models")); err != nil {
		t.Fatal(err)
	}
	rows, err := Render(withCorpus(p, c), Options{Dir: dir})
	if err != nil || len(rows) != 10 {
		t.Fatalf("render: %d rows, %v", len(rows), err)
	}
	if table2, err := os.ReadFile(filepath.Join(dir, FileTable)); err != nil || string(table2) != string(table) {
		t.Errorf("re-rendered table differs (%v):\n%s\nwant\n%s", err, table2, table)
	}
	if _, err := os.Stat(filepath.Join(dir, FileMonitor)); err != nil {
		t.Error(err)
	}

	// Interrupt the first run at update 3, then resume.
	dir2 := t.TempDir()
	p1 := p
	p1.Encodings = []string{"none"}
	r, js, err := open(withCorpus(p1, c), Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := p1.Jobs()
	cfg, _ := p1.Config(jobs[0])
	task, err := trainer.NewLMTask(cfg, r.corpus)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: js.CkptPath(0), SaveEvery: 100, MonitorEvery: p1.MonitorEvery,
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
	var log3 strings.Builder
	o3, err := Run(context.Background(), withCorpus(p1, c), Options{Dir: dir2, Log: &log3})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log3.String(), "resumed from") || !strings.Contains(log3.String(), "at step 3") {
		t.Errorf("the second run did not resume from step 3:\n%s", log3.String())
	}
	want := o.Rows[8] // none, clip off
	got := o3.Rows[0]
	if KeyOf(got) != KeyOf(want) || got.Val != want.Val || got.FinalTrain != want.FinalTrain || got.MinEntropy != want.MinEntropy ||
		got.MaxAbsScore != want.MaxAbsScore || len(got.Loss) != len(want.Loss) {
		t.Fatalf("resumed row %+v\nuninterrupted %+v", got, want)
	}
	for i := range got.Loss {
		if got.Loss[i] != want.Loss[i] {
			t.Fatalf("resumed loss %v\nuninterrupted %v", got.Loss, want.Loss)
		}
	}
}

// TestDiverged forces a divergence (lr 1e20 in float32, no clipping,
// saving every update): the run gives a row with status diverged at the
// update the engine stopped, no validation, the curves up to it, and its
// checkpoint is the last good one: it loads, is at the update before, and
// is finite. Running again reuses the row.
func TestDiverged(t *testing.T) {
	p := tinyPlan("none")
	p.LRs, p.Clips = []float64{1e20}, []float64{0}
	p.Base.Warmup, p.Base.Dtype, p.SaveEvery = 1, tensor.Float32, 1 // warm-up 1: the full lr from update 1
	dir := t.TempDir()
	c := tinyCorpus(t)
	o, err := Run(context.Background(), withCorpus(p, c), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 1 {
		t.Fatalf("%d rows", len(o.Rows))
	}
	r := o.Rows[0]
	if r.Status != StatusDiverged || r.DivergedStep < 1 || !strings.Contains(r.Why, "non-finite") || !math.IsNaN(float64(r.Val)) {
		t.Fatalf("row %+v", r)
	}
	if r.Steps != r.DivergedStep-1 || len(r.Loss) != r.Steps {
		t.Fatalf("diverged at %d with %d updates done (%d losses)", r.DivergedStep, r.Steps, len(r.Loss))
	}
	jobs, _ := p.Jobs()
	ckpt := filepath.Join(dir, "models", jobs[0].Key(), "ckpt.safetensors")
	if r.DivergedStep < 2 {
		t.Fatalf("diverged at update %d: the test needs a good update first", r.DivergedStep)
	}
	ck, err := trainer.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Step != r.DivergedStep-1 {
		t.Fatalf("checkpoint at step %d, want %d (the last good update)", ck.Step, r.DivergedStep-1)
	}
	for name, ts := range ck.Params {
		for _, v := range ts.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("checkpoint parameter %s holds %v", name, v)
			}
		}
	}
	table, _ := os.ReadFile(filepath.Join(dir, FileTable))
	if !strings.Contains(string(table), fmt.Sprintf("| none | n/a | n/a | off | 1e+20 | 1 | 1 (%d) |", r.DivergedStep)) {
		t.Errorf("table:\n%s", table)
	}
	o2, err := Run(context.Background(), withCorpus(p, c), Options{Dir: dir})
	if err != nil || o2.Reused != 1 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}
}
