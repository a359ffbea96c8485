package trainer

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestLogsPerCheckpoint: two runs in one directory keep separate metrics
// and monitor logs, each holding exactly its own updates.
func TestLogsPerCheckpoint(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.ckpt")
	cfg := tinyConfig()
	cfg.Steps = 3
	sa, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: a, NoEval: true, MonitorEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed, cfg.Steps = 2, 4
	sb, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: b, NoEval: true, MonitorEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	if MetricsPath(a) != filepath.Join(dir, "a.metrics.jsonl") || MonitorPath(b) != filepath.Join(dir, "b.monitor.csv") {
		t.Fatalf("log paths %s, %s", MetricsPath(a), MonitorPath(b))
	}
	for _, c := range []struct {
		ckpt string
		sum  *Summary
	}{{a, sa}, {b, sb}} {
		ms, err := ReadMetrics(MetricsPath(c.ckpt))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := ReadMonitor(MonitorPath(c.ckpt))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != len(c.sum.Losses) || len(recs) != len(c.sum.Losses)*cfg.Model.Heads {
			t.Fatalf("%s: %d metrics and %d monitor records, want %d updates", c.ckpt, len(ms), len(recs), len(c.sum.Losses))
		}
		for i, m := range ms {
			if m.Step != i+1 || math.Abs(m.LossBPB-c.sum.Losses[i]/math.Ln2) > 1e-12 {
				t.Fatalf("%s: line %d %+v, want step %d loss %v bits", c.ckpt, i, m, i+1, c.sum.Losses[i]/math.Ln2)
			}
		}
	}
}

// TestLogsResumeAfterKill: a run killed after saving at step 3 but after
// logging updates 4 and 5 resumes (with the monitor, and without it) into
// logs that hold each update once, as an uninterrupted run's.
func TestLogsResumeAfterKill(t *testing.T) {
	for _, monitorOnResume := range []int{1, 0} {
		dir := t.TempDir()
		ref, path := filepath.Join(dir, "ref.safetensors"), filepath.Join(dir, "ck.safetensors")
		cfg := tinyConfig()
		if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: ref, NoEval: true, MonitorEvery: 1}); err != nil {
			t.Fatal(err)
		}
		// The killed run: its checkpoint of step 3 survives, its logs went
		// on to step 5.
		var at3 []byte
		cfg.Steps = 5
		_, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 1, SaveEvery: 3,
			OnSave: func(step int) error {
				if step == 3 {
					var err error
					at3, err = os.ReadFile(path)
					return err
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, at3, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Steps = 6
		if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: monitorOnResume}); err != nil {
			t.Fatal(err)
		}
		want, _ := ReadMetrics(MetricsPath(ref))
		got, err := ReadMetrics(MetricsPath(path))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("monitor %d on resume: %d metric lines, want %d", monitorOnResume, len(got), len(want))
		}
		for i := range want {
			if got[i].Step != want[i].Step || got[i].LossBPB != want[i].LossBPB || got[i].GradNorm != want[i].GradNorm {
				t.Fatalf("monitor %d on resume: metric line %d %+v, uninterrupted %+v", monitorOnResume, i, got[i], want[i])
			}
		}
		wantRecs, _ := ReadMonitor(MonitorPath(ref))
		recs, err := ReadMonitor(MonitorPath(path))
		if err != nil {
			t.Fatal(err)
		}
		n := len(wantRecs) // with the monitor on resume: updates 1..6
		if monitorOnResume == 0 {
			n = 3 * cfg.Model.Heads // without: the killed run's 1..3 only
		}
		if len(recs) != n {
			t.Fatalf("monitor %d on resume: %d monitor records, want %d: %+v", monitorOnResume, len(recs), n, recs)
		}
		for i := range recs {
			if joinFields(recs[i].fields()) != joinFields(wantRecs[i].fields()) {
				t.Fatalf("monitor %d on resume: record %d %+v, uninterrupted %+v", monitorOnResume, i, recs[i], wantRecs[i])
			}
		}
	}
}

// TestLogsLegacy: the logs of a run from before per-checkpoint names
// (<dir>/metrics.jsonl, <dir>/monitor.csv) are still read, and its first
// resume starts its own logs from their lines up to its step.
func TestLogsLegacy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	cfg := tinyConfig()
	cfg.Steps = 3
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(MetricsPath(path), LegacyMetricsPath(path)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(MonitorPath(path), LegacyMonitorPath(path)); err != nil {
		t.Fatal(err)
	}
	if ms, err := ReadCheckpointMetrics(path); err != nil || len(ms) != 3 || FindMonitorPath(path) != filepath.Join(dir, "monitor.csv") {
		t.Fatalf("legacy metrics %v, %v; monitor %s", ms, err, FindMonitorPath(path))
	}
	cfg.Steps = 5
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, MonitorEvery: 1}); err != nil {
		t.Fatal(err)
	}
	ms, err := ReadMetrics(MetricsPath(path))
	recs, err2 := ReadMonitor(MonitorPath(path))
	if err != nil || err2 != nil || len(ms) != 5 || len(recs) != 5*cfg.Model.Heads || ms[0].Step != 1 || ms[4].Step != 5 {
		t.Fatalf("after resume: %d metrics (%v), %d monitor records (%v); want updates 1..5", len(ms), err, len(recs), err2)
	}
}
