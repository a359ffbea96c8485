package trainer

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// sampleStream is the second PCG seed word of the sampling generator.
const sampleStream = 0x73616d706c65 // "sample"

// SampleOptions configures Sample.
type SampleOptions struct {
	// Prompt is the text to continue; empty means "\n".
	Prompt []byte
	// N is the number of bytes to generate.
	N int
	// Temperature divides the logits; <= 0 means greedy (argmax). It must
	// be finite (NaN and ±Inf are errors).
	Temperature float64
	// Seed seeds the sampling generator.
	Seed uint64
	// Window is the largest context, in bytes (required). Pass the training
	// length: models without relative positions ("none", "learned") must not
	// see more than L tokens.
	Window int
	// NoCache recomputes the window for every byte even where the
	// key/value cache (layers.Decoder) serves the model: for comparison.
	NoCache bool
	// TopK keeps the K most probable bytes before drawing (0: all; at
	// most the vocabulary). TopP keeps the smallest set of most probable
	// bytes whose probability reaches TopP (nucleus sampling, Holtzman et
	// al. 2020; 0 or 1: all). Both apply after Temperature, and neither
	// to greedy decoding.
	TopK int
	TopP float64
	// Stop ends a sequence once its output ends with Stop (included in
	// the output); empty: never.
	Stop []byte
	// Sinks is the number of first positions the cache keeps once the
	// context exceeds Window (attention sinks, Xiao et al. 2023); the
	// others slide. Cached decoding only.
	Sinks int
	// OnByte, if set, receives each byte as it is produced, with the index
	// of its prompt (streaming output); an error stops generation.
	OnByte func(seq int, b byte) error
}

// Generation is the result of Generate.
type Generation struct {
	// Out holds the bytes generated for each prompt.
	Out [][]byte
	// Cached is true if the key/value cache decoded; otherwise Fallback
	// says why the window was recomputed for every byte.
	Cached   bool
	Fallback string
	// Prefill is the time spent on the prompts, Decode the time spent
	// generating; Tokens is the number of bytes generated (all prompts).
	Prefill, Decode time.Duration
	Tokens          int
}

// TokensPerSecond is the generation rate, bytes per second of Decode.
func (g *Generation) TokensPerSecond() float64 {
	if g.Decode <= 0 {
		return 0
	}
	return float64(g.Tokens) / g.Decode.Seconds()
}

// Sample generates opt.N bytes continuing opt.Prompt with the model over p.
// Each byte is drawn from softmax(logits/Temperature) of the last position,
// the context being the last Window bytes. A causal model uses one forward
// graph of batch 1 and length min(Window, len(prompt)+N): the context sits at
// positions 0.. with zero bytes after it, which the causal mask hides. A
// non-causal model uses one graph per context length. A graph over the
// available memory is refused before it is built (NewEvaluator;
// EstimateSampleMemory estimates the largest).
func Sample(p *graph.Params, model layers.Config, opt SampleOptions) ([]byte, error) {
	if err := checkSampleOptions(model, opt); err != nil {
		return nil, err
	}
	if opt.N == 0 {
		return []byte{}, nil
	}
	if !opt.NoCache && model.Causal && layers.CanDecode(model) == nil {
		g, err := Generate(p, model, [][]byte{opt.Prompt}, opt)
		if err != nil {
			return nil, err
		}
		return g.Out[0], nil
	}
	return sampleRecompute(p, model, opt)
}

func checkSampleOptions(model layers.Config, opt SampleOptions) error {
	switch {
	case opt.Window <= 0:
		return errors.Errorf("sample: window %d must be positive", opt.Window)
	case opt.N < 0:
		return errors.Errorf("sample: %d bytes asked", opt.N)
	case math.IsNaN(opt.Temperature) || math.IsInf(opt.Temperature, 0):
		return errors.Errorf("sample: temperature %v must be finite", opt.Temperature)
	case opt.TopK < 0 || opt.TopK > model.Vocab:
		return errors.Errorf("sample: top-k %d must be in [0, %d] (0: all)", opt.TopK, model.Vocab)
	case math.IsNaN(opt.TopP) || opt.TopP < 0 || opt.TopP > 1:
		return errors.Errorf("sample: top-p %v must be in [0, 1] (0 or 1: all)", opt.TopP)
	case opt.Sinks < 0 || opt.Sinks >= max(1, opt.Window-1):
		return errors.Errorf("sample: %d sinks must be in [0, %d) for a window of %d", opt.Sinks, max(1, opt.Window-1), opt.Window)
	}
	return nil
}

