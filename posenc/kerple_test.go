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

// kerpleSite returns a site of a fresh float64 graph.
func kerpleSite(h int, span posenc.Span, causal bool) *posenc.Site {
	return &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 1), Prefix: "block0/attn",
		B: 2, H: h, DHead: 4, DModel: 4 * h, Span: span, Causal: causal}
}

// TestKerpleBiasByHand: values by hand for 2 heads, queries at 5, 6 and keys
// at 3..6 (Tq != Tk, offsets), r1 = (1, 0.5), r2 = (0.5, 2) (the power's
// exponent), with the log kernel's r2 (0.5, 2) too.
func TestKerpleBiasByHand(t *testing.T) {
	q, k := []int{5, 6}, []int{3, 4, 5, 6}
	r1, r2 := []float64{1, 0.5}, []float64{0.5, 2}
	dist := []float64{2, 1, 0, 1, 3, 2, 1, 0}
	var wantLog, wantPow []float64
	for h := range r1 {
		for _, d := range dist {
			wantLog = append(wantLog, -r1[h]*math.Log(1+r2[h]*d))
			wantPow = append(wantPow, -r1[h]*math.Pow(d, r2[h]))
		}
	}
	for _, c := range []struct {
		kernel string
		want   []float64
	}{{posenc.KerpleLog, wantLog}, {posenc.KerplePower, wantPow}} {
		got := posenc.KerpleBias(c.kernel, r1, r2, 0.01, q, k)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d values, want %d", c.kernel, len(got), len(c.want))
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-15 || got[i] == 0 && math.Signbit(got[i]) {
				t.Fatalf("%s: bias[%d] = %v, want %v (and no -0)", c.kernel, i, got[i], c.want[i])
			}
		}
	}
	if posenc.KerpleBias("gauss", r1, r2, 0.01, q, k) != nil || posenc.KerpleBias(posenc.KerpleLog, r1, r2[:1], 0.01, q, k) != nil {
		t.Fatal("KerpleBias of a bad kernel or mismatched parameters: want nil")
	}
}

// TestKerpleClamp: the bounds of the paper's code.
func TestKerpleClamp(t *testing.T) {
	for _, c := range []struct {
		r    float64
		exp  bool
		want float64
	}{
		{-1, false, 0.01}, {0, false, 0.01}, {0.5, false, 0.5}, {7, false, 7},
		{-1, true, 0.01}, {1.5, true, 1.5}, {2, true, 2}, {2.5, true, 2},
	} {
		if got := posenc.KerpleClamp(c.r, 0.01, c.exp); got != c.want {
			t.Errorf("KerpleClamp(%v, exponent %v) = %v, want %v", c.r, c.exp, got, c.want)
		}
	}
}

// TestKerpleGraphMatchesHost: ScoreBias equals KerpleBias for random
// parameters (some outside their range) on self, cross, memory and
// single-query spans, causal and not, both kernels.
func TestKerpleGraphMatchesHost(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	spans := []posenc.Span{{TQ: 6, TK: 6}, {QStart: 5, TQ: 3, KStart: 0, TK: 9}, {QStart: 8, TQ: 4, KStart: 2, TK: 10},
		{QStart: 9, TQ: 1, KStart: 0, TK: 10}, {QStart: 0, TQ: 4, KStart: 6, TK: 3}}
	for _, name := range []string{"kerple-log", "kerple-power"} {
		for _, span := range spans {
			for _, causal := range []bool{true, false} {
				enc, err := posenc.New(name, posenc.Options{})
				if err != nil {
					t.Fatal(err)
				}
				ke := enc.(*posenc.Kerple)
				const h = 3
				s := kerpleSite(h, span, causal)
				bias, err := ke.ScoreBias(s)
				if err != nil {
					t.Fatal(err)
				}
				again, err := ke.ScoreBias(s)
				if err != nil || again != bias {
					t.Fatalf("%s %+v: a second call gave another node (%v)", name, span, err)
				}
				n1, n2 := ke.ParamNames()
				r1, r2 := make([]float64, h), make([]float64, h)
				for i := range r1 {
					r1[i], r2[i] = rng.Float64()*2.6-0.3, rng.Float64()*2.6-0.3
				}
				if err := s.Params.Set(n1, r1); err != nil {
					t.Fatal(err)
				}
				if err := s.Params.Set(n2, r2); err != nil {
					t.Fatal(err)
				}
				m := G.NewTapeMachine(s.G)
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				want := posenc.KerpleBias(ke.Kernel, r1, r2, ke.Eps, positionsFrom(span.QStart, span.TQ), positionsFrom(span.KStart, span.TK))
				closeTo(t, name+" bias", graph.ToFloat64s(bias.Value()), want, 1e-12)
				m.Close()
			}
		}
	}
}

func positionsFrom(start, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = start + i
	}
	return p
}

