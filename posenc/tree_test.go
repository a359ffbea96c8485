package posenc_test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// randRel returns n random relation ids in [0, numRel).
func randRel(rng *rand.Rand, n, numRel int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = rng.Intn(numRel)
	}
	return r
}

// TestTreeRelBias checks the bias against the table for shared and
// per-example relations (the shape, every element, and the table row of
// every pair), and that random tiles of TileBias equal ScoreBias.
func TestTreeRelBias(t *testing.T) {
	for _, tc := range []struct {
		name           string
		batch, b, h    int
		tq, tk         int
		maxUp, maxDown int
	}{
		{"shared", 1, 2, 3, 5, 5, 2, 3},
		{"per-example", 3, 3, 2, 4, 4, 4, 4},
		{"cross", 2, 2, 1, 3, 6, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			enc, err := posenc.NewTreeRel(tc.maxUp, tc.maxDown, 0.02, false)
			if err != nil {
				t.Fatal(err)
			}
			nr := posenc.TreeRelations(tc.maxUp, tc.maxDown)
			rel := randRel(rng, tc.batch*tc.tq*tc.tk, nr)
			pos, err := posenc.NewPairwise(tc.batch, tc.tq, tc.tk, nr, rel)
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block1/attn", B: tc.b, H: tc.h, DHead: 4, DModel: 4 * tc.h,
				Span: posenc.Span{TQ: tc.tq, TK: tc.tk}, Pos: pos, Causal: true}
			bias, err := enc.ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{tc.batch, tc.h, tc.tq, tc.tk}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			if got := p.Names(); !slices.Equal(got, []string{"block1/attn/tree_bias"}) {
				t.Fatalf("parameters %v", got)
			}
			var tiles []*G.Node
			var rects []posenc.Tile
			for k := 0; k < 4; k++ {
				q0, k0 := rng.Intn(tc.tq), rng.Intn(tc.tk)
				tl := posenc.Tile{Q0: q0, Q1: q0 + 1 + rng.Intn(tc.tq-q0), K0: k0, K1: k0 + 1 + rng.Intn(tc.tk-k0)}
				n, err := posenc.TileBias(enc, s, tl)
				if err != nil {
					t.Fatal(err)
				}
				tiles, rects = append(tiles, n), append(rects, tl)
			}
			table := randRel(rng, nr*tc.h, 1000)
			tf := make([]float64, len(table))
			for i, v := range table {
				tf[i] = float64(v)
			}
			if err := p.Set("block1/attn/tree_bias", tf); err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			v := graph.ToFloat64s(bias.Value())
			at := func(b, h, i, j int) float64 { return v[((b*tc.h+h)*tc.tq+i)*tc.tk+j] }
			for b := 0; b < tc.batch; b++ {
				for h := 0; h < tc.h; h++ {
					for i := 0; i < tc.tq; i++ {
						for j := 0; j < tc.tk; j++ {
							r := rel[(b*tc.tq+i)*tc.tk+j]
							if got, want := at(b, h, i, j), tf[r*tc.h+h]; got != want {
								t.Fatalf("bias[%d, %d, %d, %d] = %v, table[%d, %d] = %v", b, h, i, j, got, r, h, want)
							}
						}
					}
				}
			}
			for n, tile := range tiles {
				tl, tv := rects[n], graph.ToFloat64s(tile.Value())
				tq, tk := tl.Q1-tl.Q0, tl.K1-tl.K0
				if want := []int{tc.batch, tc.h, tq, tk}; !slices.Equal(tile.Shape(), want) {
					t.Fatalf("tile %+v shape %v, want %v", tl, tile.Shape(), want)
				}
				for b := 0; b < tc.batch; b++ {
					for h := 0; h < tc.h; h++ {
						for i := 0; i < tq; i++ {
							for j := 0; j < tk; j++ {
								if got, want := tv[((b*tc.h+h)*tq+i)*tk+j], at(b, h, tl.Q0+i, tl.K0+j); got != want {
									t.Fatalf("tile %+v at (%d %d %d %d) = %v, ScoreBias %v", tl, b, h, i, j, got, want)
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestTreeRelErrors: wrong kinds, relations not fitting the table or the
// site, and bad constructor arguments are errors naming the problem.
func TestTreeRelErrors(t *testing.T) {
	if _, err := posenc.NewTreeRel(-1, 2, 0.02, false); err == nil || !strings.Contains(err.Error(), "posenc tree: clipping bounds up -1") {
		t.Errorf("negative bound: %v", err)
	}
	if _, err := posenc.NewTreeRel(1, 2, -1, false); err == nil || !strings.Contains(err.Error(), "init std") {
		t.Errorf("negative std: %v", err)
	}
	enc, err := posenc.NewTreeRel(2, 2, 0.02, false)
	if err != nil {
		t.Fatal(err)
	}
	grid, _ := posenc.NewGrid(2, 2)
	nine, _ := posenc.NewPairwise(1, 4, 4, 9, make([]int, 16))
	ten, _ := posenc.NewPairwise(1, 4, 4, 10, append(make([]int, 15), 9))
	four, _ := posenc.NewPairwise(1, 4, 4, 4, make([]int, 16))
	batch3, _ := posenc.NewPairwise(3, 4, 4, 9, make([]int, 48))
	for _, tc := range []struct {
		name string
		pos  *posenc.Positions
		tq   int
		h    int
		want string
	}{
		{"line", nil, 4, 2, "posenc tree: needs pairwise positions (tree relations), the site has line positions"},
		{"grid", grid, 4, 2, "posenc tree: needs pairwise positions (tree relations), the site has grid 2x2 positions"},
		{"beyond", ten, 4, 2, "posenc tree: positions have 10 relation ids, the table has (max up 2 + 1)*(max down 2 + 1) = 9 rows"},
		{"fewer", four, 4, 2, "positions have 4 relation ids, the table has"},
		{"size", nine, 5, 2, "pairwise positions have 4 query and 4 key positions, the attention has 5 queries and 5 keys"},
		{"batch", batch3, 4, 2, "positions are for a batch of 3, the attention has 2 examples"},
		{"heads", nine, 4, 0, "posenc tree: 0 heads"},
	} {
		g := G.NewGraph()
		s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 2, H: tc.h, DHead: 4, DModel: 8,
			Span: posenc.Span{TQ: tc.tq, TK: tc.tq}, Pos: tc.pos}
		if _, err := enc.ScoreBias(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ScoreBias error %v, want %q", tc.name, err, tc.want)
		}
		if tc.h > 0 {
			if _, err := enc.BiasIndex(s, 0, posenc.Tile{Q0: 0, Q1: 1, K0: 0, K1: 1}, make([]int, 1)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: BiasIndex error %v, want %q", tc.name, err, tc.want)
			}
		}
	}
	if err := posenc.CheckKind(enc, nil); err == nil || !strings.Contains(err.Error(), "encoding tree accepts pairwise positions; the model gives it line positions") {
		t.Errorf("CheckKind line: %v", err)
	}
}

// treeAttention builds a tiny attention layer (d 8, 2 heads) with
// encoding enc over x [b, n, 8] and pairwise positions pos, and returns
// the graph, its parameters, x and the output.
func treeAttention(t *testing.T, enc posenc.Encoding, pos *posenc.Positions, b, n int, causal bool, seed int64) (*G.ExprGraph, *graph.Params, *G.Node, *G.Node) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, seed)
	a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Causal: causal, Pos: enc})
	if err != nil {
		t.Fatal(err)
	}
	xv := make([]float64, b*n*8)
	for i := range xv {
		xv[i] = rng.NormFloat64()
	}
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("x"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, n, 8}, xv)))
	y, err := a.FwdPositions(x, nil, posenc.Span{TQ: n, TK: n}, pos, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, p, x, y
}

// TestTreeRelGrad gradient-checks a causal attention layer with per-example
// tree relations (float64; the table at std 0.5 so that it matters), and
// checks that a table row used only by masked pairs (keys after the query)
// gets a zero gradient: the bias of masked pairs is irrelevant.
func TestTreeRelGrad(t *testing.T) {
	const b, n = 2, 4
	enc, err := posenc.NewTreeRel(1, 2, 0.5, false)
	if err != nil {
		t.Fatal(err)
	}
	nr := posenc.TreeRelations(1, 2)
	rng := rand.New(rand.NewSource(5))
	rel := make([]int, b*n*n)
	for i := range rel {
		q, k := i/n%n, i%n
		if k > q {
			rel[i] = nr - 1 // only future keys have the last relation
		} else {
			rel[i] = rng.Intn(nr - 1)
		}
	}
	pos, err := posenc.NewPairwise(b, n, n, nr, rel)
	if err != nil {
		t.Fatal(err)
	}
	g, p, x, y := treeAttention(t, enc, pos, b, n, true, 11)
	r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
	if err := graph.GradCheck(g, loss, append(G.Nodes{x}, p.Nodes(g)...), graph.GradCheckOpts{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	// the gradient of the row used only by masked pairs is exactly zero
	g, p, _, y = treeAttention(t, enc, pos, b, n, true, 11)
	r = G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
	loss = G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
	var table *G.Node
	for _, nd := range p.Nodes(g) {
		if nd.Name() == "block0/attn/tree_bias" {
			table = nd
		}
	}
	if table == nil {
		t.Fatalf("no tree table among %v", p.Names())
	}
	if _, err := G.Grad(loss, table); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(table))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	gv, err := table.Grad()
	if err != nil {
		t.Fatal(err)
	}
	grad := graph.ToFloat64s(gv) // [nr, H]
	for h := 0; h < 2; h++ {
		if v := grad[(nr-1)*2+h]; v != 0 {
			t.Errorf("head %d: the row of masked pairs has gradient %v, want 0", h, v)
		}
		if v := grad[h]; v == 0 {
			t.Errorf("head %d: row 0 has no gradient", h)
		}
	}
}
