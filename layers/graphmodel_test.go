package layers_test

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// tgraph is a small test graph: n nodes, undirected edges, one feature per
// node and per-node labels.
type tgraph struct {
	n      int
	edges  [][2]int
	feat   []float64
	labels []int
	// lap [n*2] is a stand-in for 2 Laplacian eigenvectors per node (any
	// per-node input works for the model's tests), nil: derived from the
	// node index (lapOf).
	lap []float64
}

// testMaxDist is the maximum distance of the test relations: the default
// GraphMaxDist, so relations have testMaxDist+2 ids.
const testMaxDist = 6

// relations returns the spatial relations [n*n] of g padded to N nodes
// (BFS distances clipped to testMaxDist; unreachable and padding pairs
// testMaxDist+1), as experiments/graphdata builds them.
func (g tgraph) relations(N int) []int {
	adj := make([][]int, g.n)
	for _, e := range g.edges {
		adj[e[0]] = append(adj[e[0]], e[1])
		adj[e[1]] = append(adj[e[1]], e[0])
	}
	rel := make([]int, N*N)
	for i := range rel {
		rel[i] = testMaxDist + 1
	}
	for s := 0; s < g.n; s++ {
		dist := make([]int, g.n)
		for i := range dist {
			dist[i] = -1
		}
		dist[s] = 0
		q := []int{s}
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			for _, v := range adj[u] {
				if dist[v] < 0 {
					dist[v] = dist[u] + 1
					q = append(q, v)
				}
			}
		}
		for j, d := range dist {
			if d >= 0 {
				rel[s*N+j] = min(d, testMaxDist)
			}
		}
	}
	return rel
}

// permute renames node i to perm[i].
func (g tgraph) permute(perm []int) tgraph {
	out := tgraph{n: g.n, feat: make([]float64, g.n), labels: make([]int, g.n), lap: make([]float64, 2*g.n)}
	lap := lapOf(g, 2)
	for _, e := range g.edges {
		out.edges = append(out.edges, [2]int{perm[e[0]], perm[e[1]]})
	}
	for i := 0; i < g.n; i++ {
		out.feat[perm[i]], out.labels[perm[i]] = g.feat[i], g.labels[i]
		copy(out.lap[2*perm[i]:2*perm[i]+2], lap[2*i:2*i+2])
	}
	return out
}

var (
	// path 0-1-2-3 plus 1-3: a triangle and a tail.
	graphA = tgraph{n: 4, edges: [][2]int{{0, 1}, {1, 2}, {2, 3}, {1, 3}}, feat: []float64{1, 0, 0, 0}, labels: []int{0, 1, 2, 2}}
	// a path of 3 nodes and an isolated node 3 (unreachable pairs).
	graphB = tgraph{n: 4, edges: [][2]int{{0, 1}, {1, 2}}, feat: []float64{0, 0, 1, 0}, labels: []int{2, 1, 0, 3}}
	// a path of 3 nodes.
	graphC = tgraph{n: 3, edges: [][2]int{{0, 1}, {1, 2}}, feat: []float64{0, 1, 0}, labels: []int{1, 0, 1}}
)

// tinyGraphConfig is a 2-block, 2-head, d=8 per-node classifier of 4
// classes.
func tinyGraphConfig(pos string) layers.GraphConfig {
	c := layers.DefaultGraphConfig(4)
	c.Encoder.DModel, c.Encoder.Heads, c.Encoder.Layers, c.Encoder.FFN, c.Encoder.InitStd = 8, 2, 2, 12, 0.5
	c.Encoder.Pos = pos
	return c
}

// built is a model applied to a padded batch.
type built struct {
	g      *G.ExprGraph
	p      *graph.Params
	m      *layers.GraphTransformer
	logits *G.Node
	loss   *G.Node
	N      int
	pos    *posenc.Positions // the relations the model was built with
	mask   *G.Node           // the padding mask input, nil if unmasked
}

