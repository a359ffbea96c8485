package posenc_test

// Shared checks that every encoding must pass. Each encoding's test file
// calls them with its name and options.

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// tinyLM is a 2-layer, 2-head, d=8 model with the encoding.
func tinyLM(name string, o posenc.Options, causal bool) layers.Config {
	return layers.Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 2, FFN: 12, Eps: 1e-5, InitStd: 0.5,
		Causal: causal, Pos: name, PosOpts: o}
}

// randomizeParams sets every parameter to N(0, 0.5²) (position tables
// included) so gradient checks see no special structure.
func randomizeParams(p *graph.Params, rng *rand.Rand) {
	for _, n := range p.Names() {
		d := p.Float64s(n)
		for i := range d {
			d[i] = rng.NormFloat64() * 0.5
		}
		if err := p.Set(n, d); err != nil {
			panic(err)
		}
	}
}

func intNode(g *G.ExprGraph, name string, shape []int, data []int) *G.Node {
	return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))))
}

// checkLMGrad gradient-checks (float64, central differences) a cross-entropy
// loss through the tiny LM with the encoding, w.r.t. every learnable, and
// requires that the parameters named in want exist (the encoding's tables).
func checkLMGrad(t *testing.T, name string, o posenc.Options, causal bool, start int, want ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(11))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	const b, tt = 2, 5
	data := make([]int, b*tt)
	tg := make([]int, b*tt)
	for i := range data {
		data[i], tg[i] = rng.Intn(256), rng.Intn(256)
	}
	logits, err := lm.FwdAt(intNode(g, "ids", []int{b, tt}, data), start)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := graph.CrossEntropy(logits, intNode(g, "targets", []int{b * tt}, tg))
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rng)
	names := map[string]bool{}
	for _, n := range lm.Learnables() {
		names[n.Name()] = true
	}
	for _, w := range want {
		if !names[w] {
			t.Fatalf("%s: parameter %q missing; have %v", name, w, p.Names())
		}
		if info, _ := p.Info(w); info.Decay {
			t.Fatalf("%s: position parameter %q is weight-decayed", name, w)
		}
	}
	if err := graph.GradCheck(g, loss, lm.Learnables(), graph.GradCheckOpts{MaxPerNode: 8, Seed: 2}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// runLogits returns the tiny LM's logits for ids [1, len(data)] at start.
func runLogits(t *testing.T, name string, o posenc.Options, causal bool, weights map[string][]float64, data []int, start int) []float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	logits, err := lm.FwdAt(intNode(g, "ids", []int{1, len(data)}, append([]int(nil), data...)), start)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range weights {
		if err := p.Set(n, w); err != nil {
			t.Fatal(err)
		}
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(logits.Value())
}

// weightsFor draws random weights for every parameter of the tiny LM with the
// encoding (tables created lazily during Fwd included).
func weightsFor(t *testing.T, name string, o posenc.Options, causal bool, tt int, seed int64) map[string][]float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, seed)
	lm, err := layers.NewLM(g, p, tinyLM(name, o, causal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{1, tt}, make([]int, tt))); err != nil {
		t.Fatal(err)
	}
	randomizeParams(p, rand.New(rand.NewSource(seed)))
	w := map[string][]float64{}
	for _, n := range p.Names() {
		w[n] = p.Float64s(n)
	}
	return w
}

// checkCausal: in a causal LM with the encoding, changing token k changes no
// output at positions < k, and does change position k.
func checkCausal(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	const tt, k = 7, 4
	w := weightsFor(t, name, o, true, tt, 3)
	data := []int{10, 20, 30, 40, 50, 60, 70}
	base := runLogits(t, name, o, true, w, data, 0)
	data[k] = 99
	changed := runLogits(t, name, o, true, w, data, 0)
	for pos := 0; pos < tt; pos++ {
		same := true
		for v := 0; v < 256; v++ {
			same = same && base[pos*256+v] == changed[pos*256+v]
		}
		if pos < k && !same {
			t.Fatalf("%s: output at position %d changed when token %d changed", name, pos, k)
		}
		if pos == k && same {
			t.Fatalf("%s: output at position %d did not change with its own token", name, pos)
		}
	}
}

