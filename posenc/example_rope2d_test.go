package posenc_test

import (
	"fmt"
	"math"

	"github.com/rpe-go/rpe/posenc"
)

// The angles by which rope-2d turns the 4 rotation pairs of an 8-dim head
// for the patch at row 2, column 3 (base 100: θ = 1, 0.1). The column
// pairs come first, as in rope-vit's compute_axial_cis.
func ExampleRope2DAngles() {
	cos, sin := posenc.Rope2DAngles([]int{2, 3}, 8, 100)
	for p := range cos {
		fmt.Printf("pair %d turns by %.2f\n", p, math.Atan2(sin[p], cos[p]))
	}
	// Output:
	// pair 0 turns by 3.00
	// pair 1 turns by 0.30
	// pair 2 turns by 2.00
	// pair 3 turns by 0.20
}

// rope-mixed's initial frequencies for one head of 8 dims (base 10:
// magnitudes 1 and 10^-0.5) and rotation angle α = π/2: the first two pairs
// turn with the row (fy) only, the other two against the column (fx < 0).
// With α = 0 they would be rope-2d's axial frequencies.
func ExampleRopeMixedFreqs() {
	f := posenc.RopeMixedFreqs(10, 8, []float64{math.Pi / 2}) // [2, 1, 4]
	fmt.Printf("fx %.3f\nfy %.3f\n", f[:4], f[4:])
	// Output:
	// fx [0.000 0.000 -1.000 -0.316]
	// fy [1.000 0.316 0.000 0.000]
}
