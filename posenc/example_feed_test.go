package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// A graph built once serves every batch of per-example relations: the
// positions carry a Feed, the encoding registers its relation ids in it,
// and Bind rebinds them before each run. Here a tree bias (relations
// clipped at 1 step up and 0 down: 2 relation ids) over 3 tokens, with the
// table set to 0 for relation 0 and -1 for relation 1.
func ExampleFeed() {
	tree, _ := posenc.NewTreeRel(1, 0, 0.02, false)

	first, _ := posenc.NewPairwise(1, 3, 3, 2, []int{0, 1, 1, 0, 0, 1, 0, 0, 0})
	first.Feed = posenc.NewFeed()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 1, DHead: 2, DModel: 2,
		Span: posenc.Span{TQ: 3, TK: 3}, Pos: first}
	bias, err := tree.ScoreBias(s) // [1, 1, 3, 3]
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Set("block0/attn/tree_bias", []float64{0, -1})
	m := G.NewTapeMachine(g)
	defer m.Close()
	for _, rel := range [][]int{{0, 1, 1, 0, 0, 1, 0, 0, 0}, {0, 0, 0, 1, 0, 0, 1, 1, 0}} {
		next, _ := posenc.NewPairwise(1, 3, 3, 2, rel)
		if err := first.Feed.Bind(next); err != nil {
			fmt.Println(err)
			return
		}
		if err := m.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(bias.Value().Data())
		m.Reset()
	}
	wrong, _ := posenc.NewPairwise(1, 2, 2, 2, []int{0, 0, 0, 0})
	fmt.Println(first.Feed.Bind(wrong))
	// Output:
	// [0 -1 -1 0 0 -1 0 0 0]
	// [0 0 0 -1 0 0 -1 -1 0]
	// posenc: feed: the tree relation ids were built for pairwise positions of batch 1, 3 queries and 3 keys; got pairwise positions of batch 1, 2 queries and 2 keys
}
