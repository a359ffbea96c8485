package study

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

type testRow struct {
	Key  string `json:"key"`
	Seed int    `json:"seed"`
}

// TestJobs: jobs run once and are reused while their spec holds; a new
// spec recomputes them; Collect lists the jobs not done as pending (with
// the reason when the spec changed); RunJob checks its range; an error of
// a job leaves no rows for it.
func TestJobs(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]int{}
	version := 1
	var rendered [][]testRow
	var fail error
	mk := func(keys ...string) *Jobs[int, testRow] {
		js := &Jobs[int, testRow]{Name: "test", Dir: dir, Keys: keys}
		js.Spec = func(i int) (int, error) { return version, nil }
		js.Do = func(ctx context.Context, i int, tag string) ([]testRow, error) {
			if fail != nil {
				return nil, fail
			}
			runs[keys[i]]++
			return []testRow{{keys[i], 1}, {keys[i], 2}}, nil
		}
		js.Render = func(rows []testRow, pending []string) error {
			rendered = append(rendered, rows)
			return nil
		}
		return js
	}
	js := mk("a", "b")
	if err := js.RunJob(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	rows, pending, err := js.Collect()
	if err != nil || len(rows) != 2 || !reflect.DeepEqual(pending, []string{"a"}) {
		t.Fatalf("after job 1: rows %v pending %v err %v", rows, pending, err)
	}
	rows, ran, reused, err := js.Run(context.Background())
	if err != nil || ran != 1 || reused != 1 || len(rows) != 4 || rows[0].Key != "a" || runs["a"] != 1 || runs["b"] != 1 {
		t.Fatalf("run: rows %v ran %d reused %d err %v runs %v", rows, ran, reused, err, runs)
	}
	if len(rendered) != 1 || len(rendered[0]) != 4 {
		t.Fatalf("rendered %v", rendered)
	}
	version = 2
	_, pending, _ = js.Collect()
	if len(pending) != 2 || !strings.Contains(pending[0], "another configuration") {
		t.Fatalf("pending after a spec change: %v", pending)
	}
	// rendering under the new spec would drop the saved rows' tables: refused
	if _, err := js.RenderSaved(); err == nil || !strings.Contains(err.Error(), "the saved rows of 2 of 2 jobs") || len(rendered) != 1 {
		t.Fatalf("render under another spec: %v (rendered %d times)", err, len(rendered))
	}
	if _, ran, _, err := js.Run(context.Background()); err != nil || ran != 2 || runs["a"] != 2 {
		t.Fatalf("rerun after a spec change: ran %d err %v runs %v", ran, err, runs)
	}
	js.Fresh = true
	if _, ran, _, _ := js.Run(context.Background()); ran != 2 {
		t.Fatalf("fresh: ran %d", ran)
	}
	if err := js.RunJob(context.Background(), 2); err == nil || !strings.Contains(err.Error(), "test: job 2 does not exist (the plan has 2 jobs, 0..1)") {
		t.Fatalf("job out of range: %v", err)
	}
	fail = errors.New("boom")
	js2 := mk("c")
	if err := js2.RunJob(context.Background(), 0); !errors.Is(err, fail) {
		t.Fatalf("failing job: %v", err)
	}
	if _, err := os.Stat(js2.RowsPath(0)); !os.IsNotExist(err) {
		t.Fatalf("a failed job left rows: %v", err)
	}
	if err := os.WriteFile(js.RowsPath(0), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := js.Collect(); err == nil || !strings.Contains(err.Error(), "delete it to recompute") {
		t.Fatalf("corrupt rows: %v", err)
	}
}
