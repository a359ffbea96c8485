package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The PEG on a 2×3 grid with one channel: with every 3×3 tap 1 and bias 0,
// each token becomes x + the sum of x over its 3×3 window, and the zero
// padding shows: on an all-ones input the corners see 4 tokens and the
// middle column 6. The neighbour table lists, for token 0 at (0, 0), the
// token of each tap (u, v) in raster order, -1 off the grid.
func ExampleCPE() {
	pos, _ := posenc.NewGrid(2, 3)
	nbr, _ := posenc.GridNeighbours(pos, 3)
	fmt.Println("token 0 taps:", nbr[:9])

	enc, _ := posenc.NewCPE(3, 1)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	ones := []float64{1, 1, 1, 1, 1, 1}
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 6, 1), G.WithName("x"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{1, 6, 1}, ones)))
	s := &posenc.Site{G: g, Params: p, Layer: 0, B: 1, H: 1, DHead: 1, DModel: 1,
		Span: posenc.Span{TQ: 6, TK: 6}, Pos: pos}
	y, err := enc.AfterBlock(s, x) // after block 1 (Layer 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Set("cpe/w", []float64{1, 1, 1, 1, 1, 1, 1, 1, 1}) // [k*k, d]
	_ = p.Set("cpe/b", []float64{0})
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("y:", graph.ToFloat64s(y.Value()))
	fmt.Println(p.Names())
	// Output:
	// token 0 taps: [-1 -1 -1 -1 0 1 -1 3 4]
	// y: [5 7 5 5 7 5]
	// [cpe/w cpe/b]
}