// checkAttentionShapes runs one attention layer with the encoding in causal
// self-attention, bidirectional self-attention, cross-attention with Tq != Tk
// and with a position offset, and gradient-checks each.
func checkAttentionShapes(t *testing.T, name string, o posenc.Options) {
	t.Helper()
	cases := []struct {
		label  string
		causal bool
		span   posenc.Span
	}{
		{"causal self", true, posenc.Span{TQ: 5, TK: 5}},
		{"bidirectional self", false, posenc.Span{TQ: 5, TK: 5}},
		{"cross tq<tk", false, posenc.Span{TQ: 3, TK: 6}},
		{"cross tq>tk", false, posenc.Span{TQ: 6, TK: 3}},
		{"causal offset memory", true, posenc.Span{QStart: 9, TQ: 3, KStart: 6, TK: 6}},
	}
	for ci, c := range cases {
		rng := rand.New(rand.NewSource(int64(20 + ci)))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		enc, err := posenc.New(name, o)
		if err != nil {
			t.Fatal(err)
		}
		a, err := layers.NewAttention(g, p, layers.AttentionConfig{Name: "block0/attn", D: 8, Heads: 2, InitStd: 0.5, Causal: c.causal, Pos: enc})
		if err != nil {
			t.Fatal(err)
		}
		mk := func(nm string, tt int) *G.Node {
			d := make([]float64, 2*tt*8)
			for i := range d {
				d[i] = rng.NormFloat64()
			}
			return G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, tt, 8), G.WithName(nm), G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, tt, 8}, d)))
		}
		xq, xkv := mk("xq", c.span.TQ), mk("xkv", c.span.TK)
		y, err := a.Fwd(xq, xkv, c.span, nil)
		if err != nil {
			if strings.Contains(err.Error(), name) {
				// an encoding may refuse a shape it cannot serve, but only
				// with an error naming itself; learned absolute positions
				// have no attention hooks, so never get here.
				t.Logf("%s %s: refused: %v", name, c.label, err)
				continue
			}
			t.Fatalf("%s %s: %v", name, c.label, err)
		}
		if got := y.Shape(); !got.Eq(tensor.Shape{2, c.span.TQ, 8}) {
			t.Fatalf("%s %s: output %v", name, c.label, got)
		}
		randomizeParams(p, rng)
		r := mk("R", c.span.TQ)
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
		wrt := append(G.Nodes{xq, xkv}, p.Nodes(g)...)
		if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{MaxPerNode: 6, Seed: 4}); err != nil {
			t.Fatalf("%s %s: %v", name, c.label, err)
		}
	}
}

// TestEveryEncoding runs the shared checks on every registered encoding.
func TestEveryEncoding(t *testing.T) {
	for _, name := range posenc.Names() {
		name := name
		t.Run(name, func(t *testing.T) {
			o := posenc.Options{MaxLen: 16, ShawK: 2, T5Buckets: 8, T5MaxDistance: 16, DebertaBuckets: 4, DebertaMaxPosition: 16}
			checkCausal(t, name, o)
			checkLMGrad(t, name, o, true, 0)
			checkLMGrad(t, name, o, false, 3)
			checkAttentionShapes(t, name, o)
		})
	}
}

func TestUnknownName(t *testing.T) {
	_, err := posenc.New("rotary", posenc.Options{})
	if err == nil || !strings.Contains(err.Error(), "rope") || !strings.Contains(err.Error(), "none") {
		t.Fatalf("unknown name: %v", err)
	}
}

// goldenTables returns the integer tables (rel, T5 and DeBERTa buckets) that
// testdata/golden/gen_golden.py computed with PyTorch, by tensor name. The
// file is committed, so its absence is a failure, not a skip.
func goldenTables(t *testing.T) map[string][]int {
	t.Helper()
	path := filepath.Join("..", "testdata", "golden", "tables.safetensors")
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden tables: %v (regenerate with /usr/bin/python3 testdata/golden/gen_golden.py)", err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]int{}
	for _, nt := range st.Tensors() {
		if nt.TensorView.DType() != safetensors.I64 {
			continue
		}
		raw := nt.TensorView.Data()
		v := make([]int, len(raw)/8)
		for i := range v {
			v[i] = int(int64(binary.LittleEndian.Uint64(raw[8*i:])))
		}
		out[nt.Name] = v
	}
	return out
}
