package trainer

import (
	"math"
	"reflect"
	"testing"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// oldScoreWindows is a copy of study.ScoreWindows as it was before
// Evaluator.Score replaced it (full windows only, two protocols). It is kept
// here only to check that Score gives bit-for-bit the same sums on a text
// that is a whole number of windows.
func oldScoreWindows(p *graph.Params, model layers.Config, text []byte, le, lastN, batch int) (all, last Score, err error) {
	nw := Windows(len(text), le)
	batch = min(batch, nw)
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, model)
	if err != nil {
		return all, last, err
	}
	idsBuf := make([]int, batch*le)
	idsT := tensor.New(tensor.WithShape(batch, le), tensor.WithBacking(idsBuf))
	idsN := G.NewMatrix(g, tensor.Int, G.WithShape(batch, le), G.WithName("score_ids"), G.WithValue(idsT))
	logits, err := lm.Fwd(idsN)
	if err != nil {
		return all, last, err
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	v := model.Vocab
	row := make([]float64, v)
	for w0 := 0; w0 < nw; w0 += batch {
		nb := min(batch, nw-w0)
		for b := 0; b < batch; b++ {
			w := w0 + min(b, nb-1)
			for j := 0; j < le; j++ {
				idsBuf[b*le+j] = int(text[w*le+j])
			}
		}
		if err := G.Let(idsN, idsT); err != nil {
			return all, last, err
		}
		if err := vm.RunAll(); err != nil {
			return all, last, err
		}
		data := logits.Value().Data()
		for b := 0; b < nb; b++ {
			w := w0 + b
			for j := 0; j < le; j++ {
				i := b*le + j
				switch d := data.(type) {
				case []float32:
					for k, x := range d[i*v : (i+1)*v] {
						row[k] = float64(x)
					}
				case []float64:
					copy(row, d[i*v:(i+1)*v])
				default:
					return all, last, errors.Errorf("logits of type %T", d)
				}
				nll := -LogSoftmaxAt(row, int(text[w*le+j+1]))
				all.Nats += nll
				all.Tokens++
				if j >= le-lastN {
					last.Nats += nll
					last.Tokens++
				}
			}
		}
		vm.Reset()
	}
	all.Windows, last.Windows = nw, nw
	return all, last, nil
}

// TestScoreMatchesOld: on a text of whole windows, Score's sums are
// bit-for-bit those of the study's former ScoreWindows, in float32 and
// float64, for several batch sizes (with padding) and window lengths.
func TestScoreMatchesOld(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		cfg := tinyConfig()
		cfg.Dtype = dt
		cfg.Model.Pos = "rope"
		tr := newTiny(t, cfg)
		trainN(t, tr, 2)
		for _, c := range []struct{ windows, le, lastN, batch int }{
			{4, 8, 8, 3}, {5, 8, 3, 2}, {3, 16, 8, 1}, {1, 16, 1, 5}, {4, 32, 8, 4},
		} {
			text := tinyText()[:c.windows*c.le+1]
			all, last, err := oldScoreWindows(tr.Params, cfg.Model, text, c.le, c.lastN, c.batch)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScoreText(tr.Params, cfg.Model, text, []int{0, c.lastN}, EvalOptions{Len: c.le, Batch: c.batch})
			if err != nil {
				t.Fatal(err)
			}
			got[0].WindowNats, got[1].WindowNats = nil, nil // the old code kept none (TestScoreWindowNats checks them)
			if !reflect.DeepEqual(got[0], all) || !reflect.DeepEqual(got[1], last) {
				t.Errorf("%v %+v: Score %+v, old ScoreWindows %+v %+v", dt, c, got, all, last)
			}
			// Eval (one protocol) is the same sum divided by the count.
			e, err := NewEvaluator(tr.Params, cfg.Model, min(c.batch, c.windows), c.le)
			if err != nil {
				t.Fatal(err)
			}
			r, err := e.Eval(text, c.lastN, 0)
			e.Close()
			if err != nil || r.Nats != last.Nats/float64(last.Tokens) || r.Tokens != last.Tokens {
				t.Errorf("%v %+v: Eval %+v %v, want %v nats", dt, c, r, err, last.Nats/float64(last.Tokens))
			}
		}
	}
}

