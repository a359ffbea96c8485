package posenc_test

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// Real-valued positions: events at irregular times. The bidirectional ALiBi
// bias of one head (slope 1/256) is -|t_k - t_q|/256; with a Feed the graph
// is built once and rebound to the times of the next batch.
func ExampleNewReal() {
	times, _ := posenc.NewReal(1, []float64{0, 0.5, 2}, []float64{0, 0.5, 2})
	times.Feed = posenc.NewFeed()
	g := G.NewGraph()
	s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 1, DHead: 2, DModel: 2,
		Span: posenc.Span{TQ: 3, TK: 3}, Pos: times}
	bias, err := posenc.NewAlibi().ScoreBias(s) // [1, 3, 3]: times shared by the batch
	if err != nil {
		fmt.Println(err)
		return
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	for _, ts := range [][]float64{{0, 0.5, 2}, {1, 5, 9}} {
		next, _ := posenc.NewReal(1, ts, ts)
		if err := times.Feed.Bind(next); err != nil {
			fmt.Println(err)
			return
		}
		if err := m.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		v := bias.Value().Data().([]float64)
		fmt.Println(v[0:3], v[3:6], v[6:9])
		m.Reset()
	}
	wrong, _ := posenc.NewReal(1, []float64{0, 1}, []float64{0, 1})
	fmt.Println(times.Feed.Bind(wrong))

	// Output:
	// [0 -0.001953125 -0.0078125] [-0.001953125 0 -0.005859375] [-0.0078125 -0.005859375 0]
	// [0 -0.015625 -0.03125] [-0.015625 0 -0.015625] [-0.03125 -0.015625 0]
	// posenc: feed: the alibi bias of real positions (1 heads, causal false) were built for real positions of batch 1, 3 queries and 3 keys; got real positions of batch 1, 2 queries and 2 keys
}
