package images

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var mnist struct {
	once        sync.Once
	train, test *Dataset
	err         error
	dir         string
	took        time.Duration
}

// loadMNIST loads the GoMNIST copy once for all tests, skipping the test
// if the module is not in the module cache.
func loadMNIST(t *testing.T) (train, test *Dataset) {
	t.Helper()
	mnist.once.Do(func() {
		if mnist.dir, mnist.err = GoMNISTDir(); mnist.err != nil {
			return
		}
		start := time.Now()
		mnist.train, mnist.test, mnist.err = LoadMNIST("")
		mnist.took = time.Since(start)
	})
	if mnist.err != nil && strings.Contains(mnist.err.Error(), "not in the module cache") {
		t.Skipf("MNIST: %v", mnist.err)
	}
	if mnist.err != nil {
		t.Fatal(mnist.err)
	}
	return mnist.train, mnist.test
}

func TestMNIST(t *testing.T) {
	train, test := loadMNIST(t)
	t.Logf("MNIST from %s loaded in %v", mnist.dir, mnist.took)
	for _, tc := range []struct {
		ds *Dataset
		n  int
	}{{train, 60000}, {test, 10000}} {
		if err := tc.ds.Check(); err != nil {
			t.Fatal(err)
		}
		if tc.ds.N != tc.n || tc.ds.Rows != 28 || tc.ds.Cols != 28 || tc.ds.Classes != 10 {
			t.Errorf("%s: %d images of %dx%d, %d classes; want %d of 28x28, 10", tc.ds.Source, tc.ds.N, tc.ds.Rows, tc.ds.Cols, tc.ds.Classes, tc.n)
		}
		counts := make([]int, 10)
		for _, l := range tc.ds.Labels {
			counts[l]++
		}
		for c, k := range counts {
			if k < tc.n/20 {
				t.Errorf("%s: only %d images of class %d", tc.ds.Source, k, c)
			}
		}
	}
	// The well-known first labels: 5 0 4 1 9 (train) and 7 2 1 0 4 (test).
	t.Logf("first training label %d, first test label %d", train.Labels[0], test.Labels[0])
	if got := train.Labels[:5]; !slices.Equal(got, []int{5, 0, 4, 1, 9}) {
		t.Errorf("first training labels %v, want [5 0 4 1 9]", got)
	}
	if got := test.Labels[:5]; !slices.Equal(got, []int{7, 2, 1, 0, 4}) {
		t.Errorf("first test labels %v, want [7 2 1 0 4]", got)
	}
	// The mean pixel of the training set is the 0.1307 of MNISTNorm.
	var sum float64
	for _, v := range train.Images {
		sum += float64(v)
	}
	m := sum / float64(len(train.Images))
	var ss float64
	for _, v := range train.Images {
		ss += (float64(v) - m) * (float64(v) - m)
	}
	sd := math.Sqrt(ss / float64(len(train.Images)))
	if math.Abs(m-float64(MNISTNorm.Mean)) > 1e-4 || math.Abs(sd-float64(MNISTNorm.Std)) > 1e-4 {
		t.Errorf("training pixels: mean %.5f, std %.5f; MNISTNorm is %+v", m, sd, MNISTNorm)
	}
}

