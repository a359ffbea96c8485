package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs for bad flags, 1 for a source directory without Go
// files.
func TestFlags(t *testing.T) {
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "README"), []byte("no Go here"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-preset", "huge"}, 2, `unknown preset "huge"`},
		{[]string{"-seeds", "1,x"}, 2, `"x" is not an integer`},
		{[]string{"-seeds", "1,1"}, 2, "seed 1 given twice"},
		{[]string{"-encodings", "rope3d"}, 2, "rope3d"},
		{[]string{"-encodings", "tree+rope3d"}, 2, "rope3d"},
		{[]string{"-encodings", "rope-2d"}, 2, "line positions"},
		{[]string{"-steps", "-3"}, 2, "-steps -3: give a number of updates >= 1"},
		{[]string{"-save-every", "-1"}, 2, "must not be negative"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-src", empty, "-out", t.TempDir(), "-encodings", "none"}, 1, "no Go files under " + empty},
		{[]string{"-src", filepath.Join(empty, "missing"), "-out", t.TempDir(), "-encodings", "none"}, 1, "source root"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// TestJobs lists the quick preset's models: every encoding once.
func TestJobs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 || lines[0] != "0 none-seed1" || lines[5] != "5 tree+rope-seed1" {
		t.Fatalf("jobs:\n%s", out.String())
	}
}
