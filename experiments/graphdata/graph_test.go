package graphdata

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestNewGraphErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		edges [][2]int
		want  string
	}{
		{"zero nodes", 0, nil, "empty graph: 0 nodes"},
		{"negative nodes", -3, nil, "empty graph: -3 nodes"},
		{"too large", MaxGraphNodes + 1, nil, "graph has 4097 nodes, more than this package's limit of 4096"},
		{"self-loop", 4, [][2]int{{0, 1}, {2, 2}}, "edge 1 (2, 2) is a self-loop"},
		{"duplicate", 4, [][2]int{{0, 1}, {1, 2}, {2, 1}}, "edge 2 (2, 1) duplicates edge 1 (1, 2)"},
		{"same order duplicate", 4, [][2]int{{3, 0}, {3, 0}}, "edge 1 (3, 0) duplicates edge 0 (3, 0)"},
		{"endpoint too large", 5, [][2]int{{0, 7}}, "edge 0 (0, 7) has an endpoint outside the 5 nodes [0, 5)"},
		{"negative endpoint", 5, [][2]int{{1, 2}, {-1, 2}}, "edge 1 (-1, 2) has an endpoint outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewGraph(c.n, c.edges)
			if g != nil {
				t.Errorf("got a graph %v", g)
			}
			errContains(t, err, c.want)
		})
	}
}

func TestNewGraph(t *testing.T) {
	g := mustGraph(t, 5, [][2]int{{3, 1}, {0, 3}, {4, 0}, {1, 0}})
	want := [][]int{{1, 3, 4}, {0, 3}, {}, {0, 1}, {0}}
	if g.N != 5 || !reflect.DeepEqual(g.Adj, want) {
		t.Fatalf("graph %d %v, want 5 %v", g.N, g.Adj, want)
	}
	if err := g.Check(5); err != nil {
		t.Fatal(err)
	}
	if got, w := g.Edges(), [][2]int{{0, 1}, {0, 3}, {0, 4}, {1, 3}}; !reflect.DeepEqual(got, w) {
		t.Errorf("edges %v, want %v", got, w)
	}
	if g.NumEdges() != 4 {
		t.Errorf("NumEdges %d, want 4", g.NumEdges())
	}
	if d, w := Degrees(g), []int{3, 2, 0, 2, 1}; !reflect.DeepEqual(d, w) {
		t.Errorf("degrees %v, want %v", d, w)
	}
	comp, c := Components(g)
	if c != 2 || !reflect.DeepEqual(comp, []int{0, 0, 1, 0, 0}) {
		t.Errorf("components %v (%d), want [0 0 1 0 0] (2)", comp, c)
	}
}

func TestCheck(t *testing.T) {
	ok := mustGraph(t, 3, [][2]int{{0, 1}, {1, 2}})
	big := mustGraph(t, 70, nil)
	for _, c := range []struct {
		name string
		g    *Graph
		max  int
		want string // "" for no error
	}{
		{"valid", ok, 3, ""},
		{"valid, no limit", big, 0, ""},
		{"too many nodes", big, 64, "graph has 70 nodes, the maximum is 64"},
		{"nil", nil, 0, "empty graph: 0 nodes"},
		{"zero nodes", &Graph{}, 0, "empty graph: 0 nodes"},
		{"missing lists", &Graph{N: 3, Adj: [][]int{{}}}, 0, "graph has 3 nodes but 1 adjacency lists"},
		{"out of range", &Graph{N: 2, Adj: [][]int{{5}, {}}}, 0, "node 0 has neighbour 5 outside [0, 2)"},
		{"self-loop", &Graph{N: 2, Adj: [][]int{{0}, {}}}, 0, "node 0 has a self-loop"},
		{"unsorted", &Graph{N: 3, Adj: [][]int{{2, 1}, {0}, {0}}}, 0, "adjacency list of node 0 is not strictly increasing: [2 1]"},
		{"repeated", &Graph{N: 2, Adj: [][]int{{1, 1}, {0}}}, 0, "not strictly increasing"},
		{"asymmetric", &Graph{N: 3, Adj: [][]int{{1}, {}, {}}}, 0, "edge (0, 1) is in the list of node 0 but not of node 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.Check(c.max)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			errContains(t, err, c.want)
		})
	}
}

func TestPermute(t *testing.T) {
	g := mustGraph(t, 4, [][2]int{{0, 1}, {1, 2}, {2, 3}})
	p, err := g.Permute([]int{2, 0, 3, 1}) // 0->2, 1->0, 2->3, 3->1
	if err != nil {
		t.Fatal(err)
	}
	if w := [][2]int{{0, 2}, {0, 3}, {1, 3}}; !reflect.DeepEqual(p.Edges(), w) {
		t.Errorf("permuted edges %v, want %v", p.Edges(), w)
	}
	for _, bad := range [][]int{{0, 1, 2}, {0, 0, 1, 2}, {0, 1, 2, 4}} {
		if _, err := g.Permute(bad); err == nil {
			t.Errorf("Permute(%v): no error", bad)
		}
	}
}

func TestTriangles(t *testing.T) {
	complete := func(n int) *Graph {
		var e [][2]int
		for u := 0; u < n; u++ {
			for v := u + 1; v < n; v++ {
				e = append(e, [2]int{u, v})
			}
		}
		return mustGraph(t, n, e)
	}
	for _, c := range []struct {
		name string
		g    *Graph
		want int
	}{
		{"K3", complete(3), 1},
		{"K4", complete(4), 4},
		{"K6", complete(6), 20},
		{"C4", cycleGraph(t, 4), 0},
		{"path", pathGraph(t, 5), 0},
		{"bowtie", mustGraph(t, 5, [][2]int{{0, 1}, {1, 2}, {0, 2}, {2, 3}, {3, 4}, {2, 4}}), 2},
	} {
		if got := Triangles(c.g); got != c.want {
			t.Errorf("%s: %d triangles, want %d", c.name, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		g := randGraph(t, rng, 3+rng.IntN(15), 0.4)
		if got, want := Triangles(g), bruteTriangles(g); got != want {
			t.Fatalf("graph %v: %d triangles, brute force %d", g.Adj, got, want)
		}
	}
}
