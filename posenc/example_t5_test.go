package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// T5's buckets with the default 32 buckets and max distance 128: exact up to
// distance 15 (causal) or 7 (bidirectional), then logarithmic. Causal
// attention puts every future key (rel > 0) in bucket 0; bidirectional
// attention gives them the upper half of the buckets.
func ExampleT5Bucket() {
	for _, rel := range []int{-200, -20, -8, -3, 0, 3, 8, 20, 200} {
		fmt.Printf("rel %4d: causal %2d, bidirectional %2d\n", rel,
			posenc.T5Bucket(rel, false, 32, 128), posenc.T5Bucket(rel, true, 32, 128))
	}
	// Output:
	// rel -200: causal 31, bidirectional 15
	// rel  -20: causal 17, bidirectional 10
	// rel   -8: causal  8, bidirectional  8
	// rel   -3: causal  3, bidirectional  3
	// rel    0: causal  0, bidirectional  0
	// rel    3: causal  0, bidirectional 19
	// rel    8: causal  0, bidirectional 24
	// rel   20: causal  0, bidirectional 26
	// rel  200: causal  0, bidirectional 31
}

// The T5 score bias of one head, for 6 causal positions with 8 buckets (4
// exact) and max distance 16. The table is set so that head 0's bias equals
// the bucket number; distance 4 and 5 share bucket 4. Attention adds the bias
// to the scaled scores; the causal mask then hides the upper triangle.
func ExampleT5() {
	enc, err := posenc.New("t5", posenc.Options{T5Buckets: 8, T5MaxDistance: 16})
	if err != nil {
		panic(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{TQ: 6, TK: 6}, Causal: true}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site) // [H, Tq, Tk]
	if err != nil {
		panic(err)
	}
	// t5_bias [8 buckets, 2 heads]: head 0 = bucket, head 1 = -bucket
	tab := make([]float64, 16)
	for b := 0; b < 8; b++ {
		tab[2*b], tab[2*b+1] = float64(b), -float64(b)
	}
	if err := p.Set("t5_bias", tab); err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	v := graph.ToFloat64s(bias.Value())
	fmt.Println(bias.Shape())
	for i := 0; i < 6; i++ {
		fmt.Println(v[i*6 : i*6+6])
	}
	// Output:
	// (2, 6, 6)
	// [0 0 0 0 0 0]
	// [1 0 0 0 0 0]
	// [2 1 0 0 0 0]
	// [3 2 1 0 0 0]
	// [4 3 2 1 0 0]
	// [4 4 3 2 1 0]
}
