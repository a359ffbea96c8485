package images

import (
	"math"
	"slices"
	"testing"
)

// fromValues builds a one-image dataset of rows×cols with the given pixels.
func fromValues(rows, cols int, v ...float32) *Dataset {
	return &Dataset{N: 1, Rows: rows, Cols: cols, Classes: 10, Images: v, Labels: []int{3}, Source: "values"}
}

func TestCanvas(t *testing.T) {
	ds := fromValues(2, 3, 1, 2, 3, 4, 5, 6)
	for _, tc := range []struct {
		size int
		want []float32
	}{
		{3, []float32{1, 2, 3, 4, 5, 6, 0, 0, 0}},
		{4, []float32{0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}},
		{5, []float32{
			0, 0, 0, 0, 0,
			0, 1, 2, 3, 0,
			0, 4, 5, 6, 0,
			0, 0, 0, 0, 0,
			0, 0, 0, 0, 0}},
	} {
		got, err := Canvas(ds, tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows != tc.size || got.Cols != tc.size || !slices.Equal(got.Images, tc.want) || got.Labels[0] != 3 {
			t.Errorf("size %d: got %v", tc.size, got.Images)
		}
	}
	_, err := Canvas(ds, 2)
	wantErr(t, err, "size 2 is smaller than the 2x3 images")
	_, err = Canvas(synth(t, 4, 2, 2, 1), 1<<16)
	wantErr(t, err, "exceed the limit")
}

func closeFloats(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol {
			return false
		}
	}
	return true
}

// TestUpscale compares with PyTorch: F.interpolate(x, scale_factor=f,
// mode="bilinear", align_corners=False).
func TestUpscale(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ds         *Dataset
		factor     int
		rows, cols int
		want       []float32
	}{
		{"2x2 by 2", fromValues(2, 2, 0, 1, 2, 3), 2, 4, 4, []float32{
			0.00, 0.25, 0.75, 1.00,
			0.50, 0.75, 1.25, 1.50,
			1.50, 1.75, 2.25, 2.50,
			2.00, 2.25, 2.75, 3.00}},
		{"1x2 by 3", fromValues(1, 2, 0, 1), 3, 3, 6, []float32{
			0, 0, 1. / 3, 2. / 3, 1, 1,
			0, 0, 1. / 3, 2. / 3, 1, 1,
			0, 0, 1. / 3, 2. / 3, 1, 1}},
		{"3x1 by 2", fromValues(3, 1, 0, 1, 0), 2, 6, 2, []float32{0, 0, 0.25, 0.25, 0.75, 0.75, 0.75, 0.75, 0.25, 0.25, 0, 0}},
		{"by 1", fromValues(1, 2, 0.5, 0.25), 1, 1, 2, []float32{0.5, 0.25}},
	} {
		got, err := Upscale(tc.ds, tc.factor)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows != tc.rows || got.Cols != tc.cols || !closeFloats(got.Images, tc.want, 1e-6) {
			t.Errorf("%s: got %dx%d %v, want %dx%d %v", tc.name, got.Rows, got.Cols, got.Images, tc.rows, tc.cols, tc.want)
		}
	}
	ds := synth(t, 3, 4, 5, 2)
	up, err := Upscale(ds, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Check(); err != nil { // values stay in [0, 1]
		t.Fatal(err)
	}
	if !slices.Equal(up.Labels, ds.Labels) {
		t.Error("labels changed")
	}
	_, err = Upscale(ds, 0)
	wantErr(t, err, "factor 0")
	_, err = Upscale(ds, 1<<40)
	wantErr(t, err, "exceed the limit")
}

func TestSubset(t *testing.T) {
	ds := synth(t, 5, 2, 3, 1)
	s, err := Subset(ds, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 2 || !slices.Equal(s.Images, ds.Images[:12]) || !slices.Equal(s.Labels, ds.Labels[:2]) {
		t.Fatalf("subset %+v", s)
	}
	s.Images[0] = 0.5
	if ds.Images[0] == 0.5 && s.Images[0] == ds.Images[0] {
		t.Error("subset shares memory with the dataset")
	}
	for _, n := range []int{0, 6, -1} {
		_, err := Subset(ds, n)
		wantErr(t, err, "want 1 to 5")
	}
}
