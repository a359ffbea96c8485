package images

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
)

// Canvas returns a new Dataset whose images are size×size: each image of ds
// is placed on a zero (black) canvas with its top-left corner at row
// (size-Rows)/2 and column (size-Cols)/2 (rounded down: an odd margin puts
// the extra zero row/column at the bottom/right). Labels are copied. It
// returns an error if size is smaller than Rows or Cols, or the result
// would exceed MaxElements pixels.
func Canvas(ds *Dataset, size int) (*Dataset, error) {
	if size < ds.Rows || size < ds.Cols {
		return nil, errors.Errorf("canvas: size %d is smaller than the %dx%d images", size, ds.Rows, ds.Cols)
	}
	if err := checkElements("canvas", ds.N, size, size); err != nil {
		return nil, err
	}
	out := newLike(ds, size, size, fmt.Sprintf("canvas %d", size))
	top, left := (size-ds.Rows)/2, (size-ds.Cols)/2
	for i := 0; i < ds.N; i++ {
		src, dst := ds.Image(i), out.Image(i)
		for r := 0; r < ds.Rows; r++ {
			copy(dst[(top+r)*size+left:], src[r*ds.Cols:(r+1)*ds.Cols])
		}
	}
	return out, nil
}

// Upscale returns a new Dataset whose images are (factor*Rows)×(factor*Cols),
// enlarged by bilinear interpolation with align_corners=False, the default
// of PyTorch's F.interpolate(mode="bilinear") and of most image libraries:
// output pixel o samples source coordinate (o+0.5)/factor - 0.5, clamped
// below at 0; its two neighbours are floor of that and the next pixel
// (the last pixel repeats at the far edge). Interpolation weights are
// computed in float64 and the result rounded to float32. Values stay in
// [0, 1] (each output is a convex combination of inputs). Bilinear rather
// than nearest, because a model trained at 28×28 sees smooth strokes, and
// nearest would turn each pixel into a factor×factor block of a texture
// never seen in training. factor 1 returns a copy. It returns an error if
// factor < 1 or the result would exceed MaxElements pixels.
func Upscale(ds *Dataset, factor int) (*Dataset, error) {
	if factor < 1 {
		return nil, errors.Errorf("upscale: factor %d must be at least 1", factor)
	}
	if tooMany(ds.N, ds.Rows, ds.Cols, factor, factor) {
		return nil, errors.Errorf("upscale: %d images of %dx%d enlarged %d times exceed the limit of %d pixels", ds.N, ds.Rows, ds.Cols, factor, MaxElements)
	}
	R, C := ds.Rows*factor, ds.Cols*factor
	out := newLike(ds, R, C, fmt.Sprintf("upscale x%d bilinear", factor))
	r0, r1, rw := bilinearTaps(ds.Rows, factor)
	c0, c1, cw := bilinearTaps(ds.Cols, factor)
	for i := 0; i < ds.N; i++ {
		src, dst := ds.Image(i), out.Image(i)
		for y := 0; y < R; y++ {
			top, bot := src[r0[y]*ds.Cols:], src[r1[y]*ds.Cols:]
			wy := rw[y]
			for x := 0; x < C; x++ {
				wx := cw[x]
				t := (1-wx)*float64(top[c0[x]]) + wx*float64(top[c1[x]])
				b := (1-wx)*float64(bot[c0[x]]) + wx*float64(bot[c1[x]])
				dst[y*C+x] = float32((1-wy)*t + wy*b)
			}
		}
	}
	return out, nil
}

// bilinearTaps returns, for each of the n*factor outputs along one axis,
// the two source indices and the weight of the second (PyTorch's
// area_pixel_compute_source_index with align_corners=False).
func bilinearTaps(n, factor int) (i0, i1 []int, w []float64) {
	m := n * factor
	i0, i1, w = make([]int, m), make([]int, m), make([]float64, m)
	for o := 0; o < m; o++ {
		s := (float64(o)+0.5)/float64(factor) - 0.5
		if s < 0 {
			s = 0
		}
		a := int(math.Floor(s))
		b := a
		if a < n-1 {
			b = a + 1
		}
		i0[o], i1[o], w[o] = a, b, s-float64(a)
	}
	return i0, i1, w
}

func checkElements(op string, n, rows, cols int) error {
	if rows <= 0 || cols <= 0 || tooMany(n, rows, cols) {
		return errors.Errorf("%s: %d images of %dx%d exceed the limit of %d pixels", op, n, rows, cols, MaxElements)
	}
	return nil
}

// newLike returns a zero Dataset of ds.N images of rows×cols with ds's
// labels copied.
func newLike(ds *Dataset, rows, cols int, what string) *Dataset {
	return &Dataset{N: ds.N, Rows: rows, Cols: cols, Classes: ds.Classes,
		Images: make([]float32, ds.N*rows*cols), Labels: append([]int(nil), ds.Labels...),
		Source: ds.Source + " [" + what + "]"}
}
