package graphdata

import (
	"slices"

	"github.com/pkg/errors"
)

// MaxGraphNodes is the largest graph this package builds: a distance
// matrix has N*N entries, and NewGraph refuses larger graphs before
// allocating anything.
const MaxGraphNodes = 4096

// Graph is an undirected simple graph on nodes 0..N-1. Adj[i] lists the
// neighbours of node i in increasing order; every edge appears in both
// lists, and no list holds its own node (no self-loops) or a node twice.
// Build it with NewGraph, which guarantees this; Check verifies it for a
// Graph built by hand. A Graph is not modified after construction.
type Graph struct {
	N   int
	Adj [][]int
}

// NewGraph returns the graph with n nodes and the given undirected edges
// (each {u, v} once, in either order). It returns an error for n <= 0
// ("empty graph"), n > MaxGraphNodes, an endpoint outside [0, n), a
// self-loop, or an edge given twice ({u, v} and {v, u} are the same edge).
func NewGraph(n int, edges [][2]int) (*Graph, error) {
	if n <= 0 {
		return nil, errors.Errorf("graphdata: empty graph: %d nodes", n)
	}
	if n > MaxGraphNodes {
		return nil, errors.Errorf("graphdata: graph has %d nodes, more than this package's limit of %d", n, MaxGraphNodes)
	}
	seen := make(map[[2]int]int, len(edges))
	deg := make([]int, n)
	for i, e := range edges {
		u, v := e[0], e[1]
		if u < 0 || u >= n || v < 0 || v >= n {
			return nil, errors.Errorf("graphdata: edge %d (%d, %d) has an endpoint outside the %d nodes [0, %d)", i, u, v, n, n)
		}
		if u == v {
			return nil, errors.Errorf("graphdata: edge %d (%d, %d) is a self-loop", i, u, v)
		}
		k := [2]int{min(u, v), max(u, v)}
		if j, ok := seen[k]; ok {
			return nil, errors.Errorf("graphdata: edge %d (%d, %d) duplicates edge %d (%d, %d)", i, u, v, j, edges[j][0], edges[j][1])
		}
		seen[k] = i
		deg[u]++
		deg[v]++
	}
	g := &Graph{N: n, Adj: make([][]int, n)}
	for i := range g.Adj {
		g.Adj[i] = make([]int, 0, deg[i])
	}
	for _, e := range edges {
		g.Adj[e[0]] = append(g.Adj[e[0]], e[1])
		g.Adj[e[1]] = append(g.Adj[e[1]], e[0])
	}
	for _, a := range g.Adj {
		slices.Sort(a)
	}
	return g, nil
}

// Check returns an error unless g is a well-formed graph (as NewGraph
// builds: N > 0, len(Adj) == N, sorted adjacency lists without self-loops
// or repeats, every edge in both lists) with at most maxNodes nodes: "graph
// has 70 nodes, the maximum is 64". maxNodes <= 0 means no maximum (other
// than MaxGraphNodes).
func (g *Graph) Check(maxNodes int) error {
	if g == nil || g.N <= 0 {
		n := 0
		if g != nil {
			n = g.N
		}
		return errors.Errorf("graphdata: empty graph: %d nodes", n)
	}
	if maxNodes > 0 && g.N > maxNodes {
		return errors.Errorf("graphdata: graph has %d nodes, the maximum is %d", g.N, maxNodes)
	}
	if g.N > MaxGraphNodes {
		return errors.Errorf("graphdata: graph has %d nodes, more than this package's limit of %d", g.N, MaxGraphNodes)
	}
	if len(g.Adj) != g.N {
		return errors.Errorf("graphdata: graph has %d nodes but %d adjacency lists", g.N, len(g.Adj))
	}
	for u, a := range g.Adj {
		for i, v := range a {
			switch {
			case v < 0 || v >= g.N:
				return errors.Errorf("graphdata: node %d has neighbour %d outside [0, %d)", u, v, g.N)
			case v == u:
				return errors.Errorf("graphdata: node %d has a self-loop", u)
			case i > 0 && a[i-1] >= v:
				return errors.Errorf("graphdata: adjacency list of node %d is not strictly increasing: %v", u, a)
			}
			if _, ok := slices.BinarySearch(g.Adj[v], u); !ok {
				return errors.Errorf("graphdata: edge (%d, %d) is in the list of node %d but not of node %d", u, v, u, v)
			}
		}
	}
	return nil
}

// NumEdges returns the number of (undirected) edges of g.
func (g *Graph) NumEdges() int {
	s := 0
	for _, a := range g.Adj {
		s += len(a)
	}
	return s / 2
}

// Edges returns every edge {u, v} once with u < v, sorted.
func (g *Graph) Edges() [][2]int {
	e := make([][2]int, 0, g.NumEdges())
	for u, a := range g.Adj {
		for _, v := range a {
			if u < v {
				e = append(e, [2]int{u, v})
			}
		}
	}
	return e
}

// Permute returns g with node i renamed perm[i]; perm must be a
// permutation of 0..N-1 (else an error).
func (g *Graph) Permute(perm []int) (*Graph, error) {
	if len(perm) != g.N {
		return nil, errors.Errorf("graphdata: permutation of %d nodes for a graph of %d", len(perm), g.N)
	}
	seen := make([]bool, g.N)
	for i, p := range perm {
		if p < 0 || p >= g.N || seen[p] {
			return nil, errors.Errorf("graphdata: %v is not a permutation of 0..%d (entry %d)", perm, g.N-1, i)
		}
		seen[p] = true
	}
	e := g.Edges()
	for i := range e {
		e[i] = [2]int{perm[e[i][0]], perm[e[i][1]]}
	}
	return NewGraph(g.N, e)
}

// Degrees returns the degree of every node [N].
func Degrees(g *Graph) []int {
	d := make([]int, g.N)
	for i, a := range g.Adj {
		d[i] = len(a)
	}
	return d
}

// Triangles returns the number of triangles (3-cliques) of g.
func Triangles(g *Graph) int {
	t := 0
	for u, a := range g.Adj {
		for _, v := range a {
			if v <= u {
				continue
			}
			// common neighbours w > v of u and v (both lists sorted)
			b := g.Adj[v]
			i, j := 0, 0
			for i < len(a) && j < len(b) {
				switch {
				case a[i] < b[j]:
					i++
				case a[i] > b[j]:
					j++
				default:
					if a[i] > v {
						t++
					}
					i++
					j++
				}
			}
		}
	}
	return t
}

// Components returns the connected component of every node [N], numbered
// 0, 1, ... in order of their smallest node, and the number of components.
func Components(g *Graph) (comp []int, count int) {
	comp = make([]int, g.N)
	for i := range comp {
		comp[i] = -1
	}
	queue := make([]int, 0, g.N)
	for s := range comp {
		if comp[s] >= 0 {
			continue
		}
		comp[s] = count
		queue = append(queue[:0], s)
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, v := range g.Adj[u] {
				if comp[v] < 0 {
					comp[v] = count
					queue = append(queue, v)
				}
			}
		}
		count++
	}
	return comp, count
}
