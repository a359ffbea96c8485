package graphdata

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

func TestNewBatchPerNode(t *testing.T) {
	ds, err := Generate(TaskOptions{Kind: KindDistance, MinNodes: 3, MaxNodes: 9, AvgDegree: 2, Connected: true, Count: 30, Seed: 2, MaxDist: 4})
	if err != nil {
		t.Fatal(err)
	}
	// three graphs of different sizes
	var idx []int
	seen := map[int]bool{}
	for i, ex := range ds.Examples {
		if !seen[ex.Graph.N] && len(idx) < 3 {
			seen[ex.Graph.N] = true
			idx = append(idx, i)
		}
	}
	const maxDist, lapK = 2, 3
	var cache DistanceCache
	bt, err := NewBatch(ds, idx, BatchOptions{MaxDist: maxDist, MaxNodes: 9, LapK: lapK, Cache: &cache})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, i := range idx {
		n = max(n, ds.Examples[i].Graph.N)
	}
	if bt.B != 3 || bt.N != n || bt.F != 1 || bt.NumRel != NumSpatialRelations(maxDist) || !bt.PerNode || bt.LapK != lapK {
		t.Fatalf("batch B %d N %d F %d NumRel %d PerNode %v LapK %d", bt.B, bt.N, bt.F, bt.NumRel, bt.PerNode, bt.LapK)
	}
	if len(bt.X) != 3*n || len(bt.Mask) != 3*n || len(bt.Rel) != 3*n*n || len(bt.Degrees) != 3*n ||
		len(bt.Labels) != 3*n || len(bt.LapPE) != 3*n*lapK || len(bt.Valid) != 3 {
		t.Fatal("wrong lengths")
	}
	unreach := UnreachableRelation(maxDist)
	for b, i := range idx {
		ex := ds.Examples[i]
		g := ex.Graph
		if bt.Nodes[b] != g.N {
			t.Errorf("graph %d: Nodes %d, want %d", b, bt.Nodes[b], g.N)
		}
		rel, _ := SpatialRelations(g, maxDist)
		pe, _ := LaplacianPE(g, lapK)
		for u := 0; u < n; u++ {
			real := u < g.N
			if bt.Valid[b][u] != real || bt.Mask[b*n+u] != map[bool]float32{true: 1, false: 0}[real] {
				t.Fatalf("graph %d node %d: valid %v mask %v, real %v", b, u, bt.Valid[b][u], bt.Mask[b*n+u], real)
			}
			wantX, wantL, wantD := float32(0), -1, 0
			if real {
				wantX, wantL, wantD = ex.Features[u], ex.Labels[u], len(g.Adj[u])
			}
			if bt.X[b*n+u] != wantX || bt.Labels[b*n+u] != wantL || bt.Degrees[b*n+u] != wantD {
				t.Fatalf("graph %d node %d: x %v label %d degree %d, want %v %d %d", b, u,
					bt.X[b*n+u], bt.Labels[b*n+u], bt.Degrees[b*n+u], wantX, wantL, wantD)
			}
			for j := 0; j < lapK; j++ {
				w := float32(0)
				if real {
					w = float32(pe[u*lapK+j])
				}
				if bt.LapPE[(b*n+u)*lapK+j] != w {
					t.Fatalf("graph %d node %d: LapPE %v, want %v", b, u, bt.LapPE[(b*n+u)*lapK+j], w)
				}
			}
			for v := 0; v < n; v++ {
				w := unreach
				if real && v < g.N {
					w = rel[u*g.N+v]
				}
				if got := bt.Rel[(b*n+u)*n+v]; got != w {
					t.Fatalf("graph %d pair (%d, %d): relation %d, want %d", b, u, v, got, w)
				}
			}
		}
	}
	if cache.Len() != 3 {
		t.Errorf("cache holds %d graphs, want 3", cache.Len())
	}
	// without the cache: the same batch
	nc, err := NewBatch(ds, idx, BatchOptions{MaxDist: maxDist, MaxNodes: 9, LapK: lapK})
	if err != nil || !reflect.DeepEqual(nc, bt) {
		t.Errorf("batch without the cache differs (%v)", err)
	}
	p, err := bt.Positions()
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != posenc.PosPairwise || p.Batch != 3 || p.TQ != n || p.TK != n || p.NumRel != bt.NumRel {
		t.Errorf("positions %+v", p)
	}
	if err := p.Check(3, n, n); err != nil {
		t.Error(err)
	}
}

