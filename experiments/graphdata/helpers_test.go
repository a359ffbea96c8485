package graphdata

import (
	"math/rand/v2"
	"testing"
)

func mustGraph(t testing.TB, n int, edges [][2]int) *Graph {
	t.Helper()
	g, err := NewGraph(n, edges)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func pathGraph(t testing.TB, n int) *Graph {
	e := make([][2]int, 0, n)
	for i := 0; i+1 < n; i++ {
		e = append(e, [2]int{i, i + 1})
	}
	return mustGraph(t, n, e)
}

func cycleGraph(t testing.TB, n int) *Graph {
	e := make([][2]int, 0, n)
	for i := 0; i < n; i++ {
		e = append(e, [2]int{i, (i + 1) % n})
	}
	return mustGraph(t, n, e)
}

// randGraph is a seeded G(n, p) graph.
func randGraph(t testing.TB, rng *rand.Rand, n int, p float64) *Graph {
	var e [][2]int
	for u := 0; u < n; u++ {
		for v := u + 1; v < n; v++ {
			if rng.Float64() < p {
				e = append(e, [2]int{v, u})
			}
		}
	}
	return mustGraph(t, n, e)
}

// floyd is Floyd–Warshall over g, the reference for ShortestPaths.
func floyd(g *Graph) []int {
	n := g.N
	const inf = 1 << 30
	d := make([]int, n*n)
	for i := range d {
		d[i] = inf
	}
	for i := 0; i < n; i++ {
		d[i*n+i] = 0
		for _, j := range g.Adj[i] {
			d[i*n+j] = 1
		}
	}
	for k := 0; k < n; k++ {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if d[i*n+k]+d[k*n+j] < d[i*n+j] {
					d[i*n+j] = d[i*n+k] + d[k*n+j]
				}
			}
		}
	}
	for i, v := range d {
		if v == inf {
			d[i] = Unreachable
		}
	}
	return d
}

// bruteTriangles counts triangles over all triples.
func bruteTriangles(g *Graph) int {
	adj := make(map[[2]int]bool)
	for _, e := range g.Edges() {
		adj[e] = true
	}
	t := 0
	for a := 0; a < g.N; a++ {
		for b := a + 1; b < g.N; b++ {
			for c := b + 1; c < g.N; c++ {
				if adj[[2]int{a, b}] && adj[[2]int{b, c}] && adj[[2]int{a, c}] {
					t++
				}
			}
		}
	}
	return t
}

func errContains(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	if !contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
