package graphdata

import (
	"reflect"
	"testing"
)

func TestValidate(t *testing.T) {
	d := DefaultTaskOptions(KindDistance)
	for _, c := range []struct {
		name string
		mod  func(o *TaskOptions)
		want string
	}{
		{"kind", func(o *TaskOptions) { o.Kind = "cliques" }, `unknown task kind "cliques"`},
		{"min nodes", func(o *TaskOptions) { o.MinNodes = 0 }, "node counts [0, 24]: need 1 <= MinNodes <= MaxNodes"},
		{"max below min", func(o *TaskOptions) { o.MaxNodes = 4 }, "node counts [8, 4]"},
		{"max too large", func(o *TaskOptions) { o.MaxNodes = 5000 }, "MaxNodes 5000 is more than this package's limit of 4096"},
		{"count", func(o *TaskOptions) { o.Count = 0 }, "Count 0 must be at least 1"},
		{"both models", func(o *TaskOptions) { o.EdgeProb = 0.1 }, "set exactly one of EdgeProb (0.1) and AvgDegree (2.5)"},
		{"no model", func(o *TaskOptions) { o.AvgDegree = 0 }, "set exactly one of EdgeProb (0) and AvgDegree (0)"},
		{"edge prob", func(o *TaskOptions) { o.AvgDegree, o.EdgeProb = 0, 1.5 }, "EdgeProb 1.5 is outside (0, 1]"},
		{"negative degree", func(o *TaskOptions) { o.AvgDegree = -1 }, "AvgDegree -1 must be positive"},
		{"max dist", func(o *TaskOptions) { o.MaxDist = 0 }, "distance-to-marked: MaxDist 0 must be at least 1"},
		{"max triangles", func(o *TaskOptions) { o.Kind = KindTriangles; o.MaxTriangles = 0 }, "triangles: MaxTriangles 0 must be at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := d
			c.mod(&o)
			_, err := Generate(o)
			errContains(t, err, c.want)
		})
	}
	for _, k := range Kinds {
		if err := DefaultTaskOptions(k).Validate(); err != nil {
			t.Errorf("defaults of %s: %v", k, err)
		}
	}
}

func TestGenerate(t *testing.T) {
	for _, c := range []struct {
		name string
		o    TaskOptions
	}{
		{"distance connected", TaskOptions{Kind: KindDistance, MinNodes: 5, MaxNodes: 12, AvgDegree: 1.5, Connected: true, Count: 40, Seed: 3, MaxDist: 3}},
		{"distance disconnected", TaskOptions{Kind: KindDistance, MinNodes: 1, MaxNodes: 10, EdgeProb: 0.15, Count: 40, Seed: 4, MaxDist: 2}},
		{"triangles", TaskOptions{Kind: KindTriangles, MinNodes: 6, MaxNodes: 14, EdgeProb: 0.4, Count: 40, Seed: 5, MaxTriangles: 5}},
		{"triangles ood", TaskOptions{Kind: KindTriangles, MinNodes: 30, MaxNodes: 40, AvgDegree: 4, Connected: true, Count: 10, Seed: 6, MaxTriangles: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			ds, err := Generate(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Examples) != o.Count || ds.NumFeatures != 1 || ds.PerNode != (o.Kind == KindDistance) {
				t.Fatalf("%d examples, %d features, per node %v", len(ds.Examples), ds.NumFeatures, ds.PerNode)
			}
			ids := map[string]bool{}
			sizes := map[int]bool{}
			labels := map[int]int{}
			for i, ex := range ds.Examples {
				g := ex.Graph
				if err := g.Check(o.MaxNodes); err != nil {
					t.Fatal(err)
				}
				if g.N < o.MinNodes {
					t.Fatalf("example %d has %d nodes, below %d", i, g.N, o.MinNodes)
				}
				sizes[g.N] = true
				if ids[ex.ID] {
					t.Fatalf("duplicate id %s", ex.ID)
				}
				ids[ex.ID] = true
				if _, nc := Components(g); o.Connected && nc != 1 {
					t.Fatalf("example %d has %d components", i, nc)
				}
				if len(ex.Features) != g.N {
					t.Fatalf("example %d: %d features for %d nodes", i, len(ex.Features), g.N)
				}
				switch o.Kind {
				case KindDistance:
					d := ShortestPaths(g)
					for v := 0; v < g.N; v++ {
						want := min(d[ex.Marked*g.N+v], o.MaxDist)
						if d[ex.Marked*g.N+v] == Unreachable {
							want = o.MaxDist + 1
						}
						if ex.Labels[v] != want {
							t.Fatalf("example %d node %d: label %d, want %d", i, v, ex.Labels[v], want)
						}
						if f := ex.Features[v]; f != map[bool]float32{true: 1, false: 0}[v == ex.Marked] {
							t.Fatalf("example %d node %d: feature %v, marked %d", i, v, f, ex.Marked)
						}
						labels[ex.Labels[v]]++
					}
				case KindTriangles:
					if want := min(bruteTriangles(g), o.MaxTriangles); len(ex.Labels) != 1 || ex.Labels[0] != want {
						t.Fatalf("example %d: labels %v, want [%d]", i, ex.Labels, want)
					}
					labels[ex.Labels[0]]++
				}
			}
			if len(sizes) < 3 || len(labels) < 3 {
				t.Errorf("little variety: sizes %v, labels %v", sizes, labels)
			}
			for l := range labels {
				if l < 0 || l >= ds.NumClasses {
					t.Errorf("label %d outside [0, %d)", l, ds.NumClasses)
				}
			}
		})
	}
}

