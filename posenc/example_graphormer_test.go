package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// exampleGraphBatch is the padded batch of the examples: a path 0-1-2 and
// a triangle 0-1-2 with a pendant node 3, relations clipped at maxDist,
// lapK Laplacian eigenvectors.
func exampleGraphBatch(maxDist, lapK int) (*graphdata.Batch, *posenc.Positions) {
	ds := &graphdata.Dataset{NumFeatures: 1, NumClasses: 1}
	for i, edges := range [][][2]int{{{0, 1}, {1, 2}}, {{0, 1}, {1, 2}, {0, 2}, {2, 3}}} {
		n := 3 + i
		g, _ := graphdata.NewGraph(n, edges)
		ds.Examples = append(ds.Examples, &graphdata.Example{ID: fmt.Sprint(i), Graph: g,
			Features: make([]float32, n), Labels: []int{0}})
	}
	bt, _ := graphdata.NewBatch(ds, []int{0, 1}, graphdata.BatchOptions{MaxDist: maxDist, LapK: lapK})
	pos, _ := bt.Positions()
	return bt, pos
}

// runExampleGraph runs g once.
func runExampleGraph(g *G.ExprGraph) error {
	m := G.NewTapeMachine(g)
	defer m.Close()
	return m.RunAll()
}

// Graphormer's spatial bias and centrality encoding on a padded batch of
// two graphs: a path 0-1-2 and a triangle 0-1-2 with a pendant node 3. The
// relations are shortest-path distances clipped at 2, with 3 for
// unreachable pairs and padding.
func ExampleGraphormerSpatial() {
	const maxDist = 2
	bt, pos := exampleGraphBatch(maxDist, 0)

	spatial, _ := posenc.NewGraphormerSpatial(graphdata.NumSpatialRelations(maxDist), 0.02, false)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: bt.B, H: 1, DHead: 4, DModel: 4,
		Span: posenc.Span{TQ: bt.N, TK: bt.N}, Pos: pos}
	bias, err := spatial.ScoreBias(s) // [B, H, N, N]
	if err != nil {
		fmt.Println(err)
		return
	}
	// one head; relation r (distance r, 3 = unreachable or padding) gets -r
	_ = p.Set("spatial_bias", []float64{0, -1, -2, -3})
	if err := runExampleGraph(g); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("bias", bias.Shape(), "parameters", p.Names())
	v := bias.Value().Data().([]float64)
	for b := 0; b < bt.B; b++ {
		fmt.Printf("graph %d:\n", b)
		for i := 0; i < bt.N; i++ {
			fmt.Println(v[(b*bt.N+i)*bt.N : (b*bt.N+i+1)*bt.N])
		}
	}
	deg, _ := posenc.GraphDegrees(pos, 0)
	fmt.Println("degrees", deg, "graphdata's", bt.Degrees)
	// Output:
	// bias (2, 1, 4, 4) parameters [spatial_bias]
	// graph 0:
	// [0 -1 -2 -3]
	// [-1 0 -1 -3]
	// [-2 -1 0 -3]
	// [-3 -3 -3 -3]
	// graph 1:
	// [0 -1 -1 -2]
	// [-1 0 -1 -2]
	// [-1 -1 0 -1]
	// [-2 -2 -1 0]
	// degrees [1 2 1 0 2 2 3 1] graphdata's [1 2 1 0 2 2 3 1]
}

// The centrality encoding adds a learned embedding of each node's degree
// (derived from the relations) to its input; the Laplacian input adds a
// learned projection of the eigenvectors. Both keep the input's shape.
func ExampleGraphormerCentrality() {
	bt, pos := exampleGraphBatch(2, 2)

	const d = 3
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(bt.B, bt.N, d), G.WithName("x"), G.WithInit(G.Zeroes()))
	cent, _ := posenc.NewGraphormerCentrality(2, 0.02)
	s := &posenc.Site{G: g, Params: p, Layer: -1, B: bt.B, DModel: d, Span: posenc.Span{TQ: bt.N, TK: bt.N}, Pos: pos}
	h, err := cent.AddToInput(s, x)
	if err != nil {
		fmt.Println(err)
		return
	}
	lap := make([]float64, len(bt.LapPE))
	for i, v := range bt.LapPE {
		lap[i] = float64(v)
	}
	ln := G.NewTensor(g, tensor.Float64, 3, G.WithShape(bt.B, bt.N, bt.LapK), G.WithName("lap"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{bt.B, bt.N, bt.LapK}, lap)))
	h, err = posenc.LaplacianInput(g, p, "lap_proj", h, ln, 0.02)
	if err != nil {
		fmt.Println(err)
		return
	}
	// degree d gets the row (d, d, d), clipped at 2; a zero projection
	_ = p.Set("centrality_emb", []float64{0, 0, 0, 1, 1, 1, 2, 2, 2})
	_ = p.Set("lap_proj/w", make([]float64, bt.LapK*d))
	if err := runExampleGraph(g); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("output", h.Shape(), "parameters", p.Names())
	v := h.Value().Data().([]float64)
	for b := 0; b < bt.B; b++ {
		var first []float64
		for i := 0; i < bt.N; i++ {
			first = append(first, v[(b*bt.N+i)*d])
		}
		fmt.Printf("graph %d: %v\n", b, first)
	}
	// Output:
	// output (2, 4, 3) parameters [centrality_emb lap_proj/w lap_proj/b]
	// graph 0: [1 2 1 0]
	// graph 1: [2 2 2 1]
}
