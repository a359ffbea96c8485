package layers

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// treeConfig is the tiny causal LM with a syntax-tree bias (relations
// clipped at 1 step up and 1 down: 4 relation ids), alone or combined.
func treeConfig(pos string) Config {
	c := tinyConfig(pos)
	c.PosOpts = posenc.Options{TreeMaxUp: 1, TreeMaxDown: 1}
	return c
}

// treeRelations returns random per-example relations [b, t, t] in [0, 4).
func treeRelations(t *testing.T, rng *rand.Rand, b, tt int) *posenc.Positions {
	t.Helper()
	rel := make([]int, b*tt*tt)
	for i := range rel {
		rel[i] = rng.Intn(4)
	}
	p, err := posenc.NewPairwise(b, tt, tt, 4, rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLMPairwisePositions: an LM whose encoding reads per-example pairwise
// positions (Options.Pos) passes a float64 gradient check (tree, and tree
// with RoPE on the token order); its logits at position i do not depend on
// later tokens or on the relations of later tokens (causality through the
// bias); and without positions it is an error naming the encoding and the
// kind.
func TestLMPairwisePositions(t *testing.T) {
	const b, tt = 2, 5
	for _, name := range []string{"tree", "tree+rope"} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			lm, err := NewLM(g, p, treeConfig(name))
			if err != nil {
				t.Fatal(err)
			}
			pos := treeRelations(t, rng, b, tt)
			logits, err := lm.FwdWith(ids(g, rng, b, tt), Options{Pos: pos})
			if err != nil {
				t.Fatal(err)
			}
			randomize(p, rng)
			loss := weightedSum(t, g, rng, logits)
			if err := graph.GradCheck(g, loss, lm.Learnables(), checkOpts); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, n := range lm.Learnables() {
				found = found || strings.Contains(n.Name(), "tree_bias")
			}
			if !found {
				t.Fatalf("no tree_bias among %v", p.Names())
			}

			// causality: change token 3 and every relation of query or key 3..4
			w := tinyWeights(t, treeConfig("none"), 2)
			run := func(data []int, pos *posenc.Positions) []float64 {
				g := G.NewGraph()
				p := graph.NewParams(tensor.Float64, 1)
				lm, err := NewLM(g, p, treeConfig(name))
				if err != nil {
					t.Fatal(err)
				}
				id := G.NewTensor(g, tensor.Int, 2, G.WithShape(1, tt), G.WithName("ids"), G.WithValue(tensor.New(tensor.WithShape(1, tt), tensor.WithBacking(data))))
				logits, err := lm.FwdWith(id, Options{Pos: pos})
				if err != nil {
					t.Fatal(err)
				}
				for n, v := range w {
					if err := p.Set(n, v); err != nil {
						t.Fatal(err)
					}
				}
				randomize(p, rand.New(rand.NewSource(5))) // the tree table too
				m := G.NewTapeMachine(g)
				defer m.Close()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				return graph.ToFloat64s(logits.Value())
			}
			p1 := treeRelations(t, rng, 1, tt)
			rel := append([]int(nil), p1.Rel...)
			for i := 0; i < tt; i++ {
				for j := 0; j < tt; j++ {
					if i >= 3 || j >= 3 {
						rel[i*tt+j] = (rel[i*tt+j] + 1) % 4
					}
				}
			}
			p2, err := posenc.NewPairwise(1, tt, tt, 4, rel)
			if err != nil {
				t.Fatal(err)
			}
			a := run([]int{1, 2, 3, 4, 5}, p1)
			c := run([]int{1, 2, 3, 9, 5}, p2)
			for i := 0; i < 3*256; i++ {
				if a[i] != c[i] {
					t.Fatalf("logit %d of position %d changed with later tokens and relations", i%256, i/256)
				}
			}
			if a[3*256] == c[3*256] {
				t.Fatal("position 3 did not change")
			}
		})
	}
	g := G.NewGraph()
	lm, err := NewLM(g, graph.NewParams(tensor.Float64, 1), treeConfig("tree"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(ids(g, rand.New(rand.NewSource(1)), 1, 4)); err == nil || !strings.Contains(err.Error(), "tree") || !strings.Contains(err.Error(), "line") {
		t.Fatalf("tree without positions: error %v", err)
	}
	if _, err := NewLM(G.NewGraph(), graph.NewParams(tensor.Float64, 1), tinyConfig("swin")); err == nil || !strings.Contains(err.Error(), "swin") {
		t.Fatalf("an encoding of grids only: error %v", err)
	}
}
