package gocode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"strings"
	"testing"

	"github.com/rpe-go/rpe/internal/fields"
)

// writeTree writes files (slash path -> contents) under a new temporary
// directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sampleTree is a small source tree: 12 good packages of two files, a
// file that does not parse, and files LoadCorpus must not read.
func sampleTree(t *testing.T) string {
	files := map[string]string{
		"a/bad.go":               "package a\nfunc {",
		"a/testdata/x.go":        "package x\n",
		"a/vendor/v/v.go":        "package v\n",
		"a/_hidden/h.go":         "package h\n",
		"a/.git/g.go":            "package g\n",
		"a/a_test.go":            "package a\nfunc TestA() {}\n",
		"a/notes.txt":            "not go",
		"cmd/tool/internal/z.go": "package z\nvar Z = 1\n",
	}
	for i := 0; i < 12; i++ {
		d := fmt.Sprintf("pkg%02d/sub", i)
		if i < 6 {
			d = fmt.Sprintf("pkg%02d", i)
		}
		files[d+"/one.go"] = fmt.Sprintf("package p%d\n\nfunc One() int { return %d }\n", i, i)
		files[d+"/two.go"] = fmt.Sprintf("package p%d\n\nvar Two = %q\n", i, strings.Repeat("x", 40+i))
	}
	files["a/a.go"] = "package a\n\nconst A = 1\n"
	return writeTree(t, files)
}

func TestLoadCorpus(t *testing.T) {
	root := sampleTree(t)
	o := DefaultOptions()
	o.ValFrac, o.TestFrac = 0.25, 0.25
	c, err := LoadCorpus(root, o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped != 1 || len(c.SkippedFiles) != 1 || c.SkippedFiles[0].Path != "a/bad.go" {
		t.Errorf("skipped %d %v, want a/bad.go", c.Skipped, c.SkippedFiles)
	}
	split := map[string]Split{}
	n := 0
	for s := Train; s <= Test; s++ {
		for _, f := range c.Files[s] {
			n++
			for _, bad := range []string{"testdata", "vendor", "_hidden", ".git", "_test.go", "bad.go"} {
				if strings.Contains(f.Path, bad) {
					t.Errorf("loaded %s", f.Path)
				}
			}
			if p, ok := split[f.Pkg]; ok && p != s {
				t.Errorf("package %s is in %v and %v", f.Pkg, p, s)
			}
			split[f.Pkg] = s
			if want := SplitOf(f.Pkg, o.ValFrac, o.TestFrac); want != s {
				t.Errorf("%s in %v, SplitOf says %v", f.Path, s, want)
			}
		}
	}
	if n != 26 {
		t.Errorf("%d files loaded, want 26 (12 packages of 2, a/a.go, cmd/tool/internal/z.go)", n)
	}
	for s := Train; s <= Test; s++ {
		if len(c.Files[s]) == 0 {
			t.Errorf("split %v is empty: %s", s, c.Summary())
		}
	}
	// Deterministic, and the same hash for the same files.
	c2, err := LoadCorpus(root, o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash() != c2.Hash() {
		t.Error("two loads of one tree differ in hash")
	}
	o.Comments = true
	c3, err := LoadCorpus(root, o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash() == c3.Hash() {
		t.Error("hash does not change with Comments")
	}
	// Tests and dirs.
	o = DefaultOptions()
	o.Tests, o.Dirs = true, "a, pkg07"
	c, err = LoadCorpus(root, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for s := Train; s <= Test; s++ {
		for _, f := range c.Files[s] {
			got = append(got, f.Path)
		}
	}
	if strings.Join(slices.Sorted(slices.Values(got)), " ") != "a/a.go a/a_test.go pkg07/sub/one.go pkg07/sub/two.go" {
		t.Errorf("dirs a, pkg07 with tests loaded %v", got)
	}
}

func TestLoadCorpusCap(t *testing.T) {
	root := sampleTree(t)
	o := DefaultOptions()
	o.ValFrac, o.TestFrac = 0.25, 0.25
	o.MaxBytes = 400
	c, err := LoadCorpus(root, o)
	if err != nil {
		t.Fatal(err)
	}
	fr := [3]float64{0.5, 0.25, 0.25}
	for s := Train; s <= Test; s++ {
		if b := c.Bytes(s); float64(b) > 400*fr[s] {
			t.Errorf("split %v has %d bytes, cap %g", s, b, 400*fr[s])
		}
	}
	if c.Capped == 0 {
		t.Errorf("nothing capped: %s", c.Summary())
	}
}

func TestLoadCorpusErrors(t *testing.T) {
	empty := writeTree(t, map[string]string{"a/readme.txt": "x", "a/testdata/t.go": "package t\n"})
	bad := writeTree(t, map[string]string{"a/bad.go": "package"})
	good := sampleTree(t)
	file := filepath.Join(good, "a", "a.go")
	for _, tc := range []struct {
		name string
		root string
		mod  func(*Options)
		want string
	}{
		{"no go files", empty, nil, "no Go files under"},
		{"none parses", bad, nil, "1 skipped"},
		{"missing root", filepath.Join(empty, "nope"), nil, "source root"},
		{"root is a file", file, nil, "not a directory"},
		{"missing dir", good, func(o *Options) { o.Dirs = "a,nope" }, `directory "nope"`},
		{"dir outside", good, func(o *Options) { o.Dirs = "../x" }, "relative to the root"},
		{"fractions", good, func(o *Options) { o.ValFrac, o.TestFrac = 0.6, 0.5 }, "sum below 1"},
		{"negative bound", good, func(o *Options) { o.MaxUp = -1 }, "max-up -1"},
		{"negative cap", good, func(o *Options) { o.MaxBytes = -1 }, "max bytes"},
		{"cap too small", good, func(o *Options) { o.MaxBytes = 10 }, "left out by the cap of 10 bytes"},
	} {
		o := DefaultOptions()
		if tc.mod != nil {
			tc.mod(&o)
		}
		_, err := LoadCorpus(tc.root, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestLoadGoroot parses two small packages of the installed GOROOT/src.
func TestLoadGoroot(t *testing.T) {
	o := DefaultOptions()
	o.Dirs = "container,unicode/utf8"
	c, err := LoadCorpus("", o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped != 0 {
		t.Errorf("GOROOT files skipped: %s", c.Summary())
	}
	n := 0
	for s := Train; s <= Test; s++ {
		for _, f := range c.Files[s] {
			n++
			if f.Tree.Len() < 10 {
				t.Errorf("%s: %d nodes", f.Path, f.Tree.Len())
			}
			checkFile(t, f, false)
		}
	}
	if n < 4 {
		t.Errorf("%d files from container and unicode/utf8: %s", n, c.Summary())
	}
}

// TestOptionNames pins the kebab-case names of the options (flags, study
// variants).
func TestOptionNames(t *testing.T) {
	fs, err := fields.Walk(&Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(fields.Names(fs), " ")
	if want := "comments dirs max-bytes max-down max-up test-frac tests val-frac"; got != want {
		t.Errorf("option names %q, want %q", got, want)
	}
	o := DefaultOptions()
	if err := fields.Set(&o, "max-up", "3"); err != nil || o.MaxUp != 3 {
		t.Errorf("set max-up: %v, %d", err, o.MaxUp)
	}
}
