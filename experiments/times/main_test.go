package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/timestudy"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs.
func TestFlags(t *testing.T) {
	quick, _ := timestudy.Preset("quick")
	n := len(quick.Encodings)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-preset", "huge"}, 2, `unknown preset "huge"`},
		{[]string{"-seeds", "1,x"}, 2, `"x" is not an integer`},
		{[]string{"-seeds", "1,1"}, 2, "seed 1 given twice"},
		{[]string{"-encodings", "rope3d"}, 2, "rope3d"},
		{[]string{"-encodings", "t5@time"}, 2, "t5@time-seed1 asks for time positions: posenc: encoding t5 accepts line positions; the model gives it real positions"},
		{[]string{"-encodings", "rope@time@time"}, 2, "@time given twice"},
		{[]string{"-encodings", "rope-2d"}, 2, "line positions"},
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

// TestJobs lists the quick preset's models, each entry once in order; the
// full preset has three seeds of every default entry.
func TestJobs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	quick, _ := timestudy.Preset("quick")
	encs := quick.Encodings
	if len(lines) != len(encs) {
		t.Fatalf("jobs:\n%s", out.String())
	}
	for i, e := range encs {
		if lines[i] != fmt.Sprintf("%d %s-seed1", i, e) {
			t.Fatalf("job %d: %q, want %s", i, lines[i], e)
		}
	}
	out.Reset()
	if code := run([]string{"-jobs", "-preset", "full"}, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != 3*len(timestudy.DefaultEncodings()) {
		t.Fatalf("full: exit %d\n%s", code, out.String())
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
