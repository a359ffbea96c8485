package viz

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
	"gorgonia.org/tensor"
)

func mustEnc(t *testing.T, name string, o posenc.Options) posenc.Encoding {
	t.Helper()
	e, err := posenc.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func close(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func TestMatrix(t *testing.T) {
	if _, err := NewMatrix(2, 3, make([]float64, 5)); err == nil {
		t.Error("2×3 matrix of 5 values accepted")
	}
	if _, err := NewMatrix(0, 0, nil); err == nil {
		t.Error("empty matrix accepted")
	}
	m, err := FromInts(2, 3, []int{0, 1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if m.At(1, 2) != 5 || m.Row(1)[0] != 3 {
		t.Errorf("At(1,2) = %v, Row(1) = %v", m.At(1, 2), m.Row(1))
	}
	m.X0, m.Y0 = 10, 11 // keys at 10..12, queries at 11..12
	if xs, ys := m.Xs(), m.Ys(); xs[0] != 10 || xs[2] != 12 || ys[1] != 12 {
		t.Errorf("Xs %v Ys %v", xs, ys)
	}
	c := m.MaskCausal()
	// query 11: keys 10, 11 visible, 12 hidden; query 12: all visible.
	want := []bool{false, false, true, false, false, false}
	for i, nan := range want {
		if math.IsNaN(c.Data[i]) != nan {
			t.Errorf("MaskCausal element %d = %v, want NaN %v", i, c.Data[i], nan)
		}
	}
	if math.IsNaN(m.Data[2]) {
		t.Error("MaskCausal modified its receiver")
	}
	if lo, hi := Range(c); lo != 0 || hi != 5 {
		t.Errorf("Range = %v, %v", lo, hi)
	}
	if lo, _ := Range(Matrix{Rows: 1, Cols: 1, Data: []float64{math.NaN()}}); !math.IsNaN(lo) {
		t.Errorf("Range of NaNs = %v", lo)
	}
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

// blueRed counts strongly blue and strongly red pixels of img in rect.
func blueRed(img image.Image, r image.Rectangle) (blue, red int) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, _, cb, _ := img.At(x, y).RGBA()
			switch {
			case cb > cr+0x3000:
				blue++
			case cr > cb+0x3000:
				red++
			}
		}
	}
	return blue, red
}

// TestHeatmapLayout checks the size, the diverging colours and the
// orientation: negative values blue, positive red, row 0 on top, column 0
// on the left.
func TestHeatmapLayout(t *testing.T) {
	// Columns: left negative, right positive.
	b, err := Heatmap(Matrix{Rows: 1, Cols: 2, Data: []float64{-1, 1}}, HeatmapOptions{Width: 400, Height: 300})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, b)
	if s := img.Bounds().Size(); s.X != 400 || s.Y != 300 {
		t.Fatalf("size %v, want 400×300", s)
	}
	plotW := 400 - 90 // the colour bar takes the right 90 px
	// The data area starts right of the y axis: sample the outer parts.
	lb, lr := blueRed(img, image.Rect(0, 0, plotW*4/10, 300))
	rb, rr := blueRed(img, image.Rect(plotW*7/10, 0, plotW, 300))
	if !(lb > 1000 && lr < lb/10 && rr > 1000 && rb < rr/10) {
		t.Errorf("columns: left blue %d red %d, right blue %d red %d", lb, lr, rb, rr)
	}
	// Rows: top negative, bottom positive.
	b, err = Heatmap(Matrix{Rows: 2, Cols: 1, Data: []float64{-1, 1}}, HeatmapOptions{Width: 400, Height: 300})
	if err != nil {
		t.Fatal(err)
	}
	img = decode(t, b)
	tb, tr := blueRed(img, image.Rect(0, 0, plotW, 150))
	bb, br := blueRed(img, image.Rect(0, 150, plotW, 300))
	if !(tb > 1000 && tr < tb/10 && br > 1000 && bb < br/10) {
		t.Errorf("rows: top blue %d red %d, bottom blue %d red %d", tb, tr, bb, br)
	}
}

func TestHeatmapGridAndErrors(t *testing.T) {
	ms := []Matrix{{Rows: 2, Cols: 2, Data: []float64{0, 1, 2, 3}}, {Rows: 2, Cols: 2, Data: []float64{4, 5, 6, math.NaN()}}, {Rows: 1, Cols: 3, Data: []float64{1, 2, 3}}}
	b, err := HeatmapGrid(ms, []string{"a", "b"}, 2, HeatmapOptions{Width: 500})
	if err != nil {
		t.Fatal(err)
	}
	if s := decode(t, b).Bounds().Size(); s.X != 500 || s.Y != 60+2*DefaultHeight*2/3 {
		t.Errorf("grid size %v", s)
	}
	for _, c := range []struct {
		name string
		ms   []Matrix
		cols int
		want string
	}{
		{"none", nil, 1, "0 matrices"},
		{"cols", ms, 0, "0 columns"},
		{"malformed", []Matrix{{Rows: 2, Cols: 2, Data: []float64{1}}}, 1, "matrix 0"},
		{"all NaN", []Matrix{{Rows: 1, Cols: 1, Data: []float64{math.NaN()}}}, 1, "no finite values"},
	} {
		if _, err := HeatmapGrid(c.ms, nil, c.cols, HeatmapOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func TestLines(t *testing.T) {
	s := []Series{
		{Name: "a", X: []float64{0, 1, 2}, Y: []float64{1, 2, 4}},
		{Name: "b", X: []float64{0, 1, 2}, Y: []float64{3, 2, 1}, Points: true},
		{X: []float64{0, 2}, Y: []float64{2, 2}, Step: true},
		{Name: "c", X: []float64{0, 1, 2}, Y: []float64{2, 3, 3.5}, Lo: []float64{1.5, 2.5, 3}, Hi: []float64{2.5, 3.5, 4}},
	}
	for _, o := range []LineOptions{{}, {Diagonal: true}, {LogY: true, LegendLeft: true, LegendBottom: true, Width: 300, Height: 200}} {
		b, err := Lines(s, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		sz := decode(t, b).Bounds().Size()
		if w := max(o.Width, 0); w == 0 && sz.X != DefaultWidth || w > 0 && sz.X != w {
			t.Errorf("%+v: width %d", o, sz.X)
		}
	}
	for _, c := range []struct {
		name string
		s    []Series
		o    LineOptions
		want string
	}{
		{"none", nil, LineOptions{}, "without series"},
		{"lengths", []Series{{X: []float64{1}, Y: []float64{1, 2}}}, LineOptions{}, "1 x and 2 y"},
		{"NaN", []Series{{X: []float64{1}, Y: []float64{math.NaN()}}}, LineOptions{}, "series 0"},
		{"log", []Series{{X: []float64{1, 2}, Y: []float64{1, 0}}}, LineOptions{LogY: true}, "log axis"},
		{"log diagonal", []Series{{X: []float64{0, 2}, Y: []float64{1, 2}}}, LineOptions{LogY: true, Diagonal: true}, "positive x"},
		{"interval length", []Series{{X: []float64{1, 2}, Y: []float64{1, 2}, Lo: []float64{0}, Hi: []float64{2, 3}}}, LineOptions{}, "interval bounds"},
		{"outside", []Series{{X: []float64{1, 2}, Y: []float64{1, 2}, Lo: []float64{0, 2.5}, Hi: []float64{2, 3}}}, LineOptions{}, "outside its interval"},
	} {
		if _, err := Lines(c.s, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if x := IntRange(-2, 1); len(x) != 4 || x[0] != -2 || x[3] != 1 {
		t.Errorf("IntRange(-2, 1) = %v", x)
	}
	if x := Ints([]int{3, -1}); x[0] != 3 || x[1] != -1 {
		t.Errorf("Ints = %v", x)
	}
}

// TestLogLogGrid draws log-log panels with fixed x ticks and a series
// style override (a pure green line appears only with the override), and
// checks that a non-positive x is refused on the log axis.
func TestLogLogGrid(t *testing.T) {
	x := []float64{512, 1024, 2048, 4096}
	green := &Style{Color: color.RGBA{G: 255, A: 255}}
	panels := func(st *Style) [][]Series {
		return [][]Series{
			{{Name: "T^2", X: x, Y: []float64{1, 4, 16, 64}, Style: st}, {X: x, Y: []float64{1, 2, 4, 8}}},
			{{X: x, Y: []float64{3, 3, 3, 3}}},
		}
	}
	greens := func(b []byte) int {
		img := decode(t, b)
		n := 0
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if g > 0xf000 && r < 0x1000 && b < 0x1000 {
					n++
				}
			}
		}
		return n
	}
	o := LineOptions{XTicks: x, Width: 600, Height: 300}
	with, err := LogLogGrid(panels(green), []string{"time", "memory"}, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	if sz := decode(t, with).Bounds().Size(); sz.X != 600 || sz.Y != 300 {
		t.Errorf("size %v, want 600x300", sz)
	}
	without, err := LogLogGrid(panels(nil), []string{"time", "memory"}, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	if g0, g1 := greens(without), greens(with); g0 != 0 || g1 < 50 {
		t.Errorf("pure green pixels: %d without the style override, %d with it", g0, g1)
	}
	if ts := fixedTicks(x).Ticks(1, 1e4); len(ts) != 4 || ts[0].Label != "512" || ts[3].Value != 4096 {
		t.Errorf("fixed ticks %v", ts)
	}
	// One point below 1 on both log axes.
	if _, err := LogLogGrid([][]Series{{{X: []float64{0.5}, Y: []float64{0.25}}}}, nil, 1, LineOptions{}); err != nil {
		t.Errorf("one point: %v", err)
	}
	bad := [][]Series{{{X: []float64{0, 1}, Y: []float64{1, 2}}}}
	if _, err := LogLogGrid(bad, nil, 1, LineOptions{}); err == nil || !strings.Contains(err.Error(), "x[0] = 0 on a log axis") || !strings.Contains(err.Error(), "panel 0") {
		t.Errorf("x = 0 on a log axis: error %v", err)
	}
}

// TestScoreBiasAlibi compares the graph's ALiBi bias with posenc.AlibiBias
// on a span with a memory offset.
func TestScoreBiasAlibi(t *testing.T) {
	span := posenc.Span{QStart: 5, TQ: 3, KStart: 2, TK: 6}
	for _, causal := range []bool{false, true} {
		ms, err := ScoreBias(mustEnc(t, "alibi", posenc.Options{}), span, BiasOptions{Heads: 4, Causal: causal})
		if err != nil {
			t.Fatal(err)
		}
		want := posenc.AlibiBias(posenc.AlibiSlopes(4), []int{5, 6, 7}, []int{2, 3, 4, 5, 6, 7}, causal)
		if len(ms) != 4 {
			t.Fatalf("%d matrices, want 4", len(ms))
		}
		for h, m := range ms {
			if m.Rows != 3 || m.Cols != 6 || m.X0 != 2 || m.Y0 != 5 {
				t.Fatalf("head %d: %d×%d at (%v, %v)", h, m.Rows, m.Cols, m.X0, m.Y0)
			}
			for k, v := range m.Data {
				if !close(v, want[h*18+k], 1e-12) {
					t.Fatalf("causal %v head %d element %d: %v, want %v", causal, h, k, v, want[h*18+k])
				}
			}
		}
	}
}

// TestScoreBiasT5 checks the T5 bias of a fresh store and of a given store
// against its table and posenc.T5Bucket, for both forms, and
// BiasByDistance against the same.
func TestScoreBiasT5(t *testing.T) {
	const heads = 3
	o := posenc.Options{T5Buckets: 8, T5MaxDistance: 20}
	p := graph.NewParams(tensor.Float32, 9)
	for _, causal := range []bool{false, true} {
		ms, err := ScoreBias(mustEnc(t, "t5", o), posenc.Span{TQ: 5, TK: 30}, BiasOptions{Params: p, Heads: heads, Causal: causal})
		if err != nil {
			t.Fatal(err)
		}
		table := p.Float64s("t5_bias") // [8, heads]
		if len(table) != 8*heads {
			t.Fatalf("t5_bias has %d values", len(table))
		}
		for h := 0; h < heads; h++ {
			for i := 0; i < 5; i++ {
				for j := 0; j < 30; j++ {
					want := table[posenc.T5Bucket(j-i, !causal, 8, 20)*heads+h]
					if got := ms[h].At(i, j); !close(got, want, 1e-6) {
						t.Fatalf("causal %v head %d (%d, %d): %v, want %v", causal, h, i, j, got, want)
					}
				}
			}
		}
		ser, err := BiasByDistance(mustEnc(t, "t5", o), -25, 25, BiasOptions{Params: p, Heads: heads, Causal: causal})
		if err != nil {
			t.Fatal(err)
		}
		for h, s := range ser {
			if s.Name != "head "+string(rune('0'+h)) || len(s.X) != 51 {
				t.Fatalf("series %q with %d points", s.Name, len(s.X))
			}
			for k, rel := range s.X {
				want := table[posenc.T5Bucket(int(rel), !causal, 8, 20)*heads+h]
				if !close(s.Y[k], want, 1e-6) {
					t.Fatalf("causal %v head %d rel %v: %v, want %v", causal, h, rel, s.Y[k], want)
				}
			}
		}
	}
	// A fresh store is seeded: two calls agree.
	a, _ := BiasByDistance(mustEnc(t, "t5", o), -3, 3, BiasOptions{Heads: 2, Seed: 4})
	b, _ := BiasByDistance(mustEnc(t, "t5", o), -3, 3, BiasOptions{Heads: 2, Seed: 4})
	if a[1].Y[0] != b[1].Y[0] || a[1].Y[0] == 0 {
		t.Errorf("fresh tables differ or are zero: %v %v", a[1].Y, b[1].Y)
	}
}

// TestScoreBiasShawScalarLayer checks that the per-layer table is looked up
// under the layer's prefix.
func TestScoreBiasShawScalarLayer(t *testing.T) {
	p := graph.NewParams(tensor.Float64, 2)
	ser, err := BiasByDistance(mustEnc(t, "shaw-scalar", posenc.Options{ShawK: 2}), -4, 4, BiasOptions{Params: p, Layer: 1, Heads: 2})
	if err != nil {
		t.Fatal(err)
	}
	table := p.Float64s("block1/attn/shaw_bias") // [5, 2]
	if len(table) != 10 {
		t.Fatalf("names %v", p.Names())
	}
	for h, s := range ser {
		for k, rel := range s.X {
			want := table[(min(max(int(rel), -2), 2)+2)*2+h]
			if s.Y[k] != want {
				t.Fatalf("head %d rel %v: %v, want %v", h, rel, s.Y[k], want)
			}
		}
	}
}

func TestPatternErrors(t *testing.T) {
	rope := mustEnc(t, "rope", posenc.Options{})
	if _, err := ScoreBias(rope, posenc.Span{TQ: 1, TK: 1}, BiasOptions{Heads: 1}); err == nil || !strings.Contains(err.Error(), "no score bias") {
		t.Errorf("rope score bias: %v", err)
	}
	if _, err := ScoreBias(mustEnc(t, "alibi", posenc.Options{}), posenc.Span{TQ: 1, TK: 1}, BiasOptions{}); err == nil {
		t.Error("0 heads accepted")
	}
	if _, err := BiasByDistance(mustEnc(t, "alibi", posenc.Options{}), 2, 1, BiasOptions{Heads: 1}); err == nil {
		t.Error("empty distance range accepted")
	}
	if _, err := QKScores(mustEnc(t, "t5", posenc.Options{}), []float64{1, 2}, []float64{1, 2}, posenc.Span{TQ: 1, TK: 1}); err == nil || !strings.Contains(err.Error(), "QKTransformer") {
		t.Errorf("t5 q.k: %v", err)
	}
	if _, err := QKScores(rope, []float64{1, 2}, []float64{1}, posenc.Span{TQ: 1, TK: 1}); err == nil {
		t.Error("q and k of different widths accepted")
	}
	if _, err := QKScores(rope, []float64{1}, []float64{1}, posenc.Span{TQ: 1, TK: 1}); err == nil {
		t.Error("head width 1 (no rotary pair) accepted by rope")
	}
}

// TestQKScoresRope checks RoPE's scores against the closed form
// Σ_p q_a(k_a cos δ - k_b sin δ) + q_b(k_b cos δ + k_a sin δ), δ = (kpos -
// qpos)θ_p, pairs (p, p + dh/2), θ_p = 10000^(-2p/dh).
func TestQKScoresRope(t *testing.T) {
	const dh = 8
	rng := rand.New(rand.NewSource(1))
	q, k := make([]float64, dh), make([]float64, dh)
	for i := range q {
		q[i], k[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	span := posenc.Span{QStart: 3, TQ: 4, KStart: 0, TK: 9}
	m, err := QKScores(mustEnc(t, "rope", posenc.Options{}), q, k, span)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 4 || m.Cols != 9 || m.X0 != 0 || m.Y0 != 3 {
		t.Fatalf("%d×%d at (%v, %v)", m.Rows, m.Cols, m.X0, m.Y0)
	}
	for i := 0; i < 4; i++ {
		for j := 0; j < 9; j++ {
			rel := float64(j - (3 + i))
			want := 0.0
			for p := 0; p < dh/2; p++ {
				d := rel * math.Pow(10000, -2*float64(p)/dh)
				a, b := p, p+dh/2
				want += q[a]*(k[a]*math.Cos(d)-k[b]*math.Sin(d)) + q[b]*(k[b]*math.Cos(d)+k[a]*math.Sin(d))
			}
			if !close(m.At(i, j), want, 1e-12) {
				t.Fatalf("(%d, %d): %v, want %v", i, j, m.At(i, j), want)
			}
		}
	}
}

func TestNiceTicks(t *testing.T) {
	var labels []string
	for _, tk := range (niceTicks{}).Ticks(0, 500) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if strings.Join(labels, " ") != "0 250 500" {
		t.Errorf("labels of 0..500: %v", labels)
	}
	labels = nil
	for _, tk := range (logTicks{}).Ticks(2e-10, 5e-3) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if strings.Join(labels, " ") != "1e-09 1e-08 1e-07 1e-06 1e-05 0.0001 0.001" {
		t.Errorf("log labels of 2e-10..5e-3: %v", labels)
	}
	for _, tk := range (flippedTicks{}).Ticks(-40.5, 0.5) {
		if tk.Label != "" && tk.Label != strconv.FormatFloat(-tk.Value, 'g', 6, 64) {
			t.Errorf("flipped tick at %v labelled %q", tk.Value, tk.Label)
		}
	}
}

func TestTabulateRelMatrix(t *testing.T) {
	s := Tabulate("sq", -2, 2, func(x int) float64 { return float64(x * x) })
	if s.Name != "sq" || len(s.X) != 5 || s.X[0] != -2 || s.Y[0] != 4 || s.Y[2] != 0 {
		t.Errorf("Tabulate: %+v", s)
	}
	if e := Tabulate("", 1, 0, nil); len(e.X) != 0 || len(e.Y) != 0 {
		t.Errorf("empty Tabulate: %+v", e)
	}
	span := posenc.Span{QStart: 4, TQ: 2, KStart: 1, TK: 3}
	m, err := RelMatrix(span, func(rel int) float64 { return float64(rel) })
	if err != nil {
		t.Fatal(err)
	}
	// query 4: keys 1, 2, 3 -> -3, -2, -1; query 5 -> -4, -3, -2.
	want := []float64{-3, -2, -1, -4, -3, -2}
	for k, v := range m.Data {
		if v != want[k] {
			t.Fatalf("RelMatrix = %v, want %v", m.Data, want)
		}
	}
	if m.X0 != 1 || m.Y0 != 4 {
		t.Errorf("origin (%v, %v)", m.X0, m.Y0)
	}
	// The same as ShawIndex through FromInts.
	sh, _ := FromInts(2, 3, posenc.ShawIndex(span, 2))
	rm, _ := RelMatrix(span, func(rel int) float64 { return float64(min(max(rel, -2), 2) + 2) })
	for k := range sh.Data {
		if sh.Data[k] != rm.Data[k] {
			t.Fatalf("ShawIndex %v, RelMatrix %v", sh.Data, rm.Data)
		}
	}
	if _, err := RelMatrix(posenc.Span{}, nil); err == nil {
		t.Error("empty span accepted")
	}
}

// TestQKScoresXPos: xPos (causal only) is evaluated on a causal site; with
// q = k its score against a key d steps back is RoPE's scaled by
// ζ^(−d/γ) per pair, so it lies below RoPE's for every d > 0 where RoPE's
// pair terms are positive (here d = 1: all cosines near 1).
func TestQKScoresXPos(t *testing.T) {
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	span := posenc.Span{QStart: 63, TQ: 1, KStart: 0, TK: 64}
	xp, err := posenc.New("xpos", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := QKScores(xp, ones, ones, span)
	if err != nil {
		t.Fatal(err)
	}
	r, err := QKScores(mustNew(t, "rope"), ones, ones, span)
	if err != nil {
		t.Fatal(err)
	}
	if d := x.At(0, 63) - r.At(0, 63); d > 1e-12 || d < -1e-12 {
		t.Fatalf("distance 0: xpos %v, rope %v", x.At(0, 63), r.At(0, 63))
	}
	if !(x.At(0, 62) < r.At(0, 62)) {
		t.Fatalf("distance 1: xpos %v not below rope %v", x.At(0, 62), r.At(0, 62))
	}
}

func mustNew(t *testing.T, name string) posenc.Encoding {
	t.Helper()
	e, err := posenc.New(name, posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestCoPEPositions: keys with a large positive logit are counted (gate
// ≈ 1), the others not (gate ≈ 0), so p_ij counts the selected keys from
// j to i; masked keys are 0; a memory span shifts the mask. Bad shapes are
// errors.
func TestCoPEPositions(t *testing.T) {
	sel := []bool{true, false, true, true}
	q := []float64{1, 1, 1, 1} // dh 1
	k := make([]float64, len(sel))
	for j, s := range sel {
		k[j] = -60
		if s {
			k[j] = 60
		}
	}
	m, err := CoPEPositions(q, k, 1, posenc.Span{TQ: 4, TK: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{
		1, 0, 0, 0,
		1, 0, 0, 0,
		2, 1, 1, 0,
		3, 2, 2, 1,
	}
	for i, w := range want {
		if math.Abs(m.Data[i]-w) > 1e-9 {
			t.Fatalf("p[%d][%d] = %v, want %v (all %v)", i/4, i%4, m.Data[i], w, m.Data)
		}
	}
	// one query at position 2 over keys 0..3: key 3 is after it
	m, err = CoPEPositions(q[:1], k, 1, posenc.Span{QStart: 2, TQ: 1, TK: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Data; math.Abs(got[0]-2) > 1e-9 || math.Abs(got[1]-1) > 1e-9 || got[3] != 0 || m.Y0 != 2 {
		t.Fatalf("memory span: p = %v (Y0 %v), want [2 1 1 0], Y0 2", got, m.Y0)
	}
	if _, err := CoPEPositions(q, k[:3], 1, posenc.Span{TQ: 4, TK: 4}); err == nil {
		t.Fatal("3 keys for TK = 4: no error")
	}
}
