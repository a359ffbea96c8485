package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// TestExitCodes: bad usage and configurations that cannot fit exit 2
// before anything runs; an exploding learning rate exits 1 and leaves no
// checkpoint.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.safetensors")
	corpus := cycleCorpus(t, dir)
	tiny := []string{"-d", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-batch", "2", "-seq", "16", "-eval-batch", "4",
		"-sample", "0", "-corpus", corpus, "-ckpt", ck}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-batch", "1000000000"}, 2},
		{[]string{"-d", "1000000"}, 2},
		{[]string{"-layers", "100000"}, 2},
		{[]string{"-corpus", "/dev/zero"}, 2},
		{[]string{"-fresh", "-resume", ck}, 2},
		{[]string{"-no-such-flag"}, 2},
		{append(append([]string(nil), tiny...), "-lr", "1e300", "-steps", "1"), 1},
		{append(append([]string(nil), tiny...), "-lr", "1e300", "-steps", "3", "-save-every", "1"), 1},
		{append(append([]string(nil), tiny...), "-dump-config"), 0},
	} {
		if got := run(c.args); got != c.want {
			t.Errorf("train %q: exit %d, want %d", c.args, got, c.want)
		}
	}
	if _, err := os.Stat(ck); !os.IsNotExist(err) {
		t.Errorf("a checkpoint was left by the exploding runs: %v", err)
	}
	if got := run(append(append([]string(nil), tiny...), "-steps", "2")); got != 0 {
		t.Errorf("tiny run: exit %d", got)
	}
}

// TestResumeTakesCheckpointConfig: resuming needs only -ckpt (and what it
// changes): the configuration and the corpus come from the checkpoint, an
// explicit flag equal to the checkpoint's value or allowed on resume is
// accepted, and a conflicting one exits 2 without training.
func TestResumeTakesCheckpointConfig(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.safetensors")
	corpus := cycleCorpus(t, dir)
	tinyRun(t, "t5", corpus, ck)
	step := func() int {
		t.Helper()
		c, err := trainer.LoadCheckpoint(ck)
		if err != nil {
			t.Fatal(err)
		}
		return c.Step
	}
	for _, c := range []struct {
		args []string
		want int
		step int
	}{
		{[]string{"-steps", "3"}, 0, 3},
		{[]string{"-steps", "4", "-lr", "1e-3", "-d", "16", "-pos", "t5"}, 0, 4},
		{[]string{"-steps", "5", "-d-model", "64"}, 2, 4},
		{[]string{"-steps", "5", "-pos", "rope"}, 2, 4},
		{[]string{"-steps", "5", "-seed", "7"}, 2, 4},
	} {
		args := append([]string{"-ckpt", ck, "-sample", "0"}, c.args...)
		if got := run(args); got != c.want {
			t.Errorf("train %q: exit %d, want %d", args, got, c.want)
		}
		if s := step(); s != c.step {
			t.Errorf("train %q: checkpoint at step %d, want %d", args, s, c.step)
		}
	}
}

// TestNoEval: -no-eval skips the final validation (the measurement runs of
// docs/training.md), which a run without it records in its last log line.
func TestNoEval(t *testing.T) {
	dir := t.TempDir()
	corpus := cycleCorpus(t, dir)
	for _, noEval := range []bool{false, true} {
		ck := filepath.Join(dir, fmt.Sprintf("ck%v.safetensors", noEval))
		args := []string{"-d", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-batch", "2", "-seq", "16", "-eval-batch", "4",
			"-sample", "0", "-corpus", corpus, "-ckpt", ck, "-steps", "2"}
		if noEval {
			args = append(args, "-no-eval")
		}
		if got := run(args); got != 0 {
			t.Fatalf("-no-eval=%v: exit %d", noEval, got)
		}
		log, err := os.ReadFile(trainer.MetricsPath(ck))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(log), `"val`); got == noEval {
			t.Errorf("-no-eval=%v: the log has a validation: %v, want %v\n%s", noEval, got, !noEval, log)
		}
	}
}

// TestInitFrom: -init-from starts a new run at another -seq-len from a
// checkpoint's weights and configuration (the model options need not be
// repeated); a model option that differs is refused with status 2; running
// the same command again resumes the new run.
func TestInitFrom(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	ft := filepath.Join(dir, "ft.safetensors")
	corpus := cycleCorpus(t, dir)
	tinyRun(t, "rope", corpus, src)
	args := []string{"-init-from", src, "-seq", "32", "-pos", "rope-pi", "-steps", "1", "-sample", "0", "-corpus", corpus, "-ckpt", ft}
	if got := run(args); got != 0 {
		t.Fatalf("train %q: exit %d", args, got)
	}
	ck, err := trainer.LoadCheckpoint(ft)
	if err != nil {
		t.Fatal(err)
	}
	o := ck.Config.Model.PosOpts
	if ck.Step != 1 || ck.Init == nil || ck.Init.Step != 2 || ck.Config.SeqLen != 32 || ck.Config.Model.DModel != 16 ||
		ck.Config.Model.Pos != "rope-pi" || o.RopeScale != 2 || o.RopeTrainLen != 16 {
		t.Fatalf("step %d init %+v config %+v", ck.Step, ck.Init, ck.Config)
	}
	other := append(append([]string(nil), args[:len(args)-1]...), filepath.Join(dir, "other.safetensors"), "-d", "32")
	if got := run(other); got != 2 {
		t.Errorf("-init-from with another -d: exit %d, want 2", got)
	}
	args[7] = "2" // -steps 2: resumes the new run
	if got := run(args); got != 0 {
		t.Fatalf("resume: exit %d", got)
	}
	if ck, err := trainer.LoadCheckpoint(ft); err != nil || ck.Step != 2 || ck.Init == nil {
		t.Fatalf("after resuming: %v, step %d", err, ck.Step)
	}
}

// cycleCorpus writes a 4,000-byte text cycling through 12 bytes into dir.
func cycleCorpus(t *testing.T, dir string) string {
	t.Helper()
	corpus := filepath.Join(dir, "c.txt")
	text := make([]byte, 4000)
	for i := range text {
		text[i] = "abcdefgh ij\n"[i%12]
	}
	if err := os.WriteFile(corpus, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return corpus
}

// tinyRun trains a tiny model (d=16, 1 layer, L=16, float64) with encoding
// pos on corpus for 2 updates into checkpoint ck.
func tinyRun(t *testing.T, pos, corpus, ck string) {
	t.Helper()
	if got := run([]string{"-d", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-batch", "2", "-seq", "16", "-eval-batch", "4",
		"-pos", pos, "-dtype", "float64", "-warmup", "1", "-sample", "0", "-corpus", corpus, "-ckpt", ck, "-steps", "2"}); got != 0 {
		t.Fatalf("training %s: exit %d", pos, got)
	}
}
