package stabilitystudy

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Warning says how well one of the attention monitor's figures, read
// early in training, separates the runs that later became unstable from
// those that did not: the survey's fourth remedy, "monitor the attention
// distributions early in training", is only useful if what it shows early
// announces what happens later.
//
// A run's early figure is its most alarming value over the recorded
// updates up to UpTo (the warm-up, before any spike is counted): the
// largest |pre-softmax score|, the largest fraction of nearly one-hot
// queries, or the smallest attention entropy. A run is unstable if it had
// a loss spike or diverged (both are counted only after warm-up). AUC is
// the probability that an unstable run's early figure is more alarming
// than a stable run's (ties count half): 0.5 is no information, 1 a
// perfect warning.
type Warning struct {
	Figure string  `json:"figure"`
	LR     float64 `json:"lr"` // 0: every learning rate pooled
	UpTo   int     `json:"up_to"`
	// Unstable and Stable count the runs with an early figure.
	Unstable int `json:"unstable"`
	Stable   int `json:"stable"`
	AUC      Num `json:"auc"`
	// MedianUnstable and MedianStable are the medians of the early figure.
	MedianUnstable Num `json:"median_unstable"`
	MedianStable   Num `json:"median_stable"`
}

// warningFigures are the early figures, each as "larger is more
// alarming" (the entropy negated) and its sign for display.
var warningFigures = []struct {
	name string
	get  func(MonitorPoint) float64
	sign float64
}{
	{"max |score|", func(m MonitorPoint) float64 { return float64(m.MaxAbsScore) }, 1},
	{"max one-hot fraction", func(m MonitorPoint) float64 { return float64(m.MaxOneHot) }, 1},
	{"min entropy (nats)", func(m MonitorPoint) float64 { return -float64(m.MinEntropy) }, -1},
}

// Unstable reports whether a run had a loss spike or diverged.
func (r Row) Unstable() bool { return r.Spikes > 0 || r.Diverged() }

// Warnings computes, for every early figure, the Warning of the runs at
// each learning rate and of all runs pooled, over the updates up to upTo.
// Rows without monitor points (or whose points are all NaN) are left out.
func Warnings(rows []Row, lrs []float64, upTo int) []Warning {
	var out []Warning
	for _, fig := range warningFigures {
		for _, lr := range append(slices.Clone(lrs), 0) {
			w := Warning{Figure: fig.name, LR: lr, UpTo: upTo}
			var un, st []float64
			for _, r := range rows {
				if lr != 0 && r.LR != lr {
					continue
				}
				v := math.NaN()
				for _, m := range r.Monitor {
					if m.Step <= upTo {
						v = nanMax(v, fig.get(m))
					}
				}
				if math.IsNaN(v) {
					continue
				}
				if r.Unstable() {
					un = append(un, v)
				} else {
					st = append(st, v)
				}
			}
			w.Unstable, w.Stable = len(un), len(st)
			w.AUC = Num(auc(un, st))
			w.MedianUnstable, w.MedianStable = Num(fig.sign*medianOrNaN(un)), Num(fig.sign*medianOrNaN(st))
			out = append(out, w)
		}
	}
	return out
}

// auc is the probability that a value of pos exceeds one of neg, ties
// counting half (the Mann-Whitney U statistic over |pos|·|neg|); NaN if
// either is empty.
func auc(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	var u float64
	for _, p := range pos {
		for _, n := range neg {
			switch {
			case p > n:
				u++
			case p == n:
				u += 0.5
			}
		}
	}
	return u / float64(len(pos)*len(neg))
}

// writeWarnings writes the early-warning table.
func writeWarnings(b *strings.Builder, ws []Warning) {
	if len(ws) == 0 {
		return
	}
	fmt.Fprintf(b, "## Does the monitor warn early?\n\n")
	fmt.Fprintf(b, "Each run's most alarming monitor figure over the recorded updates up to %d (the warm-up: before any spike is counted), "+
		"against whether the run later spiked or diverged. AUC: the probability that an unstable run's early figure is more alarming than a stable run's "+
		"(0.5: no information; 1: a perfect warning).\n\n", ws[0].UpTo)
	b.WriteString("| early figure | lr | unstable runs | stable runs | AUC | median, unstable | median, stable |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range ws {
		lr := fmt.Sprintf("%g", w.LR)
		if w.LR == 0 {
			lr = "all"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s |\n", strings.ReplaceAll(w.Figure, "|", `\|`), lr, w.Unstable, w.Stable, fmtAUC(w.AUC), fmtG(float64(w.MedianUnstable)), fmtG(float64(w.MedianStable)))
	}
	b.WriteString("\n")
}

func fmtAUC(v Num) string {
	if math.IsNaN(float64(v)) {
		return ""
	}
	return fmt.Sprintf("%.2f", float64(v))
}

// medianOrNaN is the median of v, NaN if v is empty.
func medianOrNaN(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return median(v)
}

// WarningsMarkdown renders the early-warning table of f (its section of
// table.md).
func WarningsMarkdown(f *File) string {
	var b strings.Builder
	writeWarnings(&b, f.Warnings)
	return b.String()
}
