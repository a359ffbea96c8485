package layers

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// eventTimes returns next-event positions of b examples of tt tokens from
// event times ev [b][tt+1]: the key of token i at ev[i], its query at
// ev[i+1] (the time of the event it predicts).
func eventTimes(t *testing.T, ev [][]float64) *posenc.Positions {
	t.Helper()
	var q, k []float64
	for _, e := range ev {
		k = append(k, e[:len(e)-1]...)
		q = append(q, e[1:]...)
	}
	p, err := posenc.NewReal(len(ev), q, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// randomEvents returns b sorted event sequences of n times.
func randomEvents(rng *rand.Rand, b, n int) [][]float64 {
	ev := make([][]float64, b)
	for e := range ev {
		ev[e] = make([]float64, n)
		ev[e][0] = rng.Float64()
		for i := 1; i < n; i++ {
			ev[e][i] = ev[e][i-1] + 0.2 + 3*rng.Float64()
		}
	}
	return ev
}

// TestLMRealPositions: a causal LM with RoPE (and ALiBi) on per-example
// real times, queries at the time of the next event and keys at their
// own, passes a float64 gradient check; a graph built once with a Feed
// and rebound to other times gives the logits of a graph built for them
// (float64 and float32); the logits at token i do not depend on the
// times of events after i+1; and times that put a visible key after its
// query are an error for ALiBi's causal bias.
func TestLMRealPositions(t *testing.T) {
	const b, tt = 2, 5
	for _, name := range []string{"rope", "alibi"} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(17))
			data := make([]int, b*tt)
			for i := range data {
				data[i] = rng.Intn(256)
			}
			build := func(dt tensor.Dtype, w map[string][]float64, pos *posenc.Positions) (*G.ExprGraph, *graph.Params, *LM, *G.Node) {
				g := G.NewGraph()
				p := graph.NewParams(dt, 1)
				lm, err := NewLM(g, p, tinyConfig(name))
				if err != nil {
					t.Fatal(err)
				}
				id := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, tt), G.WithName("ids"),
					G.WithValue(tensor.New(tensor.WithShape(b, tt), tensor.WithBacking(slices.Clone(data)))))
				logits, err := lm.FwdWith(id, Options{Pos: pos})
				if err != nil {
					t.Fatal(err)
				}
				for n, v := range w {
					if err := p.Set(n, v); err != nil {
						t.Fatal(err)
					}
				}
				return g, p, lm, logits
			}
			run := func(dt tensor.Dtype, w map[string][]float64, pos, bind *posenc.Positions) []float64 {
				g, _, _, logits := build(dt, w, pos)
				m := G.NewTapeMachine(g)
				defer m.Close()
				if bind != nil {
					if err := pos.Feed.Bind(bind); err != nil {
						t.Fatal(err)
					}
				}
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				return slices.Clone(graph.ToFloat64s(logits.Value()))
			}

			ev1, ev2 := randomEvents(rng, b, tt+1), randomEvents(rng, b, tt+1)
			pos1, pos2 := eventTimes(t, ev1), eventTimes(t, ev2)

			// Gradient check.
			g, p, lm, logits := build(tensor.Float64, nil, pos1)
			randomize(p, rng)
			loss := weightedSum(t, g, rng, logits)
			if err := graph.GradCheck(g, loss, lm.Learnables(), checkOpts); err != nil {
				t.Fatal(err)
			}

			// Rebinding.
			w := tinyWeights(t, tinyConfig(name), 4)
			for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				fed := *pos1
				fed.Feed = posenc.NewFeed()
				got, want := run(dt, w, &fed, pos2), run(dt, w, pos2, nil)
				if !slices.Equal(got, want) {
					t.Fatalf("%v: a fed LM rebound to other times differs from one built for them", dt)
				}
				if fed.Feed.Len() == 0 {
					t.Fatalf("%v: nothing registered in the feed", dt)
				}
			}

			// Causality through the times: move event 4 (the query time of
			// token 3, the key time of token 4) and event 5.
			ev3 := [][]float64{slices.Clone(ev1[0]), slices.Clone(ev1[1])}
			for e := range ev3 {
				ev3[e][4] += 0.1
				ev3[e][5] += 1.5
			}
			a, c := run(tensor.Float64, w, pos1, nil), run(tensor.Float64, w, eventTimes(t, ev3), nil)
			// (ALiBi's causal bias is invariant to the query's own time: it
			// shifts a row of scores by a constant; token 4 sees the moved
			// key time.)
			for e := 0; e < b; e++ {
				changed := false
				for i := 0; i < tt; i++ {
					row := (e*tt + i) * 256
					same := slices.Equal(a[row:row+256], c[row:row+256])
					if i < 3 && !same {
						t.Fatalf("example %d: the logits of token %d changed with the times of later events", e, i)
					}
					changed = changed || !same
				}
				if !changed {
					t.Fatalf("example %d: no logits changed with the times of events 4 and 5", e)
				}
			}
		})
	}

	// A causal site whose visible keys are later than their query.
	g := G.NewGraph()
	lm, err := NewLM(g, graph.NewParams(tensor.Float64, 1), tinyConfig("alibi"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := posenc.NewReal(1, []float64{0, 1, 2}, []float64{0, 1.5, 2})
	if err != nil {
		t.Fatal(err)
	}
	id := ids(g, rand.New(rand.NewSource(1)), 1, 3)
	if _, err := lm.FwdWith(id, Options{Pos: bad}); err == nil || !strings.Contains(err.Error(), "alibi") || !strings.Contains(err.Error(), "key 1 at time 1.5") {
		t.Fatalf("unsorted causal times: error %v", err)
	}
}
