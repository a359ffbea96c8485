package study

import (
	"math"
	"math/rand"
	"sort"

	"github.com/rpe-go/rpe/experiments/stats"
)

// Scores are one model's results on one evaluation: the metric, and the
// score of every test item in a fixed order (nil if the study keeps none).
type Scores struct {
	Value float64
	Items []float64
}

// PairedDiff is the paired difference A − B of two encodings: over the
// seeds both have (Seeds, a t interval of the per-seed differences), and,
// when every common seed has item scores of the same length for both,
// over seeds and items (Items, a two-level bootstrap; N = 0 otherwise).
type PairedDiff struct {
	Seeds, Items stats.Summary
}

// BootstrapReps is the number of bootstrap replications of every paired
// comparison over items; the resampling is seeded (BootstrapSeed) so a
// rendered table is the same every time.
const (
	BootstrapReps = 2000
	BootstrapSeed = 1
)

// Pair compares a with b (each: seed -> scores) on their common seeds. It
// returns ok = false when they share no seed.
func Pair(a, b map[int64]Scores) (PairedDiff, bool) {
	var seeds []int64
	for s := range a {
		if _, ok := b[s]; ok {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return PairedDiff{}, false
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	va, vb := make([]float64, len(seeds)), make([]float64, len(seeds))
	d := make([][]float64, 0, len(seeds))
	for i, s := range seeds {
		va[i], vb[i] = a[s].Value, b[s].Value
		ia, ib := a[s].Items, b[s].Items
		if d == nil || len(ia) == 0 || len(ia) != len(ib) {
			d = nil
			continue
		}
		di := make([]float64, len(ia))
		for j := range ia {
			di[j] = ia[j] - ib[j]
		}
		d = append(d, di)
	}
	var out PairedDiff
	out.Seeds, _ = stats.Paired(va, vb)
	out.Items = stats.Summary{Mean: math.NaN(), SD: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if len(d) == len(seeds) {
		if s, err := stats.PairedBootstrap(d, BootstrapReps, rand.New(rand.NewSource(BootstrapSeed))); err == nil {
			out.Items = s
		}
	}
	return out, true
}
