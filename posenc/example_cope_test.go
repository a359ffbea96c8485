package posenc_test

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// CoPE counts only the keys its gates select. Here one head of width 2
// looks with q = (1, 0) at keys whose first coordinate is +40 (gate
// σ(40/√2) ≈ 1: counted) or -40 (gate ≈ 0: skipped), and the table
// e[0, n] = n makes the term read the position itself: o_ij = p_ij, the
// number of counted keys from key j to query i. With CopeNPos = 3,
// counts above 2 read the last column. Bidirectional attention is an error.
func ExampleCoPE() {
	counted := []bool{true, false, true, true, false}
	for _, npos := range []int{8, 3} {
		enc, err := posenc.New("cope", posenc.Options{CopeNPos: npos})
		if err != nil {
			fmt.Println(err)
			return
		}
		t := len(counted)
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		q, k := make([]float64, 2*t), make([]float64, 2*t)
		for i, c := range counted {
			q[2*i] = 1
			k[2*i] = -40
			if c {
				k[2*i] = 40
			}
		}
		node := func(name string, data []float64) *G.Node {
			return G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, t, 2), G.WithName(name),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, t, 2}, data)))
		}
		s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 1, DHead: 2, DModel: 2,
			Span: posenc.Span{TQ: t, TK: t}, Causal: true}
		terms, err := enc.(posenc.ScoreTermer).ScoreTerms(s, node("q", q), node("k", k))
		if err != nil {
			fmt.Println(err)
			return
		}
		e := make([]float64, 2*npos) // [dh, npos]: row 0 is 0, 1, 2, ...
		for n := 0; n < npos; n++ {
			e[n] = float64(n)
		}
		if err := p.Set("block0/attn/cope_emb", e); err != nil {
			fmt.Println(err)
			return
		}
		m := G.NewTapeMachine(g)
		if err := m.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		o := graph.ToFloat64s(terms.Value())
		m.Close()
		fmt.Printf("npos %d: positions p_ij (rows: queries, columns: keys)\n", npos)
		for i := 0; i < t; i++ {
			for j := 0; j <= i; j++ {
				fmt.Printf(" %.2f", o[i*t+j]/math.Sqrt2) // terms = √dh·o
			}
			fmt.Println()
		}
	}
	s := &posenc.Site{Span: posenc.Span{TQ: 1, TK: 1}}
	_, err := (&posenc.CoPE{NPos: 8}).ScoreTerms(s, nil, nil)
	fmt.Println(err)
	// Output:
	// npos 8: positions p_ij (rows: queries, columns: keys)
	//  1.00
	//  1.00 0.00
	//  2.00 1.00 1.00
	//  3.00 2.00 2.00 1.00
	//  3.00 2.00 2.00 1.00 0.00
	// npos 3: positions p_ij (rows: queries, columns: keys)
	//  1.00
	//  1.00 0.00
	//  2.00 1.00 1.00
	//  2.00 2.00 2.00 1.00
	//  2.00 2.00 2.00 1.00 0.00
	// posenc cope: causal attention only (the gates count the keys from each key to the query); the site is bidirectional
}
