package images

import (
	"bytes"
	"compress/gzip"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idxBytes encodes x uncompressed, failing the test on error.
func idxBytes(t testing.TB, x *IDX) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteIDX(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gzipBytes compresses b.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	z := gzip.NewWriter(&out)
	if _, err := z.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// synthIDX returns n random images of rows×cols and their labels < classes.
func synthIDX(n, rows, cols, classes int, seed uint64) (images, labels *IDX) {
	rng := rand.New(rand.NewPCG(seed, 1))
	images = &IDX{Dims: []int{n, rows, cols}, Data: make([]byte, n*rows*cols)}
	labels = &IDX{Dims: []int{n}, Data: make([]byte, n)}
	for i := range images.Data {
		images.Data[i] = byte(rng.IntN(256))
	}
	for i := range labels.Data {
		labels.Data[i] = byte(rng.IntN(classes))
	}
	return images, labels
}

// synth returns a random Dataset of n images of rows×cols and 10 classes.
func synth(t testing.TB, n, rows, cols int, seed uint64) *Dataset {
	t.Helper()
	img, lab := synthIDX(n, rows, cols, Classes, seed)
	ds, err := FromIDX(img, lab, Classes, "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// writeFile writes b to dir/name.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantErr fails unless err is non-nil and contains every part.
func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