// lapOf is g.lap, or a deterministic stand-in for Laplacian eigenvectors
// [n*k] derived from the node index.
func lapOf(g tgraph, k int) []float64 {
	if g.lap != nil {
		if k != 2 {
			panic("lapOf: permuted test graphs have k = 2")
		}
		return g.lap
	}
	out := make([]float64, g.n*k)
	for i := 0; i < g.n; i++ {
		for c := 0; c < k; c++ {
			out[i*k+c] = math.Sin(float64(7*i+3*c+1)) * (1 + g.feat[i])
		}
	}
	return out
}

// build pads graphs to N nodes, builds cfg's model on them with seeded
// random weights (seed) and the per-node or per-graph cross-entropy.
func build(t *testing.T, cfg layers.GraphConfig, graphs []tgraph, N int, seed int64) *built {
	t.Helper()
	bt, err := buildWith(cfg, graphs, N, seed, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// buildWith is build returning the model's error, with the padding mask
// only if masked, and the relations carrying feed (may be nil).
func buildWith(cfg layers.GraphConfig, graphs []tgraph, N int, seed int64, masked bool, feed *posenc.Feed) (*built, error) {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewGraphTransformer(g, p, cfg)
	if err != nil {
		return nil, err
	}
	b := len(graphs)
	x := make([]float64, b*N)
	rel := make([]int, 0, b*N*N)
	valid := make([][]bool, b)
	var lap []float64
	if cfg.LapK > 0 {
		lap = make([]float64, b*N*cfg.LapK)
	}
	var labels []int
	for i, gr := range graphs {
		copy(x[i*N:], gr.feat)
		rel = append(rel, gr.relations(N)...)
		valid[i] = make([]bool, N)
		for j := 0; j < gr.n; j++ {
			valid[i][j] = true
		}
		if lap != nil {
			copy(lap[i*N*cfg.LapK:], lapOf(gr, cfg.LapK))
		}
		if cfg.PerNode {
			for j := 0; j < N; j++ {
				l := -1
				if j < gr.n {
					l = gr.labels[j]
				}
				labels = append(labels, l)
			}
		} else {
			labels = append(labels, gr.labels[0])
		}
	}
	pos, err := posenc.NewPairwise(b, N, N, testMaxDist+2, rel)
	if err != nil {
		return nil, err
	}
	xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, N, 1), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(b, N, 1), tensor.WithBacking(x))))
	mv, err := m.MaskValue(valid)
	if err != nil {
		return nil, err
	}
	pos.Feed = feed
	var mask *G.Node
	if masked {
		mask = G.NewTensor(g, tensor.Float64, 2, G.WithShape(b, N), G.WithName("mask"), G.WithValue(mv))
	}
	var lapN *G.Node
	if lap != nil {
		lapN = G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, N, cfg.LapK), G.WithName("lap"),
			G.WithValue(tensor.New(tensor.WithShape(b, N, cfg.LapK), tensor.WithBacking(lap))))
	}
	logits, err := m.Fwd(xn, pos, mask, lapN)
	if err != nil {
		return nil, err
	}
	want := b
	if cfg.PerNode {
		want = b * N
	}
	if s := logits.Shape(); s.Dims() != 2 || s[0] != want || s[1] != cfg.Classes {
		return nil, fmt.Errorf("logits %v, want [%d, %d]", s, want, cfg.Classes)
	}
	tg := G.NewVector(g, tensor.Int, G.WithShape(len(labels)), G.WithName("targets"),
		G.WithValue(tensor.New(tensor.WithShape(len(labels)), tensor.WithBacking(labels))))
	loss, err := graph.CrossEntropy(logits, tg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(seed))
	for _, n := range p.Names() {
		d := p.Float64s(n)
		for i := range d {
			d[i] = rng.NormFloat64() * 0.5
		}
		if err := p.Set(n, d); err != nil {
			return nil, err
		}
	}
	return &built{g: g, p: p, m: m, logits: logits, loss: loss, N: N, pos: pos, mask: mask}, nil
}

