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

// segConfig is a tiny causal model with encoding pos.
func segConfig(pos string) layers.Config {
	return layers.Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 2, FFN: 12, Eps: 1e-5, InitStd: 0.5, Causal: true, Pos: pos,
		PosOpts: posenc.Options{ShawK: 3, T5Buckets: 8, T5MaxDistance: 16, DebertaBuckets: 4, DebertaMaxPosition: 16}}
}

func segRandomize(t *testing.T, p *graph.Params, seed int64) {
	p.Randomize(rand.New(rand.NewSource(seed)), 0.5)
}

// segFull runs the model over the whole sequences ids [B, N] at positions
// 0..N-1 in one graph, with the mask that lets token p attend to the tokens
// q with floor(p/T)·T - M <= q <= p (nil mask: plain causal attention), and
// returns the logits [B*N, V].
func segFull(t *testing.T, p *graph.Params, cfg layers.Config, ids [][]int, tt, m int, masked bool) []float64 {
	t.Helper()
	b, n := len(ids), len(ids[0])
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	flat := make([]int, 0, b*n)
	for _, row := range ids {
		flat = append(flat, row...)
	}
	in := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, n), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(b, n), tensor.WithBacking(flat))))
	var o layers.Options
	if masked {
		mask := make([]float64, n*n)
		for q := 0; q < n; q++ {
			lo := (q/tt)*tt - m
			for k := max(lo, 0); k <= q; k++ {
				mask[q*n+k] = 1
			}
		}
		o.Mask = graph.MaskNode(g, graph.FromFloat64s(p.Dtype(), tensor.Shape{1, 1, n, n}, mask), "span_mask")
	}
	logits, err := lm.FwdWith(in, o)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(logits.Value())
}

func segIDs(b, n int, seed int64) [][]int {
	rng := rand.New(rand.NewSource(seed))
	ids := make([][]int, b)
	for i := range ids {
		ids[i] = make([]int, n)
		for j := range ids[i] {
			ids[i][j] = rng.Intn(256)
		}
	}
	return ids
}

// segCompare checks the runner's per-segment logits against the full
// logits [B*N, V].
func segCompare(t *testing.T, what string, segs [][]float64, full []float64, b, n, tt, v int, tol float64) {
	t.Helper()
	if len(segs) != n/tt {
		t.Fatalf("%s: %d segments, want %d", what, len(segs), n/tt)
	}
	for s, lg := range segs {
		if len(lg) != b*tt*v {
			t.Fatalf("%s: segment %d has %d logits, want %d", what, s, len(lg), b*tt*v)
		}
		for bb := 0; bb < b; bb++ {
			for i := 0; i < tt; i++ {
				for c := 0; c < v; c++ {
					got := lg[(bb*tt+i)*v+c]
					want := full[(bb*n+s*tt+i)*v+c]
					if !(math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))) {
						t.Fatalf("%s: segment %d, sequence %d, token %d, logit %d: runner %.12g, full %.12g", what, s, bb, i, c, got, want)
					}
				}
			}
		}
	}
}

