package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags checks the exit statuses and messages of bad input: status 2
// before anything runs for bad flags, 1 for unusable data.
func TestFlags(t *testing.T) {
	corrupt := t.TempDir()
	for _, f := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if err := os.WriteFile(filepath.Join(corrupt, f), []byte("not an IDX file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-preset", "huge"}, 2, `unknown preset "huge"`},
		{[]string{"-seeds", "1,x"}, 2, `"x" is not an integer`},
		{[]string{"-encodings", "rope3d"}, 2, "rope3d"},
		{[]string{"-steps", "-3"}, 2, "-steps -3: give a number of updates >= 1"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-resample", "nearest"}, 2, `-resample "nearest": give one of none, bilinear, bicubic, bilinear-aa, bicubic-aa`},
		{[]string{"-encodings", "swin@vit-pool=cls"}, 2, "vit-pool cls with swin (vit-cls-pos with): its score bias acts inside attention"},
		{[]string{"-mnist", corrupt, "-out", t.TempDir(), "-encodings", "none"}, 1, "magic"},
		{[]string{"-mnist", t.TempDir(), "-out", t.TempDir(), "-encodings", "none"}, 1, "train-images-idx3-ubyte"},
		{[]string{"-patch", "5", "-out", t.TempDir(), "-encodings", "none"}, 1, "not divisible by patch size 5"},
		{[]string{"-dataset", "cifar"}, 2, `-dataset "cifar": give mnist or fashion`},
		{[]string{"-dataset", "fashion", "-mnist", filepath.Join(t.TempDir(), "none"), "-out", t.TempDir(), "-encodings", "none"}, 1,
			"run scripts/install-data.sh dataset-fashion-mnist"},
		{[]string{"-preset", "fashion", "-mnist", corrupt, "-out", t.TempDir(), "-encodings", "none"}, 1, "fashion-mnist: idx"},
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
	if len(lines) != 12 || lines[0] != "0 none-seed1" || !strings.HasSuffix(lines[11], "cpe-seed1") {
		t.Fatalf("jobs:\n%s", out.String())
	}
}

// TestResampleFlag: -resample and the class-token variants make a custom
// plan of the models they name.
func TestResampleFlag(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"-jobs", "-resample", "bicubic-aa", "-encodings", "learned-2d@vit-pool=cls,learned-2d@vit-pool=cls@vit-cls-pos=without"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got, want := strings.TrimSpace(out.String()), "0 learned-2d@vit-pool=cls-seed1\n1 learned-2d@vit-pool=cls@vit-cls-pos=without-seed1"; got != want {
		t.Fatalf("jobs:\n%s\nwant\n%s", got, want)
	}
}

// TestResampleFlagRows: -resample reaches the evaluation, whose rows of
// learned-2d on the larger grids carry its label (one update, four test
// images).
func TestResampleFlagRows(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-out", dir, "-encodings", "learned-2d@vit-pool=cls", "-steps", "1", "-test-images", "4", "-resample", "bicubic-aa"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "resample=bicubic-aa"); n != 2 {
		t.Fatalf("%d rows evaluated with resample=bicubic-aa, want 2 (canvas56, upscale2x):\n%s", n, b)
	}
}

// TestFashionPreset lists the fashion preset's models (the full preset's
// 12 encodings x 3 seeds) and runs two updates of one model on the
// committed Fashion-MNIST sample through the flags.
func TestFashionPreset(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-preset", "fashion", "-jobs"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 36 || lines[0] != "0 none-seed1" || lines[35] != "35 cpe-seed3" {
		t.Fatalf("jobs:\n%s", out.String())
	}
	dir := t.TempDir()
	out.Reset()
	errb.Reset()
	args := []string{"-dataset", "fashion", "-mnist", "../../testdata/fashion-mnist", "-out", dir, "-encodings", "none", "-steps", "2", "-patch", "7"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"preset": "quick-fashion-custom"`, `"dataset": "fashion"`, `"Dataset": "fashion"`, `"sha256": "da85d2cd76d30db2babb9e041e65a1d816fddffe209d55c5e54e14011d309f5e"`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("results.json has no %s", s)
		}
	}
}
