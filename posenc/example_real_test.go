package posenc_test

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
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

// A causal LM over sequences of timed events: token i's key sits at the
// time of its event, its query at the time of the next event (the one it
// predicts). The graph is built once with a Feed; each batch binds its
// token ids (an ordinary input) and its times.
func ExampleNewReal_lm() {
	const b, t = 2, 4
	cfg := layers.Config{Vocab: 16, DModel: 8, Heads: 2, Layers: 1, FFN: 16, Eps: 1e-5, InitStd: 0.5, Causal: true, Pos: "rope"}
	g := G.NewGraph()
	lm, err := layers.NewLM(g, graph.NewParams(tensor.Float32, 1), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// times returns next-event positions of b sequences of t+1 events each.
	times := func(events [][]float64) *posenc.Positions {
		var q, k []float64
		for _, e := range events {
			k, q = append(k, e[:t]...), append(q, e[1:]...)
		}
		p, err := posenc.NewReal(len(events), q, k)
		if err != nil {
			panic(err)
		}
		return p
	}
	first := times([][]float64{{0, 0.5, 0.7, 2, 3.1}, {0, 1, 2, 3, 4}})
	first.Feed = posenc.NewFeed()
	ids := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, t), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(b, t), tensor.WithBacking([]int{1, 2, 3, 4, 5, 6, 7, 8}))))
	logits, err := lm.FwdWith(ids, layers.Options{Pos: first})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	var runs [][]float64
	for _, batch := range [][][]float64{
		{{0, 0.5, 0.7, 2, 3.1}, {0, 1, 2, 3, 4}},
		{{1, 1.2, 5, 6, 6.5}, {0, 0.1, 0.2, 0.3, 0.4}},
	} {
		if err := first.Feed.Bind(times(batch)); err != nil {
			fmt.Println(err)
			return
		}
		if err := m.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		runs = append(runs, slices.Clone(graph.ToFloat64s(logits.Value())))
		m.Reset()
	}
	fmt.Println(logits.Shape(), first.Feed.Len(), "fed nodes")
	// The first token attends to itself only: its logits do not depend on
	// the times. The second's keys move from 0, 0.5 to 1, 1.2 and its
	// query from 0.7 to 5.
	fmt.Println("token 0 unchanged:", slices.Equal(runs[0][:16], runs[1][:16]))
	fmt.Println("token 1 unchanged:", slices.Equal(runs[0][16:32], runs[1][16:32]))
	// Output:
	// (8, 16) 2 fed nodes
	// token 0 unchanged: true
	// token 1 unchanged: false
}
