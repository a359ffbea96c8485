package study

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"

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
	var d [][]float64 // per seed, the items' differences; nil unless every seed has them
	items := true
	for i, s := range seeds {
		va[i], vb[i] = a[s].Value, b[s].Value
		ia, ib := a[s].Items, b[s].Items
		if items = items && len(ia) > 0 && len(ia) == len(ib); !items {
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
	if items {
		if s, err := stats.PairedBootstrap(d, BootstrapReps, rand.New(rand.NewSource(BootstrapSeed))); err == nil {
			out.Items = s
		}
	}
	return out, true
}

// ScoreTable holds the scores of each (label, condition) by seed, with the
// labels in the order they were first added: what PairedSection compares.
// The zero value is empty and ready to use.
type ScoreTable struct {
	Labels []string
	m      map[[2]string]map[int64]Scores
}

// Add records the scores of label under cond for seed (replacing any).
func (t *ScoreTable) Add(label, cond string, seed int64, s Scores) {
	if t.m == nil {
		t.m = map[[2]string]map[int64]Scores{}
	}
	k := [2]string{label, cond}
	if t.m[k] == nil {
		t.m[k] = map[int64]Scores{}
		if !slices.Contains(t.Labels, label) {
			t.Labels = append(t.Labels, label)
		}
	}
	t.m[k][seed] = s
}

// WeightedItems returns w·c for each per-item count c: the items whose mean
// is a rate over a finer unit (right nodes per graph, w = 100·graphs/nodes,
// average to the node accuracy in %).
func WeightedItems(counts []int, w float64) []float64 {
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = w * float64(c)
	}
	return out
}

// PairedSection renders a section of paired comparisons of a study's
// table.md, headed "## " + heading: under each condition (conds, in
// order), the label of t with the best mean (A) against every other label
// (B, in t's order), paired on the seeds (t interval) and, where the scores
// carry items, on the seeds and items (bootstrap); the reading is worded
// from the interval over seeds (stats.Compare). what names the metric and
// unit its unit ("accuracy", "points"), item what the items are ("test
// images"). It returns "" with fewer than two seeds.
func PairedSection(heading string, conds []string, t *ScoreTable, what, unit, item, format string, dir stats.Direction) string {
	scores, labels := t.m, t.Labels
	seeds := map[int64]bool{}
	for _, m := range scores {
		for s := range m {
			seeds[s] = true
		}
	}
	if len(seeds) < 2 {
		return ""
	}
	mean := func(m map[int64]Scores) float64 {
		var s float64
		for _, v := range m {
			s += v.Value
		}
		return s / float64(len(m))
	}
	better := func(a, b float64) bool {
		if dir == stats.HigherIsBetter {
			return a > b
		}
		return a < b
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\n", heading)
	fmt.Fprintf(&b, "Under each condition, the encoding with the best mean %s (A) against every other (B): the difference A − B in %s, paired on the seeds (mean [95%% t interval] of the per-seed differences) and on the seeds and %s (mean [95%% percentile interval] of a two-level bootstrap, %d replications: seeds, then %s, resampled; — where the rows keep no per-item scores). The reading is worded from the interval over seeds: a difference whose interval contains zero is not resolved.\n\n",
		what, unit, item, BootstrapReps, item)
	fmt.Fprintf(&b, "| condition | A | B | A − B, over seeds | over seeds and %s | reading |\n|---|---|---|---:|---:|---|\n", item)
	f := func(x float64) string { return fmt.Sprintf("%+"+format[1:], x) }
	for _, c := range conds {
		best := ""
		for _, l := range labels {
			if m := scores[[2]string{l, c}]; len(m) > 0 && (best == "" || better(mean(m), mean(scores[[2]string{best, c}]))) {
				best = l
			}
		}
		if best == "" {
			continue
		}
		for _, l := range labels {
			m := scores[[2]string{l, c}]
			if l == best || len(m) == 0 {
				continue
			}
			d, ok := Pair(scores[[2]string{best, c}], m)
			if !ok {
				continue
			}
			items := "—"
			if d.Items.N > 0 {
				items = fmt.Sprintf("%s [%s, %s]", f(d.Items.Mean), f(d.Items.Lo), f(d.Items.Hi))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s [%s, %s] | %s | %s |\n", c, best, l, f(d.Seeds.Mean), f(d.Seeds.Lo), f(d.Seeds.Hi), items,
				stats.Compare(best, l, d.Seeds, unit, format, dir))
		}
	}
	return b.String()
}

// Contrast is one comparison a study's reading makes: label A under
// condition CondA against label B under CondB: two encodings under one
// condition, or one encoding under two (ALiBi at 8L against ALiBi at L).
// Claim says, in a few words, what the reading uses it for.
type Contrast struct {
	A, CondA, B, CondB string
	Claim              string
}

// ContrastSection renders a section of the contrasts a reading makes,
// headed "## " + heading: each contrast's A − B in unit, paired on the
// seeds both have (t interval) and, where both keep the same number of
// item scores, on the seeds and items (bootstrap), worded by
// stats.Compare from the interval over seeds. A contrast whose cells are
// missing from t (not run yet, or n/a) gets the row "not available". It
// returns "" when there are no contrasts.
func ContrastSection(heading, intro string, cs []Contrast, t *ScoreTable, unit, item, format string, dir stats.Direction) string {
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\n%s Each is A − B in %s, paired on the seeds (mean [95%% t interval] of the per-seed differences) and, where both keep every %s's score with the same %s, on the seeds and %s (two-level bootstrap, %d replications; — otherwise). A difference whose interval over seeds contains zero is not resolved.\n\n",
		heading, intro, unit, strings.TrimSuffix(item, "s"), item, item, BootstrapReps)
	fmt.Fprintf(&b, "| claim tested | A | B | A − B, over seeds | over seeds and %s | reading |\n|---|---|---|---:|---:|---|\n", item)
	f := func(x float64) string { return fmt.Sprintf("%+"+format[1:], x) }
	for _, c := range cs {
		a, bb := c.A+" at "+c.CondA, c.B+" at "+c.CondB
		ma, mb := t.m[[2]string{c.A, c.CondA}], t.m[[2]string{c.B, c.CondB}]
		d, ok := Pair(ma, mb)
		if !ok || len(ma) == 0 || len(mb) == 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | not available | — | not run, or n/a |\n", c.Claim, a, bb)
			continue
		}
		items := "—"
		if d.Items.N > 0 {
			items = fmt.Sprintf("%s [%s, %s]", f(d.Items.Mean), f(d.Items.Lo), f(d.Items.Hi))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s [%s, %s] | %s | %s |\n", c.Claim, a, bb, f(d.Seeds.Mean), f(d.Seeds.Lo), f(d.Seeds.Hi), items,
			stats.Compare(a, bb, d.Seeds, unit, format, dir))
	}
	return b.String()
}
