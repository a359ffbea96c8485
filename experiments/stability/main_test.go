package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/stabilitystudy"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs.
func TestFlags(t *testing.T) {
	quick, _ := stabilitystudy.Preset("quick")
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
		{[]string{"-encodings", "t5,t5"}, 2, "t5 given twice"},
		{[]string{"-encodings", "t5@bogus=1"}, 2, "bogus"},
		{[]string{"-high-lr", "-1"}, 2, "-high-lr -1 must be positive"},
		{[]string{"-high-lr", "0.002"}, 2, "the two values of an axis must differ"},
		{[]string{"-steps", "-3"}, 2, "-steps -3: give a number of updates >= 1"},
		{[]string{"-save-every", "-1"}, 2, "must not be negative"},
		{[]string{"-job", fmt.Sprint(n)}, 2, fmt.Sprintf("-job %d: the plan has %d jobs", n, n)},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// TestJobs lists the quick preset's runs in plan order, and the full
// preset's.
func TestJobs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	quick, _ := stabilitystudy.Preset("quick")
	jobs, _ := quick.Jobs()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(jobs) {
		t.Fatalf("jobs:\n%s", out.String())
	}
	for i, j := range jobs {
		if lines[i] != fmt.Sprintf("%d %s", i, j.Key()) {
			t.Fatalf("job %d: %q, want %s", i, lines[i], j.Key())
		}
	}
	full, _ := stabilitystudy.Preset("full")
	fj, _ := full.Jobs()
	out.Reset()
	if code := run([]string{"-jobs", "-preset", "full"}, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != len(fj) {
		t.Fatalf("full: exit %d\n%s", code, out.String())
	}
}

// TestRender renders an empty output directory: the table lists every run
// as not yet run.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"-render", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Not yet run: t5-init0.02-alphaoff-clipoff-lr0.002-seed1") {
		t.Fatalf("output:\n%s", out.String())
	}
}
