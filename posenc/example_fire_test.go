package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// printBias runs the graph of bias and prints head 0 [TQ, TK] with 3
// decimals.
func printBias(g *G.ExprGraph, bias *G.Node) {
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	v := graph.ToFloat64s(bias.Value())
	tq, tk := bias.Shape()[1], bias.Shape()[2]
	for i := 0; i < tq; i++ {
		for j := 0; j < tk; j++ {
			fmt.Printf("%6.3f", v[i*tk+j])
		}
		fmt.Println()
	}
}

// FIRE's MLP input, the normalised distance ψ(i-j)/ψ(max(L, i)), made
// visible: c = 1, threshold L = 2, and an MLP set to pass its input
// through to head 0 (weights 1, biases 0, so ReLU of a non-negative input
// is the identity). Queries 0..2 share the normaliser ψ(2) = log 3; from
// query 3 on the normaliser is ψ(i), so the farthest key always gets 1: the
// distances of a longer sequence are interpolated into [0, 1]. Keys after
// the query get the value of |i - j| (masked in causal attention).
func ExampleFIRE() {
	enc, err := posenc.New("fire", posenc.Options{FireWidth: 1, FireInitC: 1, FireInitL: 2})
	if err != nil {
		panic(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{TQ: 5, TK: 5}, Causal: true}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site) // [H, Tq, Tk]
	if err != nil {
		panic(err)
	}
	for name, v := range map[string][]float64{"fire_w0": {1}, "fire_b0": {0}, "fire_w1": {1, 0}, "fire_b1": {0, 0}} {
		if err := p.Set(name, v); err != nil {
			panic(err)
		}
	}
	printBias(g, bias)
	// Output:
	//  0.000 0.631 1.000 1.262 1.465
	//  0.631 0.000 0.631 1.000 1.262
	//  1.000 0.631 0.000 0.631 1.000
	//  1.000 0.792 0.500 0.000 0.500
	//  1.000 0.861 0.683 0.431 0.000
}

// dpb's MLP input with log distance: sign(r) log(|r| + 1) of r = query -
// key position.
func ExampleDPBInput() {
	for _, r := range []int{-3, -1, 0, 1, 3, 100} {
		fmt.Printf("r %4d: %.3f\n", r, posenc.DPBInput(r, true))
	}
	// Output:
	// r   -3: -1.386
	// r   -1: -0.693
	// r    0: 0.000
	// r    1: 0.693
	// r    3: 1.386
	// r  100: 4.615
}

// The dynamic position bias at its initialisation (seeded), for 3 queries
// at positions 4..6 attending to keys 0..5 (a segment after a memory): the
// bias is a function of the query-key distance alone, so it is constant
// along every diagonal.
func ExampleDPB() {
	enc, err := posenc.New("dpb", posenc.Options{DPBWidth: 8, DPBDepth: 2})
	if err != nil {
		panic(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 4, DModel: 8,
		Span: posenc.Span{QStart: 4, TQ: 3, KStart: 0, TK: 6}}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site)
	if err != nil {
		panic(err)
	}
	printBias(g, bias)
	// Output:
	//  0.290 0.268 0.230 0.182 0.134 0.092
	//  0.293 0.290 0.268 0.230 0.182 0.134
	//  0.279 0.293 0.290 0.268 0.230 0.182
}
