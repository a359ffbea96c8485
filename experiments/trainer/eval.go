package trainer

import (
	"fmt"
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
// batch windows of length tokens (positions 0..length-1). A graph
// estimated above the machine's available memory (CheckEvalMemory) is
// refused before anything is allocated, with a *MemoryError stating the
// estimate and what helps (model.Stream, a smaller length or batch). A
// model that cannot run at that length (a learned table shorter than
// length) returns the layer's error, with context.
func NewEvaluator(p *graph.Params, model layers.Config, batch, length int) (*Evaluator, error) {
	if batch <= 0 || length <= 0 {
		return nil, errors.Errorf("evaluator: batch %d and length %d must be positive", batch, length)
	}
	if err := CheckEvalMemory(model, batch, length, int(p.Dtype().Size()), 0); err != nil {
		return nil, errors.WithMessagef(err, "evaluator: [%d, %d] graph", batch, length)
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

// LogSoftmaxAt returns log softmax(logits)[k], computed in float64 with
// the maximum subtracted (stable for any finite logits).
func LogSoftmaxAt(logits []float64, k int) float64 {
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

// Score is the summed cross-entropy of the targets one protocol scores.
type Score struct {
	// Nats is the summed cross-entropy in nats over Tokens targets of
	// Windows windows (Windows counts every window run, the tail window
	// included, whether or not it scored a target of this protocol).
	Nats            float64
	Tokens, Windows int
	// WindowNats is the summed cross-entropy in nats of each window run
	// (Windows of them, in text order, the tail window last), over the
	// targets this protocol scores in it: the items of a paired comparison
	// over evaluation windows. They sum to Nats (in another order).
	WindowNats []float64
}

// BitsPerByte is the mean cross-entropy in bits: Nats / Tokens / ln 2.
func (s Score) BitsPerByte() float64 { return s.Nats / float64(s.Tokens) / math.Ln2 }

// Perplexity is the byte-level perplexity exp(Nats/Tokens) = 2^BitsPerByte.
func (s Score) Perplexity() float64 { return math.Exp(s.Nats / float64(s.Tokens)) }

// Result converts s to the mean-based EvalResult.
func (s Score) Result() EvalResult {
	nats := s.Nats / float64(s.Tokens)
	return EvalResult{BitsPerByte: nats / math.Ln2, Nats: nats, Windows: s.Windows, Tokens: s.Tokens}
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

// Windows returns the number of non-overlapping full windows of length
// inputs (plus one target byte) in n bytes: (n-1)/length.
func Windows(n, length int) int {
	if n < 1 || length <= 0 {
		return 0
	}
	return (n - 1) / length
}

// ScoreWindows returns the number of windows Score runs on n bytes at
// length le with no window limit: the full windows plus one tail window if
// (n-1) is not a multiple of le. It is 0 if n-1 < le.
func ScoreWindows(n, le int) int {
	w := Windows(n, le)
	if w > 0 && (n-1)%le != 0 {
		w++
	}
	return w
}

// window is one window Score runs: inputs text[start : start+Len], targets
// shifted by one, positions from..Len-1 scored.
type window struct{ start, from int }

// lastFloors returns the first position each last-n protocol of lastNs
// scores in a window of le positions (0 for lastN 0). Errors: no protocol,
// a lastN outside [0, le].
func lastFloors(lastNs []int, le int) ([]int, error) {
	if len(lastNs) == 0 {
		return nil, errors.New("score: no protocol (lastNs is empty)")
	}
	lo := make([]int, len(lastNs))
	for k, n := range lastNs {
		if n < 0 || n > le {
			return nil, errors.Errorf("score: last-n %d outside [0, %d]", n, le)
		}
		if n > 0 {
			lo[k] = le - n
		}
	}
	return lo, nil
}

// documents returns the windows Score runs on n bytes at length le (see
// Score): the full windows, at most maxWindows > 0 of them, then, with no
// limit, the tail window right-aligned to the end of the text, scoring
// only its last (n-1) mod le targets. Errors: n < le+1.
func documents(n, le, maxWindows int) ([]window, error) {
	full := Windows(n, le)
	if full == 0 {
		return nil, tooShort(n, le)
	}
	if maxWindows > 0 {
		full = min(full, maxWindows)
	}
	wins := make([]window, 0, full+1)
	for w := 0; w < full; w++ {
		wins = append(wins, window{start: w * le})
	}
	if r := (n - 1) % le; maxWindows <= 0 && r != 0 {
		wins = append(wins, window{start: n - 1 - le, from: le - r})
	}
	return wins, nil
}

// Score scores text with one Score per entry of lastNs, in one pass over
// the windows. lastN 0 scores every target; lastN = k > 0 only the last k
// targets of each window (positions Len-k..Len-1, which see at least Len-k
// bytes of context).
//
// The text (n bytes, n-1 targets) is cut into (n-1)/Len non-overlapping
// windows: window w has inputs text[w·Len : (w+1)·Len] at positions
// 0..Len-1 and targets text[w·Len+1 : (w+1)·Len+1]. If r = (n-1) mod Len is
// not 0, one more window right-aligned to the end of the text (inputs
// text[n-1-Len : n-1]) is run and only its last r targets are counted (the
// ones no earlier window scored); a lastN protocol counts those of the r
// that are among the window's last lastN positions. So protocol 0 scores
// each of the n-1 targets exactly once at every Len. maxWindows > 0 scores
// only the first maxWindows full windows (no tail window).
//
// Windows go through the evaluator's [Batch, Len] graph in order (a last
// incomplete batch is padded with repeats of a real window, which are not
// scored). The cross-entropy is computed in float64 from the logits and
// summed in window order, then position order.
//
// Errors: no protocol, a lastN outside [0, Len], text shorter than one
// window (Len+1 bytes), a failure of the graph.
func (e *Evaluator) Score(text []byte, lastNs []int, maxWindows int) ([]Score, error) {
	return scoreDocs(text, lastNs, maxWindows, e.Len, e.Batch, "windows", func(docs []window, visit func(scored) error) error {
		return e.runWindows(text, docs, e.Len, e.Len, e.Len, visit)
	}, nil)
}

// scoreDocs is the scoring of Evaluator.Score and Scorer.Score: the
// documents of length le of text (documents), batch at a time through run,
// which calls visit once for every position of every document; the
// positions a document scores (from its start on) count, each lastN
// protocol counting its last lastN. what names the documents in errors;
// trace, if set, sees every scored target.
func scoreDocs(text []byte, lastNs []int, maxWindows, le, batch int, what string,
	run func(docs []window, visit func(scored) error) error, trace func(window, scored)) ([]Score, error) {
	lo, err := lastFloors(lastNs, le)
	if err != nil {
		return nil, err
	}
	docs, err := documents(len(text), le, maxWindows)
	if err != nil {
		return nil, err
	}
	out := make([]Score, len(lastNs))
	for k := range out {
		out[k].WindowNats = make([]float64, len(docs))
	}
	for d0 := 0; d0 < len(docs); d0 += batch {
		part := docs[d0:min(d0+batch, len(docs))]
		err := run(part, func(t scored) error {
			w := part[t.Doc]
			if t.J < w.from {
				return nil
			}
			if trace != nil {
				trace(w, t)
			}
			nll := -LogSoftmaxAt(t.Logits, int(text[w.start+t.J+1]))
			for k := range out {
				if t.J >= lo[k] {
					out[k].Nats += nll
					out[k].Tokens++
					out[k].WindowNats[d0+t.Doc] += nll
				}
			}
			return nil
		})
		if err != nil {
			return nil, errors.WithMessagef(err, "score: %s %d..%d of length %d", what, d0, d0+len(part)-1, le)
		}
	}
	for k := range out {
		out[k].Windows = len(docs)
	}
	return out, nil
}

// Eval scores the full windows of data with one protocol (see Score; the
// tail window is not run): lastN > 0 scores only the last lastN targets of
// each window, maxWindows > 0 limits the number of windows. It reports the
// mean cross-entropy. Errors: as Score's.
func (e *Evaluator) Eval(data []byte, lastN, maxWindows int) (EvalResult, error) {
	full := Windows(len(data), e.Len)
	if maxWindows <= 0 || maxWindows > full {
		maxWindows = full
	}
	s, err := e.Score(data, []int{lastN}, maxWindows)
	if err != nil {
		return EvalResult{}, err
	}
	return s[0].Result(), nil
}

// ErrTooShort is wrapped by the error of Score, ScoreText and Evaluate for a
// text shorter than one window (Len+1 bytes).
var ErrTooShort = errors.New("text too short for one window")

// tooShortError is the error for Bytes bytes at window length Len; it is
// ErrTooShort (errors.Is).
type tooShortError struct{ bytes, len int }

func (e tooShortError) Error() string {
	return fmt.Sprintf("score: %d bytes, too short for one window of %d+1 bytes (window length %d)", e.bytes, e.len, e.len)
}

func (e tooShortError) Is(target error) bool { return target == ErrTooShort }

// tooShort is the error for n bytes at window length le.
func tooShort(n, le int) error { return tooShortError{n, le} }

// RunBatch returns the batch ScoreText (scoring) or Evaluate builds for n
// bytes: opt.Batch (0: 8) capped at the number of windows run (ScoreText:
// the full windows and the tail window, or at most opt.MaxWindows full
// ones; Evaluate: the full windows), so a short text needs no padding; 0
// if the text is shorter than one window.
func RunBatch(n int, opt EvalOptions, scoring bool) int {
	b := opt.Batch
	if b == 0 {
		b = 8
	}
	nw := Windows(n, opt.Len)
	if scoring {
		if opt.MaxWindows > 0 {
			nw = min(nw, opt.MaxWindows)
		} else {
			nw = ScoreWindows(n, opt.Len)
		}
	}
	return min(b, nw)
}

// EvalOptions configures Evaluate and ScoreText.
type EvalOptions struct {
	// Len is the window length Le (required).
	Len int
	// Batch is the number of windows per forward pass (default 8; capped at
	// the number of windows run, so a short text needs no padding).
	Batch int
	// LastN > 0 scores only the last LastN targets of each window
	// (Evaluate only; ScoreText takes a list).
	LastN int
	// MaxWindows > 0 limits the number of full windows (and runs no tail
	// window).
	MaxWindows int
	// Protocol is how each window (a document of Len tokens) is scored;
	// the zero value is full (see Protocol).
	Protocol Protocol
}

// ScoreText builds a Scorer for model over p at length opt.Len with
// opt.Protocol (the zero value: full, an Evaluator) and batch
// min(opt.Batch, windows run), scores text with every protocol of lastNs
// (see Evaluator.Score and Scorer.Score; opt.LastN is ignored) and
// releases the graph.
// A text shorter than one window is refused before the graph is built
// (an error wrapping ErrTooShort, naming both lengths), and so is a graph
// over the available memory (NewEvaluator). A model that cannot run at
// opt.Len (a learned table shorter than it) returns the layer's error,
// which wraps posenc.ErrBeyondTable.
func ScoreText(p *graph.Params, model layers.Config, text []byte, lastNs []int, opt EvalOptions) ([]Score, error) {
	if opt.Len <= 0 {
		return nil, errors.Errorf("score: length %d must be positive", opt.Len)
	}
	if Windows(len(text), opt.Len) == 0 {
		return nil, tooShort(len(text), opt.Len)
	}
	opt.Batch = opt.Protocol.runBatch(len(text), opt, true) // no padding rows for a short text
	e, err := NewScorer(p, model, opt.Batch, opt.Len, opt.Protocol)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.Score(text, lastNs, opt.MaxWindows)
}

// Evaluate builds an Evaluator (or, with opt.Protocol, a Scorer) for model
// over p at length opt.Len, scores the full windows of data with one
// last-n protocol (see Evaluator.Eval) and
// releases the graph. The extrapolation study calls it at Le = L, 2L, 4L, 8L
// on the same Params. A text shorter than one window is refused before the
// graph is built, as by ScoreText.
func Evaluate(p *graph.Params, model layers.Config, data []byte, opt EvalOptions) (EvalResult, error) {
	if opt.Len <= 0 {
		return EvalResult{}, errors.Errorf("score: length %d must be positive", opt.Len)
	}
	if Windows(len(data), opt.Len) == 0 {
		return EvalResult{}, tooShort(len(data), opt.Len)
	}
	opt.Batch = opt.Protocol.runBatch(len(data), opt, false) // no padding rows for a short text
	if opt.Protocol.name() == ProtoFull {
		e, err := NewEvaluator(p, model, opt.Batch, opt.Len)
		if err != nil {
			return EvalResult{}, err
		}
		defer e.Close()
		return e.Eval(data, opt.LastN, opt.MaxWindows)
	}
	full := Windows(len(data), opt.Len)
	if opt.MaxWindows <= 0 || opt.MaxWindows > full {
		opt.MaxWindows = full
	}
	e, err := NewScorer(p, model, opt.Batch, opt.Len, opt.Protocol)
	if err != nil {
		return EvalResult{}, err
	}
	defer e.Close()
	s, err := e.Score(data, []int{opt.LastN}, opt.MaxWindows)
	if err != nil {
		return EvalResult{}, err
	}
	return s[0].Result(), nil
}
