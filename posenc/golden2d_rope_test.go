package posenc_test

import (
	"strconv"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DRope matches rope-2d and rope-mixed with the PyTorch
// references of testdata/golden/gen_golden_rope.py (written from rope-vit's
// compute_axial_cis, compute_mixed_cis and apply_rotary_emb, float64): the
// rotated q and k and the gradients of a fixed random linear functional of
// them w.r.t. q, k and (rope-mixed) the frequencies.
func TestGolden2DRope(t *testing.T) {
	for _, name := range []string{"2d-rope-axial", "2d-rope-axial-cross", "2d-rope-mixed", "2d-rope-mixed-cross"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, h, dh, rows, cols := atoi("B"), atoi("H"), atoi("dh"), atoi("rows"), atoi("cols")
			base, err := strconv.ParseFloat(gc.meta["base"], 64)
			if err != nil {
				t.Fatal(err)
			}
			pos := gc.meta["pos"]
			o := posenc.Options{Rope2DBase: base, RopeMixedBase: base}
			enc, err := posenc.New(pos, o)
			if err != nil {
				t.Fatal(err)
			}
			grid, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["q_coords"], gc.ints["k_coords"])
			if err != nil {
				t.Fatal(err)
			}
			vals := func(n string, shape []int) []float64 {
				if !tensor.Shape(gc.shapes[n]).Eq(tensor.Shape(shape)) {
					t.Fatalf("golden %s has shape %v, want %v", n, gc.shapes[n], shape)
				}
				return gc.floats[n]
			}
			r := buildRope2D(t, enc, grid, b, h, dh, tensor.Float64, vals, gc.floats["freqs"])
			if pos == posenc.RopeMixedName && len(r.wrt) != 3 {
				t.Fatalf("wrt %v: the frequencies are missing", r.wrt)
			}
			q2, k2, grads := r.run(t)
			closeTo(t, name+" q_out", q2, gc.floats["q_out"], 1e-5)
			closeTo(t, name+" k_out", k2, gc.floats["k_out"], 1e-5)
			for i, n := range r.wrt {
				want := "grad/" + n.Name()
				if n.Name() == r.freqName {
					want = "grad/freqs"
				}
				if gc.floats[want] == nil {
					t.Fatalf("golden file has no %s", want)
				}
				closeTo(t, name+" "+want, grads[i], gc.floats[want], 1e-5)
			}
		})
	}
}

// TestGolden2DRopeMixedInit: RopeMixedFreqs gives rope-vit's
// init_random_2d_freqs for the golden per-head angles.
func TestGolden2DRopeMixedInit(t *testing.T) {
	gc := readGoldenCase(t, "2d-rope-mixed-init")
	dh, err := strconv.Atoi(gc.meta["dh"])
	if err != nil {
		t.Fatal(err)
	}
	base, err := strconv.ParseFloat(gc.meta["base"], 64)
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "init freqs", posenc.RopeMixedFreqs(base, dh, gc.floats["alpha"]), gc.floats["freqs"], 1e-12)
}
