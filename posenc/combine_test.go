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
	"github.com/rpe-go/rpe/posenc"
)

// Test encodings with one hook each. They return their inputs (or a
// constant bias of a chosen shape) and record the site they were given.
type (
	fakeEnc   struct{ name string }
	fakeQK    struct{ fakeEnc }
	fakeTerms struct{ fakeEnc }
	fakeBias  struct {
		fakeEnc
		shape []int
		val   float64
	}
	fakeValue  struct{ fakeEnc }
	fakeScaler struct{ fakeEnc }
	fakePair   struct{ fakeEnc } // accepts pairwise positions, has no hook
)

func (f fakeEnc) Name() string { return f.name }
func (fakeQK) TransformQK(_ *posenc.Site, q, k *G.Node) (*G.Node, *G.Node, error) {
	return q, k, nil
}
func (fakeTerms) ScoreTerms(_ *posenc.Site, q, _ *G.Node) (*G.Node, error) { return q, nil }
func (f fakeBias) ScoreBias(s *posenc.Site) (*G.Node, error) {
	v := make([]float64, tensor.Shape(f.shape).TotalSize())
	for i := range v {
		v[i] = f.val + float64(i)
	}
	return G.NewTensor(s.G, tensor.Float64, len(f.shape), G.WithShape(f.shape...), G.WithName(f.name),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape(f.shape), v))), nil
}
func (fakeValue) ValueTerms(_ *posenc.Site, p *G.Node) (*G.Node, error) { return p, nil }
func (fakeScaler) Scale(int) float64                                    { return 0.5 }
func (fakePair) Accepts() []posenc.PosKind                              { return []posenc.PosKind{posenc.PosPairwise} }

// TestCombinedHooks: for each of the sixteen sets of costly hooks, the
// combined encoding has exactly the hooks of its parts, plus the free ones
// (InputAdder, AfterBlocker, Scaler, PositionAccepter), and AsCombined
// recovers its parts.
func TestCombinedHooks(t *testing.T) {
	for mask := 0; mask < 16; mask++ {
		parts := []posenc.Encoding{fakeEnc{"plain"}}
		if mask&1 != 0 {
			parts = append(parts, fakeQK{fakeEnc{"qk"}})
		}
		if mask&2 != 0 {
			parts = append(parts, fakeTerms{fakeEnc{"terms"}})
		}
		if mask&4 != 0 {
			parts = append(parts, fakeBias{fakeEnc: fakeEnc{"bias"}, shape: []int{1, 2, 2}})
		}
		if mask&8 != 0 {
			parts = append(parts, fakeValue{fakeEnc{"value"}})
		}
		enc, err := posenc.NewCombined(parts...)
		if err != nil {
			t.Fatal(err)
		}
		_, q := enc.(posenc.QKTransformer)
		_, tr := enc.(posenc.ScoreTermer)
		_, b := enc.(posenc.ScoreBiaser)
		_, v := enc.(posenc.ValueTermer)
		if got := []bool{q, tr, b, v}; !slices.Equal(got, []bool{mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0}) {
			t.Errorf("%s: hooks qk, terms, bias, value = %v", enc.Name(), got)
		}
		_, in := enc.(posenc.InputAdder)
		_, ab := enc.(posenc.AfterBlocker)
		_, sc := enc.(posenc.Scaler)
		_, pa := enc.(posenc.PositionAccepter)
		_, tb := enc.(posenc.TableBiaser)
		if !in || !ab || !sc || !pa || tb {
			t.Errorf("%s: input %v, after block %v, scaler %v, accepter %v (want all), table biaser %v (want false)", enc.Name(), in, ab, sc, pa, tb)
		}
		c, ok := posenc.AsCombined(enc)
		if !ok || len(c.Parts()) != len(parts) || c.Name() != enc.Name() {
			t.Errorf("%s: AsCombined %v %v", enc.Name(), c, ok)
		}
	}
	if _, ok := posenc.AsCombined(posenc.NewAlibi()); ok {
		t.Error("AsCombined(alibi) is true")
	}
}

