package trainer

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

func TestParseProtocol(t *testing.T) {
	cases := []struct {
		in   string
		want Protocol
		str  string
	}{
		{"full", Protocol{Name: "full"}, "full"},
		{"chunks", Protocol{Name: "chunks", Window: 64}, "chunks:64"},
		{"chunks:16", Protocol{Name: "chunks", Window: 16}, "chunks:16"},
		{"stride", Protocol{Name: "stride", Window: 64, Stride: 32}, "stride:64:32"},
		{"stride:16:4", Protocol{Name: "stride", Window: 16, Stride: 4}, "stride:16:4"},
		{"memory", Protocol{Name: "memory", Window: 64, Memory: 64}, "memory:64:64"},
		{"memory:16:0", Protocol{Name: "memory", Window: 16}, "memory:16:0"}, // an explicit 0 is kept
		{"sinks", Protocol{Name: "sinks", Window: 64, Sinks: 4}, "sinks:64:4"},
		{"sinks:32:0", Protocol{Name: "sinks", Window: 32}, "sinks:32:0"},
	}
	for _, c := range cases {
		p, err := ParseProtocol(c.in, 64)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if p != c.want || p.String() != c.str {
			t.Fatalf("%s: %+v (%s), want %+v (%s)", c.in, p, p, c.want, c.str)
		}
		if back, err := ParseProtocol(p.String(), 999); err != nil || back != p {
			t.Fatalf("%s: String %q parses to %+v, %v", c.in, p, back, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"bogus", `unknown name "bogus"`},
		{"stride:a", `parameter "a" is not an integer`},
		{"full:3", "full takes at most 0 parameters"},
		{"chunks:8:2", "chunks takes at most 1 parameters (chunks:WINDOW)"},
		{"sinks:8:2:1", "sinks takes at most 2"},
	} {
		_, err := ParseProtocol(c.in, 64)
		wantErr(t, err, c.want)
	}
}

func TestProtocolCheck(t *testing.T) {
	for _, c := range []struct {
		p    Protocol
		want string // "" valid
	}{
		{Protocol{}, ""},
		{Protocol{Name: "full", Window: 8}, "window 8 is not used by full"},
		{Protocol{Name: "chunks", Window: 5}, ""},
		{Protocol{Name: "chunks", Window: 13}, "window 13 must be in [1, 12]"},
		{Protocol{Name: "chunks", Window: 0}, "window 0 must be in [1, 12]"},
		{Protocol{Name: "chunks", Window: 4, Sinks: 1}, "sinks 1 is not used by chunks"},
		{Protocol{Name: "stride", Window: 6, Stride: 7}, "stride 7 must be in [1, 6]"},
		{Protocol{Name: "stride", Window: 6, Stride: 0}, "stride 0 must be in [1, 6]"},
		{Protocol{Name: "stride", Window: 6, Stride: 2, Memory: 1}, "memory 1 is not used by stride"},
		{Protocol{Name: "memory", Window: 5, Memory: 5}, "window 5 must divide the document length"},
		{Protocol{Name: "memory", Window: 4, Memory: -1}, "memory -1 must not be negative"},
		{Protocol{Name: "memory", Window: 4}, ""},
		{Protocol{Name: "sinks", Window: 1}, "window 1 must be at least 2"},
		{Protocol{Name: "sinks", Window: 5, Sinks: 4}, "sinks 4 must be in [0, 4)"},
		{Protocol{Name: "sinks", Window: 50, Sinks: 2}, ""}, // a window longer than the document never slides
		{Protocol{Name: "sinks", Window: 5, Stride: 1}, "stride 1 is not used by sinks"},
		{Protocol{Name: "nope"}, `unknown protocol "nope"`},
	} {
		err := c.p.Check(12)
		if c.want == "" {
			if err != nil {
				t.Fatalf("%+v: %v", c.p, err)
			}
			continue
		}
		wantErr(t, err, c.want)
	}
}

func TestSubWindows(t *testing.T) {
	for _, c := range []struct {
		le, c, s int
		want     []sub
	}{
		{12, 4, 4, []sub{{0, 0, 0}, {0, 4, 0}, {0, 8, 0}}},
		{12, 5, 5, []sub{{0, 0, 0}, {0, 5, 0}, {0, 7, 3}}}, // last chunk right-aligned, scoring its last 2
		{12, 6, 2, []sub{{0, 0, 0}, {0, 2, 4}, {0, 4, 4}, {0, 6, 4}}},
		{12, 12, 12, []sub{{0, 0, 0}}},
	} {
		got := subWindows(c.le, c.c, c.s)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("subWindows(%d, %d, %d) = %v, want %v", c.le, c.c, c.s, got, c.want)
		}
	}
}

