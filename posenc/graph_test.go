package posenc_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// testGraphs are two graphs of different sizes: a path 0-1-2-3 with an
// isolated node 4 (distance 3, unreachable pairs, degree 0) and a star
// 0-{1,2,3} with the edge 1-2 (degree 3).
var testGraphs = []struct {
	n     int
	edges [][2]int
}{
	{5, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	{4, [][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}}},
}

// graphBatch returns the padded graphdata batch of graphs gs (with the
// nodes of graph b renamed by perm[b] if perm is not nil), spatial
// relations clipped at maxDist, lapK Laplacian eigenvectors.
func graphBatch(t testing.TB, maxDist, lapK int, perm [][]int) *graphdata.Batch {
	t.Helper()
	ds := &graphdata.Dataset{NumFeatures: 1, NumClasses: 1}
	for i, tg := range testGraphs {
		g, err := graphdata.NewGraph(tg.n, tg.edges)
		if err != nil {
			t.Fatal(err)
		}
		if perm != nil {
			if g, err = g.Permute(perm[i]); err != nil {
				t.Fatal(err)
			}
		}
		ds.Examples = append(ds.Examples, &graphdata.Example{ID: fmt.Sprint("g", i, perm), Graph: g,
			Features: make([]float32, tg.n), Labels: []int{0}, Marked: -1})
	}
	bt, err := graphdata.NewBatch(ds, []int{0, 1}, graphdata.BatchOptions{MaxDist: maxDist, LapK: lapK})
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func batchPositions(t testing.TB, bt *graphdata.Batch) *posenc.Positions {
	t.Helper()
	pos, err := bt.Positions()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func floatNode(g *G.ExprGraph, name string, shape tensor.Shape, v []float64) *G.Node {
	return dtypeNode(g, tensor.Float64, name, shape, v)
}

func dtypeNode(g *G.ExprGraph, dt tensor.Dtype, name string, shape tensor.Shape, v []float64) *G.Node {
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(graph.FromFloat64s(dt, shape, v)))
}

// tinyGraphModel is the graph Transformer of the tests: node inputs x
// [B, N, 4] plus the centrality and Laplacian encodings (if set), then two
// attention layers with the spatial bias (if set) and the batch's key
// padding mask. It returns the outputs [B, N, 4] and the input nodes.
type tinyGraphModel struct {
	spatial    posenc.Encoding
	centrality *posenc.GraphormerCentrality
	lapK       int
}

func (m tinyGraphModel) build(t *testing.T, g *G.ExprGraph, p *graph.Params, bt *graphdata.Batch, x []float64) (out *G.Node, inputs G.Nodes) {
	t.Helper()
	const d = 4
	pos := batchPositions(t, bt)
	xn := dtypeNode(g, p.Dtype(), "x", tensor.Shape{bt.B, bt.N, d}, x)
	inputs = G.Nodes{xn}
	h := xn
	var err error
	if m.centrality != nil {
		s := &posenc.Site{G: g, Params: p, Layer: -1, B: bt.B, DModel: d, Span: posenc.Span{TQ: bt.N, TK: bt.N}, Pos: pos}
		if h, err = m.centrality.AddToInput(s, h); err != nil {
			t.Fatal(err)
		}
	}
	if m.lapK > 0 {
		lv := make([]float64, len(bt.LapPE))
		for i, v := range bt.LapPE {
			lv[i] = float64(v)
		}
		ln := dtypeNode(g, p.Dtype(), "lap", tensor.Shape{bt.B, bt.N, m.lapK}, lv)
		inputs = append(inputs, ln)
		if h, err = posenc.LaplacianInput(g, p, "lap_proj", h, ln, 0.5); err != nil {
			t.Fatal(err)
		}
	}
	mask := graph.MaskNode(g, graph.PaddingMask(p.Dtype(), bt.Valid), "mask")
	for l := 0; l < 2; l++ {
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: fmt.Sprintf("block%d/attn", l), Layer: l, D: d, Heads: 2,
			InitStd: 0.5, Pos: m.spatial})
		if err != nil {
			t.Fatal(err)
		}
		if h, err = a.FwdPositions(h, nil, posenc.Span{TQ: bt.N, TK: bt.N}, pos, mask); err != nil {
			t.Fatal(err)
		}
	}
	return h, inputs
}

