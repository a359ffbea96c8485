package posenc_test

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// p2 is 2^e.
func p2(e float64) float64 { return math.Pow(2, e) }

// TestAlibiSlopes compares with the paper's get_slopes written out by hand.
func TestAlibiSlopes(t *testing.T) {
	seq := func(from, step float64, n int) []float64 { // 2^from, 2^(from+step), ...
		out := make([]float64, n)
		for i := range out {
			out[i] = p2(from + step*float64(i))
		}
		return out
	}
	cases := map[int][]float64{
		1: {p2(-8)},
		2: {p2(-4), p2(-8)},
		3: {p2(-4), p2(-8), p2(-2)},
		4: {p2(-2), p2(-4), p2(-6), p2(-8)},
		// c = 4, then get_slopes(8)[0::2][:2] = 2^-1, 2^-3
		6: {p2(-2), p2(-4), p2(-6), p2(-8), p2(-1), p2(-3)},
		8: seq(-1, -1, 8),
		// c = 8, then get_slopes(16)[0::2][:4] = 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
		12: append(seq(-1, -1, 8), p2(-0.5), p2(-1.5), p2(-2.5), p2(-3.5)),
		16: seq(-0.5, -0.5, 16),
	}
	for n, want := range cases {
		got := posenc.AlibiSlopes(n)
		if len(got) != len(want) {
			t.Fatalf("%d heads: %v, want %v", n, got, want)
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-15*want[i] {
				t.Fatalf("%d heads: slope %d = %v, want %v (all %v)", n, i, got[i], want[i], got)
			}
		}
	}
	if posenc.AlibiSlopes(0) != nil {
		t.Fatal("0 heads: want nil")
	}
}