// sampleRecompute is Sample computing the whole window for every byte; its
// callers have checked opt (checkSampleOptions).
func sampleRecompute(p *graph.Params, model layers.Config, opt SampleOptions) ([]byte, error) {
	if opt.N == 0 {
		return []byte{}, nil
	}
	ctx := append([]byte(nil), opt.Prompt...)
	if len(ctx) == 0 {
		ctx = []byte{'\n'}
	}
	rng := rand.New(rand.NewPCG(opt.Seed, sampleStream))
	evals := map[int]*Evaluator{}
	defer func() {
		for _, e := range evals {
			e.Close()
		}
	}()
	causalLen := min(opt.Window, len(ctx)+opt.N-1) // longest context ever used
	out := make([]byte, 0, opt.N)
	probs := make([]float64, model.Vocab)
	for len(out) < opt.N {
		c := min(len(ctx), opt.Window)
		window := ctx[len(ctx)-c:]
		gl := c
		if model.Causal {
			gl = causalLen
		}
		e, ok := evals[gl]
		if !ok {
			var err error
			if e, err = NewEvaluator(p, model, 1, gl); err != nil {
				return nil, errors.WithMessage(err, "sample")
			}
			evals[gl] = e
		}
		ids := make([]int, gl)
		for i, b := range window {
			ids[i] = int(b)
		}
		var next int
		err := e.forward(ids, func(i int, logits []float64) error {
			if i != c-1 {
				return nil
			}
			next = draw(logits, probs, opt, rng)
			return nil
		})
		if err != nil {
			return nil, errors.WithMessage(err, "sample")
		}
		out = append(out, byte(next))
		ctx = append(ctx, byte(next))
		if opt.OnByte != nil {
			if err := opt.OnByte(0, byte(next)); err != nil {
				return out, err
			}
		}
		if len(opt.Stop) > 0 && bytes.HasSuffix(out, opt.Stop) {
			break
		}
	}
	return out, nil
}

// draw picks an index from softmax(logits/temp) restricted to the TopK
// most probable and the TopP nucleus, or the argmax if temp <= 0.
func draw(logits, probs []float64, opt SampleOptions, rng *rand.Rand) int {
	best := 0
	for i, x := range logits {
		if x > logits[best] {
			best = i
		}
	}
	if opt.Temperature <= 0 {
		return best
	}
	var s float64
	for i, x := range logits {
		probs[i] = math.Exp((x - logits[best]) / opt.Temperature)
		s += probs[i]
	}
	probs = probs[:len(logits)]
	if (opt.TopK > 0 && opt.TopK < len(logits)) || (opt.TopP > 0 && opt.TopP < 1) {
		order := make([]int, len(probs))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
		keep := len(order)
		if opt.TopK > 0 {
			keep = min(keep, opt.TopK)
		}
		if opt.TopP > 0 && opt.TopP < 1 {
			var c float64
			for k, i := range order[:keep] {
				c += probs[i] / s
				if c >= opt.TopP {
					keep = k + 1
					break
				}
			}
		}
		s = 0
		for k, i := range order {
			if k >= keep {
				probs[i] = 0
			}
			s += probs[i]
		}
	}
	u := rng.Float64() * s
	last := best
	for i, q := range probs {
		if q == 0 {
			continue
		}
		if u < q {
			return i
		}
		u -= q
		last = i
	}
	return last
}

