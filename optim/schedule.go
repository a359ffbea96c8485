package optim

import "math"

// Schedule gives the learning rate of update step s (0-based). A training
// loop calls opt.SetLR(sched.LR(s)) before the s-th opt.Step.
type Schedule interface {
	LR(step int) float64
}

// WarmupCosine is linear warmup followed by cosine decay (cosine annealing of
// Loshchilov & Hutter 2017 without restarts), the schedule of most Transformer
// training recipes. For step s (negative s counts as 0):
//
//	Peak·(s+1)/Warmup                                          s < Warmup
//	Peak·(Floor + (1−Floor)·½·(1 + cos(π·(s−Warmup)/(Total−Warmup))))  Warmup <= s < Total
//	Peak·Floor                                                 s >= Total
//
// so the rate reaches Peak at the last warmup step s = Warmup−1, stays at Peak
// for s = Warmup, and falls to Floor·Peak at s = Total, where it is held.
// Warmup = 0 means no warmup. Floor is a fraction of Peak (e.g. 0.1), not a
// learning rate.
type WarmupCosine struct {
	Peak          float64
	Warmup, Total int
	Floor         float64
}

// LR returns the learning rate of step s.
func (w WarmupCosine) LR(s int) float64 {
	if s < 0 {
		s = 0
	}
	switch {
	case s < w.Warmup:
		return w.Peak * float64(s+1) / float64(w.Warmup)
	case s >= w.Total:
		return w.Peak * w.Floor
	}
	frac := float64(s-w.Warmup) / float64(w.Total-w.Warmup)
	return w.Peak * (w.Floor + (1-w.Floor)*0.5*(1+math.Cos(math.Pi*frac)))
}

// Constant is a schedule whose rate is the same at every step.
type Constant float64

// LR returns c whatever the step.
func (c Constant) LR(int) float64 { return float64(c) }
