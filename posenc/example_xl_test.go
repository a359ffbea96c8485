package posenc_test

import (
	"fmt"
	"strings"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// An XL language model reading a text four bytes at a time, each segment
// attending to the block inputs of the previous segment (the memory).
func ExampleXL() {
	cfg := layers.Config{Vocab: 256, DModel: 16, Heads: 2, Layers: 2, FFN: 32, Eps: 1e-5, InitStd: 0.02,
		Causal: true, Pos: "xl"}
	p := graph.NewParams(tensor.Float64, 1)
	r, err := layers.NewSegmentRunner(p, cfg, 1, 4, 4) // B = 1, T = 4, M = 4
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	text := []byte("Transformer-XL!!")
	ids := [][]int{make([]int, len(text))}
	for i, c := range text {
		ids[0][i] = int(c)
	}
	segs, err := r.Run(ids)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d segments, logits [%d, %d] each\n", len(segs), len(segs[0])/cfg.Vocab, cfg.Vocab)
	for _, n := range p.Names() {
		if strings.Contains(n, "xl_") {
			info, _ := p.Info(n)
			fmt.Println(n, info.Shape)
		}
	}
	// Output:
	// 4 segments, logits [4, 256] each
	// xl_u (2, 8)
	// xl_v (2, 8)
	// block0/attn/xl_wr (16, 16)
	// block1/attn/xl_wr (16, 16)
}

// The distance index of two queries at positions 5 and 6 attending to a
// memory at positions 3, 4 and to themselves: row r of the R table is
// distance minDist + r.
func ExampleXLDistances() {
	idx, minDist, n := posenc.XLDistances(posenc.Span{QStart: 5, TQ: 2, KStart: 3, TK: 4})
	fmt.Println("distances", minDist, "to", minDist+n-1)
	fmt.Println(idx)
	// Output:
	// distances -1 to 3
	// [3 2 1 0 4 3 2 1]
}