// TestSegmentRunnerMatchesFull: the segment-by-segment computation with
// memory equals the full computation in which each token attends to its
// own segment up to itself and to the M tokens before the segment. For
// M = T and two segments that is plain causal attention over 2T tokens
// (no mask at all). Encodings that depend only on relative positions;
// rope's absolute angles differ between the two computations, so it is
// equal up to rounding (hence the 1e-9 tolerance).
func TestSegmentRunnerMatchesFull(t *testing.T) {
	cases := []struct {
		t, m, n int
		masked  bool
	}{
		{4, 4, 8, false}, // M = T: plain causal over 2T tokens
		{4, 2, 12, true}, // M < T
		{3, 5, 12, true}, // M > T: memory spans two segments
		{4, 0, 8, true},  // no memory: independent segments
	}
	const b = 2
	for _, pos := range []string{"xl", "none", "t5", "shaw", "alibi", "deberta", "rope"} {
		if !segRegistered(pos) {
			t.Logf("%s not registered, skipped", pos)
			continue
		}
		for ci, c := range cases {
			what := fmt.Sprintf("%s T=%d M=%d N=%d", pos, c.t, c.m, c.n)
			cfg := segConfig(pos)
			p := graph.NewParams(tensor.Float64, 1)
			r, err := layers.NewSegmentRunner(p, cfg, b, c.t, c.m)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			segRandomize(t, p, int64(7+ci))
			ids := segIDs(b, c.n, int64(ci))
			segs, err := r.Run(ids)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			full := segFull(t, p, cfg, ids, c.t, c.m, c.masked)
			segCompare(t, what, segs, full, b, c.n, c.t, cfg.Vocab, 1e-9)
			// a second Run starts afresh (Reset) and gives the same logits
			again, err := r.Run(ids)
			if err != nil {
				t.Fatal(err)
			}
			for s := range segs {
				for i := range segs[s] {
					if again[s][i] != segs[s][i] {
						t.Fatalf("%s: second run differs at segment %d logit %d", what, s, i)
					}
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func segRegistered(name string) bool {
	for _, n := range posenc.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// TestSegmentRunnerMemoryMatters: with memory the second segment's logits
// differ from those of the same segment run alone.
func TestSegmentRunnerMemoryMatters(t *testing.T) {
	cfg := segConfig("xl")
	p := graph.NewParams(tensor.Float64, 1)
	withMem, err := layers.NewSegmentRunner(p, cfg, 1, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer withMem.Close()
	alone, err := layers.NewSegmentRunner(p, cfg, 1, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	segRandomize(t, p, 3)
	ids := segIDs(1, 8, 4)
	a, err := withMem.Run(ids)
	if err != nil {
		t.Fatal(err)
	}
	c, err := alone.Run(ids)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a[0] {
		if math.Abs(a[0][i]-c[0][i]) > 1e-12 {
			t.Fatalf("first segment, logit %d: with memory %g, alone %g", i, a[0][i], c[0][i])
		}
	}
	diff := 0.0
	for i := range a[1] {
		diff = math.Max(diff, math.Abs(a[1][i]-c[1][i]))
	}
	if diff < 1e-6 {
		t.Fatalf("memory changed the second segment's logits by only %g", diff)
	}
}

// TestSegmentRunnerFloat32 runs the float32 path and compares it with
// float64.
func TestSegmentRunnerFloat32(t *testing.T) {
	for _, pos := range []string{"xl", "deberta"} {
		cfg := segConfig(pos)
		run := func(dt tensor.Dtype) [][]float64 {
			p := graph.NewParams(dt, 1)
			r, err := layers.NewSegmentRunner(p, cfg, 2, 3, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			segRandomize(t, p, 9)
			out, err := r.Run(segIDs(2, 9, 5))
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		a, b := run(tensor.Float64), run(tensor.Float32)
		for s := range a {
			for i := range a[s] {
				if math.Abs(a[s][i]-b[s][i]) > 1e-3*math.Max(1, math.Abs(a[s][i])) {
					t.Fatalf("%s: segment %d logit %d: float64 %g, float32 %g", pos, s, i, a[s][i], b[s][i])
				}
			}
		}
	}
}

func TestSegmentRunnerErrors(t *testing.T) {
	cfg := segConfig("xl")
	p := graph.NewParams(tensor.Float64, 1)
	for _, c := range [][3]int{{0, 4, 2}, {2, 0, 2}, {2, 4, -1}} {
		if _, err := layers.NewSegmentRunner(p, cfg, c[0], c[1], c[2]); err == nil || !strings.Contains(err.Error(), "segments") {
			t.Errorf("B=%d T=%d M=%d: %v", c[0], c[1], c[2], err)
		}
	}
	r, err := layers.NewSegmentRunner(p, cfg, 2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, ids := range [][][]int{
		segIDs(1, 8, 1),                  // wrong batch
		segIDs(2, 6, 1),                  // not a multiple of T
		{make([]int, 8), make([]int, 4)}, // ragged
		{make([]int, 0), make([]int, 0)}, // empty
	} {
		if _, err := r.Run(ids); err == nil || !strings.Contains(err.Error(), "segments") {
			t.Errorf("Run(%d rows): %v", len(ids), err)
		}
	}
	if _, err := r.Step(segIDs(2, 3, 1)); err == nil || !strings.Contains(err.Error(), "segment length") {
		t.Errorf("Step with 3 tokens: %v", err)
	}
	bad := segConfig("learned")
	bad.PosOpts.MaxLen = 4
	if _, err := layers.NewSegmentRunner(graph.NewParams(tensor.Float64, 1), bad, 1, 4, 2); err == nil || !strings.Contains(err.Error(), "learned") {
		t.Errorf("learned table shorter than M+T: %v", err)
	}
}
