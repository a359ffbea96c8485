package study

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Score is the cross-entropy of a model on the targets one protocol scores.
type Score struct {
	// Nats is the summed cross-entropy in nats over Tokens targets of
	// Windows windows.
	Nats            float64
	Tokens, Windows int
}

// BitsPerByte is the mean cross-entropy in bits: Nats / Tokens / ln 2.
func (s Score) BitsPerByte() float64 { return s.Nats / float64(s.Tokens) / math.Ln2 }

// Perplexity is the byte-level perplexity exp(Nats/Tokens) = 2^BitsPerByte.
func (s Score) Perplexity() float64 { return math.Exp(s.Nats / float64(s.Tokens)) }

// ScoreWindows scores a model on text with both protocols in one pass. The
// text is cut into Windows(len(text), le) = (len(text)-1)/le non-overlapping
// windows: window w has inputs text[w·le : (w+1)·le] at positions 0..le-1
// and targets text[w·le+1 : (w+1)·le+1] (a last partial window is dropped).
// all scores every target; last scores only the last lastN targets of each
// window (positions le-lastN..le-1, which see at least le-lastN bytes of
// context). Windows go through one forward graph [batch, le] built over the
// weights of p (a last incomplete batch is padded with repeats of a real
// window, which are not scored); the cross-entropy is computed in float64
// from the logits. A model that cannot run at le (a learned table shorter
// than le) returns the error of the layer, which wraps
// posenc.ErrBeyondTable. Other errors: text shorter than one window, lastN
// outside [1, le], batch < 1.
func ScoreWindows(p *graph.Params, model layers.Config, text []byte, le, lastN, batch int) (all, last Score, err error) {
	if le <= 0 || lastN < 1 || lastN > le || batch < 1 {
		return all, last, errors.Errorf("score: length %d, last-n %d (want 1..length) and batch %d must be positive", le, lastN, batch)
	}
	nw := trainer.Windows(len(text), le)
	if nw == 0 {
		return all, last, errors.Errorf("score: %d bytes of text, too short for one window of %d+1 bytes", len(text), le)
	}
	batch = min(batch, nw)
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, model)
	if err != nil {
		return all, last, errors.WithMessage(err, "score: building the model")
	}
	idsBuf := make([]int, batch*le)
	idsT := tensor.New(tensor.WithShape(batch, le), tensor.WithBacking(idsBuf))
	idsN := G.NewMatrix(g, tensor.Int, G.WithShape(batch, le), G.WithName("score_ids"), G.WithValue(idsT))
	logits, err := lm.Fwd(idsN) // [batch*le, V]
	if err != nil {
		return all, last, errors.WithMessagef(err, "score: model at length %d", le)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	v := model.Vocab
	row := make([]float64, v)
	for w0 := 0; w0 < nw; w0 += batch {
		nb := min(batch, nw-w0)
		for b := 0; b < batch; b++ {
			w := w0 + min(b, nb-1) // padding rows repeat a real window
			for j := 0; j < le; j++ {
				idsBuf[b*le+j] = int(text[w*le+j])
			}
		}
		if err := G.Let(idsN, idsT); err != nil {
			return all, last, errors.Wrap(err, "score: binding ids")
		}
		if err := vm.RunAll(); err != nil {
			vm.Reset()
			return all, last, errors.Wrapf(err, "score: windows %d..%d of length %d", w0, w0+nb-1, le)
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
					vm.Reset()
					return all, last, errors.Errorf("score: logits of type %T", d)
				}
				nll := -logSoftmaxAt(row, int(text[w*le+j+1]))
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

// logSoftmaxAt returns log softmax(logits)[k], computed in float64.
func logSoftmaxAt(logits []float64, k int) float64 {
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, x)
	}
	var s float64
	for _, x := range logits {
		s += math.Exp(x - m)
	}
	return logits[k] - m - math.Log(s)
}
