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
	"github.com/rpe-go/rpe/posenc"
)

// TestDebertaBucketHand checks DebertaBucket against values computed by hand
// with HF's make_log_bucket_position:
//
//	mid = bucket/2; |rel| <= mid: rel;
//	else sign(rel)·(mid + ceil(ln(|rel|/mid) / ln((maxPos-1)/mid) · (mid-1)))
func TestDebertaBucketHand(t *testing.T) {
	type row struct{ rel, want int }
	cases := []struct {
		bucket, maxPos int
		rows           []row
	}{
		// mid = 2, mid-1 = 1, ln(15/2) = 2.01490:
		//   3: ln(1.5)/2.0149 = 0.2012 -> ceil 1 -> 3;   15: ln(7.5)/ln(7.5) = 1 -> 3
		//   16: ln(8)/2.0149 = 1.0320 -> 2 -> 4;        112: ln(56)/2.0149 = 1.9978 -> 2 -> 4
		//   113: ln(56.5)/2.0149 = 2.0022 -> 3 -> 5;    600: ln(300)/2.0149 = 2.831 -> 3 -> 5
		{4, 16, []row{{0, 0}, {1, 1}, {-1, -1}, {2, 2}, {-2, -2}, {3, 3}, {-3, -3}, {15, 3},
			{16, 4}, {-16, -4}, {112, 4}, {113, 5}, {-113, -5}, {600, 5}, {-600, -5}}},
		// mid = 4, mid-1 = 3, ln(9/4) = 0.81093:
		//   5: ln(1.25)/0.81093·3 = 0.8255 -> 1 -> 5;   6: ln(1.5)/ln(2.25)·3 = 1.5 -> 2 -> 6
		//   7: 2.0703 -> 3 -> 7;   8: 2.5643 -> 3 -> 7;   9: ratio exactly 1 -> 3 -> 7
		//   10: 3.3898 -> 4 -> 8;  16: 5.1285 -> 6 -> 10; 600: ln(150)/0.81093·3 = 18.54 -> 19 -> 23
		{8, 10, []row{{4, 4}, {-4, -4}, {5, 5}, {-5, -5}, {6, 6}, {7, 7}, {8, 7}, {9, 7}, {-9, -7},
			{10, 8}, {11, 8}, {16, 10}, {600, 23}, {-600, -23}}},
		// defaults: mid = 16, mid-1 = 15, ln(127/16) = 2.07157:
		//   16: exact;  17: ln(17/16)/2.07157·15 = 0.439 -> 1 -> 17
		//   127: ratio exactly 1 -> 15 -> 31 (= 2·mid-1);  128: 15.057 -> 16 -> 32
		{32, 128, []row{{16, 16}, {-16, -16}, {17, 17}, {127, 31}, {-127, -31}, {128, 32}, {600, 43}}},
		// DeBERTa-v3: mid = 128, exact up to 128; 511 -> 255, 512 -> 256
		{256, 512, []row{{128, 128}, {-128, -128}, {200, 169}, {511, 255}, {512, 256}, {-512, -256}}},
	}
	for _, c := range cases {
		for _, r := range c.rows {
			if got := posenc.DebertaBucket(r.rel, c.bucket, c.maxPos); got != r.want {
				t.Errorf("DebertaBucket(%d, %d, %d) = %d, want %d", r.rel, c.bucket, c.maxPos, got, r.want)
			}
		}
	}
}

// TestDebertaBucketGolden compares DebertaBucket over rel in [-600, 600]
// with the PyTorch transcription of HF's make_log_bucket_position.
func TestDebertaBucketGolden(t *testing.T) {
	tabs := goldenTables(t)
	rel := tabs["rel"]
	if len(rel) != 1201 {
		t.Fatalf("tables: rel has %d entries", len(rel))
	}
	for _, c := range []struct{ bs, mp int }{{4, 16}, {8, 10}, {256, 512}} {
		key := fmt.Sprintf("deberta_log_bucket/bs%d_mp%d", c.bs, c.mp)
		want := tabs[key]
		if len(want) != len(rel) {
			t.Fatalf("tables: %s missing or of length %d", key, len(want))
		}
		for i, r := range rel {
			if got := posenc.DebertaBucket(r, c.bs, c.mp); got != want[i] {
				t.Fatalf("%s: DebertaBucket(%d) = %d, PyTorch %d", key, r, got, want[i])
			}
		}
	}
}

