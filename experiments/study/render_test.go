package study

import (
	"math"
	"strconv"
	"testing"
)

// TestPrecTicks checks that every tick label reads back as the tick's value
// (the old labels of ticks at 3.05, 3.20, 3.35 were "3.1", "3.2", "3.3").
func TestPrecTicks(t *testing.T) {
	for _, r := range [][2]float64{
		{3.02, 3.38}, {3.0, 3.4}, {2.9, 4.4}, {3.03, 3.9}, {0.001, 0.0042}, {1.05, 1.35},
		{100, 500}, {-0.3, 0.25}, {2.1234, 2.1251}, {0, 1}, {4.49, 4.51},
	} {
		n := 0
		for _, tk := range (precTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			n++
			v, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(v-tk.Value) > 1e-9*math.Max(math.Abs(tk.Value), 1e-3) {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
		if n < 2 {
			t.Errorf("range %v: %d labelled ticks", r, n)
		}
	}
}
