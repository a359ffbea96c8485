package study

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckOut: a run's -out must be creatable (a path through a file is
// refused naming it, and nothing is created); -render needs saved results.
func TestCheckOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	if err := CheckOut(filepath.Join(dir, "new", "out"), false); err != nil {
		t.Errorf("a new directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("CheckOut created %s", filepath.Join(dir, "new"))
	}
	for _, c := range []struct {
		dir    string
		render bool
		want   string
	}{
		{filepath.Join(file, "out"), false, "-out: directory " + filepath.Join(file, "out") + " cannot be created: " + file + " is a file"},
		{filepath.Join(dir, "missing"), true, "-render: " + filepath.Join(dir, "missing") + " does not exist, so there is nothing to render"},
		{file, true, "-render: " + file + " is a file"},
	} {
		if err := CheckOut(c.dir, c.render); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckOut(%s, render %v): %v, want %q", c.dir, c.render, err, c.want)
		}
	}
	if err := CheckOut(dir, true); err != nil {
		t.Errorf("-render with results: %v", err)
	}
}