// TestGenerateSeeded pins the first graphs of a seed (results must be
// reproducible across versions) and checks that a smaller Count gives a
// prefix and another seed other graphs.
func TestGenerateSeeded(t *testing.T) {
	o := TaskOptions{Kind: KindDistance, MinNodes: 5, MaxNodes: 7, AvgDegree: 2, Connected: true, Count: 20, Seed: 42, MaxDist: 3}
	a, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	ex := a.Examples[0]
	if ex.ID != "distance-to-marked/n5-7/deg2c/s42/0" ||
		!reflect.DeepEqual(ex.Graph.Edges(), pinnedEdges) || ex.Marked != pinnedMarked {
		t.Errorf("first example changed: %s %v marked %d; pinned %v marked %d",
			ex.ID, ex.Graph.Edges(), ex.Marked, pinnedEdges, pinnedMarked)
	}
	o.Count = 5
	b, _ := Generate(o)
	for i, e := range b.Examples {
		if !reflect.DeepEqual(e, a.Examples[i]) {
			t.Fatalf("Count 5: example %d differs from Count 20's", i)
		}
	}
	o.Seed = 43
	c, _ := Generate(o)
	same := 0
	for i, e := range c.Examples {
		if reflect.DeepEqual(e.Graph, a.Examples[i].Graph) {
			same++
		}
	}
	if same == len(c.Examples) {
		t.Error("seed 43 gives the graphs of seed 42")
	}
}

// Pinned first example of TestGenerateSeeded.
var (
	pinnedEdges  = [][2]int{{0, 4}, {1, 2}, {1, 3}, {2, 5}, {3, 4}, {4, 5}}
	pinnedMarked = 0
)

// TestGenerateShuffled checks that node order carries no information: over
// many graphs, every node index is about equally likely to be each node of
// the unshuffled sample. With AvgDegree tiny, the sampled graph is a tree of
// joining edges whose first component holds node 0, so without the shuffle
// node 0 would have a markedly higher degree.
func TestGenerateShuffled(t *testing.T) {
	o := TaskOptions{Kind: KindTriangles, MinNodes: 8, MaxNodes: 8, AvgDegree: 0.01, Connected: true, Count: 400, Seed: 9, MaxTriangles: 1}
	ds, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	deg := make([]float64, 8)
	for _, ex := range ds.Examples {
		for i, d := range Degrees(ex.Graph) {
			deg[i] += float64(d) / float64(o.Count)
		}
	}
	// mean degree is 2*7/8 = 1.75 per node
	for i, d := range deg {
		if d < 1.5 || d > 2.0 {
			t.Errorf("node %d has mean degree %.3f (all: %.3f), want about 1.75", i, d, deg)
		}
	}
}

func TestSplit(t *testing.T) {
	ds, err := Generate(TaskOptions{Kind: KindTriangles, MinNodes: 4, MaxNodes: 6, EdgeProb: 0.5, Count: 101, Seed: 1, MaxTriangles: 2})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := Split(ds, []float64{0.8, 0.1, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || len(parts[0].Examples) != 80 || len(parts[1].Examples) != 10 || len(parts[2].Examples) != 11 {
		t.Fatalf("split sizes %d %d %d, want 80 10 11", len(parts[0].Examples), len(parts[1].Examples), len(parts[2].Examples))
	}
	if parts[1].Examples[0] != ds.Examples[80] || parts[2].Examples[10] != ds.Examples[100] || parts[2].NumClasses != ds.NumClasses {
		t.Error("parts are not consecutive slices of the data set")
	}
	parts[0].Examples = append(parts[0].Examples, nil)
	if parts[1].Examples[0] == nil {
		t.Error("appending to a part overwrites the next")
	}
	for _, c := range []struct {
		fracs []float64
		want  string
	}{
		{nil, "at least one fraction"},
		{[]float64{0.5, 0.6}, "sum to 1.1, not 1"},
		{[]float64{1.2, -0.2}, "split fraction 1 is -0.2, must be positive"},
		{[]float64{0.995, 0.0025, 0.0025}, "split fraction 1 (0.0025) of 101 examples is empty"},
		{[]float64{0.001, 0.999}, "split fraction 0 (0.001) of 101 examples is empty"},
	} {
		_, err := Split(ds, c.fracs)
		errContains(t, err, c.want)
	}
	if _, err := Split(&Dataset{}, []float64{1}); err == nil {
		t.Error("empty data set: no error")
	}
}