// run runs the forward pass and returns the logits.
func (bt *built) run(t *testing.T) []float64 {
	t.Helper()
	vm := G.NewTapeMachine(bt.g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(bt.logits.Value())
}

// graphCases are the configurations every property test covers.
func graphCases() map[string]layers.GraphConfig {
	lap := tinyGraphConfig("none")
	lap.LapK = 2
	virt := tinyGraphConfig("graphormer-spatial")
	virt.VirtualNode = true
	pooled := tinyGraphConfig("graphormer-spatial+graphormer-centrality")
	pooled.PerNode = false
	pooledVirt := pooled
	pooledVirt.VirtualNode = true
	return map[string]layers.GraphConfig{
		"none":                   tinyGraphConfig("none"),
		"spatial":                tinyGraphConfig("graphormer-spatial"),
		"spatial+centrality":     tinyGraphConfig("graphormer-spatial+graphormer-centrality"),
		"laplacian":              lap,
		"spatial/virtual":        virt,
		"per-graph/mean":         pooled,
		"per-graph/virtual":      pooledVirt,
		"per-graph/mean/lap+spt": func() layers.GraphConfig { c := pooled; c.LapK = 2; return c }(),
	}
}

// TestGraphTransformerGrad gradient-checks the whole model (float64,
// central differences) on a padded batch: graphs of 4 and 3 nodes padded
// to 5, one with an unreachable node.
func TestGraphTransformerGrad(t *testing.T) {
	for name, cfg := range graphCases() {
		t.Run(name, func(t *testing.T) {
			bt := build(t, cfg, []tgraph{graphA, graphC, graphB}, 5, 3)
			if err := graph.GradCheck(bt.g, bt.loss, bt.m.Learnables(), graph.GradCheckOpts{MaxPerNode: 10, Seed: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGraphTransformerEquivariance renames the nodes of a graph: per-node
// logits are renamed the same way, per-graph logits do not change.
func TestGraphTransformerEquivariance(t *testing.T) {
	perm := []int{2, 0, 3, 1}
	for name, cfg := range graphCases() {
		t.Run(name, func(t *testing.T) {
			a := build(t, cfg, []tgraph{graphA, graphB}, 4, 5).run(t)
			b := build(t, cfg, []tgraph{graphA.permute(perm), graphB.permute(perm)}, 4, 5).run(t)
			k := cfg.Classes
			if !cfg.PerNode {
				assertClose(t, b, a, 1e-10)
				return
			}
			for gi := 0; gi < 2; gi++ {
				for i, pi := range perm {
					got := b[(gi*4+pi)*k : (gi*4+pi+1)*k]
					want := a[(gi*4+i)*k : (gi*4+i+1)*k]
					assertClose(t, got, want, 1e-10)
				}
			}
		})
	}
}

// TestGraphTransformerPadding: padding a batch with more nodes (masked
// keys, unreachable relations, zero features) does not change the logits
// of the real nodes or of the graphs.
func TestGraphTransformerPadding(t *testing.T) {
	for name, cfg := range graphCases() {
		t.Run(name, func(t *testing.T) {
			a := build(t, cfg, []tgraph{graphA, graphC}, 4, 7).run(t)
			b := build(t, cfg, []tgraph{graphA, graphC}, 7, 7).run(t)
			k := cfg.Classes
			if !cfg.PerNode {
				assertClose(t, b, a, 1e-10)
				return
			}
			for gi, gr := range []tgraph{graphA, graphC} {
				for i := 0; i < gr.n; i++ {
					assertClose(t, b[(gi*7+i)*k:(gi*7+i+1)*k], a[(gi*4+i)*k:(gi*4+i+1)*k], 1e-10)
				}
			}
		})
	}
}

func assertClose(t *testing.T, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) || math.IsNaN(got[i]) {
			t.Fatalf("value %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// TestGraphTransformerErrors checks the errors of bad configurations and
// inputs: each names the problem.
func TestGraphTransformerErrors(t *testing.T) {
	for _, c := range []struct {
		mod  func(*layers.GraphConfig)
		want string
	}{
		{func(c *layers.GraphConfig) { c.Encoder.Causal = true }, "must not be causal"},
		{func(c *layers.GraphConfig) { c.Features = 0 }, "0 features per node"},
		{func(c *layers.GraphConfig) { c.Classes = 1 }, "1 classes, need at least 2"},
		{func(c *layers.GraphConfig) { c.LapK = -1 }, "Laplacian size -1"},
		{func(c *layers.GraphConfig) { c.MaxNodes = -2 }, "maximum graph size -2"},
		{func(c *layers.GraphConfig) { c.Encoder.Pos = "rope3d" }, "rope3d"},
	} {
		cfg := tinyGraphConfig("none")
		c.mod(&cfg)
		_, err := layers.NewGraphTransformer(G.NewGraph(), graph.NewParams(tensor.Float64, 1), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %+v: error %v, want %q", cfg, err, c.want)
		}
	}

	const b, n = 2, 4
	rel := append(graphA.relations(n), graphB.relations(n)...)
	good, _ := posenc.NewPairwise(b, n, n, testMaxDist+2, rel)
	small, _ := posenc.NewPairwise(b, 3, 3, testMaxDist+2, make([]int, b*9))
	grid, _ := posenc.NewGrid(2, 2)
	tooMany, _ := posenc.NewPairwise(b, n, n, testMaxDist+5, rel)
	for _, c := range []struct {
		name     string
		pos      string
		lapK     int
		maxNodes int
		x        []int // shape of x
		p        *posenc.Positions
		mask     []int // shape of the mask, nil: none
		lap      []int // shape of lapPE, nil: none
		want     string
	}{
		{"features", "none", 0, 0, []int{b, n, 2}, good, nil, nil, "node features have shape (2, 4, 2), want [B, N, 1]"},
		{"too large", "graphormer-spatial", 0, 3, []int{b, n, 1}, good, nil, nil, "graphs have 4 nodes, the configured maximum is 3"},
		{"distance matrix shape", "graphormer-spatial", 0, 0, []int{b, n, 1}, small, nil, nil, "3 query and 3 key positions, the attention has 4 queries and 4 keys"},
		{"grid positions", "graphormer-spatial", 0, 0, []int{b, n, 1}, grid, nil, nil, "node positions are grid 2x2, want pairwise"},
		{"no positions", "graphormer-spatial", 0, 0, []int{b, n, 1}, nil, nil, nil, "accepts pairwise positions; the model gives it line positions"},
		{"relations beyond table", "graphormer-spatial", 0, 0, []int{b, n, 1}, tooMany, nil, nil, "positions have 11 relations, the table 9 rows"},
		{"mask shape", "none", 0, 0, []int{b, n, 1}, good, []int{b, 3}, nil, "mask has shape (2, 3), want [2, 4]"},
		{"lap missing", "none", 2, 0, []int{b, n, 1}, good, nil, nil, "lapPE is nil"},
		{"lap unexpected", "none", 0, 0, []int{b, n, 1}, good, nil, []int{b, n, 2}, "model has LapK 0"},
		{"lap shape", "none", 2, 0, []int{b, n, 1}, good, nil, []int{b, n, 3}, "lapPE has shape (2, 4, 3), want [2, 4, 2]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyGraphConfig(c.pos)
			cfg.Features, cfg.LapK, cfg.MaxNodes = 1, c.lapK, c.maxNodes
			g := G.NewGraph()
			m, err := layers.NewGraphTransformer(g, graph.NewParams(tensor.Float64, 1), cfg)
			if err != nil {
				t.Fatal(err)
			}
			node := func(name string, shape []int) *G.Node {
				if shape == nil {
					return nil
				}
				return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithInit(G.Zeroes()))
			}
			_, err = m.Fwd(node("x", c.x), c.p, node("mask", c.mask), node("lap", c.lap))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}

	m, err := layers.NewGraphTransformer(G.NewGraph(), graph.NewParams(tensor.Float64, 1), tinyGraphConfig("none"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		valid [][]bool
		want  string
	}{
		{nil, "empty mask"},
		{[][]bool{{true, false}, {false, false}}, "graph 1 of the batch is empty"},
		{[][]bool{{true, false}, {true}}, "mask row 1 has 1 nodes, row 0 has 2"},
	} {
		if _, err := m.MaskValue(c.valid); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MaskValue(%v): error %v, want %q", c.valid, err, c.want)
		}
	}
}
