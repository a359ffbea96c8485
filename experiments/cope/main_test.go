package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/copestudy"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs.
func TestFlags(t *testing.T) {
	quick, _ := copestudy.Preset("quick")
	jobs, _ := quick.Jobs()
	n := len(jobs)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-preset", "huge"}, 2, `unknown preset "huge"`},
		{[]string{"-seeds", "1,x"}, 2, `"x" is not an integer`},
		{[]string{"-seeds", "1,1"}, 2, "seed 1 given twice"},
		{[]string{"-encodings", "rope3d"}, 2, "rope3d"},
		{[]string{"-encodings", "rope-2d"}, 2, "line positions"},
		{[]string{"-encodings", "cope@cope-npos=0"}, 2, "cope-npos"},
		{[]string{"-tasks", "flip-flop"}, 2, `-tasks: no task "flip-flop" (valid: copy, count)`},
		{[]string{"-tasks", "copy,copy"}, 2, "task copy given twice"},
		{[]string{"-steps", "-3"}, 2, "-steps -3: give a number of updates >= 1"},
		{[]string{"-save-every", "-1"}, 2, "must not be negative"},
		{[]string{"-job", fmt.Sprint(n)}, 2, fmt.Sprintf("-job %d: the plan has %d jobs", n, n)},
		{[]string{"-redo", "rope"}, 2, "-redo rope: no such encoding in the plan (it has copy-cope"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "-tasks"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// TestJobs lists the quick preset's models in order (task-major); the full
// preset has three seeds of each; -tasks keeps one task.
func TestJobs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "0 copy-cope-seed1\n1 copy-rope-seed1\n2 copy-alibi-seed1\n3 copy-none-seed1\n4 count-cope-seed1\n5 count-rope-seed1\n6 count-alibi-seed1\n7 count-none-seed1\n"
	if out.String() != want {
		t.Fatalf("jobs:\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if code := run([]string{"-jobs", "-preset", "full"}, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != 24 ||
		!strings.HasSuffix(out.String(), "23 count-none-seed3\n") {
		t.Fatalf("full: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"-jobs", "-tasks", "count", "-encodings", "cope"}, &out, &errb); code != 0 || out.String() != "0 count-cope-seed1\n" {
		t.Fatalf("-tasks count: exit %d\n%s", code, out.String())
	}
}

// TestRender renders an empty output directory: the tables list every
// model as not yet run, exit 0.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"-render", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Not yet run: copy-cope-seed1") || !strings.Contains(out.String(), "# CoPE tasks study, quick preset") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// TestRunTiny runs a tiny custom study end to end through the command
// (one task, one encoding, 2 updates), then -compare against itself.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"-tasks", "count", "-encodings", "none", "-steps", "2", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "1 models trained, 0 reused") || !strings.Contains(out.String(), "## Counting: accuracy on answer tokens (%)") {
		t.Fatalf("output:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-tasks", "count", "-encodings", "none", "-steps", "2", "-out", dir, "-compare", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "agree") {
		t.Fatalf("-compare: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
