package trainer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// TestNaNGuard: a learning rate that overflows the weights stops the run at
// that update, and no checkpoint is written from the non-finite weights;
// a non-finite validation is an error.
func TestNaNGuard(t *testing.T) {
	cfg := tinyConfig()
	cfg.Dtype = tensor.Float32
	cfg.LR = 1e300
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	_, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, SaveEvery: 1})
	wantErr(t, err, "step 1", "non-finite", "last good")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a checkpoint was written from non-finite weights (stat: %v)", err)
	}
	// A trainer that went non-finite refuses to save.
	tr := newTiny(t, cfg)
	if _, err := tr.TrainStep(); err == nil {
		t.Fatal("no error from an overflowing update")
	}
	wantErr(t, tr.Save(path), "non-finite")
	// Save refuses non-finite weights whatever their origin.
	ok := newTiny(t, tinyConfig())
	ok.Params.Value("head/w").Data().([]float64)[3] = posInf()
	wantErr(t, ok.Save(path), "refusing to save non-finite weights", `"head/w"`)

	// float64 survives the update but validates to a non-finite score.
	cfg.Dtype = tensor.Float64
	cfg.Steps = 1
	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{})
	if err == nil {
		t.Fatal("a run with lr 1e300 succeeded")
	}
}

func posInf() float64 { x := 1e308; return x * 10 }

// TestLock: a second lock on the same file fails at once naming the holder;
// unlocking removes the file and frees it; Run takes the checkpoint's lock.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "x.lock")
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(path)
	wantErr(t, err, path, "locked by another run", fmt.Sprintf("pid %d", os.Getpid()))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("lock file: %v %v", st, err)
	}

	ck := filepath.Join(dir, "ck.safetensors")
	u2, err := Lock(LockPath(ck))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), tinyConfig(), tinyCorpus(t), RunOptions{Ckpt: ck})
	wantErr(t, err, "ck.safetensors.lock is locked by another run")
	if err := u2(); err != nil {
		t.Fatal(err)
	}

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("lock file left after unlock: %v", err)
	}
	u3, err := Lock(path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	u3()
}

// TestResumeTrust: the checkpoint's metadata is covered by its checksum, a
// checkpoint of another corpus is refused naming both hashes, a finished
// checkpoint is explained, and contradictory options are refused.
func TestResumeTrust(t *testing.T) {
	cfg := tinyConfig()
	cfg.Steps = 3
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, edit := range [][2]string{{`"step":"3"`, `"step":"2"`}, {`"Steps\":3`, `"Steps\":4`}} {
		if !bytes.Contains(b, []byte(edit[0])) {
			t.Fatalf("checkpoint header lacks %s", edit[0])
		}
		bad := filepath.Join(dir, "edited.safetensors")
		os.WriteFile(bad, bytes.Replace(b, []byte(edit[0]), []byte(edit[1]), 1), 0o644)
		_, err := LoadCheckpoint(bad)
		wantErr(t, err, "edited.safetensors", "checksum")
	}

	other, _ := NewCorpus(bytes.ToUpper(tinyText()))
	_, err := Run(context.Background(), cfg, other, RunOptions{Ckpt: path})
	ck, _ := LoadCheckpoint(path)
	wantErr(t, err, "corpus with SHA-256 "+ck.CorpusHash, "has SHA-256 "+other.Hash())

	var log bytes.Buffer
	s, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "already trained to step 3; nothing to do: use -steps > 3 to continue, or -fresh") ||
		strings.Contains(log.String(), "tokens/s") || len(s.Losses) != 0 || s.Steps != 3 {
		t.Errorf("finished checkpoint: %+v\n%s", s, log.String())
	}
	cfg.Steps, cfg.LR = 4, 1e-3
	log.Reset()
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, Log: &log}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, fmt.Errorf("%s", log.String()), "this run changes: steps 3 -> 4, lr 0.002 -> 0.001")

	_, err = Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, Fresh: true, Resume: path})
	wantErr(t, err, "-fresh and -resume")
}

// TestEarlyFailures: an unwritable checkpoint path, a memory estimate
// beyond the machine and an oversized corpus fail before any update; a
// failing final save still reports the validation.
func TestEarlyFailures(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	steps := 0
	_, err := Run(context.Background(), tinyConfig(), tinyCorpus(t), RunOptions{Ckpt: filepath.Join(file, "ck.safetensors"),
		OnStep: func(StepResult) { steps++ }})
	if err == nil || steps != 0 {
		t.Errorf("unwritable checkpoint: %d updates, error %v", steps, err)
	}
	_, err = Run(context.Background(), tinyConfig(), tinyCorpus(t), RunOptions{Ckpt: dir,
		OnStep: func(StepResult) { steps++ }})
	if steps != 0 {
		t.Errorf("checkpoint path is a directory: %d updates before the error %v", steps, err)
	}
	wantErr(t, err, "not a regular file")

	big := tinyConfig()
	big.Batch = 1000000000
	_, err = Run(context.Background(), big, tinyCorpus(t), RunOptions{})
	wantErr(t, err, "training needs about")

	_, err = LoadCorpus("/dev/zero")
	wantErr(t, err, "/dev/zero is a device")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write(make([]byte, 3000)); w.Close() }()
	_, err = LoadCorpusLimit(fmt.Sprintf("/dev/fd/%d", r.Fd()), 1000)
	r.Close()
	wantErr(t, err, "larger than the limit of 1000 bytes")
	_, err = LoadCorpusLimit(file, 0)
	wantErr(t, err, "larger than the limit of 0 bytes")
	_, err = LoadCorpus(dir)
	wantErr(t, err, "is a directory")

	// The final save fails (its directory was replaced by a file): the
	// validation was printed and is in the summary.
	sub := filepath.Join(dir, "sub")
	cfg := tinyConfig()
	cfg.Steps = 2
	var log bytes.Buffer
	s, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: filepath.Join(sub, "ck.safetensors"), Log: &log,
		OnStep: func(r StepResult) {
			if r.Step == 2 {
				os.RemoveAll(sub)
				os.WriteFile(sub, nil, 0o644)
			}
		}})
	wantErr(t, err, "computed but the checkpoint was not saved")
	if s == nil || s.Val.Tokens == 0 || !strings.Contains(log.String(), "validation: ") {
		t.Errorf("summary %+v, log %s", s, log.String())
	}
}

// TestStaleTemps: a run removes the temporary files of its own checkpoint
// that a killed save left, and nothing else.
func TestStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	stale := []string{".ck.safetensors.tmp-123", ".ck.safetensors.tmp-9"}
	keep := []string{".ck.safetensors.tmp-abc", ".other.safetensors.tmp-1", "ck.safetensors.tmp-1", "notes"}
	for _, n := range append(append([]string(nil), stale...), keep...) {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	cfg := tinyConfig()
	cfg.Steps = 1
	var log bytes.Buffer
	if _, err := Run(context.Background(), cfg, tinyCorpus(t), RunOptions{Ckpt: path, NoEval: true, Log: &log}); err != nil {
		t.Fatal(err)
	}
	for _, n := range stale {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s not removed", n)
		}
		if !strings.Contains(log.String(), n) {
			t.Errorf("log does not mention %s", n)
		}
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s removed", n)
		}
	}
}
