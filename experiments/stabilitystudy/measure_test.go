package stabilitystudy

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// flat returns n losses equal to v.
func flat(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// with returns c with c[i-1] = v for each update i (1-based) of at.
func with(c []float64, v float64, at ...int) []float64 {
	out := append([]float64(nil), c...)
	for _, i := range at {
		out[i-1] = v
	}
	return out
}

// noisy returns n losses 3 ± 0.1 from a seeded generator.
func noisy(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = 3 + 0.2*(r.Float64()-0.5)
	}
	return out
}

// TestSpikes checks the spike definition on known curves.
func TestSpikes(t *testing.T) {
	for _, c := range []struct {
		name   string
		loss   []float64
		warmup int
		want   int
	}{
		{"flat", flat(100, 3), 30, 0},
		{"noise within 0.1", noisy(200, 1), 30, 0},
		{"one spike", with(flat(100, 3), 3.6, 50), 30, 1},
		{"just below the threshold", with(flat(100, 3), 3.49, 50), 30, 0},
		{"two consecutive updates count once", with(flat(100, 3), 3.6, 50, 51), 30, 1},
		{"two separate spikes", with(flat(100, 3), 3.6, 50, 60), 30, 2},
		{"during warm-up: not counted", with(flat(100, 3), 3.6, 25), 30, 0},
		{"right after warm-up", with(flat(100, 3), 3.6, 31), 30, 1},
		{"before a full window (warm-up 5)", with(flat(100, 3), 3.6, 15), 5, 0},
		{"first update with a full window (warm-up 5)", with(flat(100, 3), 3.6, 21), 5, 1},
		{"a decreasing curve has no spikes", func() []float64 {
			v := make([]float64, 300)
			for i := range v {
				v[i] = 8 * math.Exp(-float64(i)/50)
			}
			return v
		}(), 30, 0},
		{"short curve", flat(10, 3), 2, 0},
		{"empty", nil, 30, 0},
	} {
		if got := Spikes(c.loss, c.warmup); got != c.want {
			t.Errorf("%s: %d spikes, want %d", c.name, got, c.want)
		}
	}
}

// TestGradSpikes checks the gradient-norm spike definition.
func TestGradSpikes(t *testing.T) {
	for _, c := range []struct {
		name string
		norm []float64
		want int
	}{
		{"flat", flat(100, 1), 0},
		{"ten times the median is not enough", with(flat(100, 1), 10, 50), 0},
		{"above ten times", with(flat(100, 1), 10.5, 50), 1},
		{"consecutive", with(flat(100, 1), 20, 50, 51, 52), 1},
		{"median, not mean: one large value does not hide the next spike", with(with(flat(100, 1), 1e6, 45), 20, 50), 2},
		{"in warm-up", with(flat(100, 1), 20, 10), 0},
	} {
		if got := GradSpikes(c.norm, 30); got != c.want {
			t.Errorf("%s: %d spikes, want %d", c.name, got, c.want)
		}
	}
}

// TestLossDiverged checks the 8-bit rule and the final loss.
func TestLossDiverged(t *testing.T) {
	for _, c := range []struct {
		name string
		loss []float64
		want int
	}{
		{"below", flat(100, 7.9), 0},
		{"exactly 8 is not above", flat(100, 8), 0},
		{"above in warm-up only", with(flat(100, 3), 9, 1, 30), 0},
		{"first update after warm-up", with(flat(100, 3), 9, 31, 80), 31},
		{"later", with(flat(100, 3), 8.01, 77), 77},
	} {
		if got := LossDiverged(c.loss, 30); got != c.want {
			t.Errorf("%s: diverged at %d, want %d", c.name, got, c.want)
		}
	}
	if got := FinalLoss(append(flat(80, 5), flat(20, 2)...)); got != 2 {
		t.Errorf("final loss %g, want 2 (the last 20)", got)
	}
	if got := FinalLoss([]float64{1, 2}); got != 1.5 {
		t.Errorf("final loss of 2 updates %g, want 1.5", got)
	}
	if !math.IsNaN(FinalLoss(nil)) {
		t.Error("final loss of no updates is not NaN")
	}
}

// TestSummarize checks the figures Summarize takes from the curves, and
// that a loss above 8 bits/byte after warm-up makes a finished run
// diverged (without validation); a non-finite run's curve ends before
// its failing update, so an earlier loss above 8 bits takes its place.
func TestSummarize(t *testing.T) {
	r := Row{Status: StatusOK, Val: 3, Loss: with(flat(100, 3), 9, 60, 61), GradNorm: with(flat(100, 1), 30, 70)}
	Summarize(&r, 30)
	if r.Steps != 100 || r.Spikes != 1 || r.GradSpikes != 1 || r.MaxGradNorm != 30 || r.FinalTrain != 3 ||
		r.Status != StatusDiverged || r.DivergedStep != 60 || r.Val != 3 || r.Why == "" {
		t.Errorf("summary %+v", r)
	}
	r = Row{Status: StatusDiverged, DivergedStep: 50, Why: "non-finite loss", Val: Num(math.NaN()), Loss: with(flat(49, 3), 9, 45)}
	Summarize(&r, 30)
	if r.DivergedStep != 45 || r.Steps != 49 || !strings.Contains(r.Why, "non-finite loss at update 50") {
		t.Errorf("an earlier loss above 8 bits: %+v", r)
	}
}
