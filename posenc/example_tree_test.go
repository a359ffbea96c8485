package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The tree bias of one head for three tokens whose innermost syntax nodes
// are a call x(y): token 0 is the call, tokens 1 and 2 its children. With
// MaxUp = MaxDown = 1 there are 4 relations, id = up*2 + down: 0 (same
// node), 1 (one step down), 2 (one step up), 3 (up and down: siblings). The
// table row of each relation is set to 10*id, so the bias shows the ids.
func ExampleTreeRel() {
	enc, err := posenc.NewTreeRel(1, 1, 0.02, false)
	if err != nil {
		panic(err)
	}
	rel := []int{
		0, 1, 1, // the call to itself, down to each child
		2, 0, 3, // child 1: up to the call, itself, to its sibling
		2, 3, 0,
	}
	pos, err := posenc.NewPairwise(1, 3, 3, posenc.TreeRelations(1, 1), rel)
	if err != nil {
		panic(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 1, DHead: 4, DModel: 4,
		Span: posenc.Span{TQ: 3, TK: 3}, Pos: pos, Causal: true}
	bias, err := enc.ScoreBias(site) // [1, H, Tq, Tk]
	if err != nil {
		panic(err)
	}
	if err := p.Set("block0/attn/tree_bias", []float64{0, 10, 20, 30}); err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	fmt.Println(bias.Shape())
	v := graph.ToFloat64s(bias.Value())
	for i := 0; i < 3; i++ {
		fmt.Println(v[3*i : 3*i+3])
	}
	// relations built with other bounds do not fit the table
	other, _ := posenc.NewPairwise(1, 3, 3, posenc.TreeRelations(4, 4), rel)
	site.Pos = other
	_, err = enc.ScoreBias(site)
	fmt.Println(err)
	// Output:
	// (1, 1, 3, 3)
	// [0 10 10]
	// [20 0 30]
	// [20 30 0]
	// posenc tree: positions have 25 relation ids, the table has (max up 1 + 1)*(max down 1 + 1) = 4 rows: build the relations with the same bounds
}
