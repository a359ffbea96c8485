package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderPreset runs the command with -render into a fresh directory and
// returns the preset name that results.json records.
func renderPreset(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	var out, errw bytes.Buffer
	if rc := run(append(args, "-render", "-out", dir), &out, &errw); rc != 0 {
		t.Fatalf("%v: exit %d: %s", args, rc, errw.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Preset string }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Preset
}

// TestPresetAndOverrides checks that the presets are used as they are
// unless a flag changes them, in which case the study is "<preset>-custom".
func TestPresetAndOverrides(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "quick"},
		{[]string{"-preset", "full"}, "full"},
		{[]string{"-preset=full"}, "full"},
		{[]string{"-lr", "0.001"}, "quick-custom"},
		{[]string{"-preset", "full", "-t5-max-distance", "64"}, "full-custom"},
		{[]string{"-encodings", "t5@t5-max-distance=64"}, "quick-custom"},
		{[]string{"-max-windows", "0"}, "quick-custom"},
		{[]string{"-preset", "full", "-max-windows", "110"}, "full-custom"},
	} {
		if got := renderPreset(t, c.args...); got != c.want {
			t.Errorf("%v: preset %q, want %q", c.args, got, c.want)
		}
	}
}

func TestBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-preset", "huge"}, `unknown preset "huge"`},
		{[]string{"-job", "1", "-render"}, "does not go with"},
		{[]string{"-fresh", "-jobs"}, "-fresh deletes"},
		{[]string{"-encodings", "t5@nope=1", "-jobs"}, `unknown option "nope"`},
		{[]string{"-lr", "x"}, "lr"},
		{[]string{"-seeds", "1,a", "-jobs"}, `"a" is not an integer`},
		{[]string{"-job", "99"}, "job 99"},
	} {
		var out, errw bytes.Buffer
		rc := run(c.args, &out, &errw)
		if rc == 0 || !strings.Contains(errw.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q, want a failure mentioning %q", c.args, rc, errw.String(), c.msg)
		}
	}
}
