package layers_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// A per-node classifier with Graphormer's spatial bias on a batch of one
// path graph 0-1-2 padded to 4 nodes: the relations are hop distances (0
// itself, 1 adjacent, 2), 7 for unreachable and padding pairs
// (graph-max-dist 6: 8 relation ids), and node 3 is masked.
func ExampleGraphTransformer() {
	cfg := layers.DefaultGraphConfig(3)
	cfg.Encoder.Pos = "graphormer-spatial"
	cfg.MaxNodes = 16
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewGraphTransformer(g, p, cfg)
	if err != nil {
		panic(err)
	}
	rel := []int{
		0, 1, 2, 7,
		1, 0, 1, 7,
		2, 1, 0, 7,
		7, 7, 7, 7,
	}
	pos, err := posenc.NewPairwise(1, 4, 4, 8, rel)
	if err != nil {
		panic(err)
	}
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 4, 1), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(1, 4, 1), tensor.WithBacking([]float64{1, 0, 0, 0}))))
	mv, err := m.MaskValue([][]bool{{true, true, true, false}})
	if err != nil {
		panic(err)
	}
	mask := G.NewTensor(g, tensor.Float64, 2, G.WithShape(1, 4), G.WithName("mask"), G.WithValue(mv))
	logits, err := m.Fwd(x, pos, mask, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("logits", logits.Shape())

	// A graph larger than the configured maximum is refused.
	big := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 20, 1), G.WithName("big"), G.WithInit(G.Zeroes()))
	_, err = m.Fwd(big, nil, nil, nil)
	fmt.Println(err)
	// Output:
	// logits (4, 3)
	// graph transformer: graphs have 20 nodes, the configured maximum is 16
}
