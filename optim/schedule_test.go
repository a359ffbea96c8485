package optim

import (
	"math"
	"testing"
)

func TestWarmupCosine(t *testing.T) {
	// Peak 1e-3, 100 warmup steps, cosine over steps 100..1100, floor 0.1·Peak.
	w := WarmupCosine{Peak: 1e-3, Warmup: 100, Total: 1100, Floor: 0.1}
	cases := []struct {
		s    int
		want float64
	}{
		{-5, 1e-5},  // negative steps count as 0
		{0, 1e-5},   // 1e-3·(0+1)/100
		{49, 5e-4},  // 1e-3·50/100
		{99, 1e-3},  // 1e-3·100/100: Peak at the last warmup step
		{100, 1e-3}, // cos(0) = 1: 1e-3·(0.1 + 0.9·0.5·2)
		// Quarter: (350-100)/1000 = 1/4, cos(π/4) = 0.70710678118654752:
		// 1e-3·(0.1 + 0.9·0.5·1.70710678118654752) = 1e-3·(0.1 + 0.76819805153394638)
		{350, 8.6819805153394639e-4},
		{600, 5.5e-4},  // midpoint, cos(π/2) = 0: 1e-3·(0.1 + 0.9·0.5)
		{1100, 1e-4},   // Total: cos(π) = -1: 1e-3·0.1
		{1101, 1e-4},   // held after Total
		{100000, 1e-4}, // far beyond
	}
	for _, c := range cases {
		if got := w.LR(c.s); math.Abs(got-c.want) > 1e-17 {
			t.Errorf("LR(%d) = %.17g, want %.17g", c.s, got, c.want)
		}
	}
	// No warmup: starts at Peak.
	w0 := WarmupCosine{Peak: 2, Warmup: 0, Total: 10, Floor: 0}
	for s, want := range map[int]float64{0: 2, 5: 1, 10: 0, 11: 0} {
		if got := w0.LR(s); math.Abs(got-want) > 1e-15 {
			t.Errorf("no warmup: LR(%d) = %v, want %v", s, got, want)
		}
	}
	// Monotone: non-decreasing in warmup, non-increasing after.
	for s := 1; s < 1200; s++ {
		a, b := w.LR(s-1), w.LR(s)
		if (s < 100 && b < a) || (s >= 100 && b > a) {
			t.Fatalf("not monotone at %d: %v then %v", s, a, b)
		}
	}
}

func TestConstant(t *testing.T) {
	var s Schedule = Constant(3e-4)
	for _, step := range []int{0, 1, 1 << 30} {
		if s.LR(step) != 3e-4 {
			t.Errorf("LR(%d) = %v", step, s.LR(step))
		}
	}
}