// TestCombinedNeutralHooks: the hooks no part has return their input (the
// same node: no graph work) or attention's default scale, bit for bit; a
// Scaler part's scale is used.
func TestCombinedNeutralHooks(t *testing.T) {
	enc, err := posenc.NewCombined(posenc.NewAlibi(), fakeQK{fakeEnc{"qk"}})
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 2, 4), G.WithName("x"), G.WithInit(G.Zeroes()))
	s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 2, DHead: 2, DModel: 4, Span: posenc.Span{TQ: 2, TK: 2}}
	if y, err := enc.(posenc.InputAdder).AddToInput(s, x); err != nil || y != x {
		t.Errorf("AddToInput: %v, %v", y, err)
	}
	if y, err := enc.(posenc.AfterBlocker).AfterBlock(s, x); err != nil || y != x {
		t.Errorf("AfterBlock: %v, %v", y, err)
	}
	for _, dh := range []int{3, 8, 64} {
		if got, want := enc.(posenc.Scaler).Scale(dh), 1/math.Sqrt(float64(dh)); got != want {
			t.Errorf("Scale(%d) = %v, want %v", dh, got, want)
		}
	}
	enc, err = posenc.NewCombined(posenc.NewAlibi(), fakeScaler{fakeEnc{"half"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := enc.(posenc.Scaler).Scale(16); got != 0.5 {
		t.Errorf("Scaler part: scale %v, want 0.5", got)
	}
}

// TestCombinedT5Alibi: the bias of t5+alibi is the sum of the two biases,
// element by element, causal and bidirectional.
func TestCombinedT5Alibi(t *testing.T) {
	for _, causal := range []bool{true, false} {
		t5, err := posenc.NewT5(8, 16, 0.5, false)
		if err != nil {
			t.Fatal(err)
		}
		al := posenc.NewAlibi()
		enc, err := posenc.NewCombined(t5, al)
		if err != nil {
			t.Fatal(err)
		}
		if enc.Name() != "t5+alibi" {
			t.Errorf("name %q", enc.Name())
		}
		g := G.NewGraph()
		s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 3), Prefix: "block0/attn", B: 2, H: 3, DHead: 4, DModel: 12,
			Span: posenc.Span{QStart: 2, TQ: 4, KStart: 0, TK: 6}, Causal: causal}
		sum, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := t5.ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		ba, err := al.ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sum.Shape(), []int{3, 4, 6}) {
			t.Fatalf("shape %v, want [3 4 6]", sum.Shape())
		}
		m := G.NewTapeMachine(g)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		got, vt, va := graph.ToFloat64s(sum.Value()), graph.ToFloat64s(bt.Value()), graph.ToFloat64s(ba.Value())
		for i := range got {
			if got[i] != vt[i]+va[i] {
				t.Fatalf("causal %v: element %d: %v, t5 %v + alibi %v", causal, i, got[i], vt[i], va[i])
			}
		}
	}
}

