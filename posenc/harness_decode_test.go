package posenc_test

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

// checkDecode is the cached-decoding role of the harness. An encoding whose
// registry entry declares it (Info.NoDecode empty) must give, step by step
// through layers.Decoder, the logits of the full computation over the same
// context: float64 within 1e-12 and float32 within 1e-5 (relative to
// max(1, |logit|)), with the attention streamed or not, with a cache that
// fills exactly and one that keeps empty (masked) slots. An encoding that
// does not declare it must be refused with its reason.
func checkDecode(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	info, ok := posenc.InfoOf(name)
	if !ok {
		t.Fatalf("%s: no Info", name)
	}
	if info.NoDecode != "" {
		_, err := layers.NewDecoder(graph.NewParams(tensor.Float64, 1), tinyLM(name, o, true), 1, 4, 0)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), info.NoDecode) {
			t.Fatalf("%s: NewDecoder gave %v, want an error naming it and its reason %q", name, err, info.NoDecode)
		}
		return
	}
	if enc, err := posenc.New(name, o); err == nil {
		if l, ok := enc.(posenc.DecodeLimiter); ok {
			if m, why := l.MaxDecodeWindow(); m > 0 {
				_, err := layers.NewDecoder(graph.NewParams(tensor.Float64, 1), tinyLM(name, o, true), 1, m+1, 0)
				if err == nil || !strings.Contains(err.Error(), why) {
					t.Fatalf("%s: a decoder of window %d > its limit %d gave %v, want an error with %q", name, m+1, m, err, why)
				}
			}
		}
	}
	const b, n = 2, 6
	rng := rand.New(rand.NewSource(7))
	ids := make([]int, b*n)
	for i := range ids {
		ids[i] = rng.Intn(256)
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-5
		}
		for _, stream := range []bool{false, true} {
			cfg := tinyLM(name, o, true)
			cfg.Stream = stream
			p := graph.NewParams(dt, 1)
			full, err := decodeFull(p, cfg, ids, b, n)
			if stream && err != nil && strings.Contains(err.Error(), "stream") {
				continue // the streaming attention does not serve it (checkStream covers that)
			}
			if err != nil {
				t.Fatalf("%s: full model: %v", name, err)
			}
			for _, w := range []int{n, n + 2} {
				what := fmt.Sprintf("%s %v stream=%v W=%d", name, dt, stream, w)
				dec, err := layers.NewDecoder(p, cfg, b, w, 0)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				v := cfg.Vocab
				for i := 0; i < n; i++ {
					lg, err := dec.Step([]int{ids[i], ids[n+i]})
					if err != nil {
						t.Fatalf("%s: step %d: %v", what, i, err)
					}
					for s := 0; s < b; s++ {
						want := full[(s*n+i)*v : (s*n+i+1)*v]
						got := lg[s*v : (s+1)*v]
						for c := range want {
							if math.Abs(got[c]-want[c]) > tol*math.Max(1, math.Abs(want[c])) {
								t.Fatalf("%s: sequence %d step %d logit %d: cached %.15g, full %.15g", what, s, i, c, got[c], want[c])
							}
						}
					}
				}
				dec.Close()
			}
		}
	}
	checkDecodeSliding(t, name, o)
}

// checkDecodeSliding checks the sliding window with attention sinks and
// prompts of different lengths (layers.Skip) against a reference: in a
// one-block model a token's keys and values depend on that token alone, so
// the cached step equals the full computation over the tokens the cache
// keeps (the first sinks, then the latest), placed at positions 0.. as
// StreamingLLM re-indexes them. Sequence 1 starts late (skipped steps).
func checkDecodeSliding(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	const n, w, late = 11, 5, 3
	rng := rand.New(rand.NewSource(11))
	toks := [2][]int{}
	for s := range toks {
		for i := 0; i < n; i++ {
			toks[s] = append(toks[s], rng.Intn(256))
		}
	}
	cfg := tinyLM(name, o, true)
	cfg.Layers = 1
	if info, _ := posenc.InfoOf(name); info.NoSlide != "" {
		// an absolute table decodes within the window and refuses to slide
		dec, err := layers.NewDecoder(graph.NewParams(tensor.Float64, 1), cfg, 2, w, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer dec.Close()
		for i := 0; i < w; i++ {
			if _, err := dec.Step([]int{toks[0][i], layers.Skip}); err != nil {
				t.Fatalf("%s: step %d within the window: %v", name, i, err)
			}
		}
		_, err = dec.Step([]int{toks[0][w], toks[1][0]})
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), info.NoSlide) {
			t.Fatalf("%s: a step past the window gave %v, want an error naming it and %q", name, err, info.NoSlide)
		}
		return
	}
	for _, sinks := range []int{0, 2} {
		p := graph.NewParams(tensor.Float64, 1)
		// want[s][i]: logits after sequence s's token i.
		var want [2][][]float64
		for s := range toks {
			for i := range toks[s] {
				kept := toks[s][:i+1]
				if i+1 > w {
					kept = append(append([]int(nil), toks[s][:sinks]...), toks[s][i+1-(w-sinks):i+1]...)
				}
				full, err := decodeFull(p, cfg, kept, 1, len(kept))
				if err != nil {
					t.Fatalf("%s: reference: %v", name, err)
				}
				v := cfg.Vocab
				want[s] = append(want[s], full[(len(kept)-1)*v:])
			}
		}
		dec, err := layers.NewDecoder(p, cfg, 2, w, sinks)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for step := 0; step < n+late; step++ {
			ids := []int{layers.Skip, layers.Skip}
			idx := [2]int{step, step - late}
			for s := range ids {
				if idx[s] >= 0 && idx[s] < n {
					ids[s] = toks[s][idx[s]]
				}
			}
			lg, err := dec.Step(ids)
			if err != nil {
				t.Fatalf("%s: step %d: %v", name, step, err)
			}
			for s := range ids {
				if ids[s] == layers.Skip {
					continue
				}
				v := cfg.Vocab
				got, wnt := lg[s*v:(s+1)*v], want[s][idx[s]]
				for c := range wnt {
					if math.Abs(got[c]-wnt[c]) > 1e-12*math.Max(1, math.Abs(wnt[c])) {
						t.Fatalf("%s sinks=%d: sequence %d token %d logit %d: sliding cache %.15g, reference %.15g", name, sinks, s, idx[s], c, got[c], wnt[c])
					}
				}
			}
		}
		if dec.Len(0) != n || dec.Len(1) != n {
			t.Fatalf("%s: Len %d, %d, want %d", name, dec.Len(0), dec.Len(1), n)
		}
		dec.Close()
	}
}

// decodeFull runs the model cfg over ids [b, n] at positions 0..n-1 with
// weights drawn once into p (seeded), and returns the logits [b*n, V].
func decodeFull(p *graph.Params, cfg layers.Config, ids []int, b, n int) ([]float64, error) {
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, cfg)
	if err != nil {
		return nil, err
	}
	logits, err := lm.Fwd(intNode(g, "ids", []int{b, n}, append([]int(nil), ids...)))
	if err != nil {
		return nil, err
	}
	randomizeParams(p, rand.New(rand.NewSource(3)))
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return nil, err
	}
	return graph.ToFloat64s(logits.Value()), nil
}
