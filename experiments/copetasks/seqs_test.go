package copetasks

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// smallCopy and smallCount are small options for the tests.
func smallCopy() Options { return Options{Task: TaskCopy, Copy: CopyOptions{Tokens: 4, Data: 3}} }

func smallCount() Options {
	return Options{Task: TaskCount, Count: CountOptions{Vars: 2, Ops: 3, MaxValue: 10, SetWeight: 1, IncWeight: 7}}
}

// TestKnownSequences: the generators' output for a fixed seed, token by
// token (a change of the generators changes every study's data), and the
// ids of the tokens.
func TestKnownSequences(t *testing.T) {
	for _, c := range []struct {
		o      Options
		n      int
		seed   uint64
		want   string
		answer int
	}{
		{smallCopy(), 6, 4, "_ d _ d b _ | d d b", 7},
		{smallCount(), 14, 4, "b = 0 ; pass; pass; pass; b ++; a = 0 ; pass; print a 0", 16},
	} {
		e, err := Generate(c.o, Stream(c.seed, 0), c.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.o.Text(e.Tokens); got != c.want || e.Answer != c.answer {
			t.Errorf("%s: %q (answer at %d), want %q (at %d)", c.o.Task, got, e.Answer, c.want, c.answer)
		}
	}
	// ids: copy data 0..V-1, blank, separator, BOS; count values,
	// variables, symbols, BOS.
	co := smallCopy()
	if co.Vocab() != 7 || co.BOS() != 6 || co.TokenName(4) != "_" || co.TokenName(5) != "|" || co.TokenName(6) != "<bos>" || co.TokenName(7) != "?" {
		t.Errorf("copy vocabulary %d: %s", co.Vocab(), co.Text([]int{0, 1, 2, 3, 4, 5, 6, 7}))
	}
	n := smallCount()
	if got := n.Text([]int{0, 10, 11, 12, 13, 14, 15, 16, 17, 18}); n.Vocab() != 19 || got != "0 10 a b = ; ++; pass; print <bos>" {
		t.Errorf("count vocabulary %d: %s", n.Vocab(), got)
	}
}

// TestLayout: the input is the tokens shifted right after BOS; the targets
// are the tokens at the answer positions and -1 before.
func TestLayout(t *testing.T) {
	e := Example{Tokens: []int{4, 0, 4, 5, 0}, Answer: 4}
	ids, tgts := e.Layout(6)
	if !slices.Equal(ids, []int{6, 4, 0, 4, 5}) || !slices.Equal(tgts, []int{-1, -1, -1, -1, 0}) {
		t.Errorf("ids %v, targets %v", ids, tgts)
	}
}

// TestCopyAnswers: every copy sequence holds n data tokens among blanks,
// then the separator, and its answer is the data tokens in order.
func TestCopyAnswers(t *testing.T) {
	o := DefaultCopy()
	for _, n := range []int{16, 24, 32, 64} {
		seqs, err := Set(o, 9, 50, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range seqs {
			if e.Len() != o.Len(n) || e.Answer != n+1 || e.Tokens[n] != o.copySep() {
				t.Fatalf("context %d, sequence %d: %d tokens, answer at %d: %s", n, i, e.Len(), e.Answer, o.Text(e.Tokens))
			}
			var data []int
			for _, tok := range e.Tokens[:n] {
				switch {
				case tok == o.copyBlank():
				case tok >= 0 && tok < o.Copy.Tokens:
					data = append(data, tok)
				default:
					t.Fatalf("context token %d: %s", tok, o.Text(e.Tokens))
				}
			}
			if len(data) != o.Copy.Data || !slices.Equal(data, e.Tokens[e.Answer:]) {
				t.Fatalf("context %d, sequence %d: data %v, answer %v", n, i, data, e.Tokens[e.Answer:])
			}
		}
	}
}

// interpret runs a counting program given as text (the tokens' names) the
// way its words say, independently of the generator, and returns the
// value printed, the statements other than passes, and an error message
// ("" if the program is well formed: assignments to 0, increments of
// assigned variables, one print of an assigned variable at the end).
func interpret(words []string, maxValue int) (printed, ops int, bad string) {
	vals := map[string]int{}
	for i := 0; i < len(words); {
		switch {
		case words[i] == "pass;":
			i++
		case words[i] == "print":
			if i != len(words)-3 {
				return 0, 0, "print before the end"
			}
			v, ok := vals[words[i+1]]
			if !ok {
				return 0, 0, "print of an unassigned variable"
			}
			if words[i+2] != strconv.Itoa(v) {
				return 0, 0, "answer " + words[i+2] + ", value " + strconv.Itoa(v)
			}
			return v, ops, ""
		case i+1 < len(words) && words[i+1] == "++;":
			if _, ok := vals[words[i]]; !ok {
				return 0, 0, "increment of an unassigned variable"
			}
			if vals[words[i]]++; vals[words[i]] > maxValue {
				return 0, 0, "value past the maximum"
			}
			ops++
			i += 2
		case i+3 < len(words) && words[i+1] == "=" && words[i+2] == "0" && words[i+3] == ";":
			vals[words[i]] = 0
			ops++
			i += 4
		default:
			return 0, 0, "unparsed at word " + strconv.Itoa(i)
		}
	}
	return 0, 0, "no print"
}

// TestCountAnswers: every counting sequence is a well-formed program of
// Ops statements among passes whose answer is what running it prints.
func TestCountAnswers(t *testing.T) {
	o := DefaultCount()
	counts := map[int]int{}
	for _, n := range []int{32, 64} {
		seqs, err := Set(o, 9, 200, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range seqs {
			words := strings.Fields(o.Text(e.Tokens))
			v, ops, bad := interpret(words, o.Count.MaxValue)
			if bad != "" || ops != o.Count.Ops || e.Len() != n+3 || e.Answer != n+2 || e.Tokens[e.Answer] != v {
				t.Fatalf("context %d, sequence %d (%s, %d statements, answer at %d): %s", n, i, bad, ops, e.Answer, o.Text(e.Tokens))
			}
			counts[v]++
		}
	}
	if len(counts) < 4 {
		t.Errorf("answers %v: want a spread of counts", counts)
	}
	// The interpreter catches wrong answers.
	if _, _, bad := interpret(strings.Fields("a = 0 ; a ++; print a 2"), 10); bad == "" {
		t.Error("interpreter accepted a wrong answer")
	}
}

// TestDeterminism: a set is a function of its seed; sequence i does not
// depend on how many are drawn; another seed gives other sequences.
func TestDeterminism(t *testing.T) {
	for _, o := range []Options{DefaultCopy(), DefaultCount()} {
		a, _ := Set(o, 5, 6, 32)
		b, _ := Set(o, 5, 6, 32)
		c, _ := Set(o, 5, 3, 32)
		d, _ := Set(o, 6, 6, 32)
		for i := range a {
			if !slices.Equal(a[i].Tokens, b[i].Tokens) || (i < 3 && !slices.Equal(a[i].Tokens, c[i].Tokens)) {
				t.Fatalf("%s: sequence %d differs between draws", o.Task, i)
			}
		}
		if slices.Equal(a[0].Tokens, a[1].Tokens) && slices.Equal(a[1].Tokens, a[2].Tokens) {
			t.Errorf("%s: the sequences of a set are the same", o.Task)
		}
		same := 0
		for i := range a {
			if slices.Equal(a[i].Tokens, d[i].Tokens) {
				same++
			}
		}
		if same == len(a) {
			t.Errorf("%s: seeds 5 and 6 give the same sequences", o.Task)
		}
	}
}

// TestLongerContexts: sequence i of a set with longer contexts is sequence
// i of a set with shorter ones (the same content and answer) among more
// blanks or passes.
func TestLongerContexts(t *testing.T) {
	without := func(e Example, filler int) []int {
		return slices.DeleteFunc(slices.Clone(e.Tokens), func(tok int) bool { return tok == filler })
	}
	for _, c := range []struct {
		o      Options
		filler int
	}{{DefaultCopy(), DefaultCopy().copyBlank()}, {DefaultCount(), DefaultCount().countSym(symPass)}} {
		short, _ := Set(c.o, 1, 20, 32)
		long, _ := Set(c.o, 1, 20, 64)
		for i := range short {
			s, l := without(short[i], c.filler), without(long[i], c.filler)
			if long[i].Len() != short[i].Len()+32 || !slices.Equal(s, l) || !slices.Equal(short[i].Tokens[short[i].Answer:], long[i].Tokens[long[i].Answer:]) {
				t.Fatalf("%s %d:\n%s\n%s", c.o.Task, i, c.o.Text(short[i].Tokens), c.o.Text(long[i].Tokens))
			}
		}
	}
}

// TestBadOptions: invalid options and contexts are refused, naming the
// problem.
func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		n    int
		want string
	}{
		{Options{Task: "flip-flop"}, 8, `unknown task "flip-flop"`},
		{Options{Task: TaskCopy, Copy: CopyOptions{Tokens: 1, Data: 2}}, 8, "1 data tokens, want 2 to 1024"},
		{Options{Task: TaskCopy, Copy: CopyOptions{Tokens: 4, Data: 0}}, 8, "0 data tokens per context"},
		{smallCopy(), 2, "a context of 2 tokens cannot hold 3 data tokens"},
		{Options{Task: TaskCopy, Copy: CopyOptions{Tokens: 4, Data: 2}, Count: CountOptions{Vars: 1}}, 8, "counting options set"},
		{Options{Task: TaskCount, Count: CountOptions{Vars: 0, Ops: 1, MaxValue: 1, SetWeight: 1, IncWeight: 1}}, 8, "0 variables"},
		{Options{Task: TaskCount, Count: CountOptions{Vars: 1, Ops: 1, MaxValue: 1, SetWeight: 0, IncWeight: 1}}, 8, "weights 0"},
		{smallCount(), 11, "a context of 11 tokens cannot hold 3 statements"},
	} {
		if _, err := Generate(c.o, Stream(1, 0), c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v at %d: %v, want %q", c.o, c.n, err, c.want)
		}
	}
	if _, err := Set(smallCopy(), 1, 0, 6); err == nil {
		t.Error("a set of 0 sequences")
	}
	if _, err := Default("flip-flop"); err == nil {
		t.Error("unknown default task")
	}
}
