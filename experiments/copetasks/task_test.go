package copetasks

import (
	"math"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

// tinyConfig is a tiny model's configuration for options o at contexts of
// n tokens, batch b, in float64.
func tinyConfig(o Options, n, b int, pos string) trainer.Config {
	c := trainer.DefaultConfig()
	c.Model.Vocab, c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN, c.Model.Pos = o.Vocab(), 8, 2, 1, 16, pos
	c.Batch, c.SeqLen, c.Steps, c.Warmup, c.EvalBatch, c.Dtype = b, o.Len(n), 4, 1, b, tensor.Float64
	return c
}

// tinyTask is a task of smallCopy at contexts of 6 tokens, batch 2.
func tinyTask(t *testing.T, pos string) *Task {
	t.Helper()
	o := smallCopy()
	val, err := Set(o, 1, 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewTask(tinyConfig(o, 6, 2, pos), Data{Opts: o, Context: 6, Val: val, ValSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestLossOnAnswersOnly: on a hand-built batch, the training graph's loss
// is the mean cross-entropy of the answer tokens alone (computed here from
// the graph's logits), not of every token.
func TestLossOnAnswersOnly(t *testing.T) {
	for _, pos := range []string{"rope", "cope"} {
		task := tinyTask(t, pos)
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 3)
		loss, _, err := task.Build(g, p)
		if err != nil {
			t.Fatal(err)
		}
		// "_ b a d _ _ | b a d" and "a _ _ b _ c | a b c": answers at 7..9.
		o := smallCopy()
		batch := []Example{
			{Tokens: []int{4, 1, 0, 3, 4, 4, 5, 1, 0, 3}, Answer: 7},
			{Tokens: []int{0, 4, 4, 1, 4, 2, 5, 0, 1, 2}, Answer: 7},
		}
		if err := task.m.fill(batch); err != nil {
			t.Fatal(err)
		}
		if want := []int{-1, -1, -1, -1, -1, -1, -1, 1, 0, 3, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2}; !slices.Equal(task.m.tgts, want) {
			t.Fatalf("targets %v, want %v", task.m.tgts, want)
		}
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := graph.ToFloat64s(loss.Value())[0]
		logits := graph.ToFloat64s(task.m.logits.Value())
		v := o.Vocab()
		var answers, all float64
		for b, e := range batch {
			for i, tok := range e.Tokens {
				nats := -trainer.LogSoftmaxAt(logits[(b*10+i)*v:(b*10+i+1)*v], tok)
				all += nats / 20
				if i >= e.Answer {
					answers += nats / 6
				}
			}
		}
		vm.Close()
		if math.Abs(got-answers) > 1e-12 || math.Abs(got-all) < 1e-6 {
			t.Errorf("%s: loss %.15g; mean over answer tokens %.15g, over every token %.15g", pos, got, answers, all)
		}
	}
}

// TestEvaluate: the scores of a set are those of its sequences scored one
// at a time (a last batch padded with copies is not counted), and add up
// (the right answer tokens per sequence, the majority baseline).
func TestEvaluate(t *testing.T) {
	task := tinyTask(t, "cope")
	p := graph.NewParams(tensor.Float64, 5)
	o := smallCopy()
	seqs, _ := Set(o, 4, 3, 6)
	spec := task.EvalSpec(6)
	all, err := Evaluate(p, seqs, spec) // batch 2: the second batch is padded
	if err != nil {
		t.Fatal(err)
	}
	if all.Sequences != 3 || all.Answers != 9 || all.Len != 10 || len(all.Right) != 3 {
		t.Fatalf("%+v", all)
	}
	bits, right := 0.0, 0
	for i := range seqs {
		one, err := Evaluate(p, seqs[i:i+1], spec)
		if err != nil {
			t.Fatal(err)
		}
		bits += one.Bits / 3
		right += one.Right[0]
		if one.Right[0] != all.Right[i] {
			t.Errorf("sequence %d: %d right alone, %d in the set", i, one.Right[0], all.Right[i])
		}
	}
	if math.Abs(bits-all.Bits) > 1e-12 || float64(right)/9 != all.Accuracy {
		t.Errorf("set: %g bits, accuracy %g; one at a time %g bits, %d right", all.Bits, all.Accuracy, bits, right)
	}
	freq := map[int]int{}
	for _, e := range seqs {
		for _, tok := range e.Tokens[e.Answer:] {
			freq[tok]++
		}
	}
	most := 0
	for _, c := range freq {
		most = max(most, c)
	}
	if all.Majority != float64(most)/9 {
		t.Errorf("majority %g, want %d/9", all.Majority, most)
	}
	if _, err := Evaluate(p, nil, spec); err == nil || !strings.Contains(err.Error(), "no sequences") {
		t.Errorf("no sequences: %v", err)
	}
	long, _ := Set(o, 4, 1, 8)
	if _, err := Evaluate(p, long, spec); err == nil || !strings.Contains(err.Error(), "has 12 tokens, want 10") {
		t.Errorf("a sequence of another length: %v", err)
	}
}

// TestBatches: training batch k is a function of the seed and k.
func TestBatches(t *testing.T) {
	task := tinyTask(t, "rope")
	a, _ := task.Batch(1, 0)
	b, _ := task.Batch(1, 0)
	c, _ := task.Batch(1, 1)
	d, _ := task.Batch(2, 0)
	if len(a) != 2 || !slices.Equal(a[0].Tokens, b[0].Tokens) || !slices.Equal(a[1].Tokens, b[1].Tokens) {
		t.Fatal("batch 0 differs between draws")
	}
	if slices.Equal(a[0].Tokens, c[0].Tokens) && slices.Equal(a[1].Tokens, c[1].Tokens) {
		t.Error("batches 0 and 1 are the same")
	}
	if slices.Equal(a[0].Tokens, d[0].Tokens) && slices.Equal(a[1].Tokens, d[1].Tokens) {
		t.Error("seeds 1 and 2 draw the same batch")
	}
	if err := task.Next(); err == nil || !strings.Contains(err.Error(), "Next before Build") {
		t.Errorf("Next before Build: %v", err)
	}
}

// TestTaskConfigRefused: a checkpoint of another task, options, context or
// validation set is refused, naming both; the task's own is accepted.
func TestTaskConfigRefused(t *testing.T) {
	task := tinyTask(t, "rope")
	for _, c := range []struct {
		edit func(*Task)
		want string
	}{
		{func(o *Task) { o.data.Opts = smallCount() }, "trained on counting"},
		{func(o *Task) { o.data.Opts.Copy.Tokens = 5 }, "(V = 5)"},
		{func(o *Task) { o.data.Context = 8 }, "contexts of 8 tokens"},
		{func(o *Task) { o.data.ValSeed = 9 }, "(seed 9)"},
	} {
		other := *task
		c.edit(&other)
		saved, _ := other.TaskConfig()
		if err := task.CheckTaskConfig(saved); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an error containing %q", err, c.want)
		}
	}
	own, _ := task.TaskConfig()
	if err := task.CheckTaskConfig(own); err != nil {
		t.Fatal(err)
	}
	if err := task.CheckTaskConfig([]byte("{")); err == nil {
		t.Error("corrupt task configuration accepted")
	}
	if err := task.SetState([]byte("{")); err == nil {
		t.Error("corrupt state accepted")
	}
	if task.Kind() != Kind || task.Items() != 20 || task.DataHash() == "" || !strings.Contains(task.Describe(), "selective copy") {
		t.Errorf("kind %s, items %d, hash %q, %s", task.Kind(), task.Items(), task.DataHash(), task.Describe())
	}
}

// TestNewTaskErrors: bad configurations and data are refused, naming the
// problem.
func TestNewTaskErrors(t *testing.T) {
	o := smallCopy()
	val, _ := Set(o, 1, 2, 6)
	short, _ := Set(o, 1, 2, 5)
	cfg := tinyConfig(o, 6, 2, "rope")
	for _, c := range []struct {
		name string
		edit func(*trainer.Config, *Data)
		want string
	}{
		{"vocabulary", func(c *trainer.Config, _ *Data) { c.Model.Vocab = 6 }, "model vocabulary 6, want 7"},
		{"length", func(c *trainer.Config, _ *Data) { c.SeqLen = 12 }, "sequence length 12, want 10"},
		{"not causal", func(c *trainer.Config, _ *Data) { c.Model.Causal = false }, "causal"},
		{"no validation", func(_ *trainer.Config, d *Data) { d.Val = nil }, "no validation sequences"},
		{"short validation", func(_ *trainer.Config, d *Data) { d.Val = short }, "validation sequence 0 has 9 tokens, want 10"},
		{"context", func(_ *trainer.Config, d *Data) { d.Context = 2 }, "cannot hold 3 data tokens"},
		{"encoding", func(c *trainer.Config, _ *Data) { c.Model.Pos = "rope3d" }, "rope3d"},
	} {
		cf, d := cfg, Data{Opts: o, Context: 6, Val: val}
		c.edit(&cf, &d)
		if _, err := NewTask(cf, d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
