package copetasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// The tasks.
const (
	// TaskCopy is selective copy: copy the data tokens of the context, in
	// order, dropping the blanks.
	TaskCopy = "copy"
	// TaskCount is counting: the value of a variable after a program of
	// assignments, increments and no-ops.
	TaskCount = "count"
)

// TaskNames lists the tasks.
func TaskNames() []string { return []string{TaskCopy, TaskCount} }

// CopyOptions describe the selective copy task.
type CopyOptions struct {
	// Tokens is the number V of distinct data tokens (the paper: 16).
	Tokens int `json:"tokens"`
	// Data is the number n of data tokens of every context, all of which
	// are copied: the answer is n tokens long.
	Data int `json:"data"`
}

// CountOptions describe the counting task.
type CountOptions struct {
	// Vars is the number of variables (a, b, c, ...; the paper: 1, 3 or 5,
	// the authors' generator's default 3).
	Vars int `json:"vars"`
	// Ops is the number of assignments and increments of every context
	// (the passes fill the rest of it).
	Ops int `json:"ops"`
	// MaxValue is the largest value a variable reaches (the authors' 10):
	// an increment that would pass it is drawn again.
	MaxValue int `json:"max_value"`
	// SetWeight and IncWeight are the relative frequencies of assignments
	// and increments among the Ops statements (the authors' 1 and 7).
	SetWeight int `json:"set_weight"`
	IncWeight int `json:"inc_weight"`
}

// Options are one task's sequences: Task names it, and only its options
// are set (the other's are zero, so that equal tasks compare equal).
type Options struct {
	Task  string       `json:"task"`
	Copy  CopyOptions  `json:"copy,omitzero"`
	Count CountOptions `json:"count,omitzero"`
}

// DefaultCopy is the presets' selective copy: V = 16 data tokens, n = 16
// of them per context.
func DefaultCopy() Options {
	return Options{Task: TaskCopy, Copy: CopyOptions{Tokens: 16, Data: 16}}
}

// DefaultCount is the presets' counting: 3 variables, 8 assignments and
// increments per context, values up to 10, the authors' weights 1 and 7.
func DefaultCount() Options {
	return Options{Task: TaskCount, Count: CountOptions{Vars: 3, Ops: 8, MaxValue: 10, SetWeight: 1, IncWeight: 7}}
}

// Default returns the default options of task.
func Default(task string) (Options, error) {
	switch task {
	case TaskCopy:
		return DefaultCopy(), nil
	case TaskCount:
		return DefaultCount(), nil
	}
	return Options{}, errors.Errorf("cope tasks: unknown task %q (valid: %s)", task, strings.Join(TaskNames(), ", "))
}

// Check returns an error naming the first invalid option.
func (o Options) Check() error {
	switch o.Task {
	case TaskCopy:
		c := o.Copy
		switch {
		case o.Count != CountOptions{}:
			return errors.New("cope tasks: copy options with counting options set")
		case c.Tokens < 2 || c.Tokens > 1024:
			return errors.Errorf("cope tasks: copy: %d data tokens, want 2 to 1024", c.Tokens)
		case c.Data < 1:
			return errors.Errorf("cope tasks: copy: %d data tokens per context, want at least 1", c.Data)
		}
	case TaskCount:
		c := o.Count
		switch {
		case o.Copy != CopyOptions{}:
			return errors.New("cope tasks: counting options with copy options set")
		case c.Vars < 1 || c.Vars > 26:
			return errors.Errorf("cope tasks: count: %d variables, want 1 to 26", c.Vars)
		case c.Ops < 1:
			return errors.Errorf("cope tasks: count: %d statements, want at least 1", c.Ops)
		case c.MaxValue < 1 || c.MaxValue > 1000:
			return errors.Errorf("cope tasks: count: largest value %d, want 1 to 1000", c.MaxValue)
		case c.SetWeight < 1 || c.IncWeight < 1:
			return errors.Errorf("cope tasks: count: weights %d (assignments) and %d (increments) must be at least 1", c.SetWeight, c.IncWeight)
		}
	default:
		return errors.Errorf("cope tasks: unknown task %q (valid: %s)", o.Task, strings.Join(TaskNames(), ", "))
	}
	return nil
}

// Token lengths of the counting statements ("a = 0 ;", "a ++;", "pass;")
// and of the question ("print a").
const (
	setTokens, incTokens, passTokens = 4, 2, 1
	questionTokens                   = 2
)

// CheckContext returns an error if a context of n tokens cannot hold the
// task's content: fewer than n data tokens (copy), or fewer than 4 tokens
// per statement (count: every statement could be an assignment).
func (o Options) CheckContext(n int) error {
	if err := o.Check(); err != nil {
		return err
	}
	switch o.Task {
	case TaskCopy:
		if n < o.Copy.Data {
			return errors.Errorf("cope tasks: copy: a context of %d tokens cannot hold %d data tokens", n, o.Copy.Data)
		}
	case TaskCount:
		if n < setTokens*o.Count.Ops {
			return errors.Errorf("cope tasks: count: a context of %d tokens cannot hold %d statements of up to %d tokens", n, o.Count.Ops, setTokens)
		}
	}
	return nil
}

