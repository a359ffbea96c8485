package graphdata_test

import (
	"fmt"

	"github.com/rpe-go/rpe/experiments/graphdata"
)

// The BFS distances and spatial relations of a path 0-1-2-3 and an
// isolated node 4.
func ExampleShortestPaths() {
	g, err := graphdata.NewGraph(5, [][2]int{{0, 1}, {1, 2}, {2, 3}})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := graphdata.ShortestPaths(g)
	rel, _ := graphdata.SpatialRelations(g, 2)
	for i := 0; i < g.N; i++ {
		fmt.Printf("%2d   %d\n", d[i*g.N:(i+1)*g.N], rel[i*g.N:(i+1)*g.N])
	}
	fmt.Println("relations:", graphdata.NumSpatialRelations(2))
	// Output:
	// [ 0  1  2  3 -1]   [0 1 2 2 3]
	// [ 1  0  1  2 -1]   [1 0 1 2 3]
	// [ 2  1  0  1 -1]   [2 1 0 1 3]
	// [ 3  2  1  0 -1]   [2 2 1 0 3]
	// [-1 -1 -1 -1  0]   [3 3 3 3 0]
	// relations: 4
}

// A distance task, split into train/validation/test, an
// out-of-distribution set of larger graphs, and one padded batch.
func ExampleGenerate() {
	o := graphdata.DefaultTaskOptions(graphdata.KindDistance)
	o.Count = 100
	ds, err := graphdata.Generate(o)
	if err != nil {
		fmt.Println(err)
		return
	}
	parts, _ := graphdata.Split(ds, []float64{0.8, 0.1, 0.1})
	o.MinNodes, o.MaxNodes, o.Seed, o.Count = 32, 48, 2, 20
	ood, _ := graphdata.Generate(o)
	fmt.Println(len(parts[0].Examples), len(parts[1].Examples), len(parts[2].Examples), len(ood.Examples), ds.NumClasses)

	var cache graphdata.DistanceCache
	bt, err := graphdata.NewBatch(parts[0], []int{0, 1, 2, 3}, graphdata.BatchOptions{MaxDist: 5, MaxNodes: 64, Cache: &cache})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bt.B, bt.N == max(bt.Nodes[0], bt.Nodes[1], bt.Nodes[2], bt.Nodes[3]), bt.NumRel)
	// Output:
	// 80 10 10 20 8
	// 4 true 7
}
