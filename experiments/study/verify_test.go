package study

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// ckptJobs is a study of two tiny language models, "a-seed1" and
// "b-seed1", each trained to its checkpoint by the engine; runs counts the
// trainings of each and log collects the job events.
func ckptJobs(t *testing.T, dir string, runs map[string]int, log *bytes.Buffer) *Jobs[int, testRow] {
	keys := []string{"a-seed1", "b-seed1"}
	js := &Jobs[int, testRow]{Name: "test", Dir: dir, Keys: keys, Log: log}
	js.Spec = func(i int) (int, error) { return 1, nil }
	js.Do = func(ctx context.Context, i int, tag string) ([]testRow, error) {
		cfg := tinyConfig()
		cfg.Model.Pos, cfg.Steps = "none", 2
		sum, err := trainer.Run(ctx, cfg, tinyCorpus(t), trainer.RunOptions{Ckpt: js.CkptPath(i), NoEval: true})
		if err != nil {
			return nil, err
		}
		runs[keys[i]]++
		return []testRow{{keys[i], sum.Steps}}, nil
	}
	js.Render = func(rows []testRow, pending []string) error { return nil }
	return js
}

// TestJobsVerifyCheckpoint: a job whose checkpoint was cut short after its
// rows were saved is not done: the damage is reported, the checkpoint set
// aside, and that job alone trained again; the other is reused.
func TestJobsVerifyCheckpoint(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]int{}
	var log bytes.Buffer
	js := ckptJobs(t, dir, runs, &log)
	if _, ran, _, err := js.Run(context.Background()); err != nil || ran != 2 {
		t.Fatalf("first run: ran %d, %v", ran, err)
	}
	ck := js.CkptPath(0)
	b, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck, b[:len(b)-100], 0o644); err != nil { // cut short
		t.Fatal(err)
	}
	_, pending, err := js.Collect()
	if err != nil || len(pending) != 1 || !bytes.Contains([]byte(pending[0]), []byte("SHA-256")) {
		t.Fatalf("pending %q (%v), want a-seed1 with its checkpoint's SHA-256 named", pending, err)
	}
	rows, ran, reused, err := js.Run(context.Background())
	if err != nil || ran != 1 || reused != 1 || !reflect.DeepEqual(runs, map[string]int{"a-seed1": 2, "b-seed1": 1}) || len(rows) != 2 {
		t.Fatalf("second run: rows %v ran %d reused %d runs %v err %v\nlog:\n%s", rows, ran, reused, runs, err, log.String())
	}
	if !bytes.Contains(log.Bytes(), []byte(ck)) || !bytes.Contains(log.Bytes(), []byte(".bad")) {
		t.Fatalf("the damaged checkpoint is not reported:\n%s", log.String())
	}
	if err := VerifyCkpt(ck, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ck + ".bad"); err != nil {
		t.Fatalf("the damaged checkpoint was not kept: %v", err)
	}
}

// TestJobsRedo: -redo retrains only the named encodings' jobs; an unknown
// name is an error naming it, with nothing run.
func TestJobsRedo(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]int{}
	var log bytes.Buffer
	js := ckptJobs(t, dir, runs, &log)
	if _, _, _, err := js.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	js.Redo = []string{"b"}
	if _, ran, reused, err := js.Run(context.Background()); err != nil || ran != 1 || reused != 1 || runs["b-seed1"] != 2 || runs["a-seed1"] != 1 {
		t.Fatalf("-redo b: ran %d reused %d runs %v err %v", ran, reused, runs, err)
	}
	js.Redo = []string{"b", "zz", "a-seed1"}
	_, _, _, err := js.Run(context.Background())
	wantErr(t, err, "-redo zz,a-seed1", "no such encoding", "a, b")
	if err := js.RunJob(context.Background(), 0); err == nil || runs["a-seed1"] != 1 || runs["b-seed1"] != 2 {
		t.Fatalf("RunJob with an unknown -redo: %v, runs %v", err, runs)
	}
}

// TestCommandRedo: -redo is parsed into Command.Redo; an empty entry is
// refused.
func TestCommandRedo(t *testing.T) {
	var out, errb bytes.Buffer
	c := NewCommand("x", "x study", []string{"quick"}, "encodings", "runs/x", &out, &errb)
	if got := c.Parse([]string{"-redo", "t5, rope"}); got != -1 || !reflect.DeepEqual(c.Redo, []string{"t5", "rope"}) {
		t.Fatalf("Parse: %d, Redo %q", got, c.Redo)
	}
	c = NewCommand("x", "x study", []string{"quick"}, "encodings", "runs/x", &out, &errb)
	if got := c.Parse([]string{"-redo", "t5,,rope"}); got != 2 {
		t.Fatalf("Parse -redo t5,,rope: %d, want 2", got)
	}
}

// TestJobsStaleCheckpoint: saved rows of another spec whose checkpoint is
// still there are refused before any job runs (the engine would resume
// from a checkpoint of the other configuration); -redo or -fresh run
// them, and without the checkpoint the job runs again from scratch.
func TestJobsStaleCheckpoint(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]int{}
	var log bytes.Buffer
	js := ckptJobs(t, dir, runs, &log)
	if _, _, _, err := js.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	js.Spec = func(i int) (int, error) { return 2, nil }
	_, _, _, err := js.Run(context.Background())
	wantErr(t, err, "2 job(s)", "a-seed1, b-seed1", "another configuration", "nothing was run", "-fresh", "-redo")
	if err := js.RunJob(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "1 job(s)") {
		t.Fatalf("RunJob of a stale job: %v", err)
	}
	if runs["a-seed1"] != 1 || runs["b-seed1"] != 1 {
		t.Fatalf("stale jobs ran: %v", runs)
	}
	if err := os.Remove(js.CkptPath(0)); err != nil {
		t.Fatal(err)
	}
	js.Redo = []string{"b"}
	if _, ran, _, err := js.Run(context.Background()); err != nil || ran != 2 || runs["a-seed1"] != 2 || runs["b-seed1"] != 2 {
		t.Fatalf("without a's checkpoint and with -redo b: ran %d, %v, runs %v", ran, err, runs)
	}
}