// AnswerLen is the number of answer tokens of a sequence: n (copy) or 1
// (count).
func (o Options) AnswerLen() int {
	if o.Task == TaskCopy {
		return o.Copy.Data
	}
	return 1
}

// Len is the length T of a sequence (and of the model's input) with a
// context of n tokens: n + 1 + n_data (copy: context, separator, answer)
// or n + 3 (count: context, "print x", answer).
func (o Options) Len(n int) int {
	if o.Task == TaskCopy {
		return n + 1 + o.Copy.Data
	}
	return n + questionTokens + 1
}

// The token ids. Copy: data tokens 0..V-1, then blank, separator, BOS.
// Count: values 0..MaxValue (value k is id k, the "0" of an assignment
// included), variables, "=", ";", "++;", "pass;", "print", BOS.
func (o Options) copyBlank() int { return o.Copy.Tokens }
func (o Options) copySep() int   { return o.Copy.Tokens + 1 }
func (o Options) countVar(v int) int {
	return o.Count.MaxValue + 1 + v
}
func (o Options) countSym(k int) int { return o.Count.MaxValue + 1 + o.Count.Vars + k }

// countSyms are the counting task's symbols after the values and
// variables, in id order; BOS follows them.
var countSyms = []string{"=", ";", "++;", "pass;", "print"}

const (
	symEq = iota
	symSemi
	symInc
	symPass
	symPrint
)

// Vocab is the model's vocabulary: the task's tokens and BOS, the last id.
func (o Options) Vocab() int {
	if o.Task == TaskCopy {
		return o.Copy.Tokens + 3
	}
	return o.Count.MaxValue + 1 + o.Count.Vars + len(countSyms) + 1
}

// BOS is the id of the beginning-of-sequence token (Vocab-1): the input at
// position 0.
func (o Options) BOS() int { return o.Vocab() - 1 }

// TokenName is the text of a token id: copy data tokens as letters a..p
// (then "d16", ...), "_" for blank, "|" for the separator; counting tokens
// as in the authors' programs ("a", "=", "0", ";", "++;", "pass;",
// "print"); "<bos>"; "?" for an id outside the vocabulary.
func (o Options) TokenName(id int) string {
	switch {
	case id == o.BOS():
		return "<bos>"
	case id < 0 || id > o.BOS():
		return "?"
	case o.Task == TaskCopy:
		switch {
		case id == o.copyBlank():
			return "_"
		case id == o.copySep():
			return "|"
		case id < 26:
			return string(rune('a' + id))
		}
		return "d" + strconv.Itoa(id)
	case id <= o.Count.MaxValue:
		return strconv.Itoa(id)
	case id < o.countSym(0):
		return string(rune('a' + id - o.countVar(0)))
	}
	return countSyms[id-o.countSym(0)]
}

// Text is the tokens as text, separated by spaces.
func (o Options) Text(tokens []int) string {
	s := make([]string, len(tokens))
	for i, t := range tokens {
		s[i] = o.TokenName(t)
	}
	return strings.Join(s, " ")
}

// Example is one sequence of a task: its tokens (context, then the
// separator or question, then the answer) and where the answer starts.
type Example struct {
	Tokens []int
	// Answer is the index in Tokens of the first answer token: the answer
	// is Tokens[Answer:].
	Answer int
}

// Len is the number of tokens T.
func (e Example) Len() int { return len(e.Tokens) }

// Layout returns the model's input and targets: ids[i] = Tokens[i-1]
// (bos at 0), so that position i predicts Tokens[i]; targets[i] =
// Tokens[i] at the answer positions (i >= Answer) and -1 elsewhere (not
// scored: graph.CrossEntropy ignores negative targets).
func (e Example) Layout(bos int) (ids, targets []int) {
	ids, targets = make([]int, e.Len()), make([]int, e.Len())
	for i, t := range e.Tokens {
		if i == 0 {
			ids[i] = bos
		} else {
			ids[i] = e.Tokens[i-1]
		}
		targets[i] = -1
		if i >= e.Answer {
			targets[i] = t
		}
	}
	return ids, targets
}

