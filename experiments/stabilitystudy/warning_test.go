package stabilitystudy

import (
	"math"
	"testing"
)

// TestWarnings: AUC, counts and medians of hand-made runs: the early
// window ends at UpTo, NaN points and rows without a monitor are left out,
// ties count half, and the entropy is alarming when small.
func TestWarnings(t *testing.T) {
	pt := func(step int, score, oneHot, ent float64) MonitorPoint {
		return MonitorPoint{Step: step, MaxAbsScore: Num(score), MaxOneHot: Num(oneHot), MinEntropy: Num(ent), MeanEntropy: Num(ent)}
	}
	nan := math.NaN()
	rows := []Row{
		// unstable (a spike), early score 10 (the 1000 at update 40 is after the window)
		{LR: 0.3, Spikes: 1, Monitor: []MonitorPoint{pt(1, 1, 0, 2), pt(30, 10, 0.5, 0.1), pt(40, 1000, 1, 0)}},
		// unstable (diverged), early score 4
		{LR: 0.3, Status: StatusDiverged, Monitor: []MonitorPoint{pt(1, 4, 0.2, 1), pt(20, nan, nan, nan)}},
		// stable, early score 4 (a tie with the diverged run)
		{LR: 0.3, Monitor: []MonitorPoint{pt(1, 4, 0.2, 1)}},
		// stable, early score 2
		{LR: 0.3, Monitor: []MonitorPoint{pt(10, 2, 0.1, 1.5)}},
		// stable, no monitor: left out
		{LR: 0.3},
		// another lr
		{LR: 0.002, Monitor: []MonitorPoint{pt(1, 1, 0, 2)}},
	}
	ws := Warnings(rows, []float64{0.002, 0.3}, 30)
	find := func(fig string, lr float64) Warning {
		for _, w := range ws {
			if w.Figure == fig && w.LR == lr {
				return w
			}
		}
		t.Fatalf("no warning for %s at %g", fig, lr)
		return Warning{}
	}
	// unstable {10, 4} vs stable {4, 2}: pairs 10>4, 10>2, 4=4, 4>2 -> 3.5/4
	w := find("max |score|", 0.3)
	if w.Unstable != 2 || w.Stable != 2 || w.AUC != 0.875 || w.MedianUnstable != 7 || w.MedianStable != 3 {
		t.Errorf("score at 0.3: %+v", w)
	}
	// entropy: unstable {0.1, 1} vs stable {1, 1.5}: smaller is more alarming: 0.1<1, 0.1<1.5, 1=1, 1<1.5 -> 3.5/4
	if w := find("min entropy (nats)", 0.3); w.AUC != 0.875 || w.MedianUnstable != 0.55 || w.MedianStable != 1.25 {
		t.Errorf("entropy at 0.3: %+v", w)
	}
	if w := find("max |score|", 0.002); w.Unstable != 0 || w.Stable != 1 || !math.IsNaN(float64(w.AUC)) {
		t.Errorf("score at 0.002: %+v", w)
	}
	if w := find("max one-hot fraction", 0); w.Unstable != 2 || w.Stable != 3 {
		t.Errorf("one-hot, all lrs: %+v", w)
	}
}
