package stabilitystudy

import (
	"math"
	"slices"
)

// The definitions of the study (see the package documentation).
const (
	// Window is the number of previous updates a spike is measured
	// against.
	Window = 20
	// SpikeBits is how far (bits per byte) an update's loss must exceed
	// the mean of the Window previous ones to be a loss spike.
	SpikeBits = 0.5
	// GradSpikeFactor is how many times the median gradient norm of the
	// Window previous updates an update's norm must exceed to be a
	// gradient-norm spike.
	GradSpikeFactor = 10
	// DivergedBits is the training loss (bits per byte) above which a run
	// after warm-up counts as diverged: the uniform model's 8 bits.
	DivergedBits = 8
	// FinalWindow is the number of last updates whose mean loss is the
	// final training loss.
	FinalWindow = 20
)

// Spikes counts the loss spikes of a curve of losses (bits per byte) of
// updates 1, 2, ...: update s (1-based) is a spike if s > warmup, s >
// Window and loss[s] > mean(loss[s-Window..s-1]) + SpikeBits. Consecutive
// spike updates count as one spike. A non-finite loss is never a spike
// (it ends the run: see Diverged).
func Spikes(loss []float64, warmup int) int {
	return countRuns(len(loss), warmup, func(i int) bool {
		var m float64
		for _, v := range loss[i-Window : i] {
			m += v
		}
		return loss[i] > m/Window+SpikeBits
	})
}

// GradSpikes counts the gradient-norm spikes of a curve of global gradient
// norms (before clipping): update s is one if s > warmup, s > Window and
// norm[s] > GradSpikeFactor * median(norm[s-Window..s-1]); consecutive
// ones count as one.
func GradSpikes(norm []float64, warmup int) int {
	return countRuns(len(norm), warmup, func(i int) bool {
		return norm[i] > GradSpikeFactor*median(norm[i-Window:i])
	})
}

// countRuns counts the runs of consecutive indices i (0-based; update
// i+1) with i >= max(warmup, Window) for which spike(i) holds.
func countRuns(n, warmup int, spike func(i int) bool) int {
	count, in := 0, false
	for i := max(warmup, Window); i < n; i++ {
		s := spike(i)
		if s && !in {
			count++
		}
		in = s
	}
	return count
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// LossDiverged returns the first update (1-based) after warm-up whose loss
// (bits per byte) exceeds DivergedBits, or 0 if there is none.
func LossDiverged(loss []float64, warmup int) int {
	for i := warmup; i < len(loss); i++ {
		if loss[i] > DivergedBits {
			return i + 1
		}
	}
	return 0
}

// FinalLoss is the mean of the last FinalWindow losses (all of them if
// fewer; NaN if none).
func FinalLoss(loss []float64) float64 {
	if len(loss) == 0 {
		return math.NaN()
	}
	var s float64
	last := loss[max(0, len(loss)-FinalWindow):]
	for _, v := range last {
		s += v
	}
	return s / float64(len(last))
}

// maxFinite is the largest finite value of v (NaN if none).
func maxFinite(v []float64) float64 {
	m := math.NaN()
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) && (math.IsNaN(m) || x > m) {
			m = x
		}
	}
	return m
}
