package graphstudy

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/graph"
)

// TestSpatialBias reads a known table [R, H] back per head and relation,
// and BiasFrom maps it onto a path graph's nodes by distance.
func TestSpatialBias(t *testing.T) {
	const maxDist, h = 2, 2
	p := graph.NewParams(tensor.Float64, 1)
	// rows: distance 0, 1, 2, unreachable, virtual; head 1 = -head 0
	tab := []float64{0, 0, 1, -1, 2, -2, 9, -9, 7, -7}
	if _, err := p.Node(G.NewGraph(), "spatial_bias", tensor.Shape{5, h}, graph.Constant(0), false); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("spatial_bias", tab); err != nil {
		t.Fatal(err)
	}
	s, err := SpatialBias(p, maxDist)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != h || len(s[1].Y) != 4 || s[0].Y[2] != 2 || s[1].Y[3] != -9 {
		t.Fatalf("series %+v", s)
	}
	// path 0-1-2-3 and an isolated node 4
	g, err := graphdata.NewGraph(5, [][2]int{{0, 1}, {1, 2}, {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := BiasFrom(s, g, 0, 0, maxDist)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 1, 2, 2, 9} // distances 0, 1, 2, 3 clipped to 2, unreachable
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bias from node 0: %v, want %v", got, want)
		}
	}
	if _, err := BiasFrom(s, g, 5, 0, maxDist); err == nil || !strings.Contains(err.Error(), "node 5 of a graph of 5 nodes") {
		t.Fatalf("bad node: %v", err)
	}
	if _, err := SpatialBias(graph.NewParams(tensor.Float64, 1), maxDist); err == nil || !strings.Contains(err.Error(), "no spatial_bias") {
		t.Fatalf("no table: %v", err)
	}
}
