package graphdata

import (
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

func TestShortestPaths(t *testing.T) {
	const u = Unreachable
	for _, c := range []struct {
		name string
		g    *Graph
		want []int
	}{
		{"single node", mustGraph(t, 1, nil), []int{0}},
		{"path 4", pathGraph(t, 4), []int{
			0, 1, 2, 3,
			1, 0, 1, 2,
			2, 1, 0, 1,
			3, 2, 1, 0}},
		{"cycle 5", cycleGraph(t, 5), []int{
			0, 1, 2, 2, 1,
			1, 0, 1, 2, 2,
			2, 1, 0, 1, 2,
			2, 2, 1, 0, 1,
			1, 2, 2, 1, 0}},
		{"star", mustGraph(t, 4, [][2]int{{0, 1}, {0, 2}, {0, 3}}), []int{
			0, 1, 1, 1,
			1, 0, 2, 2,
			1, 2, 0, 2,
			1, 2, 2, 0}},
		{"two components and an isolated node", mustGraph(t, 5, [][2]int{{0, 2}, {1, 3}}), []int{
			0, u, 1, u, u,
			u, 0, u, 1, u,
			1, u, 0, u, u,
			u, 1, u, 0, u,
			u, u, u, u, 0}},
	} {
		if got := ShortestPaths(c.g); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: distances %v, want %v", c.name, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 30; i++ {
		g := randGraph(t, rng, 1+rng.IntN(20), rng.Float64()*0.3)
		if got, want := ShortestPaths(g), floyd(g); !reflect.DeepEqual(got, want) {
			t.Fatalf("graph %v: BFS %v, Floyd–Warshall %v", g.Adj, got, want)
		}
	}
}

func TestSpatialRelations(t *testing.T) {
	// path 0-1-2-3-4 plus isolated node 5, maxDist 2: ids 0, 1, 2 (>= 2), 3 unreachable
	g := mustGraph(t, 6, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}})
	got, err := SpatialRelations(g, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{
		0, 1, 2, 2, 2, 3,
		1, 0, 1, 2, 2, 3,
		2, 1, 0, 1, 2, 3,
		2, 2, 1, 0, 1, 3,
		2, 2, 2, 1, 0, 3,
		3, 3, 3, 3, 3, 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("relations %v, want %v", got, want)
	}
	if NumSpatialRelations(2) != 4 || UnreachableRelation(2) != 3 || VirtualRelation(2) != 4 {
		t.Errorf("ids for maxDist 2: %d relations, unreachable %d, virtual %d; want 4, 3, 4",
			NumSpatialRelations(2), UnreachableRelation(2), VirtualRelation(2))
	}
	if _, err := SpatialRelations(g, 0); err == nil {
		t.Error("maxDist 0: no error")
	}
	if _, err := SpatialRelations(&Graph{N: 2, Adj: [][]int{{1}, {}}}, 3); err == nil {
		t.Error("malformed graph: no error")
	}
}

func TestDistanceRelationsErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		dist       []int
		n, maxDist int
		want       string
	}{
		{"wrong shape", make([]int, 12), 4, 3, "distance matrix has 12 entries, want 4*4 = 16"},
		{"empty", nil, 0, 3, "empty graph: 0 nodes"},
		{"maxDist", make([]int, 4), 2, 0, "maximum distance 0 must be at least 1"},
		{"negative distance", []int{0, -2, 1, 0}, 2, 3, "distance -2 between nodes 0 and 1 is negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DistanceRelations(c.dist, c.n, c.maxDist)
			errContains(t, err, c.want)
		})
	}
}

func TestDistanceCache(t *testing.T) {
	var c DistanceCache // zero value
	g := pathGraph(t, 5)
	var wg sync.WaitGroup
	res := make([][]int, 8)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.Distances("p5", g)
			if err != nil {
				t.Error(err)
			}
			res[i] = d
		}()
	}
	wg.Wait()
	for i, d := range res {
		if !reflect.DeepEqual(d, ShortestPaths(g)) {
			t.Fatalf("goroutine %d: %v", i, d)
		}
		if &d[0] != &res[0][0] {
			t.Fatalf("goroutine %d got its own matrix: computed more than once", i)
		}
	}
	if c.Len() != 1 {
		t.Errorf("Len %d, want 1", c.Len())
	}
	if _, err := c.Distances("p5", pathGraph(t, 6)); err == nil {
		t.Error("same id, graph of another size: no error")
	} else {
		errContains(t, err, `graph "p5" has 6 nodes, the cached graph of that id 5`)
	}
	if _, err := c.Distances("", g); err == nil {
		t.Error("empty id: no error")
	}
	pe1, err := c.LaplacianPE("p5", g, 2)
	if err != nil {
		t.Fatal(err)
	}
	pe2, _ := c.LaplacianPE("p5", g, 2)
	want, _ := LaplacianPE(g, 2)
	if !reflect.DeepEqual(pe1, want) || &pe1[0] != &pe2[0] {
		t.Errorf("cached Laplacian encoding %v (shared %v), want %v", pe1, &pe1[0] == &pe2[0], want)
	}
	if _, err := c.LaplacianPE("p5", g, 0); err == nil {
		t.Error("k 0: no error")
	}
}
