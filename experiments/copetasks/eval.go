package copetasks

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
	// Model is the language model (causal, vocabulary Opts.Vocab()).
	Model layers.Config
	// Opts are the task's options; Context the context length of the
	// sequences scored (they are Opts.Len(Context) tokens long).
	Opts    Options
	Context int
	// Batch is the number of sequences per forward pass (the last batch is
	// padded with copies of its first sequence, not counted).
	Batch int
}

// Result is the score of a model on a set of sequences.
type Result struct {
	// Len is the sequences' length T, Sequences their number, Answers the
	// answer tokens scored (Sequences × Opts.AnswerLen()).
	Len, Sequences, Answers int
	// Accuracy is the fraction of answer tokens that are the model's most
	// likely token (teacher-forced: each answer token is predicted from
	// the context and the answer tokens before it); Exact the fraction of
	// sequences whose every answer token is; Bits the mean cross-entropy
	// per answer token in bits.
	Accuracy, Exact, Bits float64
	// Majority is the accuracy of always answering the set's most frequent
	// answer token (a baseline that reads no context).
	Majority float64
	// Right counts each sequence's answer tokens predicted right, in the
	// order of the sequences.
	Right []int `json:"right,omitempty"`
}

// Evaluate scores the weights p on seqs (contexts of s.Context tokens). It
// returns an error for no sequences, a sequence of another length, a model
// that cannot be built at that length, or non-finite scores.
func Evaluate(p *graph.Params, seqs []Example, s EvalSpec) (Result, error) {
	t := s.Opts.Len(s.Context)
	r := Result{Len: t}
	if len(seqs) == 0 {
		return r, errors.New("cope evaluation: no sequences")
	}
	if s.Batch <= 0 {
		return r, errors.Errorf("cope evaluation: batch %d must be positive", s.Batch)
	}
	for i, e := range seqs {
		if e.Len() != t {
			return r, errors.Errorf("cope evaluation: sequence %d has %d tokens, want %d", i, e.Len(), t)
		}
	}
	b := min(s.Batch, len(seqs))
	g := G.NewGraph()
	defer p.Forget(g)
	m, err := newModel(g, p, s.Model, b, t)
	if err != nil {
		return r, err
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	var nats float64
	right, exact := 0, 0
	freq := map[int]int{}
	batch := make([]Example, b)
	for start := 0; start < len(seqs); start += b {
		n := min(b, len(seqs)-start)
		for i := range batch {
			batch[i] = seqs[start]
			if i < n {
				batch[i] = seqs[start+i]
			}
		}
		if err := m.fill(batch); err != nil {
			return r, err
		}
		if err := vm.RunAll(); err != nil {
			return r, errors.Wrap(err, "cope evaluation")
		}
		out := graph.ToFloat64s(m.logits.Value()) // [b*T, V]
		v := m.logits.Shape()[1]
		for i := 0; i < n; i++ {
			e := batch[i]
			ok := 0
			for k := e.Answer; k < t; k++ {
				row := out[(i*t+k)*v : (i*t+k+1)*v]
				tgt := e.Tokens[k]
				nats -= trainer.LogSoftmaxAt(row, tgt)
				freq[tgt]++
				if argmax(row) == tgt {
					ok++
				}
			}
			r.Right = append(r.Right, ok)
			right += ok
			r.Answers += t - e.Answer
			if ok == t-e.Answer {
				exact++
			}
		}
		vm.Reset()
		r.Sequences += n
	}
	r.Accuracy = float64(right) / float64(r.Answers)
	r.Exact = float64(exact) / float64(r.Sequences)
	r.Bits = nats / float64(r.Answers) / math.Ln2
	most := 0
	for _, c := range freq {
		most = max(most, c)
	}
	r.Majority = float64(most) / float64(r.Answers)
	if math.IsNaN(r.Bits) || math.IsInf(r.Bits, 0) {
		return r, errors.Errorf("cope evaluation: %v bits at %d tokens: the model's outputs are not finite", r.Bits, t)
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
