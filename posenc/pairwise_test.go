package posenc_test

import (
	"math/rand"
	"testing"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// pairBias is a test encoding of per-example pairwise positions (the shape
// of a graph's shortest-path bias): bias[b, h, i, j] = table[rel_b(i, j), h]
// with a learnable table [NumRel, H]. It exercises the per-example side of
// the position model: a [B, H, Tq, Tk] bias through attention.
type pairBias struct{}

func (pairBias) Name() string                                { return "pair-bias" }
func (pairBias) Accepts() []posenc.PosKind                   { return []posenc.PosKind{posenc.PosPairwise} }
func (e pairBias) ScoreBias(s *posenc.Site) (*G.Node, error) { return posenc.TileBias(e, s, s.Full()) }
func (pairBias) BiasTable(s *posenc.Site) (*G.Node, error) {
	return s.Params.Node(s.G, "pair_bias", tensor.Shape{s.Pos.NumRel, s.H}, graph.Normal(0.5), false)
}
func (pairBias) BiasIndex(s *posenc.Site, b int, t posenc.Tile, dst []int) (bool, error) {
	p := s.Pos
	if p == nil || p.Kind != posenc.PosPairwise {
		return false, errors.New("pair-bias: needs pairwise positions")
	}
	if p.Batch == 1 {
		b = 0
	}
	tk := t.K1 - t.K0
	for i := t.Q0; i < t.Q1; i++ {
		for j := t.K0; j < t.K1; j++ {
			dst[(i-t.Q0)*tk+j-t.K0] = p.Rel[(b*p.TQ+i)*p.TK+j]
		}
	}
	return p.Batch > 1, nil
}

// TestPerExampleBias runs attention with a per-example pairwise bias
// [B, H, Tq, Tk]: it gradient-checks the layer, checks that two examples
// with the same tokens but different relations get different outputs (and
// the same outputs with the same relations), and that tiles of the bias
// match ScoreBias per example.
func TestPerExampleBias(t *testing.T) {
	const b, n, nrel = 2, 4, 3
	rng := rand.New(rand.NewSource(3))
	rel := make([]int, b*n*n)
	for i := range rel {
		rel[i] = rng.Intn(nrel)
	}
	x := make([]float64, n*8)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	run := func(rel []int, check bool) []float64 {
		pos, err := posenc.NewPairwise(b, n, n, nrel, rel)
		if err != nil {
			t.Fatal(err)
		}
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Pos: pairBias{}})
		if err != nil {
			t.Fatal(err)
		}
		both := append(append([]float64(nil), x...), x...) // the same tokens in both examples
		xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("x"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, n, 8}, both)))
		y, err := a.FwdPositions(xn, nil, posenc.Span{TQ: n, TK: n}, pos, nil)
		if err != nil {
			t.Fatal(err)
		}
		if check {
			r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
			if err := graph.GradCheck(g, loss, append(G.Nodes{xn}, p.Nodes(g)...), graph.GradCheckOpts{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			return nil
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(y.Value())
	}
	run(rel, true)
	out := run(rel, false)
	differ := false
	for i := 0; i < n*8; i++ {
		differ = differ || out[i] != out[n*8+i]
	}
	if !differ {
		t.Fatal("examples with different relations gave the same outputs")
	}
	same := append(append([]int(nil), rel[:n*n]...), rel[:n*n]...)
	out = run(same, false)
	for i := 0; i < n*8; i++ {
		if out[i] != out[n*8+i] {
			t.Fatalf("examples with the same tokens and relations differ at %d: %v, %v", i, out[i], out[n*8+i])
		}
	}
	// a grid-only model refuses pairwise positions, naming both kinds
	pos, _ := posenc.NewPairwise(1, n, n, nrel, rel[:n*n])
	if err := posenc.CheckKind(pairBias{}, nil); err == nil {
		t.Fatal("line positions accepted by a pairwise encoding")
	}
	if err := posenc.CheckKind(pairBias{}, pos); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkNewPairwise builds the positions of a code batch: 16 windows of
// 128 bytes, 25 tree relations (the check, the copy and the content hash).
func BenchmarkNewPairwise(b *testing.B) {
	rel := make([]int, 16*128*128)
	for i := range rel {
		rel[i] = i % 25
	}
	for i := 0; i < b.N; i++ {
		if _, err := posenc.NewPairwise(16, 128, 128, 25, rel); err != nil {
			b.Fatal(err)
		}
	}
}