// gradCheckModel gradient-checks sum(out * R) over the real nodes w.r.t.
// the inputs and every parameter, in float64.
func gradCheckModel(t *testing.T, m tinyGraphModel, bt *graphdata.Batch, seed int64) *graph.Params {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	x := make([]float64, bt.B*bt.N*4)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, seed)
	out, inputs := m.build(t, g, p, bt, x)
	r := make([]float64, len(x))
	for i := range r {
		if bt.Valid[i/(4*bt.N)][i/4%bt.N] {
			r[i] = rng.NormFloat64()
		}
	}
	rn := floatNode(g, "R", tensor.Shape{bt.B, bt.N, 4}, r)
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, rn))))
	if err := graph.GradCheck(g, loss, append(inputs, p.Nodes(g)...), graph.GradCheckOpts{Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGraphGrad gradient-checks (float64) the graph encodings through a
// 2-layer attention model on a padded batch of two different graphs: the
// spatial bias alone (shared table and per layer), with the centrality
// encoding, and the Laplacian input; it checks which parameters exist.
func TestGraphGrad(t *testing.T) {
	const maxDist = 2
	numRel := graphdata.NumSpatialRelations(maxDist)
	shared, _ := posenc.NewGraphormerSpatial(numRel, 0.5, false)
	perLayer, _ := posenc.NewGraphormerSpatial(numRel, 0.5, true)
	cent, _ := posenc.NewGraphormerCentrality(2, 0.5)
	for _, c := range []struct {
		name  string
		m     tinyGraphModel
		want  []string // position parameters
		notIn string
	}{
		{"spatial", tinyGraphModel{spatial: shared}, []string{"spatial_bias"}, "block0/attn/spatial_bias"},
		{"spatial-per-layer", tinyGraphModel{spatial: perLayer}, []string{"block0/attn/spatial_bias", "block1/attn/spatial_bias"}, "spatial_bias"},
		{"spatial+centrality", tinyGraphModel{spatial: shared, centrality: cent}, []string{"spatial_bias", "centrality_emb"}, ""},
		{"laplacian", tinyGraphModel{lapK: 3}, []string{"lap_proj/w", "lap_proj/b"}, "spatial_bias"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bt := graphBatch(t, maxDist, c.m.lapK, nil)
			p := gradCheckModel(t, c.m, bt, 7)
			names := p.Names()
			for _, w := range c.want {
				if !slices.Contains(names, w) {
					t.Errorf("parameters %v lack %s", names, w)
				}
			}
			if c.notIn != "" && slices.Contains(names, c.notIn) {
				t.Errorf("parameters %v hold %s", names, c.notIn)
			}
		})
	}
}

// TestGraphNodeOrder: renaming the nodes of each graph permutes the
// outputs of the model with the spatial and centrality encodings the same
// way (structure, not node order), and the two examples of the batch get
// their own biases.
func TestGraphNodeOrder(t *testing.T) {
	const maxDist = 2
	spatial, _ := posenc.NewGraphormerSpatial(graphdata.NumSpatialRelations(maxDist), 0.5, false)
	cent, _ := posenc.NewGraphormerCentrality(2, 0.5)
	m := tinyGraphModel{spatial: spatial, centrality: cent}
	perm := [][]int{{3, 0, 4, 1, 2}, {2, 3, 1, 0}}
	base, moved := graphBatch(t, maxDist, 0, nil), graphBatch(t, maxDist, 0, perm)
	rng := rand.New(rand.NewSource(4))
	x := make([]float64, base.B*base.N*4)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	// node i of graph b becomes node perm[b][i]: move its features along
	xm := make([]float64, len(x))
	for b := range perm {
		for i, pi := range perm[b] {
			copy(xm[(b*base.N+pi)*4:(b*base.N+pi+1)*4], x[(b*base.N+i)*4:(b*base.N+i+1)*4])
		}
	}
	run := func(bt *graphdata.Batch, x []float64) []float64 {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 9)
		out, _ := m.build(t, g, p, bt, x)
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(out.Value())
	}
	y, ym := run(base, x), run(moved, xm)
	for b := range perm {
		for i, pi := range perm[b] {
			for k := 0; k < 4; k++ {
				a, c := y[(b*base.N+i)*4+k], ym[(b*base.N+pi)*4+k]
				if d := a - c; d > 1e-12 || d < -1e-12 {
					t.Fatalf("graph %d node %d (renamed %d) output %d: %v, renamed %v", b, i, pi, k, a, c)
				}
			}
		}
	}
}

