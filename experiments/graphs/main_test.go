package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs.
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-preset", "huge"}, 2, `unknown preset "huge"`},
		{[]string{"-seeds", "1,x"}, 2, `"x" is not an integer`},
		{[]string{"-seeds", "1,1"}, 2, "seed 1 given twice"},
		{[]string{"-encodings", "rope3d"}, 2, "rope3d"},
		{[]string{"-encodings", "rope"}, 2, "take pairwise positions"},
		{[]string{"-encodings", "graphormer-spatial@graph-max-dist=3"}, 2, "graph-max-dist 3 differs"},
		{[]string{"-steps", "-3"}, 2, "-steps -3: give a number of updates >= 1"},
		{[]string{"-save-every", "-1"}, 2, "must not be negative"},
		{[]string{"-job", "9"}, 2, "-job 9: the plan has 4 jobs"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"-unreachable", "drop"}, 2, `unknown unreachable-pair option "drop" (valid: bucket, mask)`},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// TestJobs lists the quick preset's models: every encoding once; the full
// preset has three seeds of each.
func TestJobs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"0 none-seed1", "1 laplacian-seed1", "2 graphormer-spatial-seed1", "3 graphormer-spatial+graphormer-centrality-seed1"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("jobs:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-jobs", "-preset", "full"}, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != 12 {
		t.Fatalf("full: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"-jobs", "-preset", "molecules"}, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != 15 ||
		!strings.Contains(out.String(), "14 laplacian+graphormer-spatial+graphormer-centrality-seed3") {
		t.Fatalf("molecules: exit %d\n%s", code, out.String())
	}
}

// TestRender renders an empty output directory: the tables list every
// model as not yet run.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"-render", "-out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Not yet run: none-seed1") {
		t.Fatalf("output:\n%s", out.String())
	}
}
