package layers

import (
	"math/rand"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// TestSlideBufShift checks the cache window that slides over its buffer
// (slideBuf.shift) against the rows slid over the window (slideRows): at
// every step a new key is written into each sequence's room (row W-1, as
// graph.WriteTail does) and both caches slide; the rows each sequence
// attends to (its filled slots) must then be equal, for several batch
// sizes and windows, over enough steps to copy the window back to the
// start of its buffer several times.
func TestSlideBufShift(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, b := range []int{1, 3} {
			for _, w := range []int{2, 3, 6} {
				const d = 2
				m := w - 1
				c := newSlideBuf(dt, b, w, d)
				ref := make([]float64, b*w*d)
				filled := make([]int, b)
				ids := make([]int, b)
				for step := 0; step < 5*w+3; step++ {
					for i := 0; i < b; i++ {
						row := []float64{rng.Float64(), rng.Float64()}
						copy(ref[(i*w+m)*d:], row)
						view := graphFloats(c.view)
						copy(view[(i*w+m)*d:], row)
						if dt == tensor.Float32 {
							c.view.Data().([]float32)[(i*w+m)*d] = float32(row[0])
							c.view.Data().([]float32)[(i*w+m)*d+1] = float32(row[1])
							ref[(i*w+m)*d], ref[(i*w+m)*d+1] = float64(float32(row[0])), float64(float32(row[1]))
						}
					}
					slideRows(ref, ids, w, 0, filled)
					if err := c.shift(); err != nil {
						t.Fatal(err)
					}
					for i := range filled {
						filled[i] = min(m, filled[i]+1)
					}
					got := graphFloats(c.view)
					for i := 0; i < b; i++ {
						lo, hi := (i*w+m-filled[i])*d, (i*w+m)*d
						if !slices.Equal(got[lo:hi], ref[lo:hi]) {
							t.Fatalf("%v B=%d W=%d step %d sequence %d: window %v, slid rows %v", dt, b, w, step, i, got[lo:hi], ref[lo:hi])
						}
					}
				}
			}
		}
	}
}

// graphFloats returns the values of v as float64 (a copy for float32, the
// data itself for float64).
func graphFloats(v *tensor.Dense) []float64 {
	switch x := v.Data().(type) {
	case []float64:
		return x
	case []float32:
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return out
	}
	return nil
}