// TestCombinedBiasBroadcast: biases of shapes [H|1, Tq, Tk] and
// [B|1, H|1, Tq, Tk] add to [B|1, H|1, Tq, Tk] by numpy's rules, also when
// neither operand has the result's shape.
func TestCombinedBiasBroadcast(t *testing.T) {
	for _, tc := range []struct {
		a, b, want []int
	}{
		{[]int{2, 3, 4}, []int{2, 3, 4}, []int{2, 3, 4}},
		{[]int{1, 3, 4}, []int{2, 3, 4}, []int{2, 3, 4}},
		{[]int{2, 3, 4}, []int{5, 2, 3, 4}, []int{5, 2, 3, 4}},
		{[]int{5, 2, 3, 4}, []int{1, 3, 4}, []int{5, 2, 3, 4}},
		{[]int{1, 2, 3, 4}, []int{5, 1, 3, 4}, []int{5, 2, 3, 4}},
		{[]int{5, 1, 3, 4}, []int{2, 3, 4}, []int{5, 2, 3, 4}},
	} {
		enc, err := posenc.NewCombined(fakeBias{fakeEnc{"a"}, tc.a, 0}, fakeBias{fakeEnc{"b"}, tc.b, 1000})
		if err != nil {
			t.Fatal(err)
		}
		g := G.NewGraph()
		s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 5, H: 2, DHead: 2, DModel: 4, Span: posenc.Span{TQ: 3, TK: 4}}
		sum, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
		if err != nil {
			t.Fatalf("%v + %v: %v", tc.a, tc.b, err)
		}
		if !slices.Equal(sum.Shape(), tc.want) {
			t.Fatalf("%v + %v: shape %v, want %v", tc.a, tc.b, sum.Shape(), tc.want)
		}
		m := G.NewTapeMachine(g)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		got := graph.ToFloat64s(sum.Value())
		// element at multi-index ix of want, read from a shape with broadcasting
		val := func(shape []int, ix []int) float64 {
			off := 0
			for d := range shape {
				i := ix[len(ix)-len(shape)+d]
				if shape[d] == 1 {
					i = 0
				}
				off = off*shape[d] + i
			}
			return float64(off)
		}
		ix := make([]int, len(tc.want))
		for n := range got {
			r := n
			for d := len(tc.want) - 1; d >= 0; d-- {
				ix[d], r = r%tc.want[d], r/tc.want[d]
			}
			if want := val(tc.a, ix) + val(tc.b, ix) + 1000; got[n] != want {
				t.Fatalf("%v + %v: element %v = %v, want %v", tc.a, tc.b, ix, got[n], want)
			}
		}
	}
	enc, _ := posenc.NewCombined(fakeBias{fakeEnc{"a"}, []int{2, 3, 4}, 0}, fakeBias{fakeEnc{"b"}, []int{3, 3, 4}, 0})
	g := G.NewGraph()
	s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 2, Span: posenc.Span{TQ: 3, TK: 4}}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), "posenc a+b: adding the score bias of b: shapes [2 3 4] and [3 3 4] do not broadcast") {
		t.Errorf("mismatched biases: %v", err)
	}
}

