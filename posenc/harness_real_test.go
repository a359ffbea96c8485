package posenc_test

import (
	"math"
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

// realShiftVariant lists the encodings that serve real positions but are
// not translation-invariant: FIRE normalises by the query's time
// psi(max(L, t_q)), so a shift of every time changes its bias.
var realShiftVariant = map[string]bool{"fire": true}

// nextEventTimes returns per-example self-attention times of a next-event
// model for b examples of tt tokens: sorted random event times e_0 < ... <
// e_tt per example (gaps in (0.1, 2.1)), keys at e_0..e_{tt-1} and queries
// at e_1..e_tt (query i sits at the time of the event it predicts), plus
// shift.
func nextEventTimes(t *testing.T, rng *rand.Rand, b, tt int, shift float64) *posenc.Positions {
	t.Helper()
	q, k := make([]float64, 0, b*tt), make([]float64, 0, b*tt)
	for e := 0; e < b; e++ {
		ev := make([]float64, tt+1)
		ev[0] = rng.Float64()
		for i := 1; i <= tt; i++ {
			ev[i] = ev[i-1] + 0.1 + 2*rng.Float64()
		}
		for i := 0; i < tt; i++ {
			k = append(k, ev[i]+shift)
			q = append(q, ev[i+1]+shift)
		}
	}
	p, err := posenc.NewReal(b, q, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// shiftTimes returns p with every time plus c.
func shiftTimes(t *testing.T, p *posenc.Positions, c float64) *posenc.Positions {
	t.Helper()
	q, k := slices.Clone(p.QTimes), slices.Clone(p.KTimes)
	for i := range q {
		q[i] += c
	}
	for i := range k {
		k[i] += c
	}
	s, err := posenc.NewReal(p.Batch, q, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// realLM builds the tiny LM with the encoding over ids [b, tt] and
// positions pos (nil: the line), sets weights w, and returns the graph,
// the params, the logits and the loss (cross-entropy on fixed targets).
func realLM(t *testing.T, name string, o posenc.Options, causal bool, w map[string][]float64, data []int, b, tt int, pos *posenc.Positions) (*G.ExprGraph, *graph.Params, *layers.LM, *G.Node, *G.Node) {
	t.Helper()
	g, p, lm, logits, loss, err := realLMStream(name, o, causal, false, w, data, b, tt, pos)
	if err != nil {
		t.Fatal(err)
	}
	return g, p, lm, logits, loss
}

// realLMStream is realLM with the LM's attention streaming
// (layers.Config.Stream) when stream is set; it returns the model's error
// (a refusal of the streaming attention) instead of failing.
func realLMStream(name string, o posenc.Options, causal, stream bool, w map[string][]float64, data []int, b, tt int, pos *posenc.Positions) (*G.ExprGraph, *graph.Params, *layers.LM, *G.Node, *G.Node, error) {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	cfg := tinyLM(name, o, causal)
	cfg.Stream = stream
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	logits, err := lm.FwdWith(intNode(g, "ids", []int{b, tt}, slices.Clone(data)), layers.Options{Pos: pos})
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	for n, v := range w {
		if err := p.Set(n, v); err != nil {
			return nil, nil, nil, nil, nil, err
		}
	}
	tg := make([]int, b*tt)
	for i := range tg {
		tg[i] = (7 * i) % 256
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b * tt}, tg))
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	return g, p, lm, logits, loss, nil
}

// runReal returns the tiny LM's logits [b*tt*256] on positions pos (nil:
// the line), bound to bind first if not nil (through pos.Feed). It runs
// the machine twice (with the gradients) and fails if the runs differ: no
// op may overwrite a cached constant or a fed input in place.
func runReal(t *testing.T, name string, o posenc.Options, causal bool, w map[string][]float64, data []int, b, tt int, pos, bind *posenc.Positions) []float64 {
	t.Helper()
	g, _, lm, logits, loss := realLM(t, name, o, causal, w, data, b, tt, pos)
	if _, err := G.Grad(loss, lm.Learnables()...); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if bind != nil {
		if err := pos.Feed.Bind(bind); err != nil {
			t.Fatal(err)
		}
	}
	var first []float64
	for run := 0; run < 2; run++ {
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = slices.Clone(graph.ToFloat64s(logits.Value()))
		}
		m.Reset()
	}
	if got := graph.ToFloat64s(logits.Value()); !slices.Equal(got, first) {
		t.Fatalf("%s: a second run of the same graph differs by %g", name, maxAbsDiff(got, first))
	}
	return first
}

func maxAbsDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// checkRealGrad gradient-checks (float64) the causal tiny LM with the
// encoding over ids data [b, tt] at real positions pos w.r.t. every
// learnable, the parameters drawn from rng.
func checkRealGrad(t *testing.T, name string, o posenc.Options, rng *rand.Rand, data []int, b, tt int, pos *posenc.Positions) {
	t.Helper()
	g, p, lm, _, loss := realLM(t, name, o, true, nil, data, b, tt, pos)
	randomizeParams(p, rng)
	if err := graph.GradCheck(g, loss, lm.Learnables(), graph.GradCheckOpts{MaxPerNode: 4, Seed: 2}); err != nil {
		t.Errorf("%s causal=true: real-positions gradient check: %v", name, err)
	}
}

// checkReal runs the shared checks of an encoding that serves real
// positions, in the tiny LM (B = 2, T = 5), causal and (unless the
// encoding is causal-only) bidirectional:
//
//   - gradient check (float64, causal) w.r.t. every learnable on
//     per-example next-event times (query times differ from key times);
//   - rebinding: a graph built once with a Feed and bound to other times
//     gives exactly the logits of a graph built for them; binding times
//     of another shape is an error naming both shapes;
//   - integer times 0..T-1 (queries and keys alike) give the line path's
//     logits to 1e-12, per example and shared by the batch;
//   - a constant shift of every time changes nothing (to 1e-9), except for
//     the encodings in realShiftVariant, where it must change the logits;
//   - every graph runs twice to the same logits (no op overwrites a cached
//     constant or a fed input in place).
func checkReal(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	const b, tt = 2, 5
	rng := rand.New(rand.NewSource(int64(31 + len(name))))
	data := make([]int, b*tt)
	for i := range data {
		data[i] = rng.Intn(256)
	}
	modes := []bool{true}
	if !causalOnly(t, name, o) {
		modes = append(modes, false)
	}
	for _, causal := range modes {
		w := weightsFor(t, name, o, causal, tt, 9)
		pos1 := nextEventTimes(t, rng, b, tt, 0)
		pos2 := nextEventTimes(t, rng, b, tt, 0)

		// Gradient check (causal only: the bidirectional bias differs by
		// the masked entries, and the golden cases check both).
		if causal {
			checkRealGrad(t, name, o, rng, data, b, tt, pos1)
		}

		// Rebinding through a Feed.
		fed := *pos1
		fed.Feed = posenc.NewFeed()
		got, want := runReal(t, name, o, causal, w, data, b, tt, &fed, pos2), runReal(t, name, o, causal, w, data, b, tt, pos2, nil)
		if !slices.Equal(got, want) {
			t.Errorf("%s causal=%v: a fed graph bound to other times differs from a graph built for them by %g", name, causal, maxAbsDiff(got, want))
		}
		if name != "none" && fed.Feed.Len() == 0 {
			t.Errorf("%s causal=%v: reads real times but registered nothing in the feed", name, causal)
		}
		if fed.Feed.Len() > 0 {
			other := nextEventTimes(t, rng, b, tt+1, 0)
			if err := fed.Feed.Bind(other); err == nil || !strings.Contains(err.Error(), "5 queries") || !strings.Contains(err.Error(), "6 queries") {
				t.Errorf("%s causal=%v: binding times of another shape: error %v, want one naming both shapes", name, causal, err)
			}
		}

		// Integer times equal the line path.
		line := runReal(t, name, o, causal, w, data, b, tt, nil, nil)
		ints := make([]float64, tt)
		for i := range ints {
			ints[i] = float64(i)
		}
		shared, err := posenc.NewReal(1, ints, ints)
		if err != nil {
			t.Fatal(err)
		}
		per, err := posenc.NewReal(b, slices.Concat(ints, ints), slices.Concat(ints, ints))
		if err != nil {
			t.Fatal(err)
		}
		for _, pos := range []*posenc.Positions{shared, per} {
			if d := maxAbsDiff(runReal(t, name, o, causal, w, data, b, tt, pos, nil), line); d > 1e-12 {
				t.Errorf("%s causal=%v: integer times (batch %d) differ from the line path by %g", name, causal, pos.Batch, d)
			}
		}

		// Translation invariance (and its absence where documented).
		base := runReal(t, name, o, causal, w, data, b, tt, pos1, nil)
		d := maxAbsDiff(runReal(t, name, o, causal, w, data, b, tt, shiftTimes(t, pos1, 3.75), nil), base)
		if realShiftVariant[name] {
			if d < 1e-9 {
				t.Errorf("%s causal=%v: listed as not translation-invariant, but shifting every time changed nothing", name, causal)
			}
		} else if d > 1e-9 {
			t.Errorf("%s causal=%v: shifting every time by 3.75 changed the logits by %g", name, causal, d)
		}
	}
}
