package images

import "github.com/pkg/errors"

// Grid returns the patch grid (gridRows, gridCols) = (Rows/patch,
// Cols/patch) of ds's images. It returns an error if patch is not positive
// or does not divide Rows and Cols.
func Grid(ds *Dataset, patch int) (gridRows, gridCols int, err error) {
	if patch <= 0 {
		return 0, 0, errors.Errorf("patch size %d must be positive", patch)
	}
	if ds.Rows%patch != 0 || ds.Cols%patch != 0 {
		return 0, 0, errors.Errorf("image %dx%d is not divisible by patch size %d", ds.Rows, ds.Cols, patch)
	}
	return ds.Rows / patch, ds.Cols / patch, nil
}

// Patches writes image i of ds into dst as a sequence of T =
// gridRows*gridCols patches of patch*patch pixels, [T, patch*patch]
// row-major: patch t = gr*gridCols + gc (raster order over the grid, patch
// rows then patch columns) holds pixels (gr*patch+y, gc*patch+x) at
// position y*patch + x. This is the input of a ViT patch embedding. dst
// must have length Rows*Cols. It returns the grid, or an error if patch
// does not divide Rows and Cols, i is out of range or dst has the wrong
// length.
func Patches(ds *Dataset, i, patch int, dst []float32) (gridRows, gridCols int, err error) {
	gr, gc, err := Grid(ds, patch)
	if err != nil {
		return 0, 0, err
	}
	if i < 0 || i >= ds.N {
		return 0, 0, errors.Errorf("patches: image %d out of range [0, %d)", i, ds.N)
	}
	if len(dst) != ds.Pixels() {
		return 0, 0, errors.Errorf("patches: dst has length %d, want %d (%d patches x %d pixels)", len(dst), ds.Pixels(), gr*gc, patch*patch)
	}
	patchify(ds.Image(i), ds.Cols, gr, gc, patch, dst)
	return gr, gc, nil
}

// PatchBatch writes the images idx of ds into dst as [B, T, patch*patch]
// (B = len(idx); each image as Patches writes it) and returns the grid. dst
// must have length B*Rows*Cols. It returns an error as Patches does, naming
// the first out-of-range index.
func PatchBatch(ds *Dataset, idx []int, patch int, dst []float32) (gridRows, gridCols int, err error) {
	gr, gc, err := Grid(ds, patch)
	if err != nil {
		return 0, 0, err
	}
	p := ds.Pixels()
	if len(dst) != len(idx)*p {
		return 0, 0, errors.Errorf("patch batch: dst has length %d, want %d (%d images x %d patches x %d pixels)", len(dst), len(idx)*p, len(idx), gr*gc, patch*patch)
	}
	for b, i := range idx {
		if i < 0 || i >= ds.N {
			return 0, 0, errors.Errorf("patch batch: index %d (batch position %d) out of range [0, %d)", i, b, ds.N)
		}
	}
	for b, i := range idx {
		patchify(ds.Image(i), ds.Cols, gr, gc, patch, dst[b*p:(b+1)*p])
	}
	return gr, gc, nil
}

// patchify rearranges img [gr*patch, gc*patch] into dst [gr*gc, patch*patch].
func patchify(img []float32, cols, gr, gc, patch int, dst []float32) {
	k := 0
	for pr := 0; pr < gr; pr++ {
		for pc := 0; pc < gc; pc++ {
			for y := 0; y < patch; y++ {
				row := (pr*patch+y)*cols + pc*patch
				k += copy(dst[k:k+patch], img[row:row+patch])
			}
		}
	}
}
