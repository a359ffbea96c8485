package trainer

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Activation constants of EstimateMemory: how many values of each size the
// training graph keeps per block (forward values and their gradients),
// measured on the reference block (see TestEstimateMemory).
const (
	actPerTokenD   = 20 // [B*T, d] tensors: LayerNorms, q/k/v/o, residuals, ... and gradients
	actPerScore    = 3  // [B, H, T, T] tensors: scores, mask, softmax, ... and gradients
	actPerTokenFFN = 4  // [B*T, ffn] tensors: up projection, GELU, ... and gradients
	actPerLogit    = 3  // [B*T, V] tensors: logits, softmax, cross-entropy, ... and gradients
)

// MemoryEstimate is a rough count of the bytes a training run needs.
type MemoryEstimate struct {
	// Params is the number of parameters.
	Params float64
	// Weights counts the weights and their gradients (2 values per
	// parameter in the run's dtype), Optimizer AdamW's two float64 moments
	// plus the float64 copies a checkpoint save makes, Activations the
	// values of the training graph and their gradients.
	Weights, Optimizer, Activations float64
	// Total is the sum, in bytes.
	Total float64
}

// String is e.g. "1.2 GiB (12345 parameters: weights 1 MiB, optimizer ..., activations ...)".
func (m MemoryEstimate) String() string {
	return fmt.Sprintf("%s (%.0f parameters: weights+gradients %s, optimizer %s, activations %s)",
		bytesString(m.Total), m.Params, bytesString(m.Weights), bytesString(m.Optimizer), bytesString(m.Activations))
}

// BytesString formats b bytes with a binary unit, e.g. "1.5 GiB".
func BytesString(b float64) string { return bytesString(b) }

