package timestudy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/pkg/errors"
)

// Tick is the resolution of the onsets: every onset is a whole number of
// ticks (2^-10 time units), so that a repeat's onset t + P is computed
// exactly in float64, and in float32 too while onsets stay below 2^13
// units (at most 23 bits; with at least one new event a bar, the presets'
// 128 events span at most 128 bars, 2048 units), and
// "exactly P later" means exactly.
const Tick = 1.0 / 1024

// SeqOptions describe the event sequences of the time task.
type SeqOptions struct {
	// Period is the bar length P in time units: every repeat sits exactly
	// P after its source. It must be a positive multiple of Tick.
	Period float64
	// Vocab is the number of tokens ("pitches") V; chance is 1/V.
	Vocab int
	// Repeat is the probability p that an event of one bar is repeated in
	// the next, at its onset + P with the same token.
	Repeat float64
	// FirstMin and FirstMax bound the number of events of the first bar
	// (uniform); NewMin and NewMax the number of new events of every later
	// bar, added to the repeats (uniform). With p = 0.7 and 1..2 new
	// events a bar holds 1.5/(1-p) = 5 events on average.
	FirstMin, FirstMax int
	NewMin, NewMax     int
}

// DefaultSeqOptions are the presets' sequences: bars of P = 16 time units (a
// 4/4 bar counted in sixteenths), V = 16 tokens, p = 0.7, 4 to 6 events in
// the first bar and 1 to 2 new events in every later bar (5 per bar on
// average, 3.2 time units apart).
func DefaultSeqOptions() SeqOptions {
	return SeqOptions{Period: 16, Vocab: 16, Repeat: 0.7, FirstMin: 4, FirstMax: 6, NewMin: 1, NewMax: 2}
}

// Check returns an error naming the first invalid option.
func (o SeqOptions) Check() error {
	switch {
	case !(o.Period > 0) || math.IsInf(o.Period, 0):
		return errors.Errorf("time task: period %g must be positive and finite", o.Period)
	case o.Period/Tick != math.Trunc(o.Period/Tick) || o.Period/Tick > 1<<20:
		return errors.Errorf("time task: period %g must be a whole number of ticks of 1/1024 time units, at most 1024 units", o.Period)
	case o.Vocab < 2:
		return errors.Errorf("time task: vocabulary %d must hold at least 2 tokens", o.Vocab)
	case !(o.Repeat >= 0 && o.Repeat <= 1):
		return errors.Errorf("time task: repeat probability %g must be in [0, 1]", o.Repeat)
	case o.FirstMin < 1 || o.FirstMax < o.FirstMin:
		return errors.Errorf("time task: first-bar events %d..%d: want 1 <= min <= max", o.FirstMin, o.FirstMax)
	case o.NewMin < 0 || o.NewMax < o.NewMin:
		return errors.Errorf("time task: new events per bar %d..%d: want 0 <= min <= max", o.NewMin, o.NewMax)
	case o.NewMax == 0 && o.Repeat < 1:
		return errors.New("time task: bars without new events and p < 1 die out: NewMax must be at least 1")
	case o.FirstMax > 4096 || o.NewMax > 4096:
		return errors.Errorf("time task: at most 4096 events per bar (first %d, new %d)", o.FirstMax, o.NewMax)
	}
	return nil
}

// Sequence is one event sequence: events in onset order.
type Sequence struct {
	// Times are the onsets (non-decreasing; distinct within a bar),
	// Tokens the tokens in [0, Vocab).
	Times  []float64
	Tokens []int
	// Source is the index of the event that event i repeats (its onset is
	// exactly Times[i] - Period, its token the same), -1 for a new event.
	Source []int
	// Bar is the bar of each event (onsets in [Bar*P, (Bar+1)*P)).
	Bar []int
}

// Len is the number of events.
func (s Sequence) Len() int { return len(s.Times) }

// Repeats counts the events that repeat an earlier one.
func (s Sequence) Repeats() int {
	n := 0
	for _, m := range s.Source {
		if m >= 0 {
			n++
		}
	}
	return n
}

// event is one event while a sequence is generated.
type event struct {
	t     float64
	tok   int
	src   int // index in the previous bar's events, -1 if new
	srcID int // index in the sequence, set when the previous bar is placed
}