// Generate draws one sequence with a context of n tokens from rng
// (CheckContext: an error for invalid options or a context too short).
// The content is drawn first and the blanks or passes last, so that the
// same generator state gives the same content and answer at every context
// length: sequence i of a set with longer contexts is sequence i of a set
// with shorter ones among more blanks or passes.
//
// Copy: the n_data data tokens, uniform over the V; then their positions,
// n_data of the n context positions drawn uniformly (the others are
// blanks); then the separator; then the data tokens in order.
//
// Count: Ops statements, each an assignment "x = 0 ;" (weight SetWeight;
// always the first, since nothing can be incremented before) or an
// increment "x ++;" of a variable already assigned (weight IncWeight; one
// that would pass MaxValue is drawn again), with their variables uniform;
// the question's variable x, uniform among those assigned; then the
// context's other tokens are passes "pass;", interleaved with the
// statements uniformly at random; then "print x" and the answer: x's value
// (the increments of x since its last assignment).
func Generate(o Options, rng *rand.Rand, n int) (Example, error) {
	if err := o.CheckContext(n); err != nil {
		return Example{}, err
	}
	if o.Task == TaskCopy {
		return genCopy(o, rng, n), nil
	}
	return genCount(o, rng, n)
}

func genCopy(o Options, rng *rand.Rand, n int) Example {
	d := o.Copy.Data
	data := make([]int, d)
	for i := range data {
		data[i] = rng.IntN(o.Copy.Tokens)
	}
	toks := make([]int, 0, o.Len(n))
	for i, k := 0, 0; i < n; i++ {
		// Slot i holds the next data token with probability (data tokens
		// left)/(slots left): a uniform subset of d slots.
		if rng.IntN(n-i) < d-k {
			toks = append(toks, data[k])
			k++
		} else {
			toks = append(toks, o.copyBlank())
		}
	}
	toks = append(toks, o.copySep())
	return Example{Tokens: append(toks, data...), Answer: n + 1}
}

func genCount(o Options, rng *rand.Rand, n int) (Example, error) {
	c := o.Count
	vals := make([]int, c.Vars) // -1: not assigned yet
	for i := range vals {
		vals[i] = -1
	}
	var assigned []int
	stmts := make([][]int, 0, c.Ops)
	used := 0
	for len(stmts) < c.Ops {
		var st []int
		for try := 0; st == nil; try++ {
			if try == 10000 {
				return Example{}, errors.New("cope tasks: count: no statement could be drawn in 10000 tries")
			}
			if len(assigned) == 0 || rng.IntN(c.SetWeight+c.IncWeight) < c.SetWeight {
				v := rng.IntN(c.Vars)
				if vals[v] < 0 {
					assigned = append(assigned, v)
				}
				vals[v] = 0
				st = []int{o.countVar(v), o.countSym(symEq), 0, o.countSym(symSemi)}
				continue
			}
			v := assigned[rng.IntN(len(assigned))]
			if vals[v]+1 > c.MaxValue {
				continue
			}
			vals[v]++
			st = []int{o.countVar(v), o.countSym(symInc)}
		}
		stmts = append(stmts, st)
		used += len(st)
	}
	q := assigned[rng.IntN(len(assigned))]
	toks := make([]int, 0, o.Len(n))
	passes := n - used
	for k := 0; k < len(stmts); {
		// The next statement with probability (statements left)/(statements
		// and passes left): a uniform interleaving.
		if rng.IntN(len(stmts)-k+passes) < len(stmts)-k {
			toks = append(toks, stmts[k]...)
			k++
		} else {
			toks = append(toks, o.countSym(symPass))
			passes--
		}
	}
	for ; passes > 0; passes-- {
		toks = append(toks, o.countSym(symPass))
	}
	toks = append(toks, o.countSym(symPrint), o.countVar(q), vals[q])
	return Example{Tokens: toks, Answer: n + questionTokens}, nil
}

// seqStream separates the sequence streams of the tasks from other streams
// of the same seed ("copeSeqs").
const seqStream = 0x636f706553657173

// Stream returns the generator of sequence number i of a data set seeded
// with seed (validation, test: sequence i is the same whatever the other
// sequences are).
func Stream(seed, i uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seqStream+i)) }

// Set generates count sequences with contexts of n tokens, sequence i from
// Stream(seed, i).
func Set(o Options, seed uint64, count, n int) ([]Example, error) {
	if count < 1 {
		return nil, errors.Errorf("cope tasks: %d sequences: want at least 1", count)
	}
	out := make([]Example, count)
	for i := range out {
		var err error
		if out[i], err = Generate(o, Stream(seed, uint64(i)), n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// String describes the options in one line.
func (o Options) String() string {
	switch o.Task {
	case TaskCopy:
		return fmt.Sprintf("selective copy of %d data tokens (V = %d) among blanks", o.Copy.Data, o.Copy.Tokens)
	case TaskCount:
		c := o.Count
		return fmt.Sprintf("counting: %d variables, %d assignments and increments (weights %d:%d, values up to %d) among passes",
			c.Vars, c.Ops, c.SetWeight, c.IncWeight, c.MaxValue)
	}
	return fmt.Sprintf("unknown task %q", o.Task)
}
