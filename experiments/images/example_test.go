package images_test

import (
	"fmt"

	"github.com/rpe-go/rpe/experiments/images"
)

// A 4×4 image cut into 2×2 patches: four patches in raster order of the
// 2×2 patch grid, each holding its pixels row-major.
func ExamplePatches() {
	ds := &images.Dataset{N: 1, Rows: 4, Cols: 4, Classes: 10, Labels: []int{7}}
	for k := 0; k < 16; k++ {
		ds.Images = append(ds.Images, float32(k)/16)
	}
	dst := make([]float32, 16)
	gr, gc, err := images.Patches(ds, 0, 2, dst)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("grid %dx%d\n", gr, gc)
	for t := 0; t < gr*gc; t++ {
		fmt.Printf("patch %d: %v\n", t, scaled(dst[4*t:4*t+4]))
	}
	_, _, err = images.Patches(ds, 0, 3, dst)
	fmt.Println(err)
	// Output:
	// grid 2x2
	// patch 0: [0 1 4 5]
	// patch 1: [2 3 6 7]
	// patch 2: [8 9 12 13]
	// patch 3: [10 11 14 15]
	// image 4x4 is not divisible by patch size 3
}

// scaled returns v*16 as ints, the pixel numbers of the example image.
func scaled(v []float32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x * 16)
	}
	return out
}
