package trainer

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Evaluator is a forward-only graph of a model for inputs [Batch, Len]:
// built once, it scores any number of windows. It has no gradient nodes and
// binds no dual values, so evaluating never touches the gradients of a
// training graph built from the same Params.
type Evaluator struct {
	Batch, Len int
	Model      layers.Config

	p      *graph.Params
	g      *G.ExprGraph
	idsN   *G.Node
	logits *G.Node
	vm     G.VM
	idsT   *tensor.Dense
	ids    []int
}

// NewEvaluator builds the forward graph of model over the weights of p for
// batch windows of length tokens (positions 0..length-1). A model that
// cannot run at that length (a learned table shorter than length) returns
// the layer's error, with context.
func NewEvaluator(p *graph.Params, model layers.Config, batch, length int) (*Evaluator, error) {
	if batch <= 0 || length <= 0 {
		return nil, errors.Errorf("evaluator: batch %d and length %d must be positive", batch, length)
	}
	e := &Evaluator{Batch: batch, Len: length, Model: model, p: p, g: G.NewGraph()}
	lm, err := layers.NewLM(e.g, p, model)
	if err != nil {
		p.Forget(e.g)
		return nil, errors.WithMessage(err, "evaluator: building the model")
	}
	e.ids = make([]int, batch*length)
	e.idsT = tensor.New(tensor.WithShape(batch, length), tensor.WithBacking(e.ids))
	e.idsN = G.NewMatrix(e.g, tensor.Int, G.WithShape(batch, length), G.WithName("eval_ids"), G.WithValue(e.idsT))
	if e.logits, err = lm.Fwd(e.idsN); err != nil { // [B*T, V]
		p.Forget(e.g)
		return nil, errors.WithMessagef(err, "evaluator: model at length %d", length)
	}
	e.vm = G.NewTapeMachine(e.g)
	return e, nil
}

// Close releases the machine and the store's record of the graph.
func (e *Evaluator) Close() error {
	e.p.Forget(e.g)
	return e.vm.Close()
}

// forward runs the model on ids (len Batch*Len, row-major [Batch, Len]) and
// calls row(i, logits) for each of the Batch*Len rows, logits being the V
// scores of the next token after ids[i], as float64.
func (e *Evaluator) forward(ids []int, row func(i int, logits []float64) error) error {
	if len(ids) != len(e.ids) {
		return errors.Errorf("evaluator: %d ids for a [%d, %d] batch", len(ids), e.Batch, e.Len)
	}
	copy(e.ids, ids)
	if err := G.Let(e.idsN, e.idsT); err != nil {
		return errors.Wrap(err, "evaluator: binding ids")
	}
	defer e.vm.Reset()
	if err := e.vm.RunAll(); err != nil {
		return errors.Wrap(err, "evaluator")
	}
	v := e.logits.Shape()[1]
	buf := make([]float64, v)
	switch d := e.logits.Value().Data().(type) {
	case []float32:
		for i := range ids {
			for j, x := range d[i*v : (i+1)*v] {
				buf[j] = float64(x)
			}
			if err := row(i, buf); err != nil {
				return err
			}
		}
	case []float64:
		for i := range ids {
			if err := row(i, d[i*v:(i+1)*v]); err != nil {
				return err
			}
		}
	default:
		return errors.Errorf("evaluator: logits of type %T", d)
	}
	return nil
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

// EvalResult is the score of a model on a text.
type EvalResult struct {
	// BitsPerByte is the mean cross-entropy in bits: Nats / ln 2.
	BitsPerByte float64
	// Nats is the mean cross-entropy per scored byte in nats.
	Nats float64
	// Windows and Tokens count the windows and the scored targets.
	Windows, Tokens int
}

// Windows returns the number of non-overlapping windows of length inputs
// (plus one target byte) in n bytes: (n-1)/length.
func Windows(n, length int) int {
	if n < 1 || length <= 0 {
		return 0
	}
	return (n - 1) / length
}

// Eval scores data with non-overlapping windows of e.Len bytes: window w has
// inputs data[w*Len : (w+1)*Len] and targets shifted by one, so every byte
// after the first is a target of exactly one window (a last partial window
// is dropped). With lastN > 0 only the last lastN targets of each window
// are scored (each then has at least Len-lastN bytes of context); maxWindows
// > 0 limits the number of windows. The cross-entropy is computed in
// float64 from the logits. Errors: data too short for one window, lastN >
// Len, a run failure.
func (e *Evaluator) Eval(data []byte, lastN, maxWindows int) (EvalResult, error) {
	var res EvalResult
	le := e.Len
	if lastN < 0 || lastN > le {
		return res, errors.Errorf("eval: last-n %d outside [0, %d]", lastN, le)
	}
	if lastN == 0 {
		lastN = le
	}
	nw := Windows(len(data), le)
	if nw == 0 {
		return res, errors.Errorf("eval: %d bytes, too short for one window of %d+1 bytes", len(data), le)
	}
	if maxWindows > 0 && nw > maxWindows {
		nw = maxWindows
	}
	ids := make([]int, e.Batch*le)
	var sum float64
	for w0 := 0; w0 < nw; w0 += e.Batch {
		nb := min(e.Batch, nw-w0)
		for b := 0; b < e.Batch; b++ {
			w := w0 + b
			if b >= nb {
				w = w0 // padding rows repeat a real window and are not scored
			}
			for j := 0; j < le; j++ {
				ids[b*le+j] = int(data[w*le+j])
			}
		}
		err := e.forward(ids, func(i int, logits []float64) error {
			b, j := i/le, i%le
			if b >= nb || j < le-lastN {
				return nil
			}
			sum -= logSoftmaxAt(logits, int(data[(w0+b)*le+j+1]))
			res.Tokens++
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	res.Windows = nw
	res.Nats = sum / float64(res.Tokens)
	res.BitsPerByte = res.Nats / math.Ln2
	return res, nil
}

// EvalOptions configures Evaluate.
type EvalOptions struct {
	// Len is the window length Le (required).
	Len int
	// Batch is the number of windows per forward pass (default 8).
	Batch int
	// LastN > 0 scores only the last LastN targets of each window.
	LastN int
	// MaxWindows > 0 limits the number of windows.
	MaxWindows int
}

// Evaluate builds an Evaluator for model over p at length opt.Len, scores
// data (see Evaluator.Eval) and releases the graph. The extrapolation study
// calls it at Le = L, 2L, 4L, 8L on the same Params.
func Evaluate(p *graph.Params, model layers.Config, data []byte, opt EvalOptions) (EvalResult, error) {
	if opt.Batch == 0 {
		opt.Batch = 8
	}
	if nw := Windows(len(data), opt.Len); nw > 0 && nw < opt.Batch {
		opt.Batch = nw // no padding rows for a short text
	}
	e, err := NewEvaluator(p, model, opt.Batch, opt.Len)
	if err != nil {
		return EvalResult{}, err
	}
	defer e.Close()
	return e.Eval(data, opt.LastN, opt.MaxWindows)
}