// protoModel is a one-block float64 model with random weights for pos. One
// block, so that a target's context is all it depends on: with more
// blocks, memory and cached keys carry the states of earlier tokens
// (their own contexts), which layers' tests check against masked full
// computations.
func protoModel(t *testing.T, pos string) (*graph.Params, layers.Config) {
	t.Helper()
	cfg := layers.Config{Vocab: Vocab, DModel: 8, Heads: 2, Layers: 1, FFN: 16, Eps: 1e-5, InitStd: 0.02, Causal: true, Pos: pos}
	cfg.PosOpts.MaxLen = 8 // learned: a table of 8 positions
	p := graph.NewParams(tensor.Float64, 1)
	e, err := NewEvaluator(p, cfg, 1, 4) // creates the parameters
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	p.Randomize(rand.New(rand.NewSource(5)), 0.5)
	return p, cfg
}

// refNLL returns the cross-entropy of target byte next after the context
// ctx, computed by the full model over ctx alone at positions
// 0..len(ctx)-1 (the last target of a text ctx+next).
func refNLL(t *testing.T, evs map[int]*Evaluator, p *graph.Params, cfg layers.Config, ctx []byte, next byte) float64 {
	t.Helper()
	k := len(ctx)
	e := evs[k]
	if e == nil {
		var err error
		if e, err = NewEvaluator(p, cfg, 1, k); err != nil {
			t.Fatal(err)
		}
		evs[k] = e
	}
	s, err := e.Score(append(append([]byte(nil), ctx...), next), []int{1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s[0].Nats
}

// TestProtocolsScoreTheirTargets: every protocol scores each target of the
// text exactly once (the targets of the full protocol), with the context
// it documents (checked against the protocol's definition), and the score
// of each target equals the full model run over exactly that context,
// re-indexed from position 0 (1e-9, float64; equal for encodings of
// position differences, rope up to rounding).
func TestProtocolsScoreTheirTargets(t *testing.T) {
	const le = 12
	text := tinyText()[:3*le+1+5] // three documents and a tail document scoring 5
	protos := []Protocol{
		{Name: "chunks", Window: 4}, {Name: "chunks", Window: 5},
		{Name: "stride", Window: 6, Stride: 2}, {Name: "stride", Window: 5, Stride: 3},
		{Name: "memory", Window: 4, Memory: 4}, {Name: "memory", Window: 3, Memory: 5}, {Name: "memory", Window: 4},
		{Name: "sinks", Window: 5}, {Name: "sinks", Window: 5, Sinks: 2}, {Name: "sinks", Window: 20, Sinks: 1},
	}
	for _, pos := range []string{"none", "alibi", "t5", "rope", "xl", "cope"} {
		p, cfg := protoModel(t, pos)
		evs := map[int]*Evaluator{}
		full, err := ScoreText(p, cfg, text, []int{0, 3}, EvalOptions{Len: le, Batch: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, proto := range protos {
			what := fmt.Sprintf("%s %s", pos, proto)
			sc, err := NewScorer(p, cfg, 2, le, proto) // batch 2: a padded last batch
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			seen := map[int]int{}
			var refSum float64
			sc.trace = func(doc window, s scored) {
				seen[doc.start+s.J]++
				checkContext(t, what, proto, s)
				var ctx []byte
				ctx = append(ctx, text[doc.start:doc.start+s.Sinks]...)
				ctx = append(ctx, text[doc.start+s.From:doc.start+s.J+1]...)
				want := refNLL(t, evs, p, cfg, ctx, text[doc.start+s.J+1])
				got := -LogSoftmaxAt(s.Logits, int(text[doc.start+s.J+1]))
				if math.Abs(got-want) > 1e-9 {
					t.Fatalf("%s: target %d (document at %d, position %d, context [0,%d)+[%d,%d]): %.12g, the full model over that context %.12g",
						what, doc.start+s.J, doc.start, s.J, s.Sinks, s.From, s.J, got, want)
				}
				refSum += want
			}
			got, err := sc.Score(text, []int{0, 3}, 0)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sc.Close()
			if len(seen) != len(text)-1 {
				t.Fatalf("%s: %d distinct targets scored, want %d", what, len(seen), len(text)-1)
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("%s: target %d scored %d times", what, i, n)
				}
			}
			for k := range got {
				if got[k].Tokens != full[k].Tokens || got[k].Windows != full[k].Windows {
					t.Fatalf("%s protocol %d: %d targets in %d windows, full scores %d in %d", what, k, got[k].Tokens, got[k].Windows, full[k].Tokens, full[k].Windows)
				}
			}
			if math.Abs(got[0].Nats-refSum) > 1e-8 {
				t.Fatalf("%s: %.12g nats, the references sum to %.12g", what, got[0].Nats, refSum)
			}
		}
		for _, e := range evs {
			e.Close()
		}
	}
}

// checkContext checks the context of a scored target against the
// protocol's definition (Protocol's doc comment).
func checkContext(t *testing.T, what string, p Protocol, s scored) {
	t.Helper()
	c := p.Window
	var sinks, from int
	switch p.Name {
	case "chunks":
		from = s.J / c * c
		if from+c > 12 { // the right-aligned last chunk
			from = 12 - c
		}
	case "stride":
		// the first window covers [0, c); later ones end at their last target
		// or are right-aligned; either way the context is >= c - stride
		if s.J >= c {
			if s.J-s.From < c-p.Stride || s.J-s.From >= c {
				t.Fatalf("%s: position %d sees %d tokens before it, want [%d, %d)", what, s.J, s.J-s.From, c-p.Stride, c)
			}
		}
		from = s.From
	case "memory":
		from = max(0, s.J/c*c-p.Memory)
	case "sinks":
		if s.J >= c {
			sinks, from = p.Sinks, s.J-(c-1-p.Sinks)
		}
	}
	if s.Sinks != sinks || s.From != from {
		t.Fatalf("%s: position %d has context [0,%d)+[%d,%d], want [0,%d)+[%d,%d]", what, s.J, s.Sinks, s.From, s.J, sinks, from, s.J)
	}
}

// TestChunksAreShortWindows: chunks of C over documents that C divides are
// the full protocol at length C, bit for bit; stride with Stride = Window
// is chunks, bit for bit.
func TestChunksAreShortWindows(t *testing.T) {
	p, cfg := protoModel(t, "alibi")
	text := tinyText()[:4*12+1]
	short, err := ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 4, Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 12, Batch: 3, Protocol: Protocol{Name: "chunks", Window: 4}})
	if err != nil {
		t.Fatal(err)
	}
	stride, err := ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 12, Batch: 3, Protocol: Protocol{Name: "stride", Window: 4, Stride: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if chunks[0].Nats != short[0].Nats || chunks[0].Tokens != short[0].Tokens || !reflect.DeepEqual(stride[0], chunks[0]) {
		t.Fatalf("chunks:4 at 12 %+v, stride:4:4 %+v, full at 4 %+v", chunks[0], stride[0], short[0])
	}
	ev, err := Evaluate(p, cfg, text, EvalOptions{Len: 12, Batch: 3, LastN: 2, Protocol: Protocol{Name: "chunks", Window: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Tokens != 4*2 || ev.Windows != 4 {
		t.Fatalf("Evaluate with chunks, last 2: %+v, want 8 targets in 4 windows", ev)
	}
}

// TestProtocolErrors: a protocol an encoding cannot run is refused naming
// both.
func TestProtocolErrors(t *testing.T) {
	p, cfg := protoModel(t, "learned")
	text := tinyText()[:100]
	_, err := ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 12, Protocol: Protocol{Name: "sinks", Window: 4}})
	wantErr(t, err, "protocol sinks:4:0", "documents of 12 do not fit the window of 4", "learned cannot slide past the window")
	pc, cc := protoModel(t, "rope-dynamic")
	cc.PosOpts.RopeTrainLen = 4 // its base changes past 4 positions
	_, err = ScoreText(pc, cc, text, []int{0}, EvalOptions{Len: 12, Protocol: Protocol{Name: "sinks", Window: 6}})
	wantErr(t, err, "protocol sinks:6:0", "rope-dynamic decodes with a window of at most 4, not 6")
	// a table of 8 positions: memory 4 + window 6 needs 10
	_, err = ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 12, Protocol: Protocol{Name: "memory", Window: 6, Memory: 4}})
	if !errors.Is(err, posenc.ErrBeyondTable) {
		t.Fatalf("memory beyond a learned table: %v, want ErrBeyondTable", err)
	}
	wantErr(t, err, "protocol memory:6:4")
	_, err = ScoreText(p, cfg, text, []int{0}, EvalOptions{Len: 12, Protocol: Protocol{Name: "stride", Window: 6, Stride: 9}})
	wantErr(t, err, "stride 9 must be in [1, 6]")
}
