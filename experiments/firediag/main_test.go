package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: no -out, or a directory without fire models, exits 2
// naming the problem.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want int
		msg  string
	}{
		{nil, 2, "give -out DIR"},
		{[]string{"-from", dir, "-out", filepath.Join(dir, "o")}, 2, "fire-seed1"},
		{[]string{"-out", dir, "-queries", "x", "-from", dir}, 2, "fire-seed1"},
	} {
		var out, errw bytes.Buffer
		if got := run(c.args, &out, &errw); got != c.want || !strings.Contains(errw.String(), c.msg) {
			t.Errorf("firediag %q: exit %d, want %d with %q: %s", c.args, got, c.want, c.msg, errw.String())
		}
	}
}
