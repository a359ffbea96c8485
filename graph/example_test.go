package graph_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// ExampleMaskedSoftmax applies causal attention weights to equal scores: query
// i spreads its weight evenly over keys 0..i. The gradient is checked against
// finite differences with GradCheck.
func ExampleMaskedSoftmax() {
	g := G.NewGraph()
	scores := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 3, 3), G.WithName("scores"),
		G.WithValue(tensor.New(tensor.WithShape(1, 1, 3, 3), tensor.Of(tensor.Float64))))
	mask := graph.MaskNode(g, graph.CausalMask(tensor.Float64, 3, 3, 0, 0), "causal") // [1, 1, 3, 3]
	p, err := graph.MaskedSoftmax(scores, mask)
	if err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	m.Close()
	y := p.Value().Data().([]float64)
	for i := 0; i < 3; i++ {
		fmt.Printf("%.3f\n", y[i*3:i*3+3])
	}

	// Check d(sum(p * w))/d(scores) for a weighting w.
	w := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 3, 3), G.WithName("w"),
		G.WithValue(tensor.New(tensor.WithShape(1, 1, 3, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}))))
	pw, _ := graph.BroadcastMul(p, w)
	loss, _ := G.Sum(pw)
	fmt.Println("GradCheck:", graph.GradCheck(g, loss, G.Nodes{scores}, graph.GradCheckOpts{}))
	// Output:
	// [1.000 0.000 0.000]
	// [0.500 0.500 0.000]
	// [0.333 0.333 0.333]
	// GradCheck: <nil>
}

// ExampleAttentionProbe records the statistics of causal attention whose
// scores are all equal: query i spreads its weight evenly over i+1 keys,
// so the counted queries (those with at least two keys) have entropies
// ln 2 and ln 3, and none is one-hot.
func ExampleAttentionProbe() {
	g := G.NewGraph()
	zeros := func(name string) *G.Node { // [B=1, T=3, H*dh=2], one head
		return G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 3, 2), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(1, 3, 2), tensor.Of(tensor.Float64))))
	}
	mask := graph.MaskNode(g, graph.CausalMask(tensor.Float64, 3, 3, 0, 0), "causal") // [1, 1, 3, 3]
	probe := graph.NewAttentionProbe()
	if _, err := graph.AttentionProbs(zeros("q"), zeros("k"), graph.AttentionOpts{Heads: 1, Mask: mask, Probe: probe}); err != nil {
		panic(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	probe.Arm()
	if err := m.RunAll(); err != nil {
		panic(err)
	}
	probe.Disarm()
	s := probe.Stats()[0]
	fmt.Printf("rows %d, entropy mean %.4f min %.4f, one-hot %.0f%%, scores %g..%g, position RMS %v\n",
		s.Rows, s.EntropyMean, s.EntropyMin, 100*s.OneHot, s.ScoreMin, s.ScoreMax, s.PosRMS)
	// Output:
	// rows 2, entropy mean 0.8959 min 0.6931, one-hot 0%, scores 0..0, position RMS NaN
}

// ExampleStreamAttention runs causal attention over equal scores with
// tiles of two keys: query i averages the values of keys 0..i, although
// the op never holds the [3, 3] matrix of probabilities. The gradients of
// q, k, v and the bias table are checked against finite differences.
func ExampleStreamAttention() {
	g := G.NewGraph()
	node := func(name string, data ...float64) *G.Node { // [B=1, T=3, H*d=2], two heads of width 1
		return G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 3, 2), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(1, 3, 2), tensor.WithBacking(data))))
	}
	q, k := node("q", 0, 0, 0, 0, 0, 0), node("k", 0, 0, 0, 0, 0, 0)
	v := node("v", 1, 10, 2, 20, 3, 30)
	// A bias of 0 for every head, indexed by the distance i - j (rows 0..2).
	table := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 2), G.WithName("table"),
		G.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.Of(tensor.Float64))))
	out, err := graph.StreamAttention(q, k, v, graph.StreamOpts{Heads: 2, Causal: true, Table: table,
		Index: distance{}, TileQ: 2, TileK: 2})
	if err != nil {
		panic(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		panic(err)
	}
	for i, y := 0, out.Value().Data().([]float64); i < 3; i++ {
		fmt.Printf("%.2f\n", y[i*2:i*2+2]) // query i: the mean of v's rows 0..i, per head
	}

	w := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 3, 2), G.WithName("w"),
		G.WithValue(tensor.New(tensor.WithShape(1, 3, 2), tensor.WithBacking([]float64{1, -2, 3, 1, -1, 2}))))
	ow, _ := graph.BroadcastMul(out, w)
	loss, _ := G.Sum(ow)
	fmt.Println("GradCheck:", graph.GradCheck(g, loss, G.Nodes{q, k, v, table}, graph.GradCheckOpts{}))
	// Output:
	// [1.00 10.00]
	// [1.50 15.00]
	// [2.00 20.00]
	// GradCheck: <nil>
}

// distance is a graph.TileIndexer: the table row of (query i, key j) is
// i - j (clipped to 0; the causal mask hides j > i).
type distance struct{}

func (distance) TileIndex(_, q0, q1, k0, k1 int, dst []int) (bool, error) {
	for i := q0; i < q1; i++ {
		for j := k0; j < k1; j++ {
			dst[(i-q0)*(k1-k0)+j-k0] = max(i-j, 0)
		}
	}
	return false, nil
}
