package trainer

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestMonitorRecords: the monitor records the first update and every N-th
// per layer and head, with the update's gradient norm and loss as
// metrics.jsonl has them, figures within their ranges, a position RMS for
// t5 and none for rope, and leaves training bit for bit unchanged.
func TestMonitorRecords(t *testing.T) {
	for _, pos := range []string{"t5", "rope"} {
		cfg := tinyConfig()
		cfg.Model.Pos, cfg.Model.Layers = pos, 2
		plain, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{NoEval: true})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "ck.safetensors")
		var got [][]MonitorRecord
		sum, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 2,
			OnMonitor: func(r []MonitorRecord) { got = append(got, r) }})
		if err != nil {
			t.Fatal(err)
		}
		for i := range plain.Losses {
			if math.Float64bits(plain.Losses[i]) != math.Float64bits(sum.Losses[i]) {
				t.Fatalf("%s: update %d: loss %v with the monitor, %v without", pos, i+1, sum.Losses[i], plain.Losses[i])
			}
		}
		recs, err := ReadMonitor(MonitorPath(path))
		if err != nil {
			t.Fatal(err)
		}
		ms, err := ReadMetrics(MetricsPath(path))
		if err != nil {
			t.Fatal(err)
		}
		wantSteps := []int{1, 2, 4, 6}
		if per := cfg.Model.Layers * cfg.Model.Heads; len(recs) != len(wantSteps)*per || len(got) != len(wantSteps) {
			t.Fatalf("%s: %d records in %d calls, want %d in %d", pos, len(recs), len(got), len(wantSteps)*per, len(wantSteps))
		}
		maxEnt := math.Log(float64(cfg.SeqLen))
		for i, r := range recs {
			step := wantSteps[i/(cfg.Model.Layers*cfg.Model.Heads)]
			m := ms[step-1]
			if r.Step != step || r.GradNorm != m.GradNorm || math.Abs(r.Loss-m.LossBPB) > 1e-12 || joinFields(r.fields()) != joinFields(got[i/4][i%4].fields()) {
				t.Fatalf("%s: record %d %+v; want step %d, grad norm %v, loss %v (and the callback's record)", pos, i, r, step, m.GradNorm, m.LossBPB)
			}
			if !(r.EntropyMin >= 0 && r.EntropyMin <= r.EntropyMean && r.EntropyMean <= maxEnt && r.ScoreMin <= r.ScoreMax &&
				r.OneHot >= 0 && r.OneHot <= 1 && r.Rows == cfg.Batch*(cfg.SeqLen-1)) {
				t.Fatalf("%s: record %d out of range: %+v", pos, i, r)
			}
			if hasPos := !math.IsNaN(r.PosRMS); hasPos != (pos == "t5") {
				t.Fatalf("%s: PosRMS %v", pos, r.PosRMS)
			}
		}
		if _, err := WriteMonitorPNG(path, pos); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMonitorResume: a resumed run drops the records after the checkpoint
// (left by a killed run) and continues the log; a task without probes and
// a negative period are errors.
func TestMonitorResume(t *testing.T) {
	cfg := tinyConfig()
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	cfg.Steps = 3
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 1}); err != nil {
		t.Fatal(err)
	}
	// a killed run's records beyond the checkpoint, and a line cut short
	f, _ := os.OpenFile(MonitorPath(path), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("4,0,0,1,1,1,1,NaN,0,14,1,8\n5,0,0,1")
	f.Close()
	cfg.Steps = 5
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 1}); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadMonitor(MonitorPath(path))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		if r.Head == 0 {
			steps = append(steps, r.Step)
		}
	}
	if len(steps) != 5 || steps[3] != 4 || steps[4] != 5 || recs[6].Loss == 8 {
		t.Fatalf("steps recorded %v (records %+v), want 1..5 once each from the runs", steps, recs)
	}
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{MonitorEvery: -1})
	wantErr(t, err, "-monitor -1")
	_, err = RunTask(context.Background(), cfg, noProbeTask{tiny(t, cfg)}, RunOptions{MonitorEvery: 2})
	wantErr(t, err, "no attention probes")
}

// noProbeTask hides the language model's probes.
type noProbeTask struct{ *LMTask }

func (noProbeTask) Probes() {}

func tiny(t *testing.T, cfg Config) *LMTask {
	lm, err := NewLMTask(cfg, tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	return lm
}

// TestMonitorDivergence: the update that fails is recorded (its NaN
// figures included), the error carries the step as a NonFiniteError, and
// the checkpoint on disk is the last good one.
func TestMonitorDivergence(t *testing.T) {
	cfg := tinyConfig()
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	_, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, SaveEvery: 2, MonitorEvery: 10, testHook: func(tr *Trainer) {
		if tr.Step() == 4 {
			tr.Params.Value("block0/attn/wq").Data().([]float64)[0] = math.NaN()
		}
	}})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Step != 5 || nf.What != "loss" {
		t.Fatalf("error %v (%+v), want a NonFiniteError of the loss at step 5", err, nf)
	}
	recs, err := ReadMonitor(MonitorPath(path))
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-cfg.Model.Heads] // head 0: the NaN is in its query weights
	if len(recs) != 2*cfg.Model.Heads || last.Step != 5 || !math.IsNaN(last.ScoreMax) || !math.IsNaN(last.Loss) || !math.IsNaN(last.GradNorm) {
		t.Fatalf("records %+v; want updates 1 and 5, the last with NaN scores, loss and gradient norm", recs)
	}
	ck, err := LoadCheckpoint(path)
	if err != nil || ck.Step != 4 {
		t.Fatalf("checkpoint %v, %v; want the one of step 4", ck, err)
	}
}

// TestReadMonitorErrors: a file of another format is refused, naming it.
func TestReadMonitorErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "m.csv")
	os.WriteFile(bad, []byte("step,loss\n1,2\n"), 0o644)
	_, err := ReadMonitor(bad)
	wantErr(t, err, bad, "header")
	os.WriteFile(bad, []byte(joinFields(monitorHeader)+"\n1,0,0,x,1,1,1,1,1,1,1,1\n"), 0o644)
	_, err = ReadMonitor(bad)
	wantErr(t, err, "line 2", "entropy_mean")
	if _, err := MonitorPNG(nil, ""); err == nil {
		t.Error("MonitorPNG of no records: no error")
	}
}

func joinFields(f []string) string {
	s := f[0]
	for _, x := range f[1:] {
		s += "," + x
	}
	return s
}
