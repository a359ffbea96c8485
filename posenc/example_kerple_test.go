package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The KERPLE bias of one head with r1 = 1, r2 = 1 for a query at position 3
// and keys at 0..3: the logarithmic kernel -log(1 + d) and the power kernel
// -d^1 (ALiBi's bias with slope 1).
func ExampleKerpleBias() {
	q, k := []int{3}, []int{0, 1, 2, 3}
	fmt.Printf("log:   %.4f\n", posenc.KerpleBias(posenc.KerpleLog, []float64{1}, []float64{1}, 0.01, q, k))
	fmt.Printf("power: %.4f\n", posenc.KerpleBias(posenc.KerplePower, []float64{1}, []float64{1}, 0.01, q, k))
	// Output:
	// log:   [-1.3863 -1.0986 -0.6931 0.0000]
	// power: [-3.0000 -2.0000 -1.0000 0.0000]
}

// kerple-power as the attention of a model uses it: ScoreBias creates the
// shared parameters kerple_power_r1 and kerple_power_r2 [H] on first use;
// here they are set to r1 = (1, 0.5), r2 = (0.5, 3) (the exponent 3 is
// clamped to 2), and the causal bias [H, 3, 3] is computed.
func ExampleKerple() {
	enc, err := posenc.New("kerple-power", posenc.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	s := &posenc.Site{G: g, Params: p, B: 1, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{TQ: 3, TK: 3}, Causal: true}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Names())
	_ = p.Set("kerple_power_r1", []float64{1, 0.5})
	_ = p.Set("kerple_power_r2", []float64{0.5, 3})
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bias.Shape())
	// (The entries above the diagonal are hidden by the causal mask.)
	fmt.Printf("%.4f\n", graph.ToFloat64s(bias.Value()))
	// Output:
	// [kerple_power_r1 kerple_power_r2]
	// (2, 3, 3)
	// [0.0000 -1.0000 -1.4142 -1.0000 0.0000 -1.0000 -1.4142 -1.0000 0.0000 0.0000 -0.5000 -2.0000 -0.5000 0.0000 -0.5000 -2.0000 -0.5000 0.0000]
}
