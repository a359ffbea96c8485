package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The slopes of 6 heads: those of 4 heads, then every other slope of 8.
func ExampleAlibiSlopes() {
	for _, m := range posenc.AlibiSlopes(6) {
		fmt.Printf("%g ", m)
	}
	fmt.Println()
	// Output:
	// 0.25 0.0625 0.015625 0.00390625 0.5 0.125
}

// A left-padded batch: row 0 has two padding tokens before three real ones.
// Positions count real tokens only, and the causal ALiBi bias among the real
// tokens of row 0 is that of an unpadded 3-token sequence (the padding mask
// must still hide the padded keys).
func ExamplePositionsFromPadding() {
	valid := [][]bool{
		{false, false, true, true, true},
		{true, true, true, true, true},
	}
	pos := posenc.PositionsFromPadding(valid)
	fmt.Println(pos)

	g := G.NewGraph()
	bias, err := posenc.NewAlibi().BiasFromPositions(g, tensor.Float64, 2, pos, pos, true) // [B, H, T, T]
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bias.Shape())
	v := graph.ToFloat64s(bias.Value())
	// head 0 (slope 1/16) of row 0: queries and keys 2..4 are the real tokens
	for i := 2; i < 5; i++ {
		fmt.Println(v[i*5+2 : i*5+5])
	}
	// Output:
	// [[0 0 0 1 2] [0 1 2 3 4]]
	// (2, 2, 5, 5)
	// [0 0.0625 0.125]
	// [-0.0625 0 0.0625]
	// [-0.125 -0.0625 0]
}