// TestCombinedTreeRope gradient-checks a tiny causal attention layer with
// tree+rope on per-example tree relations (the tree bias sees the
// relations, rope the line positions of the span), and checks that both
// parts act: the output differs from tree alone and from rope alone.
func TestCombinedTreeRope(t *testing.T) {
	const b, n = 2, 4
	tree, err := posenc.NewTreeRel(2, 1, 0.5, false)
	if err != nil {
		t.Fatal(err)
	}
	rope, err := posenc.New("rope", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := posenc.NewCombined(tree, rope)
	if err != nil {
		t.Fatal(err)
	}
	if got := enc.(interface{ Describe() string }).Describe(); got != "tree+rope: tree (pairwise; score bias), rope (line or real; q/k transform)" {
		t.Errorf("Describe: %q", got)
	}
	if got := posenc.Accepted(enc); !slices.Equal(got, []posenc.PosKind{posenc.PosPairwise, posenc.PosLine, posenc.PosReal}) {
		t.Errorf("Accepts %v", got)
	}
	nr := posenc.TreeRelations(2, 1)
	rel := randRel(rand.New(rand.NewSource(9)), b*n*n, nr)
	pos, err := posenc.NewPairwise(b, n, n, nr, rel)
	if err != nil {
		t.Fatal(err)
	}
	g, p, x, y := treeAttention(t, enc, pos, b, n, true, 13)
	r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, n, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
	if got := p.Names(); !slices.Contains(got, "block0/attn/tree_bias") {
		t.Fatalf("parameters %v", got)
	}
	if err := graph.GradCheck(g, loss, append(G.Nodes{x}, p.Nodes(g)...), graph.GradCheckOpts{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	run := func(e posenc.Encoding) []float64 {
		g, _, _, y := treeAttention(t, e, pos, b, n, true, 13)
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(y.Value())
	}
	both := run(enc)
	ropeOnly, err := posenc.NewCombined(rope, fakePair{fakeEnc{"pairs"}}) // rope on pairwise positions (line from the span)
	if err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string][]float64{"tree": run(tree), "rope": run(ropeOnly)} {
		if slices.Equal(both, other) {
			t.Errorf("tree+rope gives the same output as %s alone", name)
		}
	}
}

// TestCombinedErrors: construction errors (none, nil, twice the same
// encoding, two Scalers) and kind errors naming the combined encoding, the
// part and the kinds.
func TestCombinedErrors(t *testing.T) {
	deb, err := posenc.New("deberta", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t5a, _ := posenc.NewT5(8, 16, 0.02, false)
	t5b, _ := posenc.NewT5(8, 16, 0.02, false)
	for _, tc := range []struct {
		parts []posenc.Encoding
		want  string
	}{
		{nil, "posenc: combined encoding of no encodings"},
		{[]posenc.Encoding{posenc.NewAlibi(), nil}, "posenc: combined encoding: part 1 is nil"},
		{[]posenc.Encoding{t5a, posenc.NewAlibi(), t5b}, "posenc: combined encoding t5+alibi+t5: t5 appears twice"},
		{[]posenc.Encoding{deb, fakeScaler{fakeEnc{"half"}}}, "posenc: combined encoding deberta+half: deberta and half each set the score scale; at most one part may be a Scaler"},
	} {
		if _, err := posenc.NewCombined(tc.parts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	tree, _ := posenc.NewTreeRel(1, 1, 0.02, false)
	enc, err := posenc.NewCombined(tree, posenc.NewAlibi())
	if err != nil {
		t.Fatal(err)
	}
	grid, _ := posenc.NewGrid(2, 2)
	if err := posenc.CheckKind(enc, grid); err == nil || !strings.Contains(err.Error(), "encoding tree+alibi accepts pairwise or line or real positions; the model gives it grid 2x2 positions") {
		t.Errorf("CheckKind grid: %v", err)
	}
	g := G.NewGraph()
	s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn", B: 1, H: 2, DHead: 2, DModel: 4,
		Span: posenc.Span{TQ: 4, TK: 4}, Causal: true}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), "posenc tree+alibi: part tree serves pairwise positions, not line positions") {
		t.Errorf("line positions: %v", err)
	}
	swin, _ := posenc.New("swin", posenc.Options{GridRows: 2, GridCols: 2})
	enc, err = posenc.NewCombined(swin, tree)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := posenc.NewPairwise(1, 4, 4, 4, make([]int, 16))
	s.Pos = pair
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), "posenc swin+tree: part swin serves grid positions, neither the site's pairwise positions nor line positions") {
		t.Errorf("pairwise positions for swin: %v", err)
	}
}

