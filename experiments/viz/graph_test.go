package viz

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
)

// TestLayout: the layout is deterministic for a seed, inside a bounded
// region, and on a path graph adjacent nodes end closer than nodes four
// steps apart.
func TestLayout(t *testing.T) {
	const n = 8
	var edges [][2]int
	for i := 0; i+1 < n; i++ {
		edges = append(edges, [2]int{i, i + 1})
	}
	x, y, err := Layout(n, edges, 3)
	if err != nil {
		t.Fatal(err)
	}
	x2, y2, _ := Layout(n, edges, 3)
	for i := range x {
		if x[i] != x2[i] || y[i] != y2[i] || math.IsNaN(x[i]) || math.Abs(x[i]) > 10 || math.Abs(y[i]) > 10 {
			t.Fatalf("node %d at (%v, %v) and (%v, %v)", i, x[i], y[i], x2[i], y2[i])
		}
	}
	dist := func(i, j int) float64 { return math.Hypot(x[i]-x[j], y[i]-y[j]) }
	var near, far float64
	for i := 0; i+4 < n; i++ {
		near += dist(i, i+1)
		far += dist(i, i+4)
	}
	if near >= far {
		t.Fatalf("adjacent nodes %v apart on average, nodes 4 steps apart %v", near, far)
	}
	if _, _, err := Layout(3, [][2]int{{0, 3}}, 1); err == nil || !strings.Contains(err.Error(), "edge [0 3]") {
		t.Fatalf("bad edge: %v", err)
	}
}

func TestDrawGraph(t *testing.T) {
	edges := [][2]int{{0, 1}, {1, 2}, {2, 0}, {2, 3}}
	b, err := DrawGraph(4, edges, GraphOptions{Title: "g", Values: []float64{-1, 0.5, math.NaN(), 2}, BarLabel: "bias", Highlight: 0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != DefaultHeight {
		t.Fatalf("PNG: %v, %v", err, img.Bounds())
	}
	for _, c := range []struct {
		n    int
		o    GraphOptions
		want string
	}{
		{0, GraphOptions{}, "no nodes"},
		{4, GraphOptions{Values: []float64{1}}, "1 node values for 4 nodes"},
		{4, GraphOptions{Labels: []string{"a"}}, "1 node labels for 4 nodes"},
		{2, GraphOptions{}, "edge [1 2] of a graph of 2 nodes"},
	} {
		if _, err := DrawGraph(c.n, edges, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("n=%d %+v: error %v, want %q", c.n, c.o, err, c.want)
		}
	}
}