// Generate draws a sequence of n events from rng: bars are generated one
// after another (the first with FirstMin..FirstMax new events; each later
// one with every event of the previous bar repeated with probability
// Repeat, plus NewMin..NewMax new events at onsets drawn uniformly from the
// bar's ticks, distinct from the bar's other onsets and from every onset
// of the previous bar + P, so that only repeats sit exactly P after an
// event; tokens uniform) until
// n events are there; the sequence is their first n in onset order. It
// returns an error for invalid options or n < 1.
func Generate(o SeqOptions, rng *rand.Rand, n int) (Sequence, error) {
	if err := o.Check(); err != nil {
		return Sequence{}, err
	}
	if n < 1 {
		return Sequence{}, errors.Errorf("time task: %d events: want at least 1", n)
	}
	s := Sequence{Times: make([]float64, 0, n), Tokens: make([]int, 0, n), Source: make([]int, 0, n), Bar: make([]int, 0, n)}
	ticks := int64(o.Period / Tick)
	var prev []event
	prevStart := 0 // sequence index of prev[0]
	for bar := 0; s.Len() < n; bar++ {
		start := float64(bar) * o.Period
		var cur []event
		nNew := o.FirstMin + rng.IntN(o.FirstMax-o.FirstMin+1)
		if bar > 0 {
			for k, e := range prev {
				if rng.Float64() < o.Repeat {
					cur = append(cur, event{t: e.t + o.Period, tok: e.tok, src: k, srcID: prevStart + k})
				}
			}
			nNew = o.NewMin + rng.IntN(o.NewMax-o.NewMin+1)
		}
		if nNew > int(ticks)-len(prev) {
			return Sequence{}, errors.Errorf("time task: %d events do not fit the %d ticks of a bar", len(cur)+nNew, ticks)
		}
		for k := 0; k < nNew; k++ {
			var t float64
			for {
				t = start + float64(rng.Int64N(ticks))*Tick
				taken := func(e event) bool { return e.t == t }
				onePLater := func(e event) bool { return e.t+o.Period == t }
				if !slices.ContainsFunc(cur, taken) && !slices.ContainsFunc(prev, onePLater) {
					break
				}
			}
			cur = append(cur, event{t: t, tok: rng.IntN(o.Vocab), src: -1, srcID: -1})
		}
		sort.SliceStable(cur, func(a, b int) bool { return cur[a].t < cur[b].t })
		prevStart = s.Len()
		for _, e := range cur {
			s.Times = append(s.Times, e.t)
			s.Tokens = append(s.Tokens, e.tok)
			s.Source = append(s.Source, e.srcID)
			s.Bar = append(s.Bar, bar)
		}
		prev = cur
	}
	s.Times, s.Tokens, s.Source, s.Bar = s.Times[:n], s.Tokens[:n], s.Source[:n], s.Bar[:n]
	return s, nil
}

// seqStream separates the sequence streams of the time task from other
// streams of the same seed ("timeSeqs").
const seqStream = 0x74696d6553657173

// Stream returns the generator of sequence number i of a data set seeded
// with seed (validation, test: sequence i is the same whatever the other
// sequences are).
func Stream(seed, i uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seqStream+i)) }

// Set generates count sequences of n events, sequence i from Stream(seed,
// i).
func Set(o SeqOptions, seed uint64, count, n int) ([]Sequence, error) {
	if count < 1 {
		return nil, errors.Errorf("time task: %d sequences: want at least 1", count)
	}
	out := make([]Sequence, count)
	for i := range out {
		var err error
		if out[i], err = Generate(o, Stream(seed, uint64(i)), n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Example is a sequence laid out for the causal language model, T
// positions:
//
//	position i holds the token of event i-1 (BOS = Vocab at i = 0) and
//	predicts the token of event i;
//	as a query, position i sits at event i's onset: QTimes[i] = t_i;
//	as a key, it sits at the onset of the event whose token it holds:
//	KTimes[i] = t_{i-1}, and KTimes[0] = t_0 - 2P (BOS: two bars before
//	the first event, where no query's t_i - P can fall).
//
// The source m of a repeated event i (t_m = t_i - P) is then the key at
// position m+1 <= i, exactly P before query i: visible to the causal
// model, at a fixed relative time but at an index offset i-m-1 that
// depends on how many events lie between.
type Example struct {
	IDs, Targets   []int
	QTimes, KTimes []float64
	// Repeat marks the targets that repeat an earlier event (predictable
	// exactly from the key at relative time -P).
	Repeat []bool
}

// Layout returns the example of the first T events of s (BOS = bos). It
// returns an error if s has fewer than T events.
func Layout(s Sequence, T int, period float64, bos int) (Example, error) {
	if T < 1 || s.Len() < T {
		return Example{}, errors.Errorf("time task: %d positions from a sequence of %d events", T, s.Len())
	}
	e := Example{IDs: make([]int, T), Targets: make([]int, T), QTimes: make([]float64, T), KTimes: make([]float64, T), Repeat: make([]bool, T)}
	for i := 0; i < T; i++ {
		e.Targets[i], e.QTimes[i], e.Repeat[i] = s.Tokens[i], s.Times[i], s.Source[i] >= 0
		if i == 0 {
			e.IDs[i], e.KTimes[i] = bos, s.Times[0]-2*period
		} else {
			e.IDs[i], e.KTimes[i] = s.Tokens[i-1], s.Times[i-1]
		}
	}
	return e, nil
}

// IndexOffsets returns, for every repeated event i of s, the index offset
// i - Source[i] to its source (the number of events from the source to the
// repeat): what a model with index positions would have to find.
func IndexOffsets(s Sequence) []int {
	var out []int
	for i, m := range s.Source {
		if m >= 0 {
			out = append(out, i-m)
		}
	}
	return out
}

// String describes the options in one line.
func (o SeqOptions) String() string {
	return fmt.Sprintf("bars of P = %g, V = %d tokens, repeat p = %g, %d-%d events in the first bar, %d-%d new events per later bar",
		o.Period, o.Vocab, o.Repeat, o.FirstMin, o.FirstMax, o.NewMin, o.NewMax)
}
