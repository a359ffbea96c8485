package layers

import (
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// input returns a float input node of the given shape with N(0,1) values.
func input(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, name string, shape ...int) *G.Node {
	data := make([]float64, tensor.Shape(shape).TotalSize())
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(graph.FromFloat64s(dt, shape, data)))
}

// ids returns an Int input node [b, t] of random bytes.
func ids(g *G.ExprGraph, rng *rand.Rand, b, t int) *G.Node {
	data := make([]int, b*t)
	for i := range data {
		data[i] = rng.Intn(256)
	}
	return G.NewTensor(g, tensor.Int, 2, G.WithShape(b, t), G.WithName("ids"), G.WithValue(tensor.New(tensor.WithShape(b, t), tensor.WithBacking(data))))
}

// weightedSum is sum(y * R) for a fixed random R: a scalar loss whose gradient
// reaches every element of y with a different weight.
func weightedSum(t *testing.T, g *G.ExprGraph, rng *rand.Rand, y *G.Node) *G.Node {
	t.Helper()
	r := input(g, y.Dtype(), rng, graph.UniqueName(g, "R"), y.Shape()...)
	prod, err := G.HadamardProd(y, r)
	if err != nil {
		t.Fatal(err)
	}
	return G.Must(G.Sum(prod))
}

var checkOpts = graph.GradCheckOpts{MaxPerNode: 12, Seed: 3}

