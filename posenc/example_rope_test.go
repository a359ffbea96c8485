package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// Each scaling's inverse frequencies θ, position divisor and attention
// factor for 4 rotary dims (base 10000: θ = 1, 1/100), scale s = 4, a model
// trained on L = 8 tokens, evaluated on 16. rope-ntk: base·4^2; rope-dynamic:
// base·(4·16/8 - 3)^2 = base·25; rope-yarn: with L = 8 the slow pair 1
// turns less than once over L, so it is interpolated (θ/4), and q and k grow
// by 0.1 ln 4 + 1.
func ExampleRope() {
	o := posenc.Options{RopeScale: 4, RopeTrainLen: 8}
	for _, name := range []string{"rope", "rope-pi", "rope-ntk", "rope-dynamic", "rope-yarn"} {
		enc, err := posenc.New(name, o)
		if err != nil {
			fmt.Println(err)
			return
		}
		theta, div, attn, err := enc.(*posenc.Rope).Frequencies(4, 16)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-12s θ = [%.4g %.4g]  positions / %g  factor %.4f\n", name, theta[0], theta[1], div, attn)
	}
	// Output:
	// rope         θ = [1 0.01]  positions / 1  factor 1.0000
	// rope-pi      θ = [1 0.01]  positions / 4  factor 1.0000
	// rope-ntk     θ = [1 0.0025]  positions / 1  factor 1.0000
	// rope-dynamic θ = [1 0.002]  positions / 1  factor 1.0000
	// rope-yarn    θ = [1 0.0025]  positions / 1  factor 1.1386
}

// Converting the query (or key) projection of a half-paired model to the
// interleaved pairing: here one row of column labels, 2 heads of 6 dims, 4
// of them rotary. Half pairs (0,2) and (1,3); interleaved pairs (0,1) and
// (2,3); dims 4 and 5 do not rotate.
func ExampleConvertPairing() {
	w := []float64{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15} // [1, 12]
	out, err := posenc.ConvertPairing(w, 2, 6, 4, "half", "interleaved")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
	// Output:
	// [0 2 1 3 4 5 10 12 11 13 14 15]
}
