package stabilitystudy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// TestMonitorRun trains tiny models with the monitor on: one that finishes
// and one forced to diverge; both give a figure and their outcome.
func TestMonitorRun(t *testing.T) {
	cfg := tinyPlan("t5").Base
	cfg.Model.Pos = "t5"
	for _, c := range []struct {
		name string
		lr   float64
		want string
	}{{"finishes", 2e-3, "8 updates, validation"}, {"diverges", 1e20, "diverged at update 2 (non-finite"}} {
		cfg.LR, cfg.Dtype, cfg.Warmup, cfg.ClipNorm = c.lr, tensor.Float32, 1, 0
		png, outcome, err := MonitorRun(context.Background(), cfg, t.TempDir(), 2)
		if err != nil || len(png) < 1000 || !strings.Contains(outcome, c.want) {
			t.Errorf("%s: %d bytes, %q, %v; want %q", c.name, len(png), outcome, err, c.want)
		}
	}
	if d := DemoConfig(); d.Validate() != nil || d.Model.Pos != "t5" || d.LR != HighLR || d.ClipNorm != 0 {
		t.Errorf("demo config %+v: %v", d, d.Validate())
	}
}

// TestResultsOrQuick returns a directory with results.json as it is.
func TestResultsOrQuick(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileJSON), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ResultsOrQuick(context.Background(), dir, filepath.Join(dir, "scratch"), nil)
	if err != nil || got != dir {
		t.Fatalf("%s, %v", got, err)
	}
}
