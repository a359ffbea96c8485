package trainer

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// naiveEval scores data window by window, one window per forward pass and
// one graph per window length, from the per-position log-probabilities.
func naiveEval(t *testing.T, p *graph.Params, m layers.Config, data []byte, le, lastN int) (nats float64, windows, tokens int) {
	t.Helper()
	e, err := NewEvaluator(p, m, 1, le)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for w := 0; (w+1)*le+1 <= len(data); w++ {
		ids := make([]int, le)
		for j := range ids {
			ids[j] = int(data[w*le+j])
		}
		err := e.forward(ids, func(j int, logits []float64) error {
			if j >= le-lastN {
				// log softmax by hand
				var s float64
				for _, x := range logits {
					s += math.Exp(x)
				}
				nats -= logits[data[w*le+j+1]] - math.Log(s)
				tokens++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		windows++
	}
	return nats / float64(tokens), windows, tokens
}

func TestEval(t *testing.T) {
	cfg := tinyConfig()
	tr := newTiny(t, cfg)
	trainN(t, tr, 3)
	data := tinyText()[:8*5+3] // 5 windows of 8 (+1 target), 2 bytes left over
	for _, c := range []struct{ batch, lastN, windows, tokens int }{
		{1, 0, 5, 40}, {2, 0, 5, 40}, {4, 3, 5, 15}, {8, 8, 5, 40}, {3, 1, 5, 5},
	} {
		e, err := NewEvaluator(tr.Params, cfg.Model, c.batch, 8)
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.Eval(data, c.lastN, 0)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := c.lastN
		if n == 0 {
			n = 8
		}
		want, ww, wt := naiveEval(t, tr.Params, cfg.Model, data, 8, n)
		if r.Windows != c.windows || r.Tokens != c.tokens || ww != c.windows || wt != c.tokens {
			t.Errorf("%+v: %d windows %d tokens (naive %d %d)", c, r.Windows, r.Tokens, ww, wt)
		}
		if math.Abs(r.Nats-want) > 1e-12 || math.Abs(r.BitsPerByte-want/math.Ln2) > 1e-12 {
			t.Errorf("%+v: %v nats, naive %v", c, r.Nats, want)
		}
	}
	// MaxWindows, errors.
	r, err := Evaluate(tr.Params, cfg.Model, data, EvalOptions{Len: 8, MaxWindows: 2})
	if err != nil || r.Windows != 2 || r.Tokens != 16 {
		t.Errorf("max windows: %+v %v", r, err)
	}
	_, err = Evaluate(tr.Params, cfg.Model, data[:8], EvalOptions{Len: 8})
	wantErr(t, err, "too short")
	_, err = Evaluate(tr.Params, cfg.Model, data, EvalOptions{Len: 8, LastN: 9})
	wantErr(t, err, "last-n 9")
	// Longer windows run on the same weights (no position encoding).
	if _, err := Evaluate(tr.Params, cfg.Model, tinyText(), EvalOptions{Len: 32, Batch: 2}); err != nil {
		t.Error(err)
	}
	if Windows(17, 8) != 2 || Windows(16, 8) != 1 || Windows(8, 8) != 0 || Windows(0, 8) != 0 {
		t.Error("Windows")
	}
}

// TestEvalUniform: with the output head zeroed every logit is equal, so the
// model predicts the uniform distribution over 256 bytes: exactly 8 bits per
// byte, at any window length and with any last-n.
func TestEvalUniform(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		cfg := tinyConfig()
		cfg.Dtype = dt
		tr := newTiny(t, cfg)
		info, _ := tr.Params.Info("head/w")
		tr.Params.Set("head/w", make([]float64, info.Shape.TotalSize()))
		for _, o := range []EvalOptions{{Len: 8}, {Len: 16, LastN: 4, Batch: 3}} {
			r, err := Evaluate(tr.Params, cfg.Model, tr.Corpus.Val, o)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.BitsPerByte-8) > 1e-12 {
				t.Errorf("%v %+v: %.15f bits/byte, want 8", dt, o, r.BitsPerByte)
			}
		}
	}
}

// TestEvalLearnedBeyondTable: a learned absolute table cannot serve longer
// windows; Evaluate returns the layer's error.
func TestEvalLearnedBeyondTable(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model.Pos = "learned"
	cfg.Model.PosOpts.MaxLen = 8
	tr := newTiny(t, cfg)
	if _, err := Evaluate(tr.Params, cfg.Model, tr.Corpus.Val, EvalOptions{Len: 8}); err != nil {
		t.Fatal(err)
	}
	_, err := Evaluate(tr.Params, cfg.Model, tr.Corpus.Val, EvalOptions{Len: 16})
	wantErr(t, err, "length 16", "position beyond the learned table")
}

func TestSample(t *testing.T) {
	cfg := tinyConfig()
	tr := newTiny(t, cfg)
	trainN(t, tr, 2)
	opt := SampleOptions{Prompt: []byte("The quick"), N: 30, Temperature: 1, Seed: 3, Window: 8}
	a, err := Sample(tr.Params, cfg.Model, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Sample(tr.Params, cfg.Model, opt)
	if len(a) != 30 || string(a) != string(b) {
		t.Fatalf("samples %q %q", a, b)
	}
	opt.Seed = 4
	if c, _ := Sample(tr.Params, cfg.Model, opt); string(c) == string(a) {
		t.Error("another seed gave the same sample")
	}
	opt.Temperature = 0
	g1, _ := Sample(tr.Params, cfg.Model, opt)
	opt.Seed = 5
	g2, _ := Sample(tr.Params, cfg.Model, opt)
	if string(g1) != string(g2) {
		t.Error("greedy sampling depends on the seed")
	}
	if s, err := Sample(tr.Params, cfg.Model, SampleOptions{N: 3, Window: 8}); err != nil || len(s) != 3 {
		t.Errorf("empty prompt: %q %v", s, err)
	}
	_, err = Sample(tr.Params, cfg.Model, SampleOptions{N: 3})
	wantErr(t, err, "window")

	// Greedy sampling with the padded causal graph equals greedy sampling
	// that recomputes each step with an exact-length graph.
	opt.Prompt, opt.NoCache = []byte("The"), true
	g1, _ = Sample(tr.Params, cfg.Model, opt)
	ctx := []byte("The")
	for i := 0; i < 12; i++ {
		w := ctx[max(0, len(ctx)-8):]
		e, err := NewEvaluator(tr.Params, cfg.Model, 1, len(w))
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int, len(w))
		for j, c := range w {
			ids[j] = int(c)
		}
		var next int
		e.forward(ids, func(j int, logits []float64) error {
			if j == len(w)-1 {
				next = draw(logits, make([]float64, 256), SampleOptions{}, nil)
			}
			return nil
		})
		e.Close()
		ctx = append(ctx, byte(next))
	}
	if string(ctx[3:]) != string(g1[:12]) {
		t.Errorf("padded greedy sample %q, exact-length %q", g1[:12], ctx[3:])
	}
}

// TestSampleCachedEqualsRecompute: with an encoding that decodes
// incrementally, Sample's cached path gives the greedy and the seeded
// temperature output of the recompute path, byte for byte.
func TestSampleCachedEqualsRecompute(t *testing.T) {
	for _, pos := range []string{"rope", "alibi", "t5"} {
		cfg := tinyConfig()
		cfg.Model.Pos = pos
		tr := newTiny(t, cfg)
		trainN(t, tr, 2)
		if err := layers.CanDecode(cfg.Model); err != nil {
			t.Fatal(err)
		}
		for _, temp := range []float64{0, 1} {
			opt := SampleOptions{Prompt: []byte("The"), N: 20, Temperature: temp, Seed: 9, Window: 24}
			a, err := Sample(tr.Params, cfg.Model, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.NoCache = true
			b, err := Sample(tr.Params, cfg.Model, opt)
			if err != nil {
				t.Fatal(err)
			}
			if string(a) != string(b) {
				t.Fatalf("%s temperature %v: cached %q, recomputed %q", pos, temp, a, b)
			}
		}
	}
}

// TestGenerate: a batch of prompts of different lengths decoded together
// gives each prompt's own greedy recompute; top-k 1 and a tiny top-p are
// greedy at any temperature; Stop ends a sequence; OnByte streams exactly
// the output; bad options are refused naming them; past the window the
// cache slides and generation goes on.
func TestGenerate(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model.Pos = "rope"
	tr := newTiny(t, cfg)
	trainN(t, tr, 2)
	prompts := [][]byte{[]byte("The quick"), []byte("A"), nil}
	opt := SampleOptions{N: 12, Window: 24}
	g, err := Generate(tr.Params, cfg.Model, prompts, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Cached || g.Fallback != "" || g.Tokens != 36 || g.TokensPerSecond() <= 0 {
		t.Fatalf("cached %v fallback %q tokens %d rate %v", g.Cached, g.Fallback, g.Tokens, g.TokensPerSecond())
	}
	for i, pr := range prompts {
		o := opt
		o.Prompt, o.NoCache = pr, true
		want, err := Sample(tr.Params, cfg.Model, o)
		if err != nil {
			t.Fatal(err)
		}
		if string(g.Out[i]) != string(want) {
			t.Errorf("prompt %d: batched cached %q, alone recomputed %q", i, g.Out[i], want)
		}
	}
	for _, o := range []SampleOptions{{N: 12, Window: 24, Temperature: 5, TopK: 1}, {N: 12, Window: 24, Temperature: 5, TopP: 1e-9}} {
		h, err := Generate(tr.Params, cfg.Model, prompts, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range prompts {
			if string(h.Out[i]) != string(g.Out[i]) {
				t.Errorf("top-k %d top-p %v prompt %d: %q, greedy %q", o.TopK, o.TopP, i, h.Out[i], g.Out[i])
			}
		}
	}
	stop := g.Out[0][3:5]
	var streamed [3][]byte
	o := opt
	o.Stop = stop
	o.OnByte = func(i int, b byte) error { streamed[i] = append(streamed[i], b); return nil }
	h, err := Generate(tr.Params, cfg.Model, prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(h.Out[0], stop) || len(h.Out[0]) > 5 {
		t.Errorf("stop %q: output %q", stop, h.Out[0])
	}
	for i := range prompts {
		if string(streamed[i]) != string(h.Out[i]) {
			t.Errorf("prompt %d: streamed %q, returned %q", i, streamed[i], h.Out[i])
		}
	}
	long, err := Generate(tr.Params, cfg.Model, prompts[:1], SampleOptions{N: 100, Window: 16, Sinks: 2, Temperature: 1, Seed: 2})
	if err != nil || len(long.Out[0]) != 100 {
		t.Fatalf("sliding: %d bytes, %v", len(long.Out[0]), err)
	}
	for _, c := range []struct {
		o    SampleOptions
		want string
	}{{SampleOptions{N: 1, Window: 8, TopK: -1}, "top-k"}, {SampleOptions{N: 1, Window: 8, TopK: 257}, "top-k"},
		{SampleOptions{N: 1, Window: 8, TopP: 1.5}, "top-p"}, {SampleOptions{N: 1, Window: 8, TopP: math.NaN()}, "top-p"},
		{SampleOptions{N: 1, Window: 8, Sinks: 7}, "sinks"}} {
		_, err := Generate(tr.Params, cfg.Model, prompts, c.o)
		wantErr(t, err, c.want)
	}
	cfg.Model.Pos = "learned"
	tl := newTiny(t, cfg)
	// an absolute table decodes with the cache while the context fits the
	// window (greedy equal to the recompute), and recomputes past it
	short := [][]byte{[]byte("The ")}
	f, err := Generate(tl.Params, cfg.Model, short, SampleOptions{N: 5, Window: 8})
	if err != nil || !f.Cached || len(f.Out[0]) != 5 {
		t.Fatalf("learned within the window: cached %v fallback %q out %q err %v", f.Cached, f.Fallback, f.Out, err)
	}
	r, err := Generate(tl.Params, cfg.Model, short, SampleOptions{N: 5, Window: 8, NoCache: true})
	if err != nil || !bytes.Equal(r.Out[0], f.Out[0]) {
		t.Fatalf("learned: cached greedy %q, recomputed %q (%v)", f.Out[0], r.Out[0], err)
	}
	f, err = Generate(tl.Params, cfg.Model, short, SampleOptions{N: 6, Window: 8})
	if err != nil || f.Cached || !strings.Contains(f.Fallback, "learned cannot slide past the window") || len(f.Out[0]) != 6 {
		t.Fatalf("learned past the window: cached %v fallback %q out %q err %v", f.Cached, f.Fallback, f.Out, err)
	}
}
