package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// ExampleCPE adds the PEG to a 2×3 grid of one-channel tokens, with a 3×3
// kernel that sums the four neighbours (up, down, left, right) and no bias:
// each token gains its neighbours' values, and the zero padding shows where
// the border is.
func ExampleCPE() {
	enc, _ := posenc.NewCPE(3, 1)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	grid, _ := posenc.NewGrid(2, 3)
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 6, 1), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(1, 6, 1), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))))
	s := &posenc.Site{G: g, Params: p, Layer: 0, B: 1, H: 1, DHead: 1, DModel: 1, Span: posenc.Span{TQ: 6, TK: 6}, Pos: grid}
	y, err := enc.AfterBlock(s, x)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Set("cpe/w", []float64{0, 1, 0, 1, 0, 1, 0, 1, 0}) // [k², d], row (dy+1)*3 + dx+1
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(y.Value().Data())
	// Output:
	// [7 11 11 10 17 14]
}