func TestNewBatchPerGraphAndFlip(t *testing.T) {
	ds, err := Generate(TaskOptions{Kind: KindTriangles, MinNodes: 4, MaxNodes: 8, EdgeProb: 0.5, Count: 10, Seed: 3, MaxTriangles: 4})
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{4, 1, 7, 1}
	var cache DistanceCache
	o := BatchOptions{MaxDist: 3, LapK: 8, Cache: &cache}
	plain, err := NewBatch(ds, idx, o)
	if err != nil {
		t.Fatal(err)
	}
	if plain.PerNode || len(plain.Labels) != 4 {
		t.Fatalf("per-graph batch: PerNode %v, %d labels", plain.PerNode, len(plain.Labels))
	}
	for b, i := range idx {
		if plain.Labels[b] != ds.Examples[i].Labels[0] {
			t.Errorf("graph %d: label %d, want %d", b, plain.Labels[b], ds.Examples[i].Labels[0])
		}
	}
	o.Flip = rand.New(rand.NewPCG(1, 2))
	flipped, err := NewBatch(ds, idx, o)
	if err != nil {
		t.Fatal(err)
	}
	n, k := plain.N, 8
	nflip := 0
	for b := range idx {
		for j := 0; j < k; j++ {
			s := float32(0)
			for u := 0; u < n; u++ {
				a, f := plain.LapPE[(b*n+u)*k+j], flipped.LapPE[(b*n+u)*k+j]
				if a != f && a != -f {
					t.Fatalf("graph %d column %d node %d: %v flipped to %v", b, j, u, a, f)
				}
				if s == 0 && math.Abs(float64(a)) > 1e-3 {
					s = f / a
				}
				if s != 0 && f != s*a {
					t.Fatalf("graph %d column %d: not one sign for the column", b, j)
				}
			}
			if s < 0 {
				nflip++
			}
		}
	}
	if nflip == 0 {
		t.Error("no column flipped")
	}
	again, _ := NewBatch(ds, idx, BatchOptions{MaxDist: 3, LapK: 8, Cache: &cache})
	if !reflect.DeepEqual(again.LapPE, plain.LapPE) {
		t.Error("flipping changed the cached encoding")
	}
}

func TestNewBatchErrors(t *testing.T) {
	ds, err := Generate(TaskOptions{Kind: KindDistance, MinNodes: 12, MaxNodes: 12, AvgDegree: 2, Count: 3, Seed: 1, MaxDist: 3})
	if err != nil {
		t.Fatal(err)
	}
	bad := *ds
	bad.Examples = []*Example{{ID: "x", Graph: pathGraph(t, 3), Features: make([]float32, 3), Labels: []int{0, 1, 9}}, nil,
		{ID: "y", Graph: pathGraph(t, 3), Features: make([]float32, 2), Labels: []int{0, 1, 2}}}
	ok := BatchOptions{MaxDist: 3}
	for _, c := range []struct {
		name string
		ds   *Dataset
		idx  []int
		o    BatchOptions
		want string
	}{
		{"no examples", ds, nil, ok, "empty batch"},
		{"nil data set", nil, []int{0}, ok, "empty batch"},
		{"index", ds, []int{0, 3}, ok, "example 3 is outside the 3 examples"},
		{"max dist", ds, []int{0}, BatchOptions{}, "maximum distance 0 must be at least 1"},
		{"lap k", ds, []int{0}, BatchOptions{MaxDist: 2, LapK: -1}, "Laplacian encoding size -1 is negative"},
		{"too large", ds, []int{1}, BatchOptions{MaxDist: 2, MaxNodes: 10}, "example 1 (distance-to-marked/n12-12/deg2/s1/1): graph has 12 nodes, the maximum is 10"},
		{"label", &bad, []int{0}, ok, "example 0 (x) has label 9 outside [0, 5)"},
		{"nil example", &bad, []int{1}, ok, "example 1 is nil"},
		{"features", &bad, []int{2}, ok, "example 2 (y) has 2 features and 3 labels, want 3*1 and 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := NewBatch(c.ds, c.idx, c.o)
			if b != nil {
				t.Error("got a batch")
			}
			errContains(t, err, c.want)
		})
	}
}

// TestBatchRegression: a regression data set's batch carries the targets
// and no labels; a non-finite target and a per-node regression set are
// errors.
func TestBatchRegression(t *testing.T) {
	g2, _ := NewGraph(2, [][2]int{{0, 1}})
	g3, _ := NewGraph(3, [][2]int{{0, 1}})
	ds := &Dataset{NumFeatures: 1, Regression: true, Examples: []*Example{
		{ID: "a", Graph: g2, Features: []float32{1, 1}, Target: 1.5},
		{ID: "b", Graph: g3, Features: []float32{1, 1, 1}, Target: -2}}}
	bt, err := NewBatch(ds, []int{1, 0}, BatchOptions{MaxDist: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Targets) != 2 || bt.Targets[0] != -2 || bt.Targets[1] != 1.5 || bt.Labels != nil || bt.N != 3 {
		t.Fatalf("targets %v, labels %v, N %d", bt.Targets, bt.Labels, bt.N)
	}
	// the lone node 2 of graph b is unreachable from 0 and 1
	if bt.Rel[2] != UnreachableRelation(2) || bt.Rel[1] != 1 {
		t.Fatalf("relations %v", bt.Rel[:9])
	}
	nan := *ds
	nan.Examples = []*Example{{ID: "c", Graph: g2, Features: []float32{1, 1}, Target: math.NaN()}}
	if _, err := NewBatch(&nan, []int{0}, BatchOptions{MaxDist: 2}); err == nil || !strings.Contains(err.Error(), "not a finite number") {
		t.Fatalf("NaN target: %v", err)
	}
	pn := *ds
	pn.PerNode = true
	if _, err := NewBatch(&pn, []int{0}, BatchOptions{MaxDist: 2}); err == nil || !strings.Contains(err.Error(), "must be per graph") {
		t.Fatalf("per-node regression: %v", err)
	}
}
