package graphdata

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/pkg/errors"
)

// The synthetic tasks.
const (
	// KindDistance is a per-node task: one node is marked (feature 1, the
	// others 0); each node's class is its shortest-path distance to the
	// marked node, clipped to MaxDist, or MaxDist+1 if it is unreachable.
	KindDistance = "distance-to-marked"
	// KindTriangles is a per-graph task: every node has the feature 1; the
	// graph's class is its number of triangles, clipped to MaxTriangles.
	KindTriangles = "triangles"
)

// Kinds lists the task kinds.
var Kinds = []string{KindDistance, KindTriangles}

// taskStream is added to the example index to form the second PCG seed
// word, so that graph streams differ from other streams of the same seed.
const taskStream = 0x6772617068730000 // "graphs"

// TaskOptions configure Generate.
type TaskOptions struct {
	// Kind is KindDistance or KindTriangles.
	Kind string
	// Every graph has a number of nodes drawn uniformly from [MinNodes,
	// MaxNodes]. A set with larger MinNodes/MaxNodes than the training set
	// (and another Seed) is the out-of-distribution test.
	MinNodes, MaxNodes int
	// Graphs are Erdős–Rényi G(n, p): each of the n(n-1)/2 pairs is an edge
	// independently with probability p. Set exactly one of EdgeProb (a
	// fixed p in (0, 1]) and AvgDegree (p = min(1, AvgDegree/(n-1)): the
	// expected degree stays the same at every size, so larger graphs have
	// longer paths).
	EdgeProb, AvgDegree float64
	// Connected joins the components of each sampled graph into one: for
	// the second and later components (in order of their smallest node),
	// an edge from a random node of the component to a random node of the
	// components before it.
	Connected bool
	// Count is the number of graphs; Seed seeds them. Example i depends
	// only on (Seed, i) and the other options, so a smaller Count gives a
	// prefix of a larger one.
	Count int
	Seed  uint64
	// MaxDist clips the distance labels of KindDistance (>= 1): classes
	// 0..MaxDist, and MaxDist+1 for unreachable nodes.
	MaxDist int
	// MaxTriangles clips the labels of KindTriangles (>= 1): classes
	// 0..MaxTriangles.
	MaxTriangles int
}

// DefaultTaskOptions returns options for kind with reasonably balanced
// classes on graphs of 8 to 24 nodes: 2000 graphs, seed 1, connected
// G(n, p) with average degree 2.5, MaxDist 6, MaxTriangles 5. (Seed 1,
// distance classes 0..6 in %: 6 17 27 25 14 7 4; triangle classes 0..5:
// 16 20 19 17 11 17, and 10 22 22 19 12 16 on 32 to 48 nodes.)
func DefaultTaskOptions(kind string) TaskOptions {
	return TaskOptions{Kind: kind, MinNodes: 8, MaxNodes: 24, Count: 2000, Seed: 1,
		AvgDegree: 2.5, Connected: true, MaxDist: 6, MaxTriangles: 5}
}

// Validate returns an error naming the first bad option.
func (o TaskOptions) Validate() error {
	if !slices.Contains(Kinds, o.Kind) {
		return errors.Errorf("graphdata: unknown task kind %q (valid: %v)", o.Kind, Kinds)
	}
	if o.MinNodes < 1 || o.MaxNodes < o.MinNodes {
		return errors.Errorf("graphdata: node counts [%d, %d]: need 1 <= MinNodes <= MaxNodes", o.MinNodes, o.MaxNodes)
	}
	if o.MaxNodes > MaxGraphNodes {
		return errors.Errorf("graphdata: MaxNodes %d is more than this package's limit of %d", o.MaxNodes, MaxGraphNodes)
	}
	if o.Count < 1 {
		return errors.Errorf("graphdata: Count %d must be at least 1", o.Count)
	}
	switch {
	case math.IsNaN(o.EdgeProb) || math.IsNaN(o.AvgDegree) || math.IsInf(o.AvgDegree, 0):
		return errors.Errorf("graphdata: EdgeProb %v and AvgDegree %v must be finite", o.EdgeProb, o.AvgDegree)
	case (o.EdgeProb != 0) == (o.AvgDegree != 0):
		return errors.Errorf("graphdata: set exactly one of EdgeProb (%v) and AvgDegree (%v)", o.EdgeProb, o.AvgDegree)
	case o.EdgeProb < 0 || o.EdgeProb > 1:
		return errors.Errorf("graphdata: EdgeProb %v is outside (0, 1]", o.EdgeProb)
	case o.AvgDegree < 0:
		return errors.Errorf("graphdata: AvgDegree %v must be positive", o.AvgDegree)
	}
	if o.Kind == KindDistance && o.MaxDist < 1 {
		return errors.Errorf("graphdata: %s: MaxDist %d must be at least 1", o.Kind, o.MaxDist)
	}
	if o.Kind == KindTriangles && o.MaxTriangles < 1 {
		return errors.Errorf("graphdata: %s: MaxTriangles %d must be at least 1", o.Kind, o.MaxTriangles)
	}
	return nil
}

// Example is one graph of a Dataset.
type Example struct {
	// ID identifies the graph (for DistanceCache): kind, sizes, model,
	// seed and index, unique across data sets with different options.
	ID    string
	Graph *Graph
	// Features [N*F] row-major [N, F] (F = Dataset.NumFeatures).
	Features []float32
	// Labels [N] for a per-node task, [1] for a per-graph task, each in
	// [0, Dataset.NumClasses); nil for a regression task.
	Labels []int
	// Target is the graph's real-valued target of a regression task
	// (Dataset.Regression), such as a molecule's TPSA; 0 otherwise.
	Target float64
	// Marked is the marked node of KindDistance, -1 otherwise.
	Marked int
}