func bytesString(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

// EstimateMemory estimates the memory of training cfg, in float64
// arithmetic (no overflow for absurd sizes). With N = Batch*SeqLen tokens,
// d = DModel, f = FFN, H = Heads, V = Vocab, T = SeqLen, L = Layers and s
// the dtype size (4 or 8):
//
//	P           = 2·V·d + L·(4d² + 2·d·f + f + 13d) + 2d + P_pos
//	              (embedding, head, per block q/k/v/o with biases, FFN with
//	              biases, two LayerNorms; final LayerNorm; P_pos = MaxLen·d
//	              for a learned table)
//	Weights     = 2·P·s                 (values and gradients)
//	Optimizer   = 4·P·8                 (AdamW moments, float64 copies on save)
//	Activations = s·(L·(20·N·d + 3·B·H·T² + 4·N·f) + 3·N·V)
//	              (without the 3·B·H·T² scores with Model.Stream)
//
// The activation constants were fitted to the bytes allocated by New and the first update of small float64
// configurations; the estimate is meant to be right within a factor of 2 (measured: 0.93 to 1.09 on five configurations, d 16 to 128, L 16 to 128).
func EstimateMemory(cfg Config) MemoryEstimate {
	m := cfg.Model
	d, f, h, v, l := float64(m.DModel), float64(m.FFN), float64(m.Heads), float64(m.Vocab), float64(m.Layers)
	b, t := float64(cfg.Batch), float64(cfg.SeqLen)
	n := b * t
	s := 4.0
	if cfg.Dtype.Type != nil && cfg.Dtype.Size() > 0 {
		s = float64(cfg.Dtype.Size())
	}
	var e MemoryEstimate
	e.Params = 2*v*d + l*(4*d*d+2*d*f+f+13*d) + 2*d
	if m.Pos == "learned" {
		e.Params += float64(m.PosOpts.Defaults().MaxLen) * d
	}
	e.Weights = 2 * e.Params * s
	e.Optimizer = 4 * e.Params * 8
	scores := actPerScore * b * h * t * t
	if m.Stream { // graph.StreamAttention: no [B, H, T, T] tensor
		scores = 0
	}
	e.Activations = s * (l*(actPerTokenD*n*d+scores+actPerTokenFFN*n*f) + actPerLogit*n*v)
	e.Total = e.Weights + e.Optimizer + e.Activations
	return e
}

// MemAvailable returns MemAvailable of /proc/meminfo in bytes; ok is false
// if it cannot be read (not Linux).
func MemAvailable() (bytes float64, ok bool) { return kBField("/proc/meminfo", "MemAvailable:") }

// memAvailable is the source of the available memory of CheckMemory,
// CheckEvalMemory and NewEvaluator; tests replace it to fake a small
// machine.
var memAvailable = MemAvailable

// PeakRSS returns the peak resident set size of this process (VmHWM of
// /proc/self/status) in bytes; ok is false if it cannot be read.
func PeakRSS() (bytes float64, ok bool) { return kBField("/proc/self/status", "VmHWM:") }

// kBField reads the first line of file starting with key, "key: N kB",
// and returns N·1024.
func kBField(file, key string) (float64, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), key)
		if !found {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// CheckMemory returns an error if the estimated memory of training cfg (see
// EstimateMemory) exceeds avail bytes; avail <= 0 means MemAvailable of the
// machine, and if that is unknown nothing is checked.
func CheckMemory(cfg Config, avail float64) error {
	if avail <= 0 {
		var ok bool
		if avail, ok = memAvailable(); !ok {
			return nil
		}
	}
	e := EstimateMemory(cfg)
	if e.Total > avail {
		return errors.Errorf("config: training needs about %s, more than the %s available; reduce batch, seq-len, d-model, ffn or layers",
			e, bytesString(avail))
	}
	return nil
}

// Constants of EstimateEvalMemory: how many values of each size the
// forward-only graph of an Evaluator holds, fitted to the bytes NewEvaluator
// and one forward pass allocate (see TestEstimateEvalMemory).
const (
	evalPerTokenD   = 10      // [B*T, d] per block: LayerNorms, q/k/v, attention, output, residuals, ...
	evalPerTokenFFN = 3       // [B*T, ffn] per block: up projection, GELU, ...
	evalPerLogit    = 1       // [B*T, V]: the logits
	evalPerMask     = 2       // [T, T] per block: the causal mask and its node (materialised only)
	evalFixed       = 1 << 20 // bytes: work space of the ops and the machine
)

// evalCost is what an encoding adds to the materialised attention of one
// block, in values: Scores tensors [B, H, T, T] (the probabilities, 1,
// and the encoding's terms), Bias tensors [H, T, T] (a score bias shared
// by the batch), Pairs values per (query, key) pair ([T, T], e.g. fire's
// MLP); and with the streaming attention StreamD values [B*T, d] and
// StreamTokens values per token, per block, and StreamFixed bytes of work
// space. Measured per encoding (TestEstimateEvalMemory).
type evalCost struct{ Scores, Bias, Pairs, StreamD, StreamTokens, StreamFixed float64 }

// evalCosts are the encodings whose cost is not the default {Scores: 1}
// (fire's Pairs, StreamTokens and StreamFixed are per unit of FireWidth).
var evalCosts = map[string]evalCost{
	"alibi":   {Scores: 1, Bias: 2},
	"kerple":  {Scores: 1, Bias: 2},
	"t5":      {Scores: 1, Bias: 4},
	"shaw":    {Scores: 3},
	"xl":      {Scores: 5, StreamD: 8},
	"rope":    {Scores: 1, StreamD: 3},
	"deberta": {Scores: 6},
	"cope":    {Scores: 6},
	"fire":    {Scores: 1, Bias: 2, Pairs: 3, StreamTokens: 48, StreamFixed: 128 << 10},
}

// encodingCost returns the evalCost of model's encoding: the table's entry
// for its name (with fire's width), {Scores: 1, Bias: 2} for another
// encoding with a score bias, {Scores: 3} for another with content-position
// terms, {Scores: 1} otherwise. A combination ("tree+rope") adds its parts.
func encodingCost(model layers.Config) evalCost {
	name := model.Pos
	if name == "" {
		name = "none"
	}
	var c evalCost
	parts := strings.Split(name, "+")
	for _, part := range parts {
		pc, ok := evalCosts[part]
		if !ok {
			pc = evalCost{Scores: 1}
			if e, err := posenc.New(part, model.PosOpts); err != nil {
				pc = evalCost{Scores: 3, Bias: 2} // unknown: count generously
			} else {
				_, st := e.(posenc.ScoreTermer)
				_, vt := e.(posenc.ValueTermer)
				if st || vt {
					pc.Scores = 3
				}
				if _, ok := e.(posenc.ScoreBiaser); ok {
					pc.Bias = 2
				}
			}
		}
		if part == "fire" {
			w := float64(model.PosOpts.Defaults().FireWidth)
			pc.Pairs, pc.StreamTokens, pc.StreamFixed = pc.Pairs*w, pc.StreamTokens*w, pc.StreamFixed*w
		}
		c.Scores += pc.Scores
		c.Bias += pc.Bias
		c.Pairs += pc.Pairs
		c.StreamD += pc.StreamD
		c.StreamTokens += pc.StreamTokens
		c.StreamFixed += pc.StreamFixed
	}
	c.Scores -= float64(len(parts) - 1) // one tensor of probabilities
	return c
}

// EvalMemoryEstimate is a rough count of the bytes the graph of an
// Evaluator adds to the weights already loaded.
type EvalMemoryEstimate struct {
	// Batch, Len and Stream are the graph's shape and attention.
	Batch, Len int
	Stream     bool
	// Tokens is the bytes of the [B*T, ·] values (blocks and logits),
	// Scores those of the [B, H, T, T], [H, T, T] and [T, T] ones (0 with
	// Stream), Fixed the work space; Total is their sum.
	Tokens, Scores, Fixed, Total float64
}

// String is e.g. "1.2 GiB (materialised attention, batch 8 × 512: token
// values 10 MiB, scores 1.1 GiB)"; streamed, without the scores.
func (m EvalMemoryEstimate) String() string {
	if m.Stream {
		return fmt.Sprintf("%s (streaming attention, batch %d × %d: token values %s)", bytesString(m.Total), m.Batch, m.Len, bytesString(m.Tokens))
	}
	att := "materialised attention"
	return fmt.Sprintf("%s (%s, batch %d × %d: token values %s, scores %s)", bytesString(m.Total), att, m.Batch, m.Len,
		bytesString(m.Tokens), bytesString(m.Scores))
}

// EstimateEvalMemory estimates the bytes of the forward-only graph of an
// Evaluator of model for batch windows of length tokens, values of
// dtypeSize bytes (4 or 8; 0 means 4), in float64 arithmetic (no overflow
// for absurd sizes). The weights, already loaded, are not counted. With
// N = batch·length, T = length, L = Layers, s = dtypeSize:
//
//	Tokens = s·(L·(10·N·d + 3·N·ffn) + N·V)
//	         + s·L·(StreamD·N·d + StreamTokens·N)          (with model.Stream)
//	Scores = s·L·(Scores·B·H·T² + Bias·H·T² + (Pairs + 2)·T²)  (0 with model.Stream)
//	Fixed  = 1 MiB (+ StreamFixed with model.Stream)
//
// Scores, Bias, Pairs and the Stream terms depend on the encoding
// (evalCosts: Scores 1 and no others for none, learned, ...; more for
// rope, alibi, t5, shaw, xl, deberta, cope, fire); the 2·T² are the causal mask (a host constant and
// its node). The streaming attention (model.Stream) holds no [T, T]
// value: its work space is O(tiles) per thread. The constants were fitted
// to the bytes NewEvaluator and one forward pass allocate with the garbage
// collector off, on float64 models of d 16 to 256 and T 64 to 2048
// (TestEstimateEvalMemory: within a factor of 2, mostly 1 to 1.5).
func EstimateEvalMemory(model layers.Config, batch, length, dtypeSize int) EvalMemoryEstimate {
	d, f, h, v, l := float64(model.DModel), float64(model.FFN), float64(model.Heads), float64(model.Vocab), float64(model.Layers)
	b, t := float64(batch), float64(length)
	n := b * t
	s := 4.0
	if dtypeSize > 0 {
		s = float64(dtypeSize)
	}
	c := encodingCost(model)
	e := EvalMemoryEstimate{Batch: batch, Len: length, Stream: model.Stream, Fixed: evalFixed}
	perBlock := evalPerTokenD*n*d + evalPerTokenFFN*n*f
	if model.Stream {
		perBlock += c.StreamD*n*d + c.StreamTokens*n
		e.Fixed += c.StreamFixed
	} else {
		e.Scores = s * l * (c.Scores*b*h*t*t + c.Bias*h*t*t + (c.Pairs+evalPerMask)*t*t)
	}
	e.Tokens = s * (l*perBlock + evalPerLogit*n*v)
	e.Total = e.Tokens + e.Scores + e.Fixed
	return e
}

// EstimateSampleMemory estimates the bytes of the graph Sample builds for
// opt (batch 1, length min(Window, len(Prompt)+N-1); see
// EstimateEvalMemory). A non-causal model builds one graph per context
// length; the largest is counted.
func EstimateSampleMemory(model layers.Config, opt SampleOptions, dtypeSize int) EvalMemoryEstimate {
	return EstimateEvalMemory(model, 1, sampleLen(opt), dtypeSize)
}

// sampleLen is the length of the largest graph Sample builds for opt.
func sampleLen(opt SampleOptions) int {
	p := max(len(opt.Prompt), 1)
	return max(1, min(opt.Window, p+opt.N-1))
}

// MemoryError is the refusal of CheckEvalMemory: a graph estimated above
// the available memory.
type MemoryError struct {
	// What is being refused ("evaluation", "sampling").
	What string
	// Estimate is the graph's estimate, Avail the memory available.
	Estimate EvalMemoryEstimate
	Avail    float64
	// Hint says what helps: the streaming attention (-stream) if the
	// encoding can stream and the estimate is materialised, else a smaller
	// length or batch.
	Hint string
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%s needs about %s, more than the %s available; %s", e.What, e.Estimate, bytesString(e.Avail), e.Hint)
}

// CheckEvalMemory returns a *MemoryError if the estimated graph of an
// Evaluator of model for batch windows of length tokens (see
// EstimateEvalMemory) exceeds avail bytes; avail <= 0 means the machine's
// MemAvailable, and if that is unknown nothing is checked. The error's hint
// names -stream when the materialised model's encoding can stream
// (StreamError), a smaller -len or -batch otherwise.
func CheckEvalMemory(model layers.Config, batch, length, dtypeSize int, avail float64) error {
	if avail <= 0 {
		var ok bool
		if avail, ok = memAvailable(); !ok {
			return nil
		}
	}
	e := EstimateEvalMemory(model, batch, length, dtypeSize)
	if e.Total <= avail {
		return nil
	}
	return &MemoryError{What: "evaluation", Estimate: e, Avail: avail, Hint: memoryHint(model, batch, length, dtypeSize, avail)}
}

// memoryHint says what would bring a graph over avail within it.
func memoryHint(model layers.Config, batch, length, dtypeSize int, avail float64) string {
	if !model.Stream {
		streamed := model
		streamed.Stream = true
		if err := StreamError(model); err != nil {
			return fmt.Sprintf("use a smaller -len or -batch (%v)", err)
		}
		if se := EstimateEvalMemory(streamed, batch, length, dtypeSize); se.Total <= avail {
			return fmt.Sprintf("-stream (the streaming attention, O(T) memory) needs about %s", bytesString(se.Total))
		}
		return "use -stream (the streaming attention, O(T) memory) and a smaller -len or -batch"
	}
	return "use a smaller -len or -batch"
}

// StreamError returns nil if model's encoding can run with the streaming
// attention (layers.Config.Stream), else the error naming the encoding
// that building such a model returns. It builds a throwaway one-block
// model of [1, 2] tokens on its own weights.
func StreamError(model layers.Config) error {
	m := model
	m.Stream, m.Layers, m.Vocab, m.FFN = true, 1, 2, 1
	p := graph.NewParams(tensor.Float64, 1)
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, m)
	if err != nil {
		return err
	}
	ids := G.NewMatrix(g, tensor.Int, G.WithShape(1, 2), G.WithName("ids"), G.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]int{0, 1}))))
	if _, err := lm.Fwd(ids); err != nil {
		name := model.Pos
		if name == "" {
			name = "none"
		}
		return errors.WithMessagef(err, "%s cannot stream", name)
	}
	return nil
}