// TestGraphormerSpatialBias checks the bias values of shared and
// per-example positions against the table, and that tiles of the bias
// match ScoreBias per example.
func TestGraphormerSpatialBias(t *testing.T) {
	const h = 3
	bt := graphBatch(t, 2, 0, nil)
	per := batchPositions(t, bt)
	one, err := posenc.NewPairwise(1, bt.N, bt.N, bt.NumRel, bt.Rel[:bt.N*bt.N])
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := posenc.NewGraphormerSpatial(bt.NumRel+1, 1, false) // a spare row is allowed
	for _, c := range []struct {
		name string
		pos  *posenc.Positions
		nb   int
	}{{"per-example", per, 2}, {"shared", one, 1}} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 2)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 2, H: h, Span: posenc.Span{TQ: bt.N, TK: bt.N}, Pos: c.pos}
			bias, err := enc.ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{c.nb, h, bt.N, bt.N}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			rng := rand.New(rand.NewSource(1))
			type tileNode struct {
				t posenc.Tile
				n *G.Node
			}
			var tiles []tileNode
			for k := 0; k < 6; k++ {
				q0, k0 := rng.Intn(bt.N), rng.Intn(bt.N)
				tl := posenc.Tile{Q0: q0, Q1: q0 + 1 + rng.Intn(bt.N-q0), K0: k0, K1: k0 + 1 + rng.Intn(bt.N-k0)}
				n, err := posenc.TileBias(enc, s, tl)
				if err != nil {
					t.Fatal(err)
				}
				tiles = append(tiles, tileNode{tl, n})
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			tab := p.Float64s("spatial_bias")
			bv := graph.ToFloat64s(bias.Value())
			for b := 0; b < c.nb; b++ {
				for hh := 0; hh < h; hh++ {
					for i := 0; i < bt.N; i++ {
						for j := 0; j < bt.N; j++ {
							r := c.pos.Rel[(b*bt.N+i)*bt.N+j]
							if got, want := bv[((b*h+hh)*bt.N+i)*bt.N+j], tab[r*h+hh]; got != want {
								t.Fatalf("bias[%d, %d, %d, %d] = %v, table[%d, %d] = %v", b, hh, i, j, got, r, hh, want)
							}
						}
					}
				}
			}
			for _, tn := range tiles {
				tq, tk := tn.t.Q1-tn.t.Q0, tn.t.K1-tn.t.K0
				tv := graph.ToFloat64s(tn.n.Value())
				for b := 0; b < c.nb; b++ {
					for hh := 0; hh < h; hh++ {
						for i := 0; i < tq; i++ {
							for j := 0; j < tk; j++ {
								got := tv[((b*h+hh)*tq+i)*tk+j]
								want := bv[((b*h+hh)*bt.N+tn.t.Q0+i)*bt.N+tn.t.K0+j]
								if got != want {
									t.Fatalf("tile %+v [%d, %d, %d, %d] = %v, ScoreBias %v", tn.t, b, hh, i, j, got, want)
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestGraphDegrees: the degrees derived from the relations equal
// graphdata's (the graphs' adjacency), padding nodes get 0, and clipping
// caps them.
func TestGraphDegrees(t *testing.T) {
	bt := graphBatch(t, 2, 0, [][]int{{4, 2, 0, 1, 3}, {1, 0, 3, 2}})
	pos := batchPositions(t, bt)
	deg, err := posenc.GraphDegrees(pos, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deg, bt.Degrees) {
		t.Fatalf("degrees %v, graphdata's %v", deg, bt.Degrees)
	}
	if deg[bt.N+4] != 0 || bt.Valid[1][4] {
		t.Fatalf("padding node: degree %d, valid %v", deg[bt.N+4], bt.Valid[1][4])
	}
	clip, err := posenc.GraphDegrees(pos, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range deg {
		if clip[i] != min(deg[i], 2) {
			t.Fatalf("clipped degree %d = %d, want min(%d, 2)", i, clip[i], deg[i])
		}
	}
	if !slices.Contains(deg, 3) {
		t.Fatalf("degrees %v: the test needs a node above the clip", deg)
	}
}

// TestWithVirtualNode: token 0 relates to everything by the new relation,
// the other pairs keep theirs.
func TestWithVirtualNode(t *testing.T) {
	bt := graphBatch(t, 2, 0, nil)
	pos := batchPositions(t, bt)
	v, err := posenc.WithVirtualNode(pos)
	if err != nil {
		t.Fatal(err)
	}
	n := bt.N + 1
	if v.Batch != 2 || v.TQ != n || v.TK != n || v.NumRel != bt.NumRel+1 {
		t.Fatalf("virtual positions batch %d, %dx%d, %d relations", v.Batch, v.TQ, v.TK, v.NumRel)
	}
	vr := graphdata.VirtualRelation(2)
	for b := 0; b < 2; b++ {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				want := vr
				if i > 0 && j > 0 {
					want = pos.Rel[(b*bt.N+i-1)*bt.N+j-1]
				}
				if got := v.Rel[(b*n+i)*n+j]; got != want {
					t.Fatalf("example %d pair (%d, %d): relation %d, want %d", b, i, j, got, want)
				}
			}
		}
	}
	deg, err := posenc.GraphDegrees(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if deg[0] != 0 || deg[n] != 0 || deg[1] != bt.Degrees[0] || deg[n+1] != bt.Degrees[bt.N] {
		t.Fatalf("degrees with a virtual node %v, graphdata's %v", deg, bt.Degrees)
	}
}

// TestGraphErrors: bad arguments and positions give errors naming the
// encoding and the problem, never a panic.
func TestGraphErrors(t *testing.T) {
	bt := graphBatch(t, 2, 0, nil)
	pos := batchPositions(t, bt)
	grid, _ := posenc.NewGrid(bt.N, 1)
	big, _ := posenc.NewPairwise(1, bt.N, bt.N, 9, append(make([]int, bt.N*bt.N-1), 8))
	cross, _ := posenc.NewPairwise(1, 2, 3, 4, make([]int, 6))
	few, _ := posenc.NewPairwise(1, 2, 2, 1, make([]int, 4))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	site := func(pos *posenc.Positions, b, tq, tk int) *posenc.Site {
		return &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: 2, DModel: 4, Span: posenc.Span{TQ: tq, TK: tk}, Pos: pos}
	}
	spatial, _ := posenc.NewGraphormerSpatial(bt.NumRel, 0.02, false)
	cent, _ := posenc.NewGraphormerCentrality(3, 0.02)
	x := floatNode(g, "x", tensor.Shape{2, bt.N, 4}, make([]float64, 2*bt.N*4))
	x3 := floatNode(g, "x3", tensor.Shape{3, bt.N, 4}, make([]float64, 3*bt.N*4))
	lap := floatNode(g, "lap", tensor.Shape{2, bt.N + 1, 3}, make([]float64, 2*(bt.N+1)*3))
	dst := make([]int, bt.N*bt.N)
	full := posenc.Tile{Q1: bt.N, K1: bt.N}
	for _, c := range []struct {
		name string
		err  func() error
		want []string
	}{
		{"spatial-rows", func() error { _, err := posenc.NewGraphormerSpatial(0, 0.02, false); return err }, []string{"graphormer-spatial", "0 relations"}},
		{"spatial-std", func() error { _, err := posenc.NewGraphormerSpatial(3, -1, false); return err }, []string{"graphormer-spatial", "negative"}},
		{"spatial-line", func() error { _, err := spatial.ScoreBias(site(nil, 2, bt.N, bt.N)); return err }, []string{"graphormer-spatial", "pairwise", "line"}},
		{"spatial-grid", func() error { _, err := spatial.ScoreBias(site(grid, 2, bt.N, bt.N)); return err }, []string{"graphormer-spatial", "pairwise", "grid"}},
		{"spatial-kind", func() error { return posenc.CheckKind(spatial, grid) }, []string{"graphormer-spatial", "pairwise", "grid"}},
		{"spatial-table", func() error { _, err := spatial.ScoreBias(site(big, 2, bt.N, bt.N)); return err }, []string{"graphormer-spatial", "9 relations", "4 rows"}},
		{"spatial-batch", func() error { _, err := spatial.ScoreBias(site(pos, 3, bt.N, bt.N)); return err }, []string{"graphormer-spatial", "batch of 2", "3 examples"}},
		{"spatial-size", func() error { _, err := spatial.ScoreBias(site(pos, 2, bt.N-1, bt.N)); return err }, []string{"graphormer-spatial", "5 query", "4 queries"}},
		{"spatial-example", func() error { _, err := spatial.BiasIndex(site(pos, 2, bt.N, bt.N), 2, full, dst); return err }, []string{"graphormer-spatial", "example 2"}},
		{"spatial-dst", func() error { _, err := spatial.BiasIndex(site(pos, 2, bt.N, bt.N), 0, full, dst[1:]); return err }, []string{"graphormer-spatial", "dst has 24"}},
		{"spatial-relation", func() error {
			bad := *pos // a hand-built value with a relation outside the table
			bad.Rel = slices.Clone(pos.Rel)
			bad.Rel[7] = 11
			_, err := spatial.BiasIndex(site(&bad, 2, bt.N, bt.N), 0, full, dst)
			return err
		}, []string{"graphormer-spatial", "relation 11", "pair (1, 2)"}},
		{"centrality-degree", func() error { _, err := posenc.NewGraphormerCentrality(0, 0.02); return err }, []string{"graphormer-centrality", "maximum degree 0"}},
		{"centrality-std", func() error { _, err := posenc.NewGraphormerCentrality(2, -1); return err }, []string{"graphormer-centrality", "negative"}},
		{"centrality-grid", func() error { _, err := cent.AddToInput(site(grid, 2, bt.N, bt.N), x); return err }, []string{"graphormer-centrality", "pairwise", "grid"}},
		{"centrality-shape", func() error { _, err := cent.AddToInput(site(pos, 2, bt.N, bt.N), lap); return err }, []string{"graphormer-centrality", "(2, 6, 3)"}},
		{"centrality-batch", func() error { _, err := cent.AddToInput(site(pos, 3, bt.N, bt.N), x3); return err }, []string{"graphormer-centrality", "batch of 2", "3 examples"}},
		{"centrality-nodes", func() error { _, err := cent.AddToInput(site(cross, 2, 2, 3), x); return err }, []string{"graphormer-centrality", "2 query and 3 key", "5 nodes"}},
		{"degrees-cross", func() error { _, err := posenc.GraphDegrees(cross, 0); return err }, []string{"2 queries and 3 keys"}},
		{"degrees-relations", func() error { _, err := posenc.GraphDegrees(few, 0); return err }, []string{"1 relations", "adjacent relation 1"}},
		{"degrees-grid", func() error { _, err := posenc.GraphDegrees(grid, 0); return err }, []string{"pairwise", "grid"}},
		{"virtual-grid", func() error { _, err := posenc.WithVirtualNode(grid); return err }, []string{"virtual node", "grid"}},
		{"laplacian-shape", func() error { _, err := posenc.LaplacianInput(g, p, "lap_proj", x, lap, 0.02); return err }, []string{"laplacian", "(2, 5, 4)", "(2, 6, 3)"}},
		{"laplacian-name", func() error { _, err := posenc.LaplacianInput(g, p, "", x, lap, 0.02); return err }, []string{"laplacian", "empty parameter name"}},
		{"laplacian-std", func() error { _, err := posenc.LaplacianInput(g, p, "lap_proj", x, lap, -1); return err }, []string{"laplacian", "negative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestGraphPaddingAndFloat32: with the key padding mask, the inputs of
// padding nodes do not reach the real nodes' outputs (so the degree-0 row
// and the unreachable relation get nothing from padding), and the model
// gives the same real-node outputs in float32 as in float64.
func TestGraphPaddingAndFloat32(t *testing.T) {
	const maxDist = 2
	spatial, _ := posenc.NewGraphormerSpatial(graphdata.NumSpatialRelations(maxDist), 0.5, false)
	cent, _ := posenc.NewGraphormerCentrality(2, 0.5)
	m := tinyGraphModel{spatial: spatial, centrality: cent, lapK: 2}
	bt := graphBatch(t, maxDist, 2, nil)
	rng := rand.New(rand.NewSource(6))
	x := make([]float64, bt.B*bt.N*4)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	run := func(dt tensor.Dtype, x []float64) []float64 {
		g := G.NewGraph()
		p := graph.NewParams(dt, 9)
		out, _ := m.build(t, g, p, bt, x)
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(out.Value())
	}
	y := run(tensor.Float64, x)
	xp := slices.Clone(x)
	for i := range xp {
		if !bt.Valid[i/(4*bt.N)][i/4%bt.N] {
			xp[i] = 100 * rng.NormFloat64()
		}
	}
	yp, y32 := run(tensor.Float64, xp), run(tensor.Float32, x)
	for i := range y {
		if !bt.Valid[i/(4*bt.N)][i/4%bt.N] {
			continue
		}
		if yp[i] != y[i] {
			t.Fatalf("output %d of a real node moved with the padding inputs: %v, %v", i, y[i], yp[i])
		}
		if d := y32[i] - y[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("output %d: float32 %v, float64 %v", i, y32[i], y[i])
		}
	}
}

// FuzzGraphPositions feeds hand-built pairwise positions (relations
// possibly outside the table or the declared NumRel, wrong lengths) to the
// graph encodings' host side: BiasIndex, GraphDegrees and WithVirtualNode
// return an error or correct values, never panic.
func FuzzGraphPositions(f *testing.F) {
	f.Add(uint8(2), uint8(3), uint8(4), uint8(4), []byte{0, 1, 2, 3, 1, 0, 1, 2, 2, 1, 0, 1, 3, 2, 1, 0})
	f.Add(uint8(1), uint8(2), uint8(3), uint8(2), []byte{0, 1, 9, 1, 0, 1})
	f.Add(uint8(1), uint8(0), uint8(1), uint8(1), []byte{})
	f.Add(uint8(1), uint8(4), uint8(4), uint8(4), []byte{0, 1, 2, 3, 1, 0, 1, 2, 2, 1, 0, 1, 3, 2, 1, 0}) // shared: every example index reads example 0
	f.Fuzz(func(t *testing.T, batch, tq, tk, numRel uint8, data []byte) {
		b, q, k := int(batch%3), int(tq%5), int(tk%5)
		rel := make([]int, len(data))
		for i, v := range data {
			rel[i] = int(int8(v))
		}
		p := &posenc.Positions{Kind: posenc.PosPairwise, Batch: b, TQ: q, TK: k, NumRel: int(numRel % 8), Rel: rel}
		enc := &posenc.GraphormerSpatial{NumRel: 4}
		s := &posenc.Site{B: max(b, 1), H: 1, Span: posenc.Span{TQ: q, TK: k}, Pos: p}
		if q > 0 && k > 0 {
			dst := make([]int, q*k)
			for e := -1; e <= b; e++ {
				if _, err := enc.BiasIndex(s, e, s.Full(), dst); err == nil {
					ex := e
					if b == 1 { // shared positions: e is ignored
						ex = 0
					}
					for i, r := range dst {
						if r != rel[(ex*q+i/k)*k+i%k] || r < 0 || r >= 4 {
							t.Fatalf("example %d pair %d: index %d", e, i, r)
						}
					}
				}
			}
		}
		if deg, err := posenc.GraphDegrees(p, 2); err == nil && len(deg) != b*q {
			t.Fatalf("%d degrees for %d x %d nodes", len(deg), b, q)
		}
		if v, err := posenc.WithVirtualNode(p); err == nil && (v.TQ != q+1 || v.NumRel != p.NumRel+1) {
			t.Fatalf("virtual node positions %dx%d with %d relations", v.TQ, v.TK, v.NumRel)
		}
	})
}
