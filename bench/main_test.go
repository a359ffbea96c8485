package main

import (
	"strings"
	"testing"
)

// TestMainStatus: -h exits 0; a bad flag exits 2 with its error prefixed
// "bench: " once (it read "bench: bench: ..."), a failed run 1.
func TestMainStatus(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"-h"}, 0, ""},
		{[]string{"-cost", "-go-only", "-mem-limit", "0"}, 2, "bench: -mem-limit 0 GiB must be positive"},
		{[]string{"-go-only", "-pos", "nope", "-steps", "1"}, 2, `bench: flag -pos "nope": unknown encoding (valid: none, sinusoidal`},
	} {
		var out, errw strings.Builder
		got := mainStatus(c.args, &out, &errw)
		if got != c.status || !strings.Contains(errw.String(), c.want) || strings.Contains(errw.String(), "bench: bench:") {
			t.Errorf("bench %v: status %d, stderr %q; want %d and %q", c.args, got, errw.String(), c.status, c.want)
		}
	}
}
