package main

import (
	"fmt"
	"strconv"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
)

// streamMode is the value of eval's -stream: auto (the default), on
// (-stream, -stream=true) or off (-stream=false).
type streamMode int

const (
	streamAuto streamMode = iota
	streamOn
	streamOff
)

func (m *streamMode) String() string {
	switch *m {
	case streamOn:
		return "true"
	case streamOff:
		return "false"
	}
	return "auto"
}

func (m *streamMode) Set(s string) error {
	if s == "auto" {
		*m = streamAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.Errorf("%q is not true, false or auto", s)
	}
	*m = streamOff
	if b {
		*m = streamOn
	}
	return nil
}

// IsBoolFlag lets -stream stand alone for -stream=true.
func (m *streamMode) IsBoolFlag() bool { return true }

// autoStreamAbove is the estimate of the materialised graph above which
// -stream=auto streams (when the encoding can).
const autoStreamAbove = 1 << 30

// planInput is what planEval decides from.
type planInput struct {
	// Model is the checkpoint's model (its Stream is ignored).
	Model layers.Config
	// Batch and Len are the graph's shape, DtypeSize the bytes per value.
	Batch, Len, DtypeSize int
	// Avail is the memory available in bytes (-mem-limit, or MemAvailable);
	// <= 0: unknown, nothing is refused for memory.
	Avail float64
	// Mode is -stream.
	Mode streamMode
	// StreamErr is nil if the encoding can stream, else why not
	// (trainer.StreamError).
	StreamErr error
}

// evalPlan is how one window length is evaluated.
type evalPlan struct {
	// Stream chooses the streaming attention; Estimate is the chosen
	// graph's estimate; Why says why that attention was chosen.
	Stream   bool
	Estimate trainer.EvalMemoryEstimate
	Why      string
}

// planEval chooses the attention of an evaluation graph and refuses, as a
// usageError before anything is allocated, a graph estimated above the
// available memory (with the estimate, the memory and the flag that
// helps) and -stream=true with an encoding that cannot stream (naming
// it). -stream=auto streams when the materialised graph would need more
// than autoStreamAbove or more than the available memory and the encoding
// can stream; otherwise it keeps the materialised attention (the numbers
// of earlier runs, bit for bit).
func planEval(in planInput) (evalPlan, error) {
	mat, str := in.Model, in.Model
	mat.Stream, str.Stream = false, true
	me := trainer.EstimateEvalMemory(mat, in.Batch, in.Len, in.DtypeSize)
	se := trainer.EstimateEvalMemory(str, in.Batch, in.Len, in.DtypeSize)
	var p evalPlan
	switch in.Mode {
	case streamOn:
		if in.StreamErr != nil {
			return evalPlan{}, usageError{errors.WithMessage(in.StreamErr, "-stream")}
		}
		p = evalPlan{Stream: true, Estimate: se, Why: "-stream"}
	case streamOff:
		p = evalPlan{Estimate: me, Why: "-stream=false"}
	default:
		over := me.Total > autoStreamAbove || (in.Avail > 0 && me.Total > in.Avail)
		switch {
		case over && in.StreamErr == nil:
			p = evalPlan{Stream: true, Estimate: se, Why: fmt.Sprintf("auto: the materialised attention would need about %s", bytesString(me.Total))}
		case over:
			p = evalPlan{Estimate: me, Why: "auto: the encoding cannot stream"}
		default:
			p = evalPlan{Estimate: me, Why: fmt.Sprintf("auto: at most %s", bytesString(autoStreamAbove))}
		}
	}
	if in.Avail <= 0 || p.Estimate.Total <= in.Avail {
		return p, nil
	}
	var hint string
	switch {
	case p.Stream:
		hint = "use a smaller -len or -batch"
	case in.StreamErr != nil:
		hint = fmt.Sprintf("use a smaller -len or -batch (%v)", in.StreamErr)
	case se.Total <= in.Avail:
		hint = fmt.Sprintf("-stream (the streaming attention, O(T) memory) needs about %s", bytesString(se.Total))
	default:
		hint = fmt.Sprintf("even -stream needs about %s: use a smaller -len or -batch", bytesString(se.Total))
	}
	return evalPlan{}, usageError{errors.Errorf("-len %d: evaluation needs about %s, more than the %s available (MemAvailable, or -mem-limit); %s",
		in.Len, p.Estimate, bytesString(in.Avail), hint)}
}

func bytesString(b float64) string { return trainer.BytesString(b) }
