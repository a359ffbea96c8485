package extrapstudy

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// trained returns the weights of the tiny model of encoding enc after its 6
// updates.
func trained(t *testing.T, enc string) (*graph.Params, trainer.Config) {
	t.Helper()
	p := tinyPlan(enc)
	cfg := p.Config(enc, 1)
	tr, err := trainer.New(cfg, tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for tr.Step() < cfg.Steps {
		if _, err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	return tr.Params, cfg
}

// scoreWindows scores text with both protocols of the study (every target;
// the last lastN of each window) through the engine, as run.go does.
func scoreWindows(p *graph.Params, model layers.Config, text []byte, le, lastN, batch int) (all, last trainer.Score, err error) {
	s, err := trainer.ScoreText(p, model, text, []int{0, lastN}, trainer.EvalOptions{Len: le, Batch: batch})
	if err != nil {
		return all, last, err
	}
	return s[0], s[1], nil
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestScoreWindowsCounts checks the windows and scored targets of both
// protocols over the whole text (a right-aligned tail window scores the
// targets after the last whole window), and that batching and padding do
// not change the scores.
func TestScoreWindowsCounts(t *testing.T) {
	params, cfg := trained(t, "rope")
	for _, tc := range []struct {
		n, le, lastN, batch int
		windows, last       int // windows run, targets of the last-N protocol
	}{
		{n: 33, le: 8, lastN: 8, batch: 3, windows: 4, last: 32},        // 4 windows exactly, padded last batch
		{n: 40, le: 8, lastN: 8, batch: 4, windows: 5, last: 39},        // 4 windows + a tail window for 7 targets
		{n: 41, le: 8, lastN: 8, batch: 2, windows: 5, last: 40},        // 5 windows
		{n: 65, le: 16, lastN: 8, batch: 3, windows: 4, last: 32},       // last-L at 2L
		{n: 100, le: 32, lastN: 8, batch: 1, windows: 4, last: 3*8 + 3}, // last-L at 4L, tail of 3 targets
		{n: 120, le: 32, lastN: 8, batch: 2, windows: 4, last: 3*8 + 8}, // tail of 23 targets, 8 of them last-L
		{n: 17, le: 16, lastN: 1, batch: 5, windows: 1, last: 1},        // batch capped at 1 window
	} {
		text := tinyText()[:tc.n]
		all, last, err := scoreWindows(params, cfg.Model, text, tc.le, tc.lastN, tc.batch)
		if err != nil {
			t.Fatal(err)
		}
		if all.Windows != tc.windows || last.Windows != tc.windows {
			t.Errorf("n=%d le=%d: windows %d, %d, want %d", tc.n, tc.le, all.Windows, last.Windows, tc.windows)
		}
		if all.Tokens != tc.n-1 || last.Tokens != tc.last {
			t.Errorf("n=%d le=%d: tokens %d (all), %d (last), want %d and %d", tc.n, tc.le, all.Tokens, last.Tokens,
				tc.n-1, tc.last)
		}
		// Batch 1 (no padding) gives the same sums.
		a1, l1, err := scoreWindows(params, cfg.Model, text, tc.le, tc.lastN, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !near(a1.Nats, all.Nats) || !near(l1.Nats, last.Nats) {
			t.Errorf("n=%d le=%d: batch %d gives %v/%v, batch 1 %v/%v", tc.n, tc.le, tc.batch, all.Nats, last.Nats, a1.Nats, l1.Nats)
		}
		if (tc.n-1)%tc.le != 0 {
			continue
		}
		// On whole windows, trainer.Evaluate (one protocol per pass) gives
		// the same scores.
		for _, c := range []struct {
			lastN int
			got   trainer.Score
		}{{0, all}, {tc.lastN, last}} {
			want, err := trainer.Evaluate(params, cfg.Model, text, trainer.EvalOptions{Len: tc.le, LastN: c.lastN, Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			if want.Tokens != c.got.Tokens || !near(want.BitsPerByte, c.got.BitsPerByte()) {
				t.Errorf("n=%d le=%d last %d: %d tokens %.12f bits, trainer.Evaluate %d tokens %.12f", tc.n, tc.le, c.lastN,
					c.got.Tokens, c.got.BitsPerByte(), want.Tokens, want.BitsPerByte)
			}
		}
	}
}

// TestScoreWindowsBoundaries checks which bytes are inputs and targets: every
// byte after the first is a target (the bytes after the last whole window
// are scored by the tail window), the first byte is context only.
func TestScoreWindowsBoundaries(t *testing.T) {
	params, cfg := trained(t, "alibi")
	const le, nw = 16, 3
	base := append([]byte(nil), tinyText()[:nw*le+1+5]...) // 5 extra bytes beyond the last whole window
	score := func(text []byte) (trainer.Score, trainer.Score) {
		a, l, err := scoreWindows(params, cfg.Model, text, le, 8, 2)
		if err != nil {
			t.Fatal(err)
		}
		return a, l
	}
	a0, l0 := score(base)
	if a0.Tokens != len(base)-1 || a0.Windows != nw+1 {
		t.Errorf("%d bytes: %d targets in %d windows, want %d in %d", len(base), a0.Tokens, a0.Windows, len(base)-1, nw+1)
	}
	mod := func(i int) []byte {
		b := append([]byte(nil), base...)
		b[i] ^= 0x20
		return b
	}
	if a, l := score(mod(len(base) - 1)); a.Nats == a0.Nats || l.Nats == l0.Nats {
		t.Errorf("the text's last byte (a target of the tail window) did not change the scores")
	}
	if a, l := score(mod(nw * le)); a.Nats == a0.Nats || l.Nats == l0.Nats {
		t.Errorf("the last whole window's last target did not change the scores")
	}
	if a, _ := score(mod(0)); a.Tokens != a0.Tokens || a.Nats == a0.Nats {
		t.Errorf("the first byte (context only): tokens %d vs %d, nats unchanged %v", a.Tokens, a0.Tokens, a.Nats == a0.Nats)
	}
	// A text of exactly nw*le bytes holds nw-1 whole windows and a tail.
	if a, _ := score(base[:nw*le]); a.Windows != nw || a.Tokens != nw*le-1 {
		t.Errorf("%d bytes: %d windows, %d targets, want %d and %d", nw*le, a.Windows, a.Tokens, nw, nw*le-1)
	}
}

// TestScoreWindowsLastL checks that protocol (b) scores the last L targets:
// for a causal model the first L targets of a 2L window see exactly what an
// L window at the same offset sees, so all(2L) - last(2L) equals the score of
// those L windows.
func TestScoreWindowsLastL(t *testing.T) {
	for _, enc := range []string{"rope", "alibi", "t5"} {
		params, cfg := trained(t, enc)
		const L = 8
		text := tinyText()[:4*2*L+1]
		all, last, err := scoreWindows(params, cfg.Model, text, 2*L, L, 3)
		if err != nil {
			t.Fatal(err)
		}
		var first float64
		for w := 0; w < 4; w++ {
			a, _, err := scoreWindows(params, cfg.Model, text[w*2*L:w*2*L+L+1], L, L, 1)
			if err != nil {
				t.Fatal(err)
			}
			first += a.Nats
		}
		if !near(all.Nats-last.Nats, first) {
			t.Errorf("%s: all - last = %.12f, first halves scored alone %.12f", enc, all.Nats-last.Nats, first)
		}
		// At Le = L both protocols coincide.
		a, l, err := scoreWindows(params, cfg.Model, text, L, L, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, l) {
			t.Errorf("%s: at Le = L the protocols differ: %+v vs %+v", enc, a, l)
		}
	}
}

// TestScoreWindowsLearnedBeyondTable checks the error a learned table gives
// beyond L.
func TestScoreWindowsLearnedBeyondTable(t *testing.T) {
	params, cfg := trained(t, "learned")
	text := tinyText()[:100]
	if _, _, err := scoreWindows(params, cfg.Model, text, 8, 8, 2); err != nil {
		t.Fatalf("at L: %v", err)
	}
	_, _, err := scoreWindows(params, cfg.Model, text, 16, 8, 2)
	if !errors.Is(err, posenc.ErrBeyondTable) {
		t.Fatalf("at 2L: error %v, want posenc.ErrBeyondTable", err)
	}
}

func TestScoreWindowsErrors(t *testing.T) {
	params, cfg := trained(t, "none")
	text := tinyText()[:20]
	_, _, err := scoreWindows(params, cfg.Model, text, 32, 8, 1)
	wantErr(t, err, "20 bytes", "too short", "32+1")
	_, _, err = scoreWindows(params, cfg.Model, text, 8, 9, 1)
	wantErr(t, err, "last-n 9")
}
