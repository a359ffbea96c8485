package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPyAllocator: -py-malloc system preloads nothing, a library path is
// preloaded into the PyTorch process (LD_PRELOAD), a missing one is an
// error naming it, and auto takes tcmalloc only where it is installed.
func TestPyAllocator(t *testing.T) {
	o := options{python: "/usr/bin/python3", pyMalloc: "system"}
	cmd, err := pyCommand(o, "x.py")
	if err != nil || cmd.Env != nil {
		t.Fatalf("system: env %v, %v", cmd.Env, err)
	}
	lib := filepath.Join(t.TempDir(), "libfake.so")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.pyMalloc = lib
	if cmd, err = pyCommand(o, "x.py"); err != nil || !slices.Contains(cmd.Env, "LD_PRELOAD="+lib) {
		t.Fatalf("%s: env lacks LD_PRELOAD (%v)", lib, err)
	}
	o.pyMalloc = lib + ".missing"
	if _, err = pyCommand(o, "x.py"); err == nil || !strings.Contains(err.Error(), "libfake.so.missing") {
		t.Fatalf("missing library: error %v, want one naming it", err)
	}
	path, name, err := pyAllocator("auto")
	installed := false
	for _, p := range tcmallocPaths {
		if _, err := os.Stat(p); err == nil {
			installed = true
		}
	}
	if err != nil || installed != (path != "") || installed != (name == "tcmalloc") {
		t.Fatalf("auto: %q %q %v (tcmalloc installed: %v)", path, name, err, installed)
	}
}
