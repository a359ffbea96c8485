package study

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
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

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestScoreWindowsCounts checks the windows and scored targets of both
// protocols, and that batching and padding do not change the scores.
func TestScoreWindowsCounts(t *testing.T) {
	params, cfg := trained(t, "rope")
	for _, tc := range []struct {
		n, le, lastN, batch int
		windows             int
	}{
		{n: 33, le: 8, lastN: 8, batch: 3, windows: 4},   // 4 windows exactly, padded last batch
		{n: 40, le: 8, lastN: 8, batch: 4, windows: 4},   // 7 trailing bytes dropped
		{n: 41, le: 8, lastN: 8, batch: 2, windows: 5},   // 5 windows
		{n: 65, le: 16, lastN: 8, batch: 3, windows: 4},  // last-L at 2L
		{n: 100, le: 32, lastN: 8, batch: 1, windows: 3}, // last-L at 4L
		{n: 17, le: 16, lastN: 1, batch: 5, windows: 1},  // batch capped at 1 window
	} {
		text := tinyText()[:tc.n]
		all, last, err := ScoreWindows(params, cfg.Model, text, tc.le, tc.lastN, tc.batch)
		if err != nil {
			t.Fatal(err)
		}
		if all.Windows != tc.windows || last.Windows != tc.windows {
			t.Errorf("n=%d le=%d: windows %d, %d, want %d", tc.n, tc.le, all.Windows, last.Windows, tc.windows)
		}
		if all.Tokens != tc.windows*tc.le || last.Tokens != tc.windows*tc.lastN {
			t.Errorf("n=%d le=%d: tokens %d (all), %d (last), want %d and %d", tc.n, tc.le, all.Tokens, last.Tokens,
				tc.windows*tc.le, tc.windows*tc.lastN)
		}
		// Batch 1 (no padding) gives the same sums.
		a1, l1, err := ScoreWindows(params, cfg.Model, text, tc.le, tc.lastN, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !near(a1.Nats, all.Nats) || !near(l1.Nats, last.Nats) {
			t.Errorf("n=%d le=%d: batch %d gives %v/%v, batch 1 %v/%v", tc.n, tc.le, tc.batch, all.Nats, last.Nats, a1.Nats, l1.Nats)
		}
		// trainer.Evaluate is an independent implementation of both.
		for _, c := range []struct {
			lastN int
			got   Score
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

// TestScoreWindowsBoundaries checks which bytes are inputs and targets: the
// byte after the last whole window is ignored, the last target counts, the
// first byte is context only.
func TestScoreWindowsBoundaries(t *testing.T) {
	params, cfg := trained(t, "alibi")
	const le, nw = 16, 3
	base := append([]byte(nil), tinyText()[:nw*le+1+5]...) // 5 extra bytes beyond the last window
	score := func(text []byte) (Score, Score) {
		a, l, err := ScoreWindows(params, cfg.Model, text, le, 8, 2)
		if err != nil {
			t.Fatal(err)
		}
		return a, l
	}
	a0, l0 := score(base)
	mod := func(i int) []byte {
		b := append([]byte(nil), base...)
		b[i] ^= 0x20
		return b
	}
	if a, l := score(mod(nw*le + 1)); a != a0 || l != l0 {
		t.Errorf("the byte after the last window's target changed the scores")
	}
	if a, l := score(mod(nw * le)); a.Nats == a0.Nats || l.Nats == l0.Nats {
		t.Errorf("the last window's last target did not change the scores")
	}
	if a, _ := score(mod(0)); a.Tokens != a0.Tokens || a.Nats == a0.Nats {
		t.Errorf("the first byte (context only): tokens %d vs %d, nats unchanged %v", a.Tokens, a0.Tokens, a.Nats == a0.Nats)
	}
	// Only windows: text of exactly nw*le bytes holds nw-1 windows.
	if a, _ := score(base[:nw*le]); a.Windows != nw-1 {
		t.Errorf("%d bytes: %d windows, want %d", nw*le, a.Windows, nw-1)
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
		all, last, err := ScoreWindows(params, cfg.Model, text, 2*L, L, 3)
		if err != nil {
			t.Fatal(err)
		}
		var first float64
		for w := 0; w < 4; w++ {
			a, _, err := ScoreWindows(params, cfg.Model, text[w*2*L:w*2*L+L+1], L, L, 1)
			if err != nil {
				t.Fatal(err)
			}
			first += a.Nats
		}
		if !near(all.Nats-last.Nats, first) {
			t.Errorf("%s: all - last = %.12f, first halves scored alone %.12f", enc, all.Nats-last.Nats, first)
		}
		// At Le = L both protocols coincide.
		a, l, err := ScoreWindows(params, cfg.Model, text, L, L, 3)
		if err != nil {
			t.Fatal(err)
		}
		if a != l {
			t.Errorf("%s: at Le = L the protocols differ: %+v vs %+v", enc, a, l)
		}
	}
}

// TestScoreWindowsLearnedBeyondTable checks the error a learned table gives
// beyond L.
func TestScoreWindowsLearnedBeyondTable(t *testing.T) {
	params, cfg := trained(t, "learned")
	text := tinyText()[:100]
	if _, _, err := ScoreWindows(params, cfg.Model, text, 8, 8, 2); err != nil {
		t.Fatalf("at L: %v", err)
	}
	_, _, err := ScoreWindows(params, cfg.Model, text, 16, 8, 2)
	if !errors.Is(err, posenc.ErrBeyondTable) {
		t.Fatalf("at 2L: error %v, want posenc.ErrBeyondTable", err)
	}
}

func TestScoreWindowsErrors(t *testing.T) {
	params, cfg := trained(t, "none")
	text := tinyText()[:20]
	_, _, err := ScoreWindows(params, cfg.Model, text, 32, 8, 1)
	wantErr(t, err, "20 bytes", "too short", "32+1")
	_, _, err = ScoreWindows(params, cfg.Model, text, 8, 9, 1)
	wantErr(t, err, "last-n 9")
	_, _, err = ScoreWindows(params, cfg.Model, text, 8, 8, 0)
	wantErr(t, err, "batch 0")
}

func TestMemorySampler(t *testing.T) {
	s := startMemSampler(time.Millisecond)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	time.Sleep(5 * time.Millisecond)
	m := s.Stop()
	if m.PeakHeap < 64<<20 {
		t.Errorf("peak heap %d < 64 MiB after allocating 64 MiB", m.PeakHeap)
	}
	if _, ok := ProcStatus("VmRSS"); ok && m.PeakRSS < 64<<20 {
		t.Errorf("peak RSS %d (%s) < 64 MiB after touching 64 MiB", m.PeakRSS, m.RSSSource)
	}
	_ = buf[len(buf)-1]
}
