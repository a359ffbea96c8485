package trainer

import (
	"math"
	"math/rand/v2"

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
	if opt.Window <= 0 {
		return nil, errors.Errorf("sample: window %d must be positive", opt.Window)
	}
	if opt.N < 0 {
		return nil, errors.Errorf("sample: %d bytes asked", opt.N)
	}
	if math.IsNaN(opt.Temperature) || math.IsInf(opt.Temperature, 0) {
		return nil, errors.Errorf("sample: temperature %v must be finite", opt.Temperature)
	}
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
			next = draw(logits, probs, opt.Temperature, rng)
			return nil
		})
		if err != nil {
			return nil, errors.WithMessage(err, "sample")
		}
		out = append(out, byte(next))
		ctx = append(ctx, byte(next))
	}
	return out, nil
}

// draw picks an index from softmax(logits/temp), or the argmax if temp <= 0.
func draw(logits, probs []float64, temp float64, rng *rand.Rand) int {
	best := 0
	for i, x := range logits {
		if x > logits[best] {
			best = i
		}
	}
	if temp <= 0 {
		return best
	}
	var s float64
	for i, x := range logits {
		probs[i] = math.Exp((x - logits[best]) / temp)
		s += probs[i]
	}
	u := rng.Float64() * s
	for i, q := range probs[:len(logits)] {
		if u < q {
			return i
		}
		u -= q
	}
	return best
}
