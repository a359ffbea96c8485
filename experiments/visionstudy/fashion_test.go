package visionstudy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/images"
)

// fashionSample is the committed Fashion-MNIST sample: 40 training and 20
// test images of 28×28 (testdata/fashion-mnist/README.md).
const fashionSample = "../../testdata/fashion-mnist"

// fashionPlan is tinyPlan on the sample: 7×7-pixel patches (a 4×4 grid),
// tested natively and on a 56×56 canvas (an 8×8 grid), a few updates.
func fashionPlan(t *testing.T, encs ...string) Plan {
	t.Helper()
	p, err := WithDataset(tinyPlan(encs...), DatasetFashion)
	if err != nil {
		t.Fatal(err)
	}
	p.MNIST, p.Patch, p.Base.Steps = fashionSample, 7, 3
	p.ValImages, p.TestImages = 8, 0
	p.Resolutions = []Resolution{{Name: "28px", Kind: "native"}, {Name: "canvas56", Kind: "canvas", Size: 56}}
	return p
}

// TestFashionRuns runs a tiny study on the Fashion-MNIST sample end to
// end: the rows name the dataset and carry the sums of the four files
// read, every test image is scored, and results.json records the dataset
// in the plan and the rows.
func TestFashionRuns(t *testing.T) {
	p := fashionPlan(t, "none", "rope-2d")
	if p.Preset != "test-fashion" || DefaultDir(p.Preset) != filepath.Join("runs", "vision", "test-fashion") {
		t.Fatalf("preset %q", p.Preset)
	}
	_, _, want, err := images.LoadFashionMNIST(fashionSample)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 2 || len(o.Rows) != 4 {
		t.Fatalf("trained %d, %d rows: %+v", o.Trained, len(o.Rows), o.Rows)
	}
	grids := []string{"4x4", "8x8"}
	for i, r := range o.Rows {
		if r.Status != StatusOK || r.Dataset != DatasetFashion || r.Preset != "test-fashion" || r.Images != 20 || r.TrainSteps != 3 || r.Grid != grids[i%2] {
			t.Errorf("row %+v", r)
		}
		if !slices.Equal(r.DataFiles, want) || len(r.DataFiles) != 4 || r.DataFiles[0].Name != images.TrainImagesFile {
			t.Errorf("%s at %s: data files %+v, want %+v", r.Encoding, r.Resolution, r.DataFiles, want)
		}
	}
	f, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Plan.Dataset != DatasetFashion || len(f.Rows) != 4 || f.Rows[0].Dataset != DatasetFashion || !slices.Equal(f.Rows[0].DataFiles, want) {
		t.Errorf("results.json: plan dataset %q, rows %+v", f.Plan.Dataset, f.Rows)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil || !strings.Contains(string(b), "on Fashion-MNIST in 7x7-pixel patches") {
		t.Errorf("table.md does not name the dataset (%v):\n%.300s", err, b)
	}
	// MNIST rows leave the dataset empty, as the committed rows have it.
	if got := tinyPlan("none").rowDataset(); got != "" {
		t.Errorf("MNIST rows: dataset %q", got)
	}
}

// TestFashionMissing: a plan on Fashion-MNIST whose directory does not
// exist is refused with an error naming the directory, the Debian package
// and scripts/install-data.sh, before anything is trained.
func TestFashionMissing(t *testing.T) {
	p := fashionPlan(t, "none")
	p.MNIST = filepath.Join(t.TempDir(), "fashion-mnist")
	dir := t.TempDir()
	_, err := Run(context.Background(), p, Options{Dir: dir})
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{p.MNIST, "dataset-fashion-mnist", "scripts/install-data.sh"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "models")); !os.IsNotExist(err) {
		t.Errorf("models/ exists after a refused run: %v", err)
	}
}

// TestDatasetChoice: the presets keep MNIST but fashion, another dataset
// than the preset's renames the plan, and unknown names are refused.
func TestDatasetChoice(t *testing.T) {
	for _, c := range []struct{ preset, dataset, name, stored string }{
		{"quick", "mnist", "quick", ""},
		{"full", "mnist", "full", ""},
		{"full", "fashion", "full-fashion", "fashion"},
		{"fashion", "fashion", "fashion", "fashion"},
		{"fashion", "mnist", "fashion-mnist", ""},
	} {
		p, err := Preset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		if p, err = WithDataset(p, c.dataset); err != nil || p.Preset != c.name || p.Dataset != c.stored || p.Validate() != nil {
			t.Errorf("%s on %s: preset %q, dataset %q, %v; want %q, %q", c.preset, c.dataset, p.Preset, p.Dataset, err, c.name, c.stored)
		}
	}
	full, _ := Preset("full")
	fashion, _ := Preset("fashion")
	fashion.Preset, fashion.Dataset = full.Preset, full.Dataset
	if !reflect.DeepEqual(full, fashion) {
		t.Errorf("the fashion preset is not the full preset on Fashion-MNIST:\n%+v\n%+v", fashion, full)
	}
	p, _ := Preset("quick")
	if _, err := WithDataset(p, "cifar"); err == nil || !strings.Contains(err.Error(), "mnist or fashion") {
		t.Errorf("cifar: %v", err)
	}
	p.Dataset = "cifar"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "cifar") {
		t.Errorf("plan on cifar: %v", err)
	}
}