// TestMNISTPipeline runs the test-time path on real data: 100 test images
// upscaled to 56x56 and placed on a 64x64 canvas, patched by 8, and one
// training batch.
func TestMNISTPipeline(t *testing.T) {
	train, test := loadMNIST(t)
	sub, err := Subset(test, 100)
	if err != nil {
		t.Fatal(err)
	}
	up, err := Upscale(sub, 2)
	if err != nil {
		t.Fatal(err)
	}
	big, err := Canvas(up, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Check(); err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 64*64)
	if gr, gc, err := Patches(big, 99, 8, dst); err != nil || gr != 8 || gc != 8 {
		t.Fatalf("grid %dx%d: %v", gr, gc, err)
	}
	b, err := NewBatcher(train, BatcherOptions{Batch: 32, Patch: 7, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	B, T, D := b.Shape()
	if B != 32 || T != 16 || D != 49 {
		t.Fatalf("shape %d %d %d", B, T, D)
	}
	if err := b.Next(make([]float32, B*T*D), make([]int, B)); err != nil {
		t.Fatal(err)
	}
}

// TestGoMNISTVersion checks that GoMNISTVersion is the version go.mod
// requires, so the module-cache fallback path is the right one.
func TestGoMNISTVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", GoMNIST).Output()
	if err != nil {
		t.Skipf("go list -m %s: %v", GoMNIST, err)
	}
	if v := strings.TrimSpace(string(out)); v != GoMNISTVersion {
		t.Fatalf("go.mod requires %s@%s, GoMNISTVersion is %s", GoMNIST, v, GoMNISTVersion)
	}
	if e := escapeModulePath(GoMNIST); e != "github.com/petar/!go!m!n!i!s!t" {
		t.Fatalf("escaped module path %s", e)
	}
}

// TestGoMNISTDirFallback finds the data through the module cache from a
// directory outside any module, where `go list -m` fails.
func TestGoMNISTDirFallback(t *testing.T) {
	want, err := GoMNISTDir()
	if err != nil {
		t.Skipf("MNIST: %v", err)
	}
	t.Chdir(t.TempDir())
	got, err := GoMNISTDir()
	if err != nil || got != want {
		t.Fatalf("outside the module: %q, %v; want %q", got, err, want)
	}
	// An empty module cache and no go command: a clear error.
	t.Setenv("PATH", "")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPATH", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	_, err = GoMNISTDir()
	wantErr(t, err, "not in the module cache", "go mod download")
}

// writeMNISTDir writes a synthetic dataset as the four standard files,
// gzip-compressed if gz.
func writeMNISTDir(t *testing.T, dir string, gz bool, nTrain, nTest int) {
	for _, f := range []struct {
		images, labels string
		n              int
		seed           uint64
	}{{TrainImagesFile, TrainLabelsFile, nTrain, 1}, {TestImagesFile, TestLabelsFile, nTest, 2}} {
		img, lab := synthIDX(f.n, 6, 4, 10, f.seed)
		bi, bl, ext := idxBytes(t, img), idxBytes(t, lab), ""
		if gz {
			bi, bl, ext = gzipBytes(t, bi), gzipBytes(t, bl), ".gz"
		}
		writeFile(t, dir, f.images+ext, bi)
		writeFile(t, dir, f.labels+ext, bl)
	}
}

func TestLoadMNISTDir(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		writeMNISTDir(t, dir, gz, 7, 3)
		train, test, err := LoadMNIST(dir)
		if err != nil {
			t.Fatal(err)
		}
		img, lab := synthIDX(7, 6, 4, 10, 1)
		want, _ := FromIDX(img, lab, 10, "")
		if train.N != 7 || test.N != 3 || train.Rows != 6 || train.Cols != 4 || train.Hash() != want.Hash() {
			t.Fatalf("gz %v: got %d and %d images of %dx%d", gz, train.N, test.N, train.Rows, train.Cols)
		}
		if !strings.Contains(train.Source, filepath.Join(dir, TrainImagesFile)) {
			t.Errorf("source %q does not name the file", train.Source)
		}
		for i, b := range img.Data {
			if train.Images[i] != float32(b)/255 {
				t.Fatalf("pixel %d: %v, want %d/255", i, train.Images[i], b)
			}
		}
	}
}

