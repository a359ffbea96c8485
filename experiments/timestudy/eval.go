package timestudy

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// EvalSpec is what Evaluate needs besides the weights.
type EvalSpec struct {
	// Model is the language model (causal, vocabulary V+1).
	Model layers.Config
	// Time gives the model the onsets as real positions (else indices).
	Time bool
	// Length is the number of events scored per sequence (its first
	// Length events).
	Length int
	// Batch is the number of sequences per forward pass (the last batch is
	// padded with copies of its first sequence, not counted).
	Batch int
	// Period is the bar length P (the BOS key sits at t_0 - 2P).
	Period float64
}

// Result is the score of a model on a set of sequences at one length.
type Result struct {
	// Length is the number of events per sequence, Sequences the number of
	// sequences, Events = Sequences*Length the targets scored, Repeats of
	// them repeated events (predictable from the key P earlier) and New the
	// others.
	Length, Sequences, Events, Repeats, New int
	// RepeatAccuracy is the fraction of repeated events whose token is the
	// model's most likely one (chance 1/V), RepeatBits their mean
	// cross-entropy in bits; Bits is over every event, NewBits over the new
	// ones (log2 V at best: they are uniform).
	RepeatAccuracy, RepeatBits, Bits, NewBits float64
	// RepeatRight[q] counts the repeated events of sequence q predicted
	// right, in the order of the sequences.
	RepeatRight []int `json:"repeat_right,omitempty"`
}

// Evaluate scores the weights p on the first s.Length events of every
// sequence. It returns an error for no sequences, a sequence shorter than
// s.Length, a model that cannot be built at that length, or non-finite
// scores.
func Evaluate(p *graph.Params, seqs []Sequence, s EvalSpec) (Result, error) {
	r := Result{Length: s.Length}
	if len(seqs) == 0 {
		return r, errors.New("time evaluation: no sequences")
	}
	if s.Batch <= 0 {
		return r, errors.Errorf("time evaluation: batch %d must be positive", s.Batch)
	}
	for i, q := range seqs {
		if q.Len() < s.Length || s.Length < 1 {
			return r, errors.Errorf("time evaluation: sequence %d has %d events, want %d (at least 1)", i, q.Len(), s.Length)
		}
	}
	b := min(s.Batch, len(seqs))
	g := G.NewGraph()
	defer p.Forget(g)
	m, err := newModel(g, p, s.Model, b, s.Length, s.Time, s.Period)
	if err != nil {
		return r, err
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	var natsRep, natsAll, natsNew float64
	correct := 0
	batch := make([]Sequence, b)
	for start := 0; start < len(seqs); start += b {
		n := min(b, len(seqs)-start)
		for i := range batch {
			batch[i] = seqs[start]
			if i < n {
				batch[i] = seqs[start+i]
			}
		}
		exs, err := m.fill(batch)
		if err != nil {
			return r, err
		}
		if err := vm.RunAll(); err != nil {
			return r, errors.Wrap(err, "time evaluation")
		}
		out := graph.ToFloat64s(m.logits.Value()) // [b*Length, V+1]
		v := m.logits.Shape()[1]
		for i := 0; i < n; i++ {
			right := 0
			for k := 0; k < s.Length; k++ {
				row := out[(i*s.Length+k)*v : (i*s.Length+k+1)*v]
				tgt := exs[i].Targets[k]
				lp := trainer.LogSoftmaxAt(row, tgt)
				natsAll -= lp
				if exs[i].Repeat[k] {
					natsRep -= lp
					r.Repeats++
					if argmax(row) == tgt {
						correct++
						right++
					}
				} else {
					natsNew -= lp
					r.New++
				}
			}
			r.RepeatRight = append(r.RepeatRight, right)
		}
		vm.Reset()
		r.Sequences += n
	}
	r.Events = r.Sequences * s.Length
	r.Bits = natsAll / float64(r.Events) / math.Ln2
	if r.Repeats > 0 {
		r.RepeatBits = natsRep / float64(r.Repeats) / math.Ln2
		r.RepeatAccuracy = float64(correct) / float64(r.Repeats)
	}
	if r.New > 0 {
		r.NewBits = natsNew / float64(r.New) / math.Ln2
	}
	for _, x := range []float64{r.Bits, r.RepeatBits, r.NewBits} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return r, errors.Errorf("time evaluation: %v bits at %d events: the model's outputs are not finite", x, s.Length)
		}
	}
	return r, nil
}

// argmax is the index of the largest value (the first of ties).
func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
