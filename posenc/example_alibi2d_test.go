package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The 2-D ALiBi bias of the first of 2 heads (slope 2^-4) for a query at
// the corner of a 2×3 grid: -m·(Euclidean distance to each key).
func ExampleAlibi2D() {
	enc, err := posenc.New("alibi-2d", posenc.Options{})
	if err != nil {
		panic(err)
	}
	grid, _ := posenc.NewGrid(2, 3)
	g := G.NewGraph()
	site := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{TQ: 6, TK: 6}, Pos: grid}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site) // [H, Tq, Tk]
	if err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	v := graph.ToFloat64s(bias.Value())
	fmt.Println("slopes", posenc.AlibiSlopes(2))
	for kr := 0; kr < 2; kr++ {
		for kc := 0; kc < 3; kc++ {
			fmt.Printf(" %8.5f", v[kr*3+kc]) // head 0, query 0 at (0, 0)
		}
		fmt.Println()
	}
	// Output:
	// slopes [0.0625 0.00390625]
	//   0.00000 -0.06250 -0.12500
	//  -0.06250 -0.08839 -0.13975
}
