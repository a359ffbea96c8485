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

// TestAlibiBiasTimes: the bias of real times against the formulas, and
// integer times against AlibiBias (the line path), bit for bit.
func TestAlibiBiasTimes(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	slopes := posenc.AlibiSlopes(3)
	q, k := []float64{0.5, 2.25}, []float64{0, 1.5, 4}
	for _, causal := range []bool{true, false} {
		got := posenc.AlibiBiasTimes(slopes, q, k, causal)
		for h, m := range slopes {
			for i, qt := range q {
				for j, kt := range k {
					d := qt - kt
					if !causal {
						d = math.Abs(d)
					}
					if w := -m * d; got[(h*2+i)*3+j] != w {
						t.Fatalf("causal=%v h=%d i=%d j=%d: %v, want %v", causal, h, i, j, got[(h*2+i)*3+j], w)
					}
				}
			}
		}
		qi, ki := []int{3, 4, 5}, []int{0, 1, 2, 3, 4, 5}
		qf, kf := make([]float64, 3), make([]float64, 6)
		for i := range qi {
			qf[i] = float64(qi[i])
		}
		for j := range ki {
			kf[j] = float64(ki[j])
		}
		n := 1 + rng.Intn(8)
		if a, b := posenc.AlibiBiasTimes(posenc.AlibiSlopes(n), qf, kf, causal), posenc.AlibiBias(posenc.AlibiSlopes(n), qi, ki, causal); !slices.Equal(a, b) {
			t.Fatalf("causal=%v: integer times %v, line %v", causal, a, b)
		}
	}
}

// TestRopeAnglesTimes: angles of real times are t·θ_p (divided by the
// position divisor) reduced to [-π, π], and give the cos and sin of
// RopeAngles at integer times.
func TestRopeAnglesTimes(t *testing.T) {
	theta := []float64{1, 0.1, 0.001}
	times := []float64{0, 0.25, 7, 1234.5}
	for _, div := range []float64{1, 4} {
		a := posenc.RopeAnglesTimes(times, theta, div)
		for ti, tm := range times {
			for p, th := range theta {
				v := a[ti*3+p]
				if v < -math.Pi || v > math.Pi {
					t.Fatalf("div %g: angle %v outside [-π, π]", div, v)
				}
				want := tm / div * th
				if math.Abs(math.Cos(v)-math.Cos(want)) > 1e-12 || math.Abs(math.Sin(v)-math.Sin(want)) > 1e-12 {
					t.Fatalf("div %g time %g pair %d: angle %v, want %v mod 2π", div, tm, p, v, want)
				}
			}
		}
	}
	cos, sin := posenc.RopeAngles(2, 3, theta, 1, 1)
	a := posenc.RopeAnglesTimes([]float64{2, 3, 4}, theta, 1)
	for i := range a {
		if math.Abs(math.Cos(a[i])-cos[i]) > 1e-13 || math.Abs(math.Sin(a[i])-sin[i]) > 1e-13 {
			t.Fatalf("entry %d: cos, sin %v %v, want %v %v", i, math.Cos(a[i]), math.Sin(a[i]), cos[i], sin[i])
		}
	}
}