// Dataset is a list of labelled graphs.
type Dataset struct {
	Options TaskOptions
	// PerNode: labels are per node (else one per graph).
	PerNode bool
	// NumFeatures is F, NumClasses the number of label classes (0 for a
	// regression task).
	NumFeatures, NumClasses int
	// Regression: each graph has a real-valued Example.Target instead of
	// labels (a per-graph task: PerNode is false, NumClasses 0).
	Regression bool
	Examples   []*Example
}

// Generate returns o.Count labelled random graphs (see TaskOptions and the
// Kind constants). Each graph is sampled, optionally connected, then its
// nodes are renamed by a uniform random permutation, so that node order
// carries no information; the task (marked node, labels) is drawn after
// the shuffle. It returns o.Validate's error for bad options.
func Generate(o TaskOptions) (*Dataset, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ds := &Dataset{Options: o, NumFeatures: 1}
	switch o.Kind {
	case KindDistance:
		ds.PerNode, ds.NumClasses = true, o.MaxDist+2
	case KindTriangles:
		ds.NumClasses = o.MaxTriangles + 1
	}
	model := fmt.Sprintf("p%g", o.EdgeProb)
	if o.AvgDegree != 0 {
		model = fmt.Sprintf("deg%g", o.AvgDegree)
	}
	if o.Connected {
		model += "c"
	}
	ds.Examples = make([]*Example, o.Count)
	for i := range ds.Examples {
		rng := rand.New(rand.NewPCG(o.Seed, taskStream+uint64(i)))
		g, err := randomGraph(o, rng)
		if err != nil {
			return nil, err
		}
		ex := &Example{ID: fmt.Sprintf("%s/n%d-%d/%s/s%d/%d", o.Kind, o.MinNodes, o.MaxNodes, model, o.Seed, i),
			Graph: g, Features: make([]float32, g.N), Marked: -1}
		switch o.Kind {
		case KindDistance:
			ex.Marked = rng.IntN(g.N)
			ex.Features[ex.Marked] = 1
			row := make([]int, g.N)
			for j := range row {
				row[j] = Unreachable
			}
			distancesFrom(g, ex.Marked, row, nil)
			ex.Labels = make([]int, g.N)
			for j, d := range row {
				ex.Labels[j] = min(d, o.MaxDist)
				if d == Unreachable {
					ex.Labels[j] = o.MaxDist + 1
				}
			}
		case KindTriangles:
			for j := range ex.Features {
				ex.Features[j] = 1
			}
			ex.Labels = []int{min(Triangles(g), o.MaxTriangles)}
		}
		ds.Examples[i] = ex
	}
	return ds, nil
}

// randomGraph samples G(n, p), connects it if asked, and shuffles it.
func randomGraph(o TaskOptions, rng *rand.Rand) (*Graph, error) {
	n := o.MinNodes + rng.IntN(o.MaxNodes-o.MinNodes+1)
	p := o.EdgeProb
	if o.AvgDegree != 0 {
		p = 0
		if n > 1 {
			p = min(1, o.AvgDegree/float64(n-1))
		}
	}
	var edges [][2]int
	for u := 0; u < n; u++ {
		for v := u + 1; v < n; v++ {
			if rng.Float64() < p {
				edges = append(edges, [2]int{u, v})
			}
		}
	}
	g, err := NewGraph(n, edges)
	if err != nil {
		return nil, err
	}
	if o.Connected {
		comp, c := Components(g)
		if c > 1 {
			members := make([][]int, c)
			for v, k := range comp {
				members[k] = append(members[k], v)
			}
			before := slices.Clone(members[0])
			for k := 1; k < c; k++ {
				m := members[k]
				edges = append(edges, [2]int{m[rng.IntN(len(m))], before[rng.IntN(len(before))]})
				before = append(before, m...)
			}
			if g, err = NewGraph(n, edges); err != nil {
				return nil, err
			}
		}
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	return g.Permute(perm)
}

// Split divides ds into len(fracs) consecutive parts (train, validation,
// test, ...) holding the given fractions of its examples; the examples of
// a generated Dataset are independent, so consecutive parts are random
// splits. Part i has floor(fracs[i]*len) examples, the last the rest. The
// parts share ds's Example values. It returns an error if a fraction is
// not positive, the fractions do not sum to 1 (within 1e-9), or a part
// would be empty.
func Split(ds *Dataset, fracs []float64) ([]*Dataset, error) {
	if ds == nil || len(ds.Examples) == 0 {
		return nil, errors.New("graphdata: split of an empty data set")
	}
	if len(fracs) == 0 {
		return nil, errors.New("graphdata: split needs at least one fraction")
	}
	sum := 0.0
	for i, f := range fracs {
		if !(f > 0) || math.IsInf(f, 0) {
			return nil, errors.Errorf("graphdata: split fraction %d is %v, must be positive", i, f)
		}
		sum += f
	}
	if math.Abs(sum-1) > 1e-9 {
		return nil, errors.Errorf("graphdata: split fractions %v sum to %v, not 1", fracs, sum)
	}
	n := len(ds.Examples)
	parts := make([]*Dataset, len(fracs))
	start := 0
	for i, f := range fracs {
		end := start + int(math.Floor(f*float64(n)))
		if i == len(fracs)-1 {
			end = n
		}
		if end <= start {
			return nil, errors.Errorf("graphdata: split fraction %d (%v) of %d examples is empty", i, f, n)
		}
		p := *ds
		p.Examples = ds.Examples[start:end:end]
		parts[i] = &p
		start = end
	}
	return parts, nil
}