// TestKerpleGradCheck gradient-checks sum(bias * R) w.r.t. r1 and r2 in
// float64 with every parameter inside its range (where the clamp is the
// identity), on a memory span.
func TestKerpleGradCheck(t *testing.T) {
	for i, name := range []string{"kerple-log", "kerple-power"} {
		rng := rand.New(rand.NewSource(int64(20 + i)))
		enc, _ := posenc.New(name, posenc.Options{})
		ke := enc.(*posenc.Kerple)
		const h = 3
		span := posenc.Span{QStart: 6, TQ: 4, KStart: 1, TK: 9}
		s := kerpleSite(h, span, true)
		bias, err := ke.ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		n1, n2 := ke.ParamNames()
		r1, r2 := make([]float64, h), make([]float64, h)
		for j := range r1 {
			r1[j], r2[j] = 0.1+rng.Float64()*2, 0.1+rng.Float64()*1.8
		}
		_ = s.Params.Set(n1, r1)
		_ = s.Params.Set(n2, r2)
		rv := make([]float64, h*span.TQ*span.TK)
		for j := range rv {
			rv[j] = rng.NormFloat64()
		}
		r := G.NewTensor(s.G, tensor.Float64, 3, G.WithShape(h, span.TQ, span.TK), G.WithName("R"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{h, span.TQ, span.TK}, rv)))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(bias, r))))
		if err := graph.GradCheck(s.G, loss, s.Params.Nodes(s.G), graph.GradCheckOpts{Seed: 1}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestKerpleParams: one pair of [H] parameters shared by every layer, never
// weight-decayed, initialised in the paper's ranges.
func TestKerpleParams(t *testing.T) {
	for _, c := range []struct {
		name         string
		hi1, hi2     float64
		want1, want2 string
	}{
		{"kerple-log", 2, 1, "kerple_log_r1", "kerple_log_r2"},
		{"kerple-power", 1, 2, "kerple_power_r1", "kerple_power_r2"},
	} {
		enc, _ := posenc.New(c.name, posenc.Options{})
		s := kerpleSite(16, posenc.Span{TQ: 3, TK: 3}, true)
		for layer := 0; layer < 3; layer++ {
			s.Layer = layer
			if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.Params.Names(); !slices.Equal(got, []string{c.want1, c.want2}) {
			t.Fatalf("%s: parameters %v", c.name, got)
		}
		for n, hi := range map[string]float64{c.want1: c.hi1, c.want2: c.hi2} {
			info, _ := s.Params.Info(n)
			if info.Decay || !slices.Equal(info.Shape, tensor.Shape{16}) {
				t.Errorf("%s: %+v, want shape [16], no decay", n, info)
			}
			for _, v := range s.Params.Float64s(n) {
				if v < 0 || v >= hi {
					t.Errorf("%s: init %v outside [0, %v)", n, v, hi)
				}
			}
		}
	}
}

// TestKerpleErrors: bad kernels, bounds and sites are errors naming the
// encoding and the value.
func TestKerpleErrors(t *testing.T) {
	for _, c := range []struct {
		kernel string
		eps    float64
		want   string
	}{
		{"gauss", 0.01, `kernel "gauss"`},
		{posenc.KerpleLog, -0.5, "kerple-log: eps -0.5"},
		{posenc.KerplePower, 1, "kerple-power: eps 1"},
		{posenc.KerplePower, math.NaN(), "kerple-power: eps NaN"},
	} {
		if _, err := posenc.NewKerple(c.kernel, c.eps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewKerple(%q, %v) = %v, want an error containing %q", c.kernel, c.eps, err, c.want)
		}
	}
	if _, err := posenc.New("kerple-log", posenc.Options{KerpleEps: -1}); err == nil || !strings.Contains(err.Error(), "eps -1") {
		t.Errorf("New with KerpleEps -1: %v", err)
	}
	if d := (posenc.Options{}).Defaults().KerpleEps; d != 0.01 {
		t.Errorf("default KerpleEps %v, want 0.01", d)
	}
	enc, _ := posenc.New("kerple-power", posenc.Options{})
	for _, s := range []*posenc.Site{kerpleSite(0, posenc.Span{TQ: 3, TK: 3}, true), kerpleSite(2, posenc.Span{TQ: 0, TK: 3}, true)} {
		if _, err := enc.(posenc.ScoreBiaser).ScoreBias(s); err == nil || !strings.Contains(err.Error(), "kerple-power") {
			t.Errorf("ScoreBias with H=%d TQ=%d: %v", s.H, s.TQ, err)
		}
	}
}

// TestKerpleFloat32: a float32 graph (the training dtype) gives the host
// bias to float32 precision, both kernels.
func TestKerpleFloat32(t *testing.T) {
	for _, name := range []string{"kerple-log", "kerple-power"} {
		enc, _ := posenc.New(name, posenc.Options{})
		ke := enc.(*posenc.Kerple)
		span := posenc.Span{QStart: 3, TQ: 4, KStart: 0, TK: 7}
		s := &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float32, 1), B: 1, H: 2, DHead: 4, DModel: 8, Span: span, Causal: true}
		bias, err := ke.ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(s.G)
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		n1, n2 := ke.ParamNames()
		want := posenc.KerpleBias(ke.Kernel, s.Params.Float64s(n1), s.Params.Float64s(n2), ke.Eps,
			positionsFrom(span.QStart, span.TQ), positionsFrom(span.KStart, span.TK))
		closeTo(t, name+" float32 bias", graph.ToFloat64s(bias.Value()), want, 1e-6)
		m.Close()
	}
}