// tailNats is the cross-entropy, by hand, of the targets at positions
// from..le-1 of the window with inputs text[start:start+le].
func tailNats(t *testing.T, p *graph.Params, m layers.Config, text []byte, start, le, from int) float64 {
	t.Helper()
	e, err := NewEvaluator(p, m, 1, le)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := make([]int, le)
	for j := range ids {
		ids[j] = int(text[start+j])
	}
	var nats float64
	err = e.forward(ids, func(j int, logits []float64) error {
		if j >= from {
			var s float64
			for _, x := range logits {
				s += math.Exp(x)
			}
			nats -= logits[text[start+j+1]] - math.Log(s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return nats
}

// TestScoreTail: the whole text is scored; the targets after the last full
// window come from one right-aligned window, and protocol 0 scores each of
// the n-1 targets once at every length.
func TestScoreTail(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model.Pos = "alibi"
	tr := newTiny(t, cfg)
	trainN(t, tr, 2)
	const le = 8
	text := tinyText()[:5*le+1+3] // 5 full windows, r = 3 targets left
	n := len(text)
	full, err := ScoreText(tr.Params, cfg.Model, text[:5*le+1], []int{0, 2, 8}, EvalOptions{Len: le, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 2, 4, 6, 8} {
		got, err := ScoreText(tr.Params, cfg.Model, text, []int{0, 2, 8}, EvalOptions{Len: le, Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		for k, c := range []struct {
			tokens, from int
		}{{n - 1, le - 3}, {5*2 + 2, le - 2}, {n - 1, le - 3}} {
			want := full[k].Nats + tailNats(t, tr.Params, cfg.Model, text, n-1-le, le, c.from)
			if got[k].Tokens != c.tokens || got[k].Windows != 6 || math.Abs(got[k].Nats-want) > 1e-9 {
				t.Errorf("batch %d protocol %d: %+v, want %d tokens, 6 windows, %v nats", batch, k, got[k], c.tokens, want)
			}
		}
	}
	// Every length scores all n-1 targets; a tail of one target whose
	// protocol window misses it counts nothing.
	for _, l := range []int{3, 7, 8, 16, 40, n - 1} {
		s, err := ScoreText(tr.Params, cfg.Model, text, []int{0, 1}, EvalOptions{Len: l})
		if err != nil {
			t.Fatal(err)
		}
		if s[0].Tokens != n-1 || s[1].Windows != ScoreWindows(n, l) || s[1].Tokens != ScoreWindows(n, l) {
			t.Errorf("Le=%d: %+v", l, s)
		}
	}
	// maxWindows runs no tail window.
	s, err := ScoreText(tr.Params, cfg.Model, text, []int{0}, EvalOptions{Len: le, MaxWindows: 2})
	if err != nil || s[0].Windows != 2 || s[0].Tokens != 2*le {
		t.Errorf("max windows: %+v %v", s, err)
	}
	s, err = ScoreText(tr.Params, cfg.Model, text, []int{0}, EvalOptions{Len: le, MaxWindows: 50})
	if err != nil || s[0].Windows != 5 || s[0].Tokens != 5*le {
		t.Errorf("max windows beyond the text: %+v %v", s, err)
	}
	// Errors.
	for _, c := range []struct {
		text   []byte
		lastNs []int
		want   string
	}{
		{text, nil, "no protocol"},
		{text, []int{0, -1}, "last-n -1 outside [0, 8]"},
		{text, []int{9}, "last-n 9 outside [0, 8]"},
		{text[:le], []int{0}, "8 bytes, too short for one window of 8+1"},
	} {
		_, err := ScoreText(tr.Params, cfg.Model, c.text, c.lastNs, EvalOptions{Len: le})
		wantErr(t, err, c.want)
	}
}

// TestScoreWindowNats: each protocol's WindowNats holds, window by window
// in text order (the tail window last), the cross-entropy of the targets
// that protocol scores in the window, the same as that window scored by
// hand; they sum to Nats. Evaluation protocols other than full keep them
// too.
func TestScoreWindowNats(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model.Pos = "alibi"
	tr := newTiny(t, cfg)
	trainN(t, tr, 2)
	const le = 8
	text := tinyText()[:5*le+1+3] // 5 full windows, then a tail window scoring 3 targets
	n := len(text)
	lastNs := []int{0, 2}
	for _, proto := range []Protocol{{}, {Name: "chunks", Window: 4}} {
		got, err := ScoreText(tr.Params, cfg.Model, text, lastNs, EvalOptions{Len: le, Batch: 2, Protocol: proto})
		if err != nil {
			t.Fatal(err)
		}
		for k, lastN := range lastNs {
			s := got[k]
			if len(s.WindowNats) != s.Windows || s.Windows != 6 {
				t.Fatalf("%s last %d: %d window scores for %d windows, want 6", proto, lastN, len(s.WindowNats), s.Windows)
			}
			var sum float64
			for w, v := range s.WindowNats {
				sum += v
				if proto.Name != "" {
					continue // chunks: checked by the sum only
				}
				start, from := w*le, 0
				if w == 5 {
					start, from = n-1-le, le-3
				}
				if lastN > 0 {
					from = max(from, le-lastN)
				}
				if want := tailNats(t, tr.Params, cfg.Model, text, start, le, from); math.Abs(v-want) > 1e-9 {
					t.Errorf("last %d window %d: %.12f nats, by hand %.12f", lastN, w, v, want)
				}
			}
			if math.Abs(sum-s.Nats) > 1e-9*math.Abs(s.Nats) {
				t.Errorf("%s last %d: window scores sum to %.12f, Nats %.12f", proto, lastN, sum, s.Nats)
			}
		}
	}
}

// TestScoreBeyondTable: a learned table shorter than Le gives an error
// wrapping posenc.ErrBeyondTable.
func TestScoreBeyondTable(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model.Pos = "learned"
	cfg.Model.PosOpts.MaxLen = 8
	tr := newTiny(t, cfg)
	_, err := ScoreText(tr.Params, cfg.Model, tr.Corpus.Val, []int{0}, EvalOptions{Len: 16})
	if !errors.Is(err, posenc.ErrBeyondTable) {
		t.Errorf("error %v does not wrap posenc.ErrBeyondTable", err)
	}
}