// TestCombinedAllHooks gradient-checks a tiny causal attention layer with
// shaw+t5+rope on line positions (score and value terms, a bias and a q/k
// transform, all delegated), and checks that the input hooks of
// sinusoidal+learned+tree apply in order, the tree part skipped and the
// absolute parts given line positions when the site has tree relations.
func TestCombinedAllHooks(t *testing.T) {
	o := posenc.Options{ShawK: 2, T5Buckets: 8, T5MaxDistance: 16, InitStd: 0.5}
	var parts []posenc.Encoding
	for _, n := range []string{"shaw", "t5", "rope"} {
		e, err := posenc.New(n, o)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, e)
	}
	enc, err := posenc.NewCombined(parts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []bool{is[posenc.ScoreTermer](enc), is[posenc.ValueTermer](enc), is[posenc.ScoreBiaser](enc), is[posenc.QKTransformer](enc)} {
		if !ok {
			t.Fatalf("%s lacks a hook of its parts", enc.Name())
		}
	}
	g, p, x, y := treeAttention(t, enc, nil, 2, 4, true, 17)
	r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 4, 8), G.WithName("R"), G.WithInit(G.Gaussian(0, 1)))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, r))))
	if err := graph.GradCheck(g, loss, append(G.Nodes{x}, p.Nodes(g)...), graph.GradCheckOpts{Seed: 1}); err != nil {
		t.Fatal(err)
	}

	// input hooks in order: learned(sinusoidal(x)) = x + sin + learned
	sin, _ := posenc.New("sinusoidal", posenc.Options{})
	learned, _ := posenc.New("learned", posenc.Options{MaxLen: 8, InitStd: 0.5})
	tree, _ := posenc.NewTreeRel(1, 1, 0.02, false)
	enc, err = posenc.NewCombined(sin, tree, learned)
	if err != nil {
		t.Fatal(err)
	}
	pos, _ := posenc.NewPairwise(1, 4, 4, 4, make([]int, 16))
	add := func(e posenc.Encoding, pos *posenc.Positions) []float64 {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 4, 8), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
		s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Layer: -1, B: 1, H: 2, DHead: 4, DModel: 8,
			Span: posenc.Span{QStart: 2, TQ: 4, KStart: 2, TK: 4}, Pos: pos}
		y, err := e.(posenc.InputAdder).AddToInput(s, x)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		defer m.Close()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		xv, yv := graph.ToFloat64s(x.Value()), graph.ToFloat64s(y.Value())
		for i := range yv {
			yv[i] -= xv[i]
		}
		return yv
	}
	both := add(enc, pos)
	s, l := add(sin, nil), add(learned, nil)
	for i := range both {
		if math.Abs(both[i]-(s[i]+l[i])) > 1e-12 {
			t.Fatalf("element %d: combined adds %v, sinusoidal %v + learned %v", i, both[i], s[i], l[i])
		}
	}
}

func is[T any](e posenc.Encoding) bool {
	_, ok := e.(T)
	return ok
}

// fakeRecord is a score bias (zeros [1, Tq, Tk]) serving kinds that
// records the positions it was given.
type fakeRecord struct {
	fakeEnc
	kinds []posenc.PosKind
	got   **posenc.Positions
}

func (f fakeRecord) Accepts() []posenc.PosKind { return f.kinds }
func (f fakeRecord) ScoreBias(s *posenc.Site) (*G.Node, error) {
	*f.got = s.Pos
	return G.NewTensor(s.G, tensor.Float64, 3, G.WithShape(1, s.TQ, s.TK), G.WithName(f.name), G.WithInit(G.Zeroes())), nil
}

// TestCombinedSites: a part gets the site's positions if it serves their
// kind, else line positions (Pos nil, the same span).
func TestCombinedSites(t *testing.T) {
	var line, pair, both *posenc.Positions
	enc, err := posenc.NewCombined(
		fakeRecord{fakeEnc{"line"}, []posenc.PosKind{posenc.PosLine}, &line},
		fakeRecord{fakeEnc{"pair"}, []posenc.PosKind{posenc.PosPairwise}, &pair},
		fakeRecord{fakeEnc{"both"}, []posenc.PosKind{posenc.PosPairwise, posenc.PosLine}, &both})
	if err != nil {
		t.Fatal(err)
	}
	pos, _ := posenc.NewPairwise(1, 3, 3, 2, make([]int, 9))
	s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 2, Span: posenc.Span{TQ: 3, TK: 3}, Pos: pos}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err != nil {
		t.Fatal(err)
	}
	if line != nil || pair != pos || both != pos || s.Pos != pos {
		t.Errorf("positions given: line part %v, pairwise part %v, both %v; the site keeps %v", line.Describe(), pair.Describe(), both.Describe(), s.Pos.Describe())
	}
}
