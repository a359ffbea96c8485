package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// A learned-2d table trained on one patch grid serves another only when
// resampled; the 1-D weights of each axis are those of PyTorch's
// F.interpolate (align_corners=False): bilinear clamps at the border,
// bicubic (A = -0.75) overshoots (the same numbers as torch).
func ExampleResampleWeights() {
	for _, mode := range []string{"bilinear", "bicubic"} {
		w, _ := posenc.ResampleWeights(mode, 2, 4) // 2 table rows to 4 grid rows
		fmt.Println(mode)
		for i := 0; i < 4; i++ {
			fmt.Printf("  row %d = %+.4f\n", i, w[i*2:(i+1)*2])
		}
	}
	// Output:
	// bilinear
	//   row 0 = [+1.0000 +0.0000]
	//   row 1 = [+0.7500 +0.2500]
	//   row 2 = [+0.2500 +0.7500]
	//   row 3 = [+0.0000 +1.0000]
	// bicubic
	//   row 0 = [+1.1055 -0.1055]
	//   row 1 = [+0.7734 +0.2266]
	//   row 2 = [+0.2266 +0.7734]
	//   row 3 = [-0.1055 +1.1055]
}

// A ViT-style table for a 7×7 patch grid: on a 14×14 grid it is an error
// unless resampling is asked for; with bicubic resampling the 196 tokens
// get rows interpolated from the 49 learned ones, and the gradient flows
// back into the 49.
func ExampleLearned2D() {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	grid, _ := posenc.NewGrid(14, 14)
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 196, 16), G.WithName("x"), G.WithInit(G.Zeroes()))
	site := &posenc.Site{G: g, Params: p, Layer: -1, B: 1, H: 1, DHead: 16, DModel: 16, Span: posenc.Span{TQ: 196, TK: 196}, Pos: grid}

	plain, _ := posenc.New("learned-2d", posenc.Options{}) // 7×7, resample none
	_, err := plain.(posenc.InputAdder).AddToInput(site, x)
	fmt.Println(err)

	resampled, _ := posenc.New("learned-2d", posenc.Options{GridResample: "bicubic"})
	y, err := resampled.(posenc.InputAdder).AddToInput(site, x)
	fmt.Println(y.Shape(), err)
	info, _ := p.Info("pos_emb_2d")
	fmt.Println("pos_emb_2d", info.Shape, "decay", info.Decay)
	// Output:
	// posenc learned-2d: table is 7x7, the input grid is 14x14; set -grid-resample bilinear or bicubic
	// (1, 196, 16) <nil>
	// pos_emb_2d (49, 16) decay false
}
