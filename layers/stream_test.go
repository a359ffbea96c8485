package layers

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestLMStreamFloat32: in float32 the LM with Stream on computes the logits
// of the LM with Stream off (same weights) within 1e-5, for encodings of
// each kind the streaming attention serves (none, rotary, table biases,
// terms, CoPE's own streaming), and its probes record as many rows with
// close entropies and position parts.
func TestLMStreamFloat32(t *testing.T) {
	for _, pos := range []string{"none", "rope", "alibi", "t5", "kerple-log", "shaw", "xl", "deberta", "cope", "fire"} {
		t.Run(pos, func(t *testing.T) {
			cfg := tinyConfig(pos)
			w := tinyWeights(t, cfg, 4)
			rng := rand.New(rand.NewSource(9))
			const b, tt = 2, 9
			data := make([]int, b*tt)
			for i := range data {
				data[i] = rng.Intn(256)
			}
			ref, refStats := runLMProbed(t, cfg, w, data, b, tt)
			cfg.Stream = true
			got, gotStats := runLMProbed(t, cfg, w, data, b, tt)
			for i := range ref {
				if d := math.Abs(got[i] - ref[i]); !(d <= 1e-5) {
					t.Fatalf("logit %d: stream %v, materialised %v (diff %g)", i, got[i], ref[i], d)
				}
			}
			for l := range refStats {
				if len(gotStats[l]) != len(refStats[l]) {
					t.Fatalf("block %d: the stream probe recorded %d heads, the materialised one %d", l, len(gotStats[l]), len(refStats[l]))
				}
				for h := range refStats[l] {
					r, g := refStats[l][h], gotStats[l][h]
					if g.Rows != r.Rows || g.Rows == 0 {
						t.Fatalf("block %d head %d: the stream probe counted %d rows, the materialised one %d", l, h, g.Rows, r.Rows)
					}
					samePos := math.Abs(g.PosRMS-r.PosRMS) <= 1e-4 || math.IsNaN(g.PosRMS) && math.IsNaN(r.PosRMS) // NaN: no position part
					if de := math.Abs(g.EntropyMean - r.EntropyMean); !(de <= 1e-4 && samePos) {
						t.Fatalf("block %d head %d: stream %+v, materialised %+v", l, h, g, r)
					}
				}
			}
		})
	}
}

// runLMProbed runs the float32 tiny LM with its probes armed and returns
// the logits and each block's head statistics.
func runLMProbed(t *testing.T, cfg Config, weights map[string][]float64, data []int, b, tt int) ([]float64, [][]graph.HeadStats) {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float32, 1)
	lm, err := NewLM(g, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, tt), G.WithName("ids"), G.WithValue(tensor.New(tensor.WithShape(b, tt), tensor.WithBacking(append([]int(nil), data...)))))
	logits, err := lm.Fwd(id)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range weights {
		if err := p.Set(name, w); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Stream {
		for _, bl := range lm.Blocks {
			if bl.Attn.Probs() != nil {
				t.Fatalf("%s: Probs() is not nil with Stream", bl.Name)
			}
		}
	}
	for _, pr := range lm.Probes() {
		pr.Arm()
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	var stats [][]graph.HeadStats
	for _, pr := range lm.Probes() {
		pr.Disarm()
		stats = append(stats, pr.Stats())
	}
	return graph.ToFloat64s(logits.Value()), stats
}

// TestStreamErrors: with Stream, an encoding with content-position terms
// that is not a posenc.StreamTermer (a combination) and a mask that is not
// a key-padding mask [B, 1, 1, Tk] are errors naming the problem; a
// key-padding mask, rebound between runs, gives the materialised
// attention's results.
func TestStreamErrors(t *testing.T) {
	// Every registered line encoding streams (the harness checks each);
	// a combination with terms is not a StreamTermer and is refused.
	var parts []posenc.Encoding
	for _, name := range []string{"shaw", "t5"} {
		e, err := posenc.New(name, posenc.Options{}.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, e)
	}
	comb, err := posenc.NewCombined(parts...)
	if err != nil {
		t.Fatal(err)
	}
	{
		g := G.NewGraph()
		a, err := NewAttention(g, graph.NewParams(tensor.Float64, 1), AttentionConfig{Name: "attn", D: 8, Heads: 2, InitStd: 0.5, Causal: true, Pos: comb, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		x := input(g, tensor.Float64, rand.New(rand.NewSource(3)), "x", 2, 4, 8)
		if _, err = a.Fwd(x, nil, posenc.Span{TQ: 4, TK: 4}, nil); err == nil || !strings.Contains(err.Error(), "shaw+t5 adds content-position terms") {
			t.Errorf("shaw+t5 with Stream: error %v, want one naming its terms", err)
		}
	}

	rng := rand.New(rand.NewSource(5))
	const b, tt = 2, 4
	build := func(stream bool) (*G.ExprGraph, *Attention, *G.Node) {
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		a, err := NewAttention(g, p, AttentionConfig{Name: "attn", D: 8, Heads: 2, InitStd: 0.5, Causal: true, Pos: posenc.NewAlibi(), Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		randomize(p, rand.New(rand.NewSource(2)))
		return g, a, input(g, tensor.Float64, rand.New(rand.NewSource(3)), "x", b, tt, 8)
	}
	g, a, x := build(true)
	full := input(g, tensor.Float64, rng, "full_mask", b, 1, tt, tt)
	if _, err := a.Fwd(x, nil, posenc.Span{TQ: tt, TK: tt}, full); err == nil || !strings.Contains(err.Error(), "(2, 1, 4, 4)") {
		t.Errorf("a full mask with Stream: error %v, want one naming its shape", err)
	}

	// A key mask is an input read at every run: two masks bound in turn to
	// one graph give the materialised attention's outputs.
	keys := [][]float64{{1, 1, 0, 1, 1, 1, 1, 0}, {1, 0, 1, 1, 0, 1, 1, 1}} // [B, 1, 1, Tk]
	run := func(stream bool) [][]float64 {
		g, a, x := build(stream)
		value := func(k []float64) *tensor.Dense {
			return graph.FromFloat64s(tensor.Float64, tensor.Shape{b, 1, 1, tt}, k)
		}
		mask := G.NewTensor(g, tensor.Float64, 4, G.WithShape(b, 1, 1, tt), G.WithName("key_mask"), G.WithValue(value(keys[0])))
		y, err := a.Fwd(x, nil, posenc.Span{TQ: tt, TK: tt}, mask)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		var out [][]float64
		for i, k := range keys {
			if i > 0 {
				if err := G.Let(mask, value(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			out = append(out, graph.ToFloat64s(y.Value()))
			m.Reset()
		}
		return out
	}
	ref, got := run(false), run(true)
	for r := range ref {
		for i := range ref[r] {
			if d := math.Abs(got[r][i] - ref[r][i]); !(d <= 1e-12) {
				t.Fatalf("key mask %d: output %d stream %v, materialised %v", r, i, got[r][i], ref[r][i])
			}
		}
	}
}
