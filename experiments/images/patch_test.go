package images

import (
	"slices"
	"testing"
)

// iota fills a dataset of n images with pixel k of image i = (i*rows*cols+k)/1000.
func iotaDS(n, rows, cols int) *Dataset {
	ds := &Dataset{N: n, Rows: rows, Cols: cols, Classes: 10, Images: make([]float32, n*rows*cols), Labels: make([]int, n)}
	for k := range ds.Images {
		ds.Images[k] = float32(k)
	}
	return ds
}

func TestPatches(t *testing.T) {
	ds := iotaDS(2, 4, 6) // image 1: values 24..47
	dst := make([]float32, 24)
	gr, gc, err := Patches(ds, 1, 2, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{
		24, 25, 30, 31, // patch (0,0)
		26, 27, 32, 33, // patch (0,1)
		28, 29, 34, 35, // patch (0,2)
		36, 37, 42, 43, // patch (1,0)
		38, 39, 44, 45,
		40, 41, 46, 47,
	}
	if gr != 2 || gc != 3 || !slices.Equal(dst, want) {
		t.Fatalf("grid %dx%d, %v", gr, gc, dst)
	}
	// The pixel (r, c) is at patch (r/P)*gc + c/P, position (r%P)*P + c%P.
	for _, p := range []int{1, 2} {
		gr, gc, err := Patches(ds, 0, p, dst)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < ds.Rows; r++ {
			for c := 0; c < ds.Cols; c++ {
				k := ((r/p)*gc+c/p)*p*p + (r%p)*p + c%p
				if dst[k] != ds.Image(0)[r*ds.Cols+c] {
					t.Fatalf("patch %d: pixel (%d, %d) not at %d (grid %dx%d)", p, r, c, k, gr, gc)
				}
			}
		}
	}
	for _, tc := range []struct {
		i, patch, n int
		want        string
	}{
		{0, 4, 24, "image 4x6 is not divisible by patch size 4"},
		{0, 0, 24, "patch size 0"},
		{2, 2, 24, "image 2 out of range"},
		{0, 2, 23, "dst has length 23, want 24 (6 patches x 4 pixels)"},
	} {
		_, _, err := Patches(ds, tc.i, tc.patch, make([]float32, tc.n))
		wantErr(t, err, tc.want)
	}
	_, _, err = Patches(synth(t, 1, 28, 28, 1), 0, 5, make([]float32, 784))
	wantErr(t, err, "image 28x28 is not divisible by patch size 5")
}

func TestPatchBatch(t *testing.T) {
	ds := iotaDS(3, 4, 4)
	idx := []int{2, 0}
	dst := make([]float32, 32)
	gr, gc, err := PatchBatch(ds, idx, 2, dst)
	if err != nil || gr != 2 || gc != 2 {
		t.Fatal(gr, gc, err)
	}
	one := make([]float32, 16)
	for b, i := range idx {
		Patches(ds, i, 2, one)
		if !slices.Equal(dst[b*16:(b+1)*16], one) {
			t.Fatalf("batch item %d differs from Patches of image %d", b, i)
		}
	}
	_, _, err = PatchBatch(ds, []int{0, 3}, 2, dst)
	wantErr(t, err, "index 3 (batch position 1) out of range")
	_, _, err = PatchBatch(ds, idx, 2, dst[:31])
	wantErr(t, err, "dst has length 31, want 32")
}