func TestDebertaBucketPanics(t *testing.T) {
	for _, c := range []struct{ bs, mp int }{{1, 16}, {0, 16}, {8, 5}, {8, 4}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "deberta") {
					t.Errorf("DebertaBucket(9, %d, %d): recovered %v, want a panic naming deberta", c.bs, c.mp, r)
				}
			}()
			posenc.DebertaBucket(9, c.bs, c.mp)
		}()
	}
}

// TestDebertaIndex checks the gather indices of spans with Tq != Tk, with
// the clamp to [0, 2·span-1] active at both ends.
func TestDebertaIndex(t *testing.T) {
	cases := []struct {
		bs, mp int
		span   posenc.Span
		want   []int // c2p = p2c, row-major [TQ, TK]
	}{
		// queries 5, 6, keys 0..7: rel 5..-2 -> lb 3,3,3,2,1,0,-1,-2 (+4);
		// rel 6..-1 -> 3,3,3,3,2,1,0,-1 (+4)
		{4, 16, posenc.Span{QStart: 5, TQ: 2, KStart: 0, TK: 8},
			[]int{7, 7, 7, 6, 5, 4, 3, 2, 7, 7, 7, 7, 6, 5, 4, 3}},
		// rel -112, -113 / -111, -112: lb -4, -5 / -4, -4; +4 -> 0, -1 clamped to 0
		{4, 16, posenc.Span{QStart: 0, TQ: 2, KStart: 112, TK: 2}, []int{0, 0, 0, 0}},
		// rel 113, 16, 15: lb 5, 4, 3; +4 -> 9, 8 clamped to 7, and 7
		{4, 16, posenc.Span{QStart: 113, TQ: 1, KStart: 0, TK: 1}, []int{7}},
		{4, 16, posenc.Span{QStart: 16, TQ: 1, KStart: 0, TK: 2}, []int{7, 7}},
		// bucket 8, max 10: rel 0..-11 -> lb 0..-7, -7, -7, -8, -8 (+8)
		{8, 10, posenc.Span{TQ: 1, TK: 12}, []int{8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 0, 0}},
		// Tq > Tk: queries 0..2, key 1: rel -1, 0, 1 -> 7, 8, 9
		{8, 10, posenc.Span{TQ: 3, KStart: 1, TK: 1}, []int{7, 8, 9}},
	}
	for _, c := range cases {
		c2p, p2c := posenc.DebertaIndex(c.span, c.bs, c.mp)
		if fmt.Sprint(c2p) != fmt.Sprint(c.want) {
			t.Errorf("bucket %d max %d %+v: c2p %v, want %v", c.bs, c.mp, c.span, c2p, c.want)
		}
		if fmt.Sprint(p2c) != fmt.Sprint(c.want) {
			t.Errorf("bucket %d max %d %+v: p2c %v, want %v", c.bs, c.mp, c.span, p2c, c.want)
		}
	}
}

// debLinear is x·W + b for the test's own projections.
func debLinear(x, w, b *G.Node) (*G.Node, error) {
	y, err := G.Mul(x, w)
	if err != nil {
		return nil, err
	}
	return graph.BroadcastAdd(y, b)
}

