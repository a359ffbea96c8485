package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// Swin's table rows for a query at the centre of a 3×3 grid: the table has
// (2·3-1)² = 25 rows, one per offset query minus key, row offset major; the
// centre offset (0, 0) is row 12.
func ExampleSwinIndex() {
	for kr := 0; kr < 3; kr++ {
		for kc := 0; kc < 3; kc++ {
			fmt.Printf("%3d", posenc.SwinIndex(1, 1, kr, kc, 3, 3))
		}
		fmt.Println()
	}
	// Output:
	//  18 17 16
	//  13 12 11
	//   8  7  6
}

// The swin bias of one head on a 2×2 grid, with the table set so that the
// bias is the table row; a 3×3 grid does not fit the 2×2 table, swin-log
// serves any grid.
func ExampleSwin() {
	enc, err := posenc.New("swin", posenc.Options{GridRows: 2, GridCols: 2})
	if err != nil {
		panic(err)
	}
	grid, _ := posenc.NewGrid(2, 2)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 1, DHead: 4, DModel: 4,
		Span: posenc.Span{TQ: 4, TK: 4}, Pos: grid}
	bias, err := enc.(posenc.ScoreBiaser).ScoreBias(site) // [H, Tq, Tk]
	if err != nil {
		panic(err)
	}
	if err := p.Set("block0/attn/swin_bias", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	v := graph.ToFloat64s(bias.Value())
	for i := 0; i < 4; i++ {
		fmt.Println(v[4*i : 4*i+4])
	}
	big, _ := posenc.NewGrid(3, 3)
	site.Pos, site.Span = big, posenc.Span{TQ: 9, TK: 9}
	_, err = enc.(posenc.ScoreBiaser).ScoreBias(site)
	fmt.Println(err)
	// Output:
	// [4 3 1 0]
	// [5 4 2 1]
	// [7 6 4 3]
	// [8 7 5 4]
	// posenc swin: table covers offsets up to ±1 rows and ±1 cols (2x2 grid), the positions span 3x3; use swin-log
}

// swin-log's rows per axis with 4 buckets per sign and log buckets to 8:
// offsets -1, 0 and 1 are exact, |Δ| = 2 and 3 share a log bucket, and
// everything from 4 on shares the last one. The row bucket is the major
// index (8 buckets per axis, so Δrow 1 is row 5·8 = 40).
func ExampleSwinLogIndex() {
	for _, d := range []int{-20, -5, -2, -1, 0, 1, 2, 5, 20} {
		fmt.Printf("Δcol %3d: row %2d   Δrow %3d: row %2d\n", d, posenc.SwinLogIndex(0, 0, 0, d, 4, 8), d, posenc.SwinLogIndex(0, 0, d, 0, 4, 8))
	}
	// Output:
	// Δcol -20: row  3   Δrow -20: row 24
	// Δcol  -5: row  3   Δrow  -5: row 24
	// Δcol  -2: row  2   Δrow  -2: row 16
	// Δcol  -1: row  1   Δrow  -1: row  8
	// Δcol   0: row  0   Δrow   0: row  0
	// Δcol   1: row  5   Δrow   1: row 40
	// Δcol   2: row  6   Δrow   2: row 48
	// Δcol   5: row  7   Δrow   5: row 56
	// Δcol  20: row  7   Δrow  20: row 56
}