// Generate continues each prompt (empty: "\n") by opt.N bytes with the
// key/value cache (layers.Decoder), all prompts in one batch: the prompts
// are fed right-aligned one byte per step (layers.Skip before a shorter
// one starts), then every sequence draws its bytes, until N or its Stop.
// Past Window bytes of context the cache slides, keeping the first Sinks
// positions (StreamingLLM); within the window every step's logits equal
// the recompute's, so greedy output equals Sample with NoCache. Memory is
// O(Window) whatever N. A model that cannot decode incrementally falls
// back to Sample's recompute, one prompt at a time, and says why in
// Generation.Fallback. Prompt i draws from its own generator (Seed, i).
func Generate(p *graph.Params, model layers.Config, prompts [][]byte, opt SampleOptions) (*Generation, error) {
	if err := checkSampleOptions(model, opt); err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, errors.New("sample: no prompt")
	}
	g := &Generation{Out: make([][]byte, len(prompts))}
	if opt.N == 0 {
		for i := range g.Out {
			g.Out[i] = []byte{}
		}
		return g, nil
	}
	longest := 0
	for _, pr := range prompts {
		longest = max(longest, len(pr), 1)
	}
	why := ""
	winErr := layers.CheckDecodeWindow(model, max(2, opt.Window))
	switch err := layers.CanDecode(model); {
	case opt.NoCache:
		why = "the cache was turned off (NoCache)"
	case !model.Causal:
		why = "the model is not causal"
	case err != nil:
		why = err.Error()
	case winErr != nil:
		why = winErr.Error()
	case longest+opt.N-1 > opt.Window && layers.CanSlide(model) != nil:
		why = fmt.Sprintf("the context reaches %d bytes, past the window of %d, and %v", longest+opt.N-1, opt.Window, layers.CanSlide(model))
	}
	if why != "" {
		g.Fallback = why
		t0 := time.Now()
		for i, pr := range prompts {
			o := opt
			o.Prompt, o.Seed = pr, opt.Seed+uint64(i)
			if cb := opt.OnByte; cb != nil {
				o.OnByte = func(_ int, b byte) error { return cb(i, b) }
			}
			out, err := sampleRecompute(p, model, o)
			if err != nil {
				return nil, err
			}
			g.Out[i] = out
			g.Tokens += len(out)
		}
		g.Decode = time.Since(t0)
		return g, nil
	}
	g.Cached = true
	b := len(prompts)
	dec, err := layers.NewDecoder(p, model, b, max(2, opt.Window), opt.Sinks)
	if err != nil {
		return nil, errors.WithMessage(err, "sample")
	}
	defer dec.Close()
	ctx := make([][]byte, b)
	rngs := make([]*rand.Rand, b)
	for i, pr := range prompts {
		ctx[i] = pr
		if len(pr) == 0 {
			ctx[i] = []byte{'\n'}
		}
		rngs[i] = rand.New(rand.NewPCG(opt.Seed+uint64(i), sampleStream))
		g.Out[i] = make([]byte, 0, opt.N)
	}
	ids := make([]int, b)
	var logits []float64
	t0 := time.Now()
	for s := 0; s < longest; s++ {
		for i, c := range ctx {
			ids[i] = layers.Skip
			if k := s - (longest - len(c)); k >= 0 {
				ids[i] = int(c[k])
			}
		}
		if logits, err = dec.Step(ids); err != nil {
			return nil, errors.WithMessage(err, "sample")
		}
	}
	g.Prefill = time.Since(t0)
	t0 = time.Now()
	defer func() { g.Decode = time.Since(t0) }()
	probs := make([]float64, model.Vocab)
	done := make([]bool, b)
	v := model.Vocab
	for {
		left := 0
		for i := range ids {
			ids[i] = layers.Skip
			if done[i] {
				continue
			}
			next := draw(logits[i*v:(i+1)*v], probs, opt, rngs[i])
			g.Out[i] = append(g.Out[i], byte(next))
			g.Tokens++
			if opt.OnByte != nil {
				if err := opt.OnByte(i, byte(next)); err != nil {
					return g, err
				}
			}
			if len(g.Out[i]) == opt.N || (len(opt.Stop) > 0 && bytes.HasSuffix(g.Out[i], opt.Stop)) {
				done[i] = true
				continue
			}
			ids[i] = next
			left++
		}
		if left == 0 {
			return g, nil
		}
		if logits, err = dec.Step(ids); err != nil {
			return nil, errors.WithMessage(err, "sample")
		}
	}
}
