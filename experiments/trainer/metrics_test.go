package trainer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMetricsLog: one line per update with the loss in bits/byte, the
// learning rate, the gradient norm and the validation where measured; an
// interrupted and resumed run (even one whose log ran past its last
// checkpoint) leaves the same log as an uninterrupted run, apart from
// timings. The file is 0644.
func TestMetricsLog(t *testing.T) {
	cfg := tinyConfig()
	cfg.Steps, cfg.EvalEvery = 6, 2
	read := func(dir string) []Metric {
		t.Helper()
		ms, err := ReadMetrics(MetricsPath(filepath.Join(dir, "ck.safetensors")))
		if err != nil {
			t.Fatal(err)
		}
		for i := range ms {
			ms[i].Seconds, ms[i].TokensPerSec = 0, 0
		}
		return ms
	}
	a := t.TempDir()
	s, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: filepath.Join(a, "ck.safetensors")})
	if err != nil {
		t.Fatal(err)
	}
	want := read(a)
	if len(want) != 6 || want[1].ValBPB == nil || want[0].ValBPB != nil || want[5].ValBPB == nil ||
		*want[5].ValBPB != s.Val.BitsPerByte || want[2].LossBPB*0.6931471805599453 != s.Losses[2] || want[3].LR == 0 || want[3].GradNorm == 0 {
		t.Fatalf("metrics %+v", want)
	}
	if st, _ := os.Stat(MetricsPath(filepath.Join(a, "ck.safetensors"))); st.Mode().Perm() != 0o644 {
		t.Errorf("metrics mode %v", st.Mode().Perm())
	}

	b := t.TempDir()
	ck := filepath.Join(b, "ck.safetensors")
	stop := errors.New("stop")
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: ck, BeforeStep: func(s int) error {
		if s == 3 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatal(err)
	}
	// Lines past the checkpoint, as a run killed after it would leave.
	f, _ := os.OpenFile(MetricsPath(ck), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":4,"loss_bpb":9}` + "\n" + `{"step":5,"loss`)
	f.Close()
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: ck}); err != nil {
		t.Fatal(err)
	}
	got := read(b)
	if len(got) != len(want) {
		t.Fatalf("resumed log has %d lines, uninterrupted %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Step != w.Step || g.LossBPB != w.LossBPB || g.LR != w.LR || g.GradNorm != w.GradNorm ||
			(g.ValBPB == nil) != (w.ValBPB == nil) || g.ValBPB != nil && *g.ValBPB != *w.ValBPB {
			t.Errorf("line %d: resumed %+v, uninterrupted %+v", i, g, w)
		}
	}
	// -fresh starts the log over.
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: ck, Fresh: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(read(b)); n != 6 {
		t.Errorf("fresh run log has %d lines", n)
	}
}

// TestProgressPlain: a writer that is not a terminal gets plain lines, no
// carriage returns.
func TestProgressPlain(t *testing.T) {
	old := PlainInterval
	PlainInterval = time.Nanosecond
	defer func() { PlainInterval = old }()
	var buf bytes.Buffer
	p := NewProgress(&buf, 10, "job")
	for i := 0; i < 10; i++ {
		p.Describe("step")
		p.Add(1)
		p.Clear()
	}
	p.Finish()
	out := buf.String()
	if strings.Contains(out, "\r") || !strings.Contains(out, "step | 100% (10/10)") || strings.Count(out, "\n") != 11 {
		t.Errorf("plain progress:\n%q", out)
	}
	var log bytes.Buffer
	cfg := tinyConfig()
	cfg.Steps = 2
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Progress: &buf, Log: &log}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\r") || !strings.Contains(buf.String(), "bits/byte") {
		t.Errorf("run progress:\n%q", buf.String())
	}
	NewProgress(nil, 3, "x").Finish()
}