// TestRealErrors: the encodings that refuse real positions, and bad times,
// give errors naming the encoding and the problem.
func TestRealErrors(t *testing.T) {
	per, err := posenc.NewReal(2, []float64{0, 1, 0, 1}, []float64{0, 1, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	unsorted, err := posenc.NewReal(1, []float64{0, 2, 1}, []float64{0, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	site := func(pos *posenc.Positions, causal bool) *posenc.Site {
		return &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), B: 2, H: 2, DHead: 4, DModel: 8,
			Span: posenc.Span{TQ: pos.TQ, TK: pos.TK}, Pos: pos, Causal: causal}
	}
	qk := func(s *posenc.Site) (*G.Node, *G.Node) {
		mk := func(name string) *G.Node {
			return G.NewTensor(s.G, tensor.Float64, 4, G.WithShape(2, 2, s.TQ, 4), G.WithName(name),
				G.WithValue(tensor.New(tensor.WithShape(2, 2, s.TQ, 4), tensor.WithBacking(make([]float64, 2*2*s.TQ*4)))))
		}
		return mk("q"), mk("k")
	}
	for _, name := range []string{posenc.RopeDynamic, posenc.RopeYaRN} {
		e, err := posenc.NewRope(name, posenc.Options{RopeScale: 2})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(posenc.Accepted(e), posenc.PosReal) {
			t.Errorf("%s lists real positions", name)
		}
		s := site(per, false)
		q, k := qk(s)
		if _, _, err := e.TransformQK(s, q, k); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "real positions") {
			t.Errorf("%s: error %v, want one naming it and real positions", name, err)
		}
	}
	for _, name := range []string{posenc.RopePlain, posenc.RopePI, posenc.RopeNTK, posenc.RopeLlama3} {
		e, err := posenc.NewRope(name, posenc.Options{RopeScale: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(posenc.Accepted(e), posenc.PosReal) {
			t.Errorf("%s does not list real positions", name)
		}
	}
	// ALiBi: causal times with a visible key after its query (by index:
	// key 1 at time 2 is visible to query 2 at time 1); fine bidirectional.
	if _, err := posenc.NewAlibi().ScoreBias(site(unsorted, true)); err == nil || !strings.Contains(err.Error(), "alibi") ||
		!strings.Contains(err.Error(), "key 1 at time 2 is visible to query 2") {
		t.Errorf("alibi, unsorted causal times: error %v", err)
	}
	if _, err := posenc.NewAlibi().ScoreBias(site(unsorted, false)); err != nil {
		t.Errorf("alibi, unsorted bidirectional times: %v", err)
	}
	// A Feed refuses times that break the causal order, and keeps its
	// nodes.
	fed, _ := posenc.NewReal(1, []float64{0, 1, 2}, []float64{0, 1, 2})
	fed.Feed = posenc.NewFeed()
	s := site(fed, true)
	bias, err := posenc.NewAlibi().ScoreBias(s)
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(bias.Value().Data().([]float64))
	if err := fed.Feed.Bind(unsorted); err == nil || !strings.Contains(err.Error(), "alibi") {
		t.Errorf("binding unsorted causal times: error %v", err)
	}
	if !slices.Equal(before, bias.Value().Data().([]float64)) {
		t.Error("a failed Bind changed the bias")
	}
	// FIRE: negative query times (also when bound through a Feed); the
	// table biasers refuse tiles of real sites.
	neg, _ := posenc.NewReal(1, []float64{-0.5, 1, 2}, []float64{0, 1, 2})
	fire, err := posenc.New("fire", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fire.(posenc.ScoreBiaser).ScoreBias(site(neg, true)); err == nil || !strings.Contains(err.Error(), "fire") || !strings.Contains(err.Error(), "time -0.5") {
		t.Errorf("fire, negative query time: error %v", err)
	}
	fed2, _ := posenc.NewReal(1, []float64{0, 1, 2}, []float64{0, 1, 2})
	fed2.Feed = posenc.NewFeed()
	if _, err := fire.(posenc.ScoreBiaser).ScoreBias(site(fed2, true)); err != nil {
		t.Fatal(err)
	}
	if err := fed2.Feed.Bind(neg); err == nil || !strings.Contains(err.Error(), "time -0.5") {
		t.Errorf("fire, binding a negative query time: error %v", err)
	}
	for _, name := range []string{"fire", "dpb"} {
		enc, err := posenc.New(name, posenc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tb := enc.(posenc.TableBiaser)
		s := site(fed, false)
		if _, err := tb.BiasTable(s); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "real positions") {
			t.Errorf("%s: BiasTable of a real site: error %v", name, err)
		}
		if _, err := tb.BiasIndex(s, 0, s.Full(), make([]int, 9)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: BiasIndex of a real site: error %v", name, err)
		}
	}
	// Non-finite times.
	if _, err := posenc.NewReal(1, []float64{0, math.NaN()}, []float64{0, 1}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN time: error %v", err)
	}
}
