package graphdata

import (
	"sync"

	"github.com/pkg/errors"
)

// Unreachable is the distance ShortestPaths gives a pair of nodes in
// different connected components.
const Unreachable = -1

// ShortestPaths returns the shortest-path (hop) distances of g [N*N],
// row-major: d[i*N+j] is the number of edges on a shortest path from i to
// j, 0 on the diagonal, Unreachable (-1) if no path exists. The matrix is
// symmetric. It runs one breadth-first search per node, O(N·(N+E)).
//
// g must be well formed (NewGraph, or Check returned nil); a neighbour
// outside [0, N) panics like a slice index.
func ShortestPaths(g *Graph) []int {
	n := g.N
	d := make([]int, n*n)
	for i := range d {
		d[i] = Unreachable
	}
	queue := make([]int, 0, n)
	for s := 0; s < n; s++ {
		queue = distancesFrom(g, s, d[s*n:(s+1)*n], queue)
	}
	return d
}

// distancesFrom writes the distances from s into row [N] (which must hold
// Unreachable everywhere) by breadth-first search, using queue as scratch
// space, and returns the queue for reuse.
func distancesFrom(g *Graph, s int, row, queue []int) []int {
	row[s] = 0
	queue = append(queue[:0], s)
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		for _, v := range g.Adj[u] {
			if row[v] == Unreachable {
				row[v] = row[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return queue
}

// NumSpatialRelations returns the number of relation ids SpatialRelations
// uses for maxDist: maxDist+1 distance buckets 0..maxDist and one id for
// unreachable pairs, maxDist+2 in all. A virtual (graph) token, if an
// encoding adds one, takes the next id, maxDist+2 (VirtualRelation), so a
// table with a virtual token has maxDist+3 rows; this package never
// produces that id.
func NumSpatialRelations(maxDist int) int { return maxDist + 2 }

// UnreachableRelation is the relation id of unreachable pairs (and of
// every pair involving a padding node in a Batch): maxDist+1.
func UnreachableRelation(maxDist int) int { return maxDist + 1 }

// VirtualRelation is the id reserved for pairs with a virtual (graph)
// token: maxDist+2, outside NumSpatialRelations(maxDist).
func VirtualRelation(maxDist int) int { return maxDist + 2 }

// SpatialRelations returns the Graphormer spatial relation of every pair
// of nodes of g [N*N], row-major, for a learnable bias table with
// NumSpatialRelations(maxDist) rows:
//
//	rel = min(d, maxDist)   for a reachable pair at distance d (0 for i == j)
//	rel = maxDist + 1       for an unreachable pair
//
// so distances >= maxDist share the bucket maxDist. It returns an error if
// maxDist < 1 or g is not well formed.
func SpatialRelations(g *Graph, maxDist int) ([]int, error) {
	if err := g.Check(0); err != nil {
		return nil, err
	}
	return DistanceRelations(ShortestPaths(g), g.N, maxDist)
}

// DistanceRelations maps a distance matrix dist [n*n] (as ShortestPaths
// returns) to spatial relation ids (see SpatialRelations). It returns an
// error if maxDist < 1, n <= 0, dist has not n*n entries ("distance matrix
// has 12 entries, want 4*4 = 16"), or an entry is below Unreachable.
func DistanceRelations(dist []int, n, maxDist int) ([]int, error) {
	if maxDist < 1 {
		return nil, errors.Errorf("graphdata: maximum distance %d must be at least 1", maxDist)
	}
	if n <= 0 {
		return nil, errors.Errorf("graphdata: empty graph: %d nodes", n)
	}
	if len(dist) != n*n {
		return nil, errors.Errorf("graphdata: distance matrix has %d entries, want %d*%d = %d", len(dist), n, n, n*n)
	}
	rel := make([]int, len(dist))
	for i, d := range dist {
		switch {
		case d == Unreachable:
			rel[i] = UnreachableRelation(maxDist)
		case d < 0:
			return nil, errors.Errorf("graphdata: distance %d between nodes %d and %d is negative (unreachable is %d)", d, i/n, i%n, Unreachable)
		default:
			rel[i] = min(d, maxDist)
		}
	}
	return rel, nil
}

// DistanceCache computes each graph's shortest-path distances (and
// Laplacian positional encodings) once and keeps them, keyed by a graph id
// (Example.ID). It is safe for concurrent use; the zero value is ready.
// Each id must name one graph: asking for an id with a graph of another
// size is an error, and a different graph of the same size under a reused
// id gets the cached values of the first. Returned slices are shared and
// must not be modified.
type DistanceCache struct {
	mu   sync.Mutex
	dist map[string]*cacheEntry
	lap  map[lapKey]*cacheEntry
}

type lapKey struct {
	id string
	k  int
}

type cacheEntry struct {
	once sync.Once
	n    int
	ints []int
	flts []float64
	err  error
}

func (c *DistanceCache) entry(id string, k int, lap bool) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lap {
		if c.lap == nil {
			c.lap = make(map[lapKey]*cacheEntry)
		}
		e := c.lap[lapKey{id, k}]
		if e == nil {
			e = &cacheEntry{}
			c.lap[lapKey{id, k}] = e
		}
		return e
	}
	if c.dist == nil {
		c.dist = make(map[string]*cacheEntry)
	}
	e := c.dist[id]
	if e == nil {
		e = &cacheEntry{}
		c.dist[id] = e
	}
	return e
}

func checkCached(e *cacheEntry, id string, g *Graph) error {
	if e.err != nil {
		return e.err
	}
	if e.n != g.N {
		return errors.Errorf("graphdata: distance cache: graph %q has %d nodes, the cached graph of that id %d (ids must be unique)", id, g.N, e.n)
	}
	return nil
}

// Distances returns ShortestPaths(g), computed on the first call for id.
// It returns an error if id is empty, g is not well formed, or id was
// cached for a graph of another size.
func (c *DistanceCache) Distances(id string, g *Graph) ([]int, error) {
	if id == "" {
		return nil, errors.New("graphdata: distance cache: empty graph id")
	}
	if err := g.Check(0); err != nil {
		return nil, err
	}
	e := c.entry(id, 0, false)
	e.once.Do(func() { e.n, e.ints = g.N, ShortestPaths(g) })
	if err := checkCached(e, id, g); err != nil {
		return nil, err
	}
	return e.ints, nil
}

// LaplacianPE returns LaplacianPE(g, k), computed on the first call for
// (id, k), with the same errors as Distances and LaplacianPE.
func (c *DistanceCache) LaplacianPE(id string, g *Graph, k int) ([]float64, error) {
	if id == "" {
		return nil, errors.New("graphdata: distance cache: empty graph id")
	}
	if err := g.Check(0); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, errors.Errorf("graphdata: Laplacian encoding size %d must be at least 1", k)
	}
	e := c.entry(id, k, true)
	e.once.Do(func() { e.n = g.N; e.flts, e.err = LaplacianPE(g, k) })
	if err := checkCached(e, id, g); err != nil {
		return nil, err
	}
	return e.flts, nil
}

// Len returns the number of graphs whose distances are cached.
func (c *DistanceCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dist)
}
