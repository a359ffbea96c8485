package study

import (
	"context"
	"io/fs"
	"math"
	"path/filepath"
	"syscall"
	"strconv"
	"testing"
)

// TestPrecTicks checks that every tick label reads back as the tick's value
// (the old labels of ticks at 3.05, 3.20, 3.35 were "3.1", "3.2", "3.3").
func TestPrecTicks(t *testing.T) {
	for _, r := range [][2]float64{
		{3.02, 3.38}, {3.0, 3.4}, {2.9, 4.4}, {3.03, 3.9}, {0.001, 0.0042}, {1.05, 1.35},
		{100, 500}, {-0.3, 0.25}, {2.1234, 2.1251}, {0, 1}, {4.49, 4.51},
	} {
		n := 0
		for _, tk := range (precTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			n++
			v, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(v-tk.Value) > 1e-9*math.Max(math.Abs(tk.Value), 1e-3) {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
		if n < 2 {
			t.Errorf("range %v: %d labelled ticks", r, n)
		}
	}
}

// TestFileModes runs a tiny study and checks that every file it writes is
// 0644 and every directory 0755 (CreateTemp alone makes files 0600).
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "out")
	p := tinyPlan("none")
	if _, err := Run(context.Background(), p, tinyCorpus(t), Options{Dir: dir, GitRev: "test"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Errorf("only %d files and directories written", n)
	}
}