func TestLoadMNISTErrors(t *testing.T) {
	t.Run("missing file", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, true, 4, 2)
		os.Remove(filepath.Join(dir, TestLabelsFile+".gz"))
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, "missing file", TestLabelsFile, dir)
	})
	t.Run("no directory", func(t *testing.T) {
		_, _, err := LoadMNIST(filepath.Join(t.TempDir(), "nope"))
		wantErr(t, err, "nope")
	})
	t.Run("count mismatch", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, false, 4, 2)
		_, lab := synthIDX(5, 1, 1, 10, 3)
		writeFile(t, dir, TrainLabelsFile, idxBytes(t, lab))
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, "4 images but 5 labels", TrainImagesFile)
	})
	t.Run("label too big", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, false, 4, 2)
		writeFile(t, dir, TestLabelsFile, idxBytes(t, &IDX{Dims: []int{2}, Data: []byte{3, 10}}))
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, "label 10 of image 1 is not below the 10 classes", TestLabelsFile)
	})
	t.Run("labels as images", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, false, 4, 2)
		writeFile(t, dir, TrainImagesFile, idxBytes(t, &IDX{Dims: []int{4}, Data: make([]byte, 4)}))
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, "images have 1 dimensions")
	})
	t.Run("corrupt file", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, true, 4, 2)
		p := filepath.Join(dir, TrainImagesFile+".gz")
		b, _ := os.ReadFile(p)
		writeFile(t, dir, TrainImagesFile+".gz", b[:len(b)-6])
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, p)
	})
	t.Run("sizes differ", func(t *testing.T) {
		dir := t.TempDir()
		writeMNISTDir(t, dir, false, 4, 2)
		img, lab := synthIDX(2, 5, 5, 10, 3)
		writeFile(t, dir, TestImagesFile, idxBytes(t, img))
		writeFile(t, dir, TestLabelsFile, idxBytes(t, lab))
		_, _, err := LoadMNIST(dir)
		wantErr(t, err, "6x4 but test images 5x5")
	})
}

func TestCheck(t *testing.T) {
	ds := synth(t, 3, 2, 2, 1)
	for _, tc := range []struct {
		edit func(d *Dataset)
		want string
	}{
		{func(d *Dataset) { d.N = 0 }, "all must be positive"},
		{func(d *Dataset) { d.Classes = 0 }, "0 classes"},
		{func(d *Dataset) { d.Images = d.Images[1:] }, "11 pixel values"},
		{func(d *Dataset) { d.Labels = d.Labels[1:] }, "2 labels for 3 images"},
		{func(d *Dataset) { d.Images[5] = 1.5 }, "image 1 pixel 1 is 1.5"},
		{func(d *Dataset) { d.Labels[2] = -1 }, "label -1 of image 2"},
		{func(d *Dataset) { d.N, d.Rows, d.Cols = 1<<20, 1<<10, 1<<10 }, "exceed the limit"},
	} {
		d, _ := Subset(ds, 3)
		tc.edit(d)
		wantErr(t, d.Check(), tc.want)
	}
	if err := ds.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestHash(t *testing.T) {
	ds := synth(t, 4, 3, 3, 1)
	h := ds.Hash()
	if len(h) != 64 {
		t.Fatalf("hash %q", h)
	}
	same := synth(t, 4, 3, 3, 1)
	if same.Hash() != h {
		t.Fatal("equal datasets hash differently")
	}
	for name, edit := range map[string]func(d *Dataset){
		"pixel":  func(d *Dataset) { d.Images[35] += 1.0 / 255 },
		"label":  func(d *Dataset) { d.Labels[3] = (d.Labels[3] + 1) % 10 },
		"shape":  func(d *Dataset) { d.Rows, d.Cols = 1, 9 },
		"source": nil,
	} {
		d, _ := Subset(ds, 4)
		if edit == nil {
			d.Source = "other"
			if d.Hash() != h {
				t.Errorf("the source changed the hash")
			}
			continue
		}
		edit(d)
		if d.Hash() == h {
			t.Errorf("changing the %s did not change the hash", name)
		}
	}
}

func TestFromIDXErrors(t *testing.T) {
	img, lab := synthIDX(2, 3, 3, 10, 1)
	_, err := FromIDX(img, lab, 0, "src")
	wantErr(t, err, "src", "0 classes")
	_, err = FromIDX(&IDX{Dims: []int{0, 3, 3}}, &IDX{Dims: []int{0}}, 10, "src")
	wantErr(t, err, "empty dataset")
	_, err = FromIDX(&IDX{Dims: []int{1 << 40, 1 << 40, 1 << 40}}, &IDX{Dims: []int{1 << 40}}, 10, "src")
	wantErr(t, err, "exceed the limit")
	_, err = FromIDX(&IDX{Dims: []int{2, 3, 3}, Data: img.Data[:5]}, lab, 10, "src")
	wantErr(t, err, "do not match")
}
