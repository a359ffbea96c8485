package timestudy

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkSequence checks the invariants of a generated sequence: onsets in
// order and in their bars, on the tick grid, distinct within a bar, tokens
// in range, and every repeat exactly P after its source in the previous
// bar, with its token, and no new event exactly P after another.
func checkSequence(t *testing.T, o SeqOptions, s Sequence, n int) {
	t.Helper()
	if s.Len() != n || len(s.Tokens) != n || len(s.Source) != n || len(s.Bar) != n {
		t.Fatalf("lengths %d %d %d %d, want %d", s.Len(), len(s.Tokens), len(s.Source), len(s.Bar), n)
	}
	for i := 0; i < n; i++ {
		ti := s.Times[i]
		if i > 0 && (ti < s.Times[i-1] || (ti == s.Times[i-1] && s.Bar[i] == s.Bar[i-1])) {
			t.Fatalf("event %d at %g after event %d at %g (bars %d, %d)", i, ti, i-1, s.Times[i-1], s.Bar[i], s.Bar[i-1])
		}
		if lo := float64(s.Bar[i]) * o.Period; ti < lo || ti >= lo+o.Period {
			t.Fatalf("event %d at %g outside its bar %d", i, ti, s.Bar[i])
		}
		if ti/Tick != math.Trunc(ti/Tick) {
			t.Fatalf("event %d at %g is not on the tick grid", i, ti)
		}
		if s.Tokens[i] < 0 || s.Tokens[i] >= o.Vocab {
			t.Fatalf("event %d: token %d outside [0, %d)", i, s.Tokens[i], o.Vocab)
		}
		if m := s.Source[i]; m >= 0 {
			if m >= i || s.Bar[m] != s.Bar[i]-1 || s.Times[i]-s.Times[m] != o.Period || s.Tokens[m] != s.Tokens[i] {
				t.Fatalf("repeat %d (bar %d, t %g, token %d) of %d (bar %d, t %g, token %d): not exactly P = %g later with its token",
					i, s.Bar[i], s.Times[i], s.Tokens[i], m, s.Bar[m], s.Times[m], s.Tokens[m], o.Period)
			}
			if s.Times[i] < 1<<13 && float32(s.Times[i])-float32(s.Times[m]) != float32(o.Period) { // Tick's promise
				t.Fatalf("repeat %d is not exactly P later in float32", i)
			}
		} else {
			for m := 0; m < i; m++ { // only repeats sit exactly P after an event
				if s.Times[i]-s.Times[m] == o.Period {
					t.Fatalf("new event %d at %g is exactly P after event %d", i, s.Times[i], m)
				}
			}
		}
	}
}

// TestGenerate: every repeat sits exactly P after its source, sequences
// are a function of the seed, and the index offsets to the sources vary.
func TestGenerate(t *testing.T) {
	for _, o := range []SeqOptions{
		DefaultSeqOptions(),
		{Period: 4, Vocab: 3, Repeat: 1, FirstMin: 1, FirstMax: 3, NewMin: 0, NewMax: 2},
		{Period: 0.5, Vocab: 100, Repeat: 0, FirstMin: 2, FirstMax: 2, NewMin: 1, NewMax: 1},
		{Period: 1000, Vocab: 2, Repeat: 0.5, FirstMin: 8, FirstMax: 20, NewMin: 3, NewMax: 9},
		// Bars of 8 ticks: a new onset would often fall exactly P after
		// an event that was not repeated.
		{Period: 8 * Tick, Vocab: 4, Repeat: 0.3, FirstMin: 2, FirstMax: 3, NewMin: 1, NewMax: 2},
	} {
		offsets := map[int]bool{}
		repeats := 0
		for seed := uint64(1); seed <= 20; seed++ {
			s, err := Generate(o, Stream(seed, 0), 80)
			if err != nil {
				t.Fatal(err)
			}
			checkSequence(t, o, s, 80)
			for _, d := range IndexOffsets(s) {
				offsets[d] = true
			}
			repeats += s.Repeats()
		}
		switch {
		case o.Repeat == 0 && repeats != 0:
			t.Errorf("%v: %d repeats with p = 0", o, repeats)
		case o.Repeat > 0 && len(offsets) < 3:
			t.Errorf("%v: index offsets %v do not vary", o, offsets)
		}
	}
	o := DefaultSeqOptions()
	a, _ := Generate(o, Stream(7, 3), 100)
	b, _ := Generate(o, Stream(7, 3), 100)
	c, _ := Generate(o, Stream(7, 4), 100)
	short, _ := Generate(o, Stream(7, 3), 40)
	if !slices.Equal(a.Times, b.Times) || !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.Source, b.Source) {
		t.Error("the same seed gave two sequences")
	}
	if slices.Equal(a.Times, c.Times) {
		t.Error("another stream gave the same sequence")
	}
	if !slices.Equal(a.Times[:40], short.Times) || !slices.Equal(a.Tokens[:40], short.Tokens) {
		t.Error("a shorter sequence is not the beginning of the longer one")
	}
	// The default sequences: about 5 events per bar, about 70% repeats
	// after the first bar.
	set, err := Set(o, 1, 200, 64)
	if err != nil {
		t.Fatal(err)
	}
	events, reps, bars := 0, 0, 0
	for _, s := range set {
		events += s.Len()
		reps += s.Repeats()
		bars += s.Bar[s.Len()-1] + 1
	}
	if perBar, frac := float64(events)/float64(bars), float64(reps)/float64(events); perBar < 4 || perBar > 6 || frac < 0.5 || frac > 0.75 {
		t.Errorf("%.2f events per bar, %.2f repeats", perBar, frac)
	}
}