// randomize replaces every parameter of p with N(0, 0.5²) values (biases and
// gains too) so gradient checks see no special structure.
func randomize(p *graph.Params, rng *rand.Rand) {
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

func TestLinearFFNLayerNormGrad(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	x := input(g, tensor.Float64, rng, "x", 5, 6)
	lin, err := NewLinear(g, p, LinearConfig{Name: "lin", In: 6, Out: 4, Bias: true, InitStd: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := NewLayerNorm(g, p, "ln", 4, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := NewFeedForward(g, p, "ffn", 4, 7, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	randomize(p, rng)
	y := G.Must(lin.Fwd(x))
	y = G.Must(ln.Fwd(y))
	y = G.Must(ff.Fwd(y))
	loss := weightedSum(t, g, rng, y)
	wrt := append(G.Nodes{x}, p.Nodes(g)...)
	if err := graph.GradCheck(g, loss, wrt, checkOpts); err != nil {
		t.Fatal(err)
	}
	if _, err := lin.Fwd(G.Must(G.Reshape(x, []int{6, 5}))); err == nil {
		t.Fatal("linear accepted [6,5] for In=6")
	}
}

func TestEmbeddingGrad(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	e, err := NewEmbedding(g, p, "emb", 256, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	id := ids(g, rng, 2, 5)
	loss := weightedSum(t, g, rng, G.Must(e.Fwd(id)))
	if err := graph.GradCheck(g, loss, e.Learnables(), graph.GradCheckOpts{}); err != nil {
		t.Fatal(err)
	}
}

// attnCase is one attention configuration of the table tests.
type attnCase struct {
	name           string
	causal         bool
	tq, tk         int
	qStart, kStart int
	pad            bool // mask the first key of batch row 1
}

var attnCases = []attnCase{
	{name: "causal self", causal: true, tq: 5, tk: 5},
	{name: "bidirectional self", tq: 5, tk: 5},
	{name: "cross tq<tk", tq: 3, tk: 6, qStart: 0, kStart: 0},
	{name: "causal with offset and memory", causal: true, tq: 3, tk: 6, qStart: 7, kStart: 4},
	{name: "padding", causal: true, tq: 4, tk: 4, pad: true},
}

func buildAttn(t *testing.T, c attnCase, dt tensor.Dtype, seed int64) (*G.ExprGraph, *graph.Params, *Attention, *G.Node, *G.Node, *G.Node, *G.Node) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	p := graph.NewParams(dt, 1)
	pos, _ := posenc.New("none", posenc.Options{})
	a, err := NewAttention(g, p, AttentionConfig{Name: "attn", D: 8, Heads: 2, InitStd: 0.5, Causal: c.causal, Pos: pos})
	if err != nil {
		t.Fatal(err)
	}
	randomize(p, rng)
	xq := input(g, dt, rng, "xq", 2, c.tq, 8)
	xkv := input(g, dt, rng, "xkv", 2, c.tk, 8)
	var mask *G.Node
	if c.pad {
		valid := [][]bool{make([]bool, c.tk), make([]bool, c.tk)}
		for j := range valid[0] {
			valid[0][j], valid[1][j] = true, j > 0
		}
		mask = graph.MaskNode(g, graph.PaddingMask(dt, valid), "pad")
	}
	y, err := a.Fwd(xq, xkv, posenc.Span{QStart: c.qStart, TQ: c.tq, KStart: c.kStart, TK: c.tk}, mask)
	if err != nil {
		t.Fatal(err)
	}
	return g, p, a, xq, xkv, y, mask
}

func TestAttentionGrad(t *testing.T) {
	for i, c := range attnCases {
		t.Run(c.name, func(t *testing.T) {
			g, p, _, xq, xkv, y, _ := buildAttn(t, c, tensor.Float64, int64(10+i))
			loss := weightedSum(t, g, rand.New(rand.NewSource(5)), y)
			wrt := append(G.Nodes{xq, xkv}, p.Nodes(g)...)
			if err := graph.GradCheck(g, loss, wrt, checkOpts); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAttentionFullyMaskedRow: with causal masking and the first key padded,
// query 0 of batch row 1 can attend to nothing: its output is exactly the
// output bias (zero attention), never NaN.
func TestAttentionFullyMaskedRow(t *testing.T) {
	c := attnCase{name: "pad", causal: true, tq: 4, tk: 4, pad: true}
	g, _, a, _, _, y, _ := buildAttn(t, c, tensor.Float64, 7)
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	out := y.Value().Data().([]float64) // [2, 4, 8]
	bo := a.O.B.Value().Data().([]float64)
	for i, v := range out {
		if math.IsNaN(v) {
			t.Fatalf("NaN at %d", i)
		}
	}
	row := out[1*4*8 : 1*4*8+8]
	for j := range row {
		if row[j] != bo[j] {
			t.Fatalf("fully masked row: out %v, want output bias %v", row, bo)
		}
	}
	// the same query in batch row 0 (key 0 valid) is not just the bias
	same := true
	for j := 0; j < 8; j++ {
		same = same && out[j] == bo[j]
	}
	if same {
		t.Fatal("unmasked row equals the bias: the test cannot tell masking apart")
	}
}

func TestAttentionErrors(t *testing.T) {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	if _, err := NewAttention(g, p, AttentionConfig{Name: "a", D: 10, Heads: 4}); err == nil {
		t.Fatal("d=10, heads=4 accepted")
	}
	a, err := NewAttention(g, p, AttentionConfig{Name: "a", D: 8, Heads: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	x := input(g, tensor.Float64, rng, "x", 2, 3, 8)
	if _, err := a.Fwd(x, nil, posenc.Span{TQ: 4, TK: 4}, nil); err == nil {
		t.Fatal("span 4 accepted for T=3")
	}
	bad := input(g, tensor.Float64, rng, "bad", 2, 3, 6)
	if _, err := a.Fwd(bad, nil, posenc.Span{TQ: 3, TK: 3}, nil); err == nil {
		t.Fatal("width 6 accepted for d=8")
	}
}

func tinyConfig(pos string) Config {
	return Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 2, FFN: 12, Eps: 1e-5, InitStd: 0.5, Causal: true, Pos: pos}
}

// TestLMGrad checks every parameter's gradient through the LM and a
// cross-entropy loss.
func TestLMGrad(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := NewLM(g, p, tinyConfig("none"))
	if err != nil {
		t.Fatal(err)
	}
	randomize(p, rng)
	id := ids(g, rng, 2, 4)
	logits, err := lm.Fwd(id)
	if err != nil {
		t.Fatal(err)
	}
	tg := make([]int, 8)
	for i := range tg {
		tg[i] = rng.Intn(256)
	}
	targets := G.NewTensor(g, tensor.Int, 1, G.WithShape(8), G.WithName("targets"), G.WithValue(tensor.New(tensor.WithShape(8), tensor.WithBacking(tg))))
	loss, err := graph.CrossEntropy(logits, targets)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(lm.Learnables()); got != 4+2*(2+8+2+4) {
		t.Fatalf("%d learnables", got)
	}
	if err := graph.GradCheck(g, loss, lm.Learnables(), graph.GradCheckOpts{MaxPerNode: 6, Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

// runLM returns the logits of the tiny LM on the given ids at dtype dt.
func runLM(t *testing.T, cfg Config, dt tensor.Dtype, weights map[string][]float64, data []int, b, tt int) []float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(dt, 1)
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
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(logits.Value())
}

// tinyWeights draws every parameter of the tiny LM once.
func tinyWeights(t *testing.T, cfg Config, seed int64) map[string][]float64 {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, seed)
	lm, err := NewLM(g, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := ids(g, rand.New(rand.NewSource(1)), 1, 4)
	if _, err := lm.Fwd(id); err != nil { // creates lazily made encoding parameters
		t.Fatal(err)
	}
	randomize(p, rand.New(rand.NewSource(seed)))
	w := map[string][]float64{}
	for _, n := range p.Names() {
		w[n] = p.Float64s(n)
	}
	return w
}

func TestLMFloat32MatchesFloat64(t *testing.T) {
	cfg := tinyConfig("none")
	w := tinyWeights(t, cfg, 4)
	rng := rand.New(rand.NewSource(9))
	data := make([]int, 2*6)
	for i := range data {
		data[i] = rng.Intn(256)
	}
	l64 := runLM(t, cfg, tensor.Float64, w, data, 2, 6)
	l32 := runLM(t, cfg, tensor.Float32, w, data, 2, 6)
	for i := range l64 {
		if d := math.Abs(l64[i] - l32[i]); d > 1e-4*(1+math.Abs(l64[i])) {
			t.Fatalf("logit %d: float64 %v float32 %v", i, l64[i], l32[i])
		}
	}
}

// TestLMCausal: changing token k changes no logit of positions < k.
func TestLMCausal(t *testing.T) {
	cfg := tinyConfig("none")
	w := tinyWeights(t, cfg, 5)
	data := []int{1, 2, 3, 4, 5, 6}
	base := runLM(t, cfg, tensor.Float64, w, data, 1, 6)
	data[4] = 200
	changed := runLM(t, cfg, tensor.Float64, w, data, 1, 6)
	for i := 0; i < 6*256; i++ {
		same := base[i] == changed[i]
		if pos := i / 256; pos < 4 && !same {
			t.Fatalf("position %d changed when token 4 changed", pos)
		} else if pos >= 4 && same && i%256 == 0 {
			t.Fatalf("position %d did not change when token 4 changed", pos)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.Heads = 3
	if err := bad.Validate(); err == nil {
		t.Fatal("d_model 128 with 3 heads accepted")
	}
	g := G.NewGraph()
	cfg := tinyConfig("nonsense")
	if _, err := NewLM(g, graph.NewParams(tensor.Float64, 1), cfg); err == nil {
		t.Fatal("unknown encoding accepted")
	}
}
