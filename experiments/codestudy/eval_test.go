package codestudy

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestEvaluateMatchesEngine: for a 1-D encoding, Evaluate's bits per byte
// (every target and the last n) equal the engine's scoring
// (trainer.ScoreText) of each anchor's window as a text of its own, with a
// batch that does not divide the windows (a padded last batch).
func TestEvaluateMatchesEngine(t *testing.T) {
	c, err := gocode.LoadCorpus(writeSrc(t), tinyPlan().Corpus)
	if err != nil {
		t.Fatal(err)
	}
	anchors, err := Anchors(c.Files[gocode.Test], 5, 48, 7)
	if err != nil {
		t.Fatal(err)
	}
	model := layers.Config{Vocab: 256, DModel: 8, Heads: 2, Layers: 1, FFN: 16, Eps: 1e-5, InitStd: 0.3, Causal: true, Pos: "t5"}
	p := graph.NewParams(tensor.Float64, 3)
	g := G.NewGraph()
	if _, err := layers.NewLM(g, p, model); err != nil { // creates the weights
		t.Fatal(err)
	}
	p.Forget(g)
	for _, le := range []int{16, 48} {
		got, err := Evaluate(p, anchors, EvalSpec{Model: model, Length: le, LastN: 16, Batch: 2, MaxUp: 4, MaxDown: 4})
		if err != nil {
			t.Fatal(err)
		}
		var all, last trainer.Score
		for _, a := range anchors {
			s, err := trainer.ScoreText(p, model, a.File.Src[a.End-le:a.End+1], []int{0, 16}, trainer.EvalOptions{Len: le, Batch: 1})
			if err != nil {
				t.Fatal(err)
			}
			all.Nats, all.Tokens = all.Nats+s[0].Nats, all.Tokens+s[0].Tokens
			last.Nats, last.Tokens = last.Nats+s[1].Nats, last.Tokens+s[1].Tokens
		}
		if got.Windows != 5 || got.Targets != all.Tokens || got.TargetsLast != last.Tokens {
			t.Fatalf("length %d: %+v; engine counts %d and %d targets", le, got, all.Tokens, last.Tokens)
		}
		if d := math.Abs(got.BitsPerByte - all.BitsPerByte()); d > 1e-9 {
			t.Errorf("length %d: %.12f bits/byte, engine %.12f", le, got.BitsPerByte, all.BitsPerByte())
		}
		if d := math.Abs(got.BitsPerByteLast - last.BitsPerByte()); d > 1e-9 {
			t.Errorf("length %d: last 16: %.12f bits/byte, engine %.12f", le, got.BitsPerByteLast, last.BitsPerByte())
		}
	}
	if _, err := Evaluate(p, anchors, EvalSpec{Model: model, Length: 64, LastN: 16, Batch: 2}); err == nil {
		t.Error("a window longer than its anchor's room was accepted")
	}
	if _, err := Evaluate(p, anchors, EvalSpec{Model: model, Length: 16, LastN: 17, Batch: 2}); err == nil {
		t.Error("last 17 of 16 accepted")
	}
	if _, err := Evaluate(p, nil, EvalSpec{Model: model, Length: 16, LastN: 16, Batch: 2}); err == nil {
		t.Error("no windows accepted")
	}
}

// TestPairwise: whether a model gets the tree relations follows the kinds
// the encoding accepts, not its name.
func TestPairwise(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{{"none", false}, {"t5", false}, {"alibi", false}, {"rope", false}, {"tree", true}, {"tree+rope", true}, {"tree+alibi", true}} {
		e, err := posenc.New(c.name, posenc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := Pairwise(e); got != c.want {
			t.Errorf("Pairwise(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	rope, err := posenc.NewRope("rope", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !Pairwise(pairwiseOnly{rope}) {
		t.Error("an encoding named rope that serves pairwise positions only is not given them")
	}
	if Pairwise(lineAndPairwise{rope}) {
		t.Error("an encoding that serves line positions too is given relations")
	}
}

// pairwiseOnly is rope claiming to serve pairwise positions only.
type pairwiseOnly struct{ posenc.Encoding }

func (pairwiseOnly) Accepts() []posenc.PosKind { return []posenc.PosKind{posenc.PosPairwise} }

// lineAndPairwise is rope claiming to serve both.
type lineAndPairwise struct{ posenc.Encoding }

func (lineAndPairwise) Accepts() []posenc.PosKind {
	return []posenc.PosKind{posenc.PosLine, posenc.PosPairwise}
}

// TestSnippetRelations: in "return a + b", the byte "a" (an Ident) and
// the byte "b" are siblings under the BinaryExpr: one step up, one down;
// "+" belongs to the BinaryExpr itself: from "a" one step up, none down.
func TestSnippetRelations(t *testing.T) {
	src := []byte("package p\n\nfunc f(a, b int) int { return a + b }\n")
	start := strings.Index(string(src), "a + b")
	up, down, err := SnippetRelations(src, start, 5, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	// bytes: 0 'a', 1 ' ', 2 '+', 3 ' ', 4 'b'
	if up.At(0, 4) != 1 || down.At(0, 4) != 1 || up.At(0, 2) != 1 || down.At(0, 2) != 0 || up.At(2, 0) != 0 || down.At(2, 0) != 1 {
		t.Fatalf("up %v\ndown %v", up.Data, down.Data)
	}
	if _, _, err := SnippetRelations([]byte("package p\nfunc {"), 0, 3, 4, 4); err == nil {
		t.Fatal("a snippet that does not parse was accepted")
	}
}
