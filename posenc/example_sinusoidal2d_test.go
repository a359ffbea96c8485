package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// MAE's 2-D sine-cosine table for d = 4 (one frequency, ω = 1): the column
// comes first, [sin c, cos c, sin r, cos r]. The hook multiplies it by
// Options.SinusoidalScale (default 1/√d).
func ExampleSinusoid2DTable() {
	grid, _ := posenc.NewGrid(2, 2) // (0,0) (0,1) (1,0) (1,1)
	tab, _ := posenc.Sinusoid2DTable(grid.QCoords, 4)
	for i := 0; i < 4; i++ {
		fmt.Printf("(r %d, c %d) %+.4f\n", grid.QCoords[2*i], grid.QCoords[2*i+1], tab[i*4:(i+1)*4])
	}
	_, err := posenc.Sinusoid2DTable(grid.QCoords, 6)
	fmt.Println(err)
	// Output:
	// (r 0, c 0) [+0.0000 +1.0000 +0.0000 +1.0000]
	// (r 0, c 1) [+0.8415 +0.5403 +0.0000 +1.0000]
	// (r 1, c 0) [+0.0000 +1.0000 +0.8415 +0.5403]
	// (r 1, c 1) [+0.8415 +0.5403 +0.8415 +0.5403]
	// posenc sinusoidal-2d: width 6 is not a positive multiple of 4 (sin and cos of rows and columns)
}