// alibiBias runs the encoding's ScoreBias for a site.
func alibiBias(t *testing.T, dt tensor.Dtype, heads int, span posenc.Span, causal bool) *G.Node {
	t.Helper()
	enc, err := posenc.New("alibi", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	site := &posenc.Site{G: g, Params: graph.NewParams(dt, 1), B: 2, H: heads, DHead: 4, DModel: 4 * heads, Span: span, Causal: causal}
	b, err := enc.(posenc.ScoreBiaser).ScoreBias(site)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAlibiBias: values by hand for 2 heads (slopes 1/16, 1/256), queries at
// 5, 6 and keys at 3..6 (Tq != Tk, offsets), causal and bidirectional.
func TestAlibiBias(t *testing.T) {
	span := posenc.Span{QStart: 5, TQ: 2, KStart: 3, TK: 4}
	m0, m1 := 1.0/16, 1.0/256
	// qpos - kpos: row 0: 2 1 0 -1; row 1: 3 2 1 0
	causal := []float64{
		-2 * m0, -1 * m0, 0, 1 * m0,
		-3 * m0, -2 * m0, -1 * m0, 0,
		-2 * m1, -1 * m1, 0, 1 * m1,
		-3 * m1, -2 * m1, -1 * m1, 0,
	}
	bidi := []float64{
		-2 * m0, -1 * m0, 0, -1 * m0,
		-3 * m0, -2 * m0, -1 * m0, 0,
		-2 * m1, -1 * m1, 0, -1 * m1,
		-3 * m1, -2 * m1, -1 * m1, 0,
	}
	for _, c := range []struct {
		causal bool
		dt     tensor.Dtype
		want   []float64
	}{{true, tensor.Float64, causal}, {false, tensor.Float64, bidi}, {false, tensor.Float32, bidi}} {
		b := alibiBias(t, c.dt, 2, span, c.causal)
		if !b.Shape().Eq(tensor.Shape{2, 2, 4}) || b.Dtype() != c.dt {
			t.Fatalf("bias %v %v, want [2 2 4] %v", b.Shape(), b.Dtype(), c.dt)
		}
		checkFloats(t, "ALiBi bias", graph.ToFloat64s(b.Value()), c.want, 1e-15)
	}
	// a second call with the same span is served from the cache and equal;
	// a different span is not.
	again := alibiBias(t, tensor.Float64, 2, span, true)
	checkFloats(t, "cached ALiBi bias", graph.ToFloat64s(again.Value()), causal, 0)
	other := alibiBias(t, tensor.Float64, 2, posenc.Span{QStart: 6, TQ: 2, KStart: 3, TK: 4}, true)
	if v := graph.ToFloat64s(other.Value()); v[0] != -3*m0 {
		t.Fatalf("span with QStart 6: bias[0,0,0] = %v, want %v", v[0], -3*m0)
	}
}

func TestPositionsFromPadding(t *testing.T) {
	valid := [][]bool{
		{false, false, true, true, true}, // left padding
		{true, true, true, true, true},
		{true, true, true, false, false}, // right padding
		{false, true, true, false, true}, // a hole
		{false, false, false, false, false},
	}
	want := [][]int{{0, 0, 0, 1, 2}, {0, 1, 2, 3, 4}, {0, 1, 2, 2, 2}, {0, 0, 1, 1, 2}, {0, 0, 0, 0, 0}}
	got := posenc.PositionsFromPadding(valid)
	for b := range want {
		for j := range want[b] {
			if got[b][j] != want[b][j] {
				t.Fatalf("row %d: positions %v, want %v", b, got[b], want[b])
			}
		}
	}
}

// TestAlibiBiasFromPositions: with left padding, the bias among the real
// tokens of a row equals the bias of the unpadded sequence; a row with a hole
// counts positions over real tokens only.
func TestAlibiBiasFromPositions(t *testing.T) {
	enc := posenc.NewAlibi()
	valid := [][]bool{{false, false, true, true, true}, {true, false, true, true, true}}
	pos := posenc.PositionsFromPadding(valid)
	for _, causal := range []bool{true, false} {
		g := G.NewGraph()
		b, err := enc.BiasFromPositions(g, tensor.Float64, 4, pos, pos, causal)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Shape().Eq(tensor.Shape{2, 4, 5, 5}) {
			t.Fatalf("shape %v, want [2 4 5 5]", b.Shape())
		}
		v := graph.ToFloat64s(b.Value())
		ref := graph.ToFloat64s(alibiBias(t, tensor.Float64, 4, posenc.Span{TQ: 3, TK: 3}, causal).Value()) // [4, 3, 3]
		slopes := posenc.AlibiSlopes(4)
		for h := 0; h < 4; h++ {
			for i := 0; i < 3; i++ {
				for j := 0; j < 3; j++ {
					if got := v[((0*4+h)*5+2+i)*5+2+j]; got != ref[(h*3+i)*3+j] {
						t.Fatalf("causal %v: left-padded row, head %d, real tokens %d, %d: %v, want %v", causal, h, i, j, got, ref[(h*3+i)*3+j])
					}
				}
			}
			// row 1: positions 0 0 1 2 3; query 4 (pos 3) and key 0 (pos 0)
			if got, want := v[((1*4+h)*5+4)*5+0], -3*slopes[h]; got != want {
				t.Fatalf("causal %v: row with a hole, head %d: %v, want %v", causal, h, got, want)
			}
		}
	}
	g := G.NewGraph()
	for _, c := range []struct {
		heads      int
		qpos, kpos [][]int
	}{
		{0, pos, pos},
		{2, pos, pos[:1]},
		{2, [][]int{{0, 1}, {0}}, [][]int{{0, 1}, {0, 1}}},
	} {
		if _, err := enc.BiasFromPositions(g, tensor.Float64, c.heads, c.qpos, c.kpos, true); err == nil || !strings.Contains(err.Error(), "alibi") {
			t.Errorf("BiasFromPositions(%d heads, %v, %v): error %v", c.heads, c.qpos, c.kpos, err)
		}
	}
}
