package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// The clipped relative index of Shaw et al. for 3 queries at positions 2..4
// attending to 5 keys at positions 0..4, with K = 2: row i holds
// clamp(j - (2+i), -2, 2) + 2.
func ExampleShawIndex() {
	span := posenc.Span{QStart: 2, TQ: 3, KStart: 0, TK: 5}
	idx := posenc.ShawIndex(span, 2)
	for i := 0; i < span.TQ; i++ {
		fmt.Println(idx[i*span.TK : (i+1)*span.TK])
	}
	// Output:
	// [0 1 2 3 4]
	// [0 0 1 2 3]
	// [0 0 0 1 2]
}

// An attention layer with Shaw's encoding creates a key and a value table
// [2K+1, dh] for the layer, shared by its heads, and with Alpha a scale of
// the key terms; "shaw-scalar" creates one bias table [2K+1, H] and its
// scale instead.
func ExampleShaw() {
	for _, name := range []string{"shaw", "shaw-scalar"} {
		enc, err := posenc.New(name, posenc.Options{ShawK: 3, Alpha: true})
		if err != nil {
			panic(err)
		}
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.02, Causal: true, Pos: enc})
		if err != nil {
			panic(err)
		}
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 5, 8), G.WithName("x"))
		y, err := a.Fwd(x, nil, posenc.Span{TQ: 5, TK: 5}, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(name, "output", y.Shape())
		for _, n := range p.Names() {
			if info, _ := p.Info(n); !shawIsProjection(n) {
				fmt.Println(" ", n, info.Shape)
			}
		}
	}
	// Output:
	// shaw output (1, 5, 8)
	//   block0/attn/shaw_k (7, 4)
	//   block0/attn/shaw_k_alpha (1)
	//   block0/attn/shaw_v (7, 4)
	// shaw-scalar output (1, 5, 8)
	//   block0/attn/shaw_bias (7, 2)
	//   block0/attn/shaw_alpha (1)
}

// shawIsProjection reports whether parameter n belongs to the attention's own
// projections.
func shawIsProjection(n string) bool {
	switch n[len(n)-2:] {
	case "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo":
		return true
	}
	return false
}