// TestLayout: position i holds event i-1's token and predicts event i's;
// queries sit at t_i, keys at t_{i-1}, BOS two bars early; the source of a
// repeat is a visible key exactly P before the query.
func TestLayout(t *testing.T) {
	o := DefaultSeqOptions()
	s, _ := Generate(o, Stream(3, 0), 70)
	e, err := Layout(s, 64, o.Period, o.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	if e.IDs[0] != o.Vocab || e.KTimes[0] != s.Times[0]-2*o.Period || e.QTimes[0] != s.Times[0] {
		t.Fatalf("BOS: id %d at key time %g, query %g", e.IDs[0], e.KTimes[0], e.QTimes[0])
	}
	n := 0
	for i := 1; i < 64; i++ {
		if e.IDs[i] != s.Tokens[i-1] || e.Targets[i] != s.Tokens[i] || e.KTimes[i] != s.Times[i-1] || e.QTimes[i] != s.Times[i] {
			t.Fatalf("position %d: %d -> %d at q %g k %g", i, e.IDs[i], e.Targets[i], e.QTimes[i], e.KTimes[i])
		}
		if m := s.Source[i]; m >= 0 {
			n++
			if !e.Repeat[i] || m+1 > i || e.KTimes[m+1] != e.QTimes[i]-o.Period || e.IDs[m+1] != e.Targets[i] {
				t.Fatalf("repeat %d of %d: key %d at %g holds %d", i, m, m+1, e.KTimes[m+1], e.IDs[m+1])
			}
		}
		for j := 0; j <= i; j++ { // only the source sits at -P
			if e.KTimes[j] == e.QTimes[i]-o.Period && s.Source[i] != j-1 {
				t.Fatalf("key %d sits at -P from query %d, which repeats %d", j, i, s.Source[i])
			}
		}
	}
	if n == 0 {
		t.Fatal("no repeat in 64 events")
	}
	if _, err := Layout(s, 71, o.Period, o.Vocab); err == nil || !strings.Contains(err.Error(), "71 positions from a sequence of 70 events") {
		t.Errorf("too long: %v", err)
	}
}

// TestSeqOptionsErrors: bad options are errors naming the problem.
func TestSeqOptionsErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(*SeqOptions)
		want string
	}{
		{func(o *SeqOptions) { o.Period = 0 }, "period 0 must be positive"},
		{func(o *SeqOptions) { o.Period = -4 }, "period -4 must be positive"},
		{func(o *SeqOptions) { o.Period = math.Inf(1) }, "must be positive and finite"},
		{func(o *SeqOptions) { o.Period = math.NaN() }, "must be positive and finite"},
		{func(o *SeqOptions) { o.Period = 0.1 }, "whole number of ticks"},
		{func(o *SeqOptions) { o.Repeat = 1.5 }, "repeat probability 1.5 must be in [0, 1]"},
		{func(o *SeqOptions) { o.Repeat = -0.1 }, "repeat probability -0.1"},
		{func(o *SeqOptions) { o.Repeat = math.NaN() }, "repeat probability NaN"},
		{func(o *SeqOptions) { o.Vocab = 1 }, "vocabulary 1"},
		{func(o *SeqOptions) { o.FirstMin = 0 }, "first-bar events 0..6"},
		{func(o *SeqOptions) { o.FirstMax = 3 }, "first-bar events 4..3"},
		{func(o *SeqOptions) { o.NewMin = 3 }, "new events per bar 3..2"},
		{func(o *SeqOptions) { o.NewMin, o.NewMax = 0, 0 }, "die out"},
		{func(o *SeqOptions) { o.FirstMax = 5000 }, "at most 4096"},
		{func(o *SeqOptions) { o.Period, o.FirstMin, o.FirstMax = Tick, 2, 2 }, "do not fit"},
	} {
		o := DefaultSeqOptions()
		c.edit(&o)
		_, err := Generate(o, Stream(1, 0), 10)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", o, err, c.want)
		}
	}
	if _, err := Generate(DefaultSeqOptions(), Stream(1, 0), 0); err == nil || !strings.Contains(err.Error(), "0 events") {
		t.Errorf("0 events: %v", err)
	}
	if _, err := Set(DefaultSeqOptions(), 1, 0, 10); err == nil || !strings.Contains(err.Error(), "0 sequences") {
		t.Errorf("0 sequences: %v", err)
	}
}

// FuzzGenerate: any options give an error or a sequence with the
// invariants, never a panic.
func FuzzGenerate(f *testing.F) {
	f.Add(16.0, 0.7, 16, 4, 6, 1, 2, uint64(1), 50)
	f.Add(0.25, 1.0, 2, 1, 1, 0, 1, uint64(9), 30)
	f.Add(-1.0, 2.0, 0, 0, 0, 0, 0, uint64(0), 0)
	f.Fuzz(func(t *testing.T, period, p float64, vocab, fmin, fmax, nmin, nmax int, seed uint64, n int) {
		o := SeqOptions{Period: period, Vocab: vocab, Repeat: p, FirstMin: fmin, FirstMax: fmax, NewMin: nmin, NewMax: nmax}
		if n > 300 || o.FirstMax > 50 || o.NewMax > 50 {
			return // keep each case fast
		}
		s, err := Generate(o, rand.New(rand.NewPCG(seed, 1)), n)
		if err != nil {
			return
		}
		checkSequence(t, o, s, n)
	})
}
