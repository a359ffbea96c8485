package images

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fashionSample is the committed Fashion-MNIST sample (its README.md says
// how it was cut from the Debian files).
const fashionSample = "../../testdata/fashion-mnist"

// The SHA-256 of the four files of Debian's dataset-fashion-mnist
// 0.0~git20200523.55506a9-1, in LoadMNISTFiles' order.
var fashionDebianSums = []string{
	"b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7", // train-images-idx3-ubyte.gz
	"0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056", // train-labels-idx1-ubyte.gz
	"cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa", // t10k-images-idx3-ubyte.gz
	"8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05", // t10k-labels-idx1-ubyte.gz
}

// checkClasses fails unless every class 0..9 has an image in ds, and
// returns the count of each.
func checkClasses(t *testing.T, ds *Dataset) []int {
	t.Helper()
	n := make([]int, Classes)
	for _, l := range ds.Labels {
		n[l]++
	}
	if ds.Classes != Classes || slices.Contains(n, 0) {
		t.Errorf("%s: %d classes, images per class %v", ds.Source, ds.Classes, n)
	}
	return n
}

// TestFashionMNISTSample loads the committed sample: counts, shapes,
// labels, the files' sums (sha256sum of testdata/fashion-mnist/*) and a
// pixel.
func TestFashionMNISTSample(t *testing.T) {
	train, test, files, err := LoadFashionMNIST(fashionSample)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ds         *Dataset
		n          int
		firstLabel int
	}{{train, 40, 9}, {test, 20, 9}} {
		if c.ds.N != c.n || c.ds.Rows != 28 || c.ds.Cols != 28 || c.ds.Labels[0] != c.firstLabel {
			t.Errorf("%s: %d images of %dx%d, first label %d; want %d of 28x28, %d", c.ds.Source, c.ds.N, c.ds.Rows, c.ds.Cols, c.ds.Labels[0], c.n, c.firstLabel)
		}
		if err := c.ds.Check(); err != nil {
			t.Error(err)
		}
		checkClasses(t, c.ds)
	}
	want := []FileSum{
		{TrainImagesFile, 31376, "da85d2cd76d30db2babb9e041e65a1d816fddffe209d55c5e54e14011d309f5e"},
		{TrainLabelsFile, 48, "c261370b929c58742e7077037cfee81f43e5467c55df2c68ee27a677255651b0"},
		{TestImagesFile, 15696, "f38c6626c8c04860dac27cb68f52e3937e119ba78da6c081c86098dfec10b562"},
		{TestLabelsFile, 28, "e21c0184f874cd914238084128c0533d46f5bceb81833fddc8ee3c2fc8a22c2e"},
	}
	if !slices.Equal(files, want) {
		t.Errorf("files\n%+v\nwant\n%+v", files, want)
	}
	// LoadMNISTFiles gives the same sums for any directory of IDX files.
	if _, _, again, err := LoadMNISTFiles(fashionSample); err != nil || !slices.Equal(again, want) {
		t.Errorf("LoadMNISTFiles: %+v, %v", again, err)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFileSumGzip: the sum of a .gz file is that of its compressed bytes,
// whatever follows the IDX stream inside them.
func TestFileSumGzip(t *testing.T) {
	dir := t.TempDir()
	img, lab := synthIDX(3, 2, 2, Classes, 1)
	ib, lb := gzipBytes(t, idxBytes(t, img)), idxBytes(t, lab)
	ip, lp := filepath.Join(dir, "i.gz"), filepath.Join(dir, "l")
	if err := os.WriteFile(ip, ib, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lp, lb, 0o644); err != nil {
		t.Fatal(err)
	}
	_, sums, err := loadDatasetSums(ip, lp, Classes)
	if err != nil {
		t.Fatal(err)
	}
	if sums[0].Name != "i.gz" || sums[0].Bytes != int64(len(ib)) || sums[0].SHA256 != sha256Hex(ib) ||
		sums[1].Name != "l" || sums[1].Bytes != int64(len(lb)) || sums[1].SHA256 != sha256Hex(lb) {
		t.Errorf("sums %+v", sums)
	}
}

// TestFashionMNISTMissing: a missing directory, or one without the files,
// is an error naming the path, the Debian package and the install script.
func TestFashionMNISTMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "fashion-mnist")
	empty := t.TempDir()
	for _, dir := range []string{missing, empty} {
		_, _, _, err := LoadFashionMNIST(dir)
		if err == nil {
			t.Fatalf("%s: no error", dir)
		}
		for _, s := range []string{dir, FashionMNISTPackage, "scripts/install-data.sh"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not name %s", err, s)
			}
		}
	}
	// a corrupt file is a parse error, not an installation hint
	bad := t.TempDir()
	for _, f := range []string{TrainImagesFile, TrainLabelsFile, TestImagesFile, TestLabelsFile} {
		if err := os.WriteFile(filepath.Join(bad, f), []byte("not IDX"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := LoadFashionMNIST(bad); err == nil || !strings.Contains(err.Error(), "magic") || strings.Contains(err.Error(), "install") {
		t.Errorf("corrupt files: %v", err)
	}
}

// TestFashionMNISTInstalled reads the files of Debian's
// dataset-fashion-mnist where it is installed: 60,000 training and 10,000
// test images of 28×28, 10 classes of 6,000 and 1,000, the files' sums,
// and the committed sample is their first images.
func TestFashionMNISTInstalled(t *testing.T) {
	if _, err := os.Stat(filepath.Join(FashionMNISTDir, TrainImagesFile+".gz")); err != nil {
		t.Skipf("%v (Debian's %s: scripts/install-data.sh %s)", err, FashionMNISTPackage, FashionMNISTPackage)
	}
	train, test, files, err := LoadFashionMNIST("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ds       *Dataset
		n, class int
	}{{train, 60000, 6000}, {test, 10000, 1000}} {
		if c.ds.N != c.n || c.ds.Rows != 28 || c.ds.Cols != 28 {
			t.Errorf("%s: %d images of %dx%d, want %d of 28x28", c.ds.Source, c.ds.N, c.ds.Rows, c.ds.Cols, c.n)
		}
		for k, n := range checkClasses(t, c.ds) {
			if n != c.class {
				t.Errorf("%s: class %d has %d images, want %d", c.ds.Source, k, n, c.class)
			}
		}
	}
	var sums []string
	for _, f := range files {
		sums = append(sums, f.SHA256)
	}
	if !slices.Equal(sums, fashionDebianSums) {
		t.Errorf("sums %v\nwant %v (another version of %s?)", sums, fashionDebianSums, FashionMNISTPackage)
	}
	strain, stest, _, err := LoadFashionMNIST(fashionSample)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]*Dataset{{strain, train}, {stest, test}} {
		first, err := Subset(c[1], c[0].N)
		if err != nil {
			t.Fatal(err)
		}
		if first.Hash() != c[0].Hash() {
			t.Errorf("the sample %s is not the first %d images of %s", c[0].Source, c[0].N, c[1].Source)
		}
	}
}
