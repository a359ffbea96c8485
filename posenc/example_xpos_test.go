package posenc_test

import (
	"fmt"
	"math"

	"github.com/rpe-go/rpe/posenc"
)

// xPos multiplies pair p of a score at distance n-m by ζ_p^((n-m)/γ): with
// 8 rotary dims ζ = 0.29, 0.46, 0.64, 0.82, and with the default γ = 512 the
// fastest-rotating pair keeps 9% of its weight after 1000 tokens, the
// slowest 68%. Bidirectional attention is an error.
func ExampleXPos() {
	enc, err := posenc.New("xpos", posenc.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	gamma := enc.(*posenc.XPos).ScaleBase
	zeta := posenc.XPosZeta(8)
	fmt.Printf("ζ = %.2f\n", zeta)
	for _, d := range []float64{0, 100, 1000} {
		fmt.Printf("distance %4g:", d)
		for _, z := range zeta {
			fmt.Printf(" %.3f", math.Pow(z, d/gamma))
		}
		fmt.Println()
	}
	_, err = posenc.New("xpos", posenc.Options{XPosScaleBase: -1})
	fmt.Println(err)
	// Output:
	// ζ = [0.29 0.46 0.64 0.82]
	// distance    0: 1.000 1.000 1.000 1.000
	// distance  100: 0.783 0.861 0.917 0.962
	// distance 1000: 0.087 0.223 0.422 0.681
	// posenc xpos: scale base -1 must be a finite number > 0
}