// TestDebertaScoreTermsDirect compares ScoreTerms with a per-element loop
// over HF's c2p and p2c terms, for self-attention, Tq < Tk, Tq > Tk and
// offsets large enough for log buckets and clamping.
func TestDebertaScoreTermsDirect(t *testing.T) {
	const b, h, dh, bs, mp = 2, 2, 3, 4, 16
	const d = h * dh
	spans := []posenc.Span{
		{TQ: 4, TK: 4},
		{QStart: 17, TQ: 3, KStart: 0, TK: 6},
		{QStart: 0, TQ: 5, KStart: 2, TK: 3},
		{QStart: 130, TQ: 2, KStart: 0, TK: 3},
	}
	for si, span := range spans {
		rng := rand.New(rand.NewSource(int64(40 + si)))
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		enc, err := posenc.New("deberta", posenc.Options{DebertaBuckets: bs, DebertaMaxPosition: mp})
		if err != nil {
			t.Fatal(err)
		}
		node := func(name string, shape ...int) *G.Node {
			n, err := p.Node(g, name, tensor.Shape(shape), graph.Zeros, false)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		wq, bq, wk, bk := node("wq", d, d), node("bq", d), node("wk", d, d), node("bk", d)
		project := func(x *G.Node, which string) (*G.Node, error) {
			if which == "q" {
				return debLinear(x, wq, bq)
			}
			return debLinear(x, wk, bk)
		}
		q, qd := xlRandInput(g, rng, "q", b, h, span.TQ, dh)
		k, kd := xlRandInput(g, rng, "k", b, h, span.TK, dh)
		site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: b, H: h, DHead: dh, DModel: d, Span: span, Project: project}
		out, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k)
		if err != nil {
			t.Fatal(err)
		}
		xlRandomizeParams(t, p, rng)
		xlRun(t, g)
		got := graph.ToFloat64s(out.Value())

		rel := p.Float64s("deberta_rel")
		if len(rel) != 2*bs*d {
			t.Fatalf("deberta_rel has %d values, want [%d, %d]", len(rel), 2*bs, d)
		}
		W := map[string][]float64{"q": p.Float64s("wq"), "k": p.Float64s("wk")}
		B := map[string][]float64{"q": p.Float64s("bq"), "k": p.Float64s("bk")}
		// proj(which, row, col) = (deberta_rel[row] · W + b)[col]
		proj := func(which string, row, col int) float64 {
			s := B[which][col]
			for e := 0; e < d; e++ {
				s += rel[row*d+e] * W[which][e*d+col]
			}
			return s
		}
		clamp := func(x int) int { return min(max(x, 0), 2*bs-1) }
		want := make([]float64, 0, len(got))
		for bb := 0; bb < b; bb++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < span.TQ; i++ {
					for j := 0; j < span.TK; j++ {
						qp, kp := span.QStart+i, span.KStart+j
						c2p := clamp(posenc.DebertaBucket(qp-kp, bs, mp) + bs)
						p2c := clamp(-posenc.DebertaBucket(kp-qp, bs, mp) + bs)
						s := 0.0
						for c := 0; c < dh; c++ {
							col := hh*dh + c
							qc := qd[((bb*h+hh)*span.TQ+i)*dh+c]
							kc := kd[((bb*h+hh)*span.TK+j)*dh+c]
							s += qc*proj("k", c2p, col) + kc*proj("q", p2c, col)
						}
						want = append(want, s)
					}
				}
			}
		}
		xlCheckClose(t, fmt.Sprintf("deberta terms %+v", span), got, want, 1e-12)
	}
}

func TestDebertaScale(t *testing.T) {
	enc, err := posenc.New("deberta", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := enc.(posenc.Scaler).Scale(8), 1/math.Sqrt(24); got != want {
		t.Fatalf("Scale(8) = %v, want 1/sqrt(3·8) = %v", got, want)
	}
	d := enc.(*posenc.DeBERTa)
	if d.Buckets != 32 || d.MaxPosition != 128 {
		t.Fatalf("defaults: buckets %d, max position %d", d.Buckets, d.MaxPosition)
	}
}

func TestDebertaErrors(t *testing.T) {
	for _, o := range []posenc.Options{{DebertaBuckets: 1}, {DebertaBuckets: 8, DebertaMaxPosition: 5}} {
		if _, err := posenc.New("deberta", o); err == nil || !strings.Contains(err.Error(), "deberta") {
			t.Errorf("options %+v: %v", o, err)
		}
	}
	enc, _ := posenc.New("deberta", posenc.Options{DebertaBuckets: 4, DebertaMaxPosition: 16})
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	q := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, 3, 2), G.WithName("q"))
	k := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, 3, 2), G.WithName("k"))
	site := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 1, H: 2, DHead: 2, DModel: 4, Span: posenc.Span{TQ: 3, TK: 3}}
	if _, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k); err == nil || !strings.Contains(err.Error(), "Project") {
		t.Fatalf("nil Project: %v", err)
	}
	site.Span.TK = 4
	if _, err := enc.(posenc.ScoreTermer).ScoreTerms(site, q, k); err == nil || !strings.Contains(err.Error(), "posenc deberta: k has shape") {
		t.Fatalf("k shape: %v", err)
	}
}

func TestDebertaGrad(t *testing.T) {
	// TestEveryEncoding runs the causal and bidirectional checks; this one
	// also requires deberta_rel to exist and not to be decayed. max position
	// 8 with a start of 2 puts the last keys into log buckets.
	o := posenc.Options{DebertaBuckets: 4, DebertaMaxPosition: 8}
	checkLMGrad(t, "deberta", o, false, 2, "deberta_rel")
}
