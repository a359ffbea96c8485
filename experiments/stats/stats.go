package stats

import (
	"fmt"
	"math"
	"math/rand"
	randv2 "math/rand/v2"
	"sort"

	"github.com/pkg/errors"
	"gonum.org/v1/gonum/stat/distuv"
)

// Level is the coverage of every interval of this package.
const Level = 0.95

// Summary describes a sample: its size, mean, sample standard deviation
// (n−1 in the denominator; 0 for one value) and the 95% interval [Lo, Hi]
// of the mean (NaN when N < 2).
type Summary struct {
	N            int
	Mean, SD     float64
	Lo, Hi       float64
	Method       string // "t" (Student t over N values) or "bootstrap"
	Replications int    `json:",omitempty"` // bootstrap only
}

// Describe summarises xs with the Student-t interval of its mean. It
// returns a Summary with N = 0 and NaN fields for an empty sample; NaN
// values are not skipped (they make the summary NaN).
func Describe(xs []float64) Summary {
	s := Summary{N: len(xs), Method: "t", Mean: math.NaN(), SD: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if len(xs) == 0 {
		return s
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	s.Mean = sum / float64(len(xs))
	if len(xs) == 1 {
		s.SD = 0
		return s
	}
	var ss float64
	for _, x := range xs {
		ss += (x - s.Mean) * (x - s.Mean)
	}
	s.SD = math.Sqrt(ss / float64(len(xs)-1))
	half := HalfWidth(s.SD, len(xs))
	s.Lo, s.Hi = s.Mean-half, s.Mean+half
	return s
}

// HalfWidth is the half-width of the 95% t interval of the mean of n
// values of sample standard deviation sd: t(0.975, n−1)·sd/√n; 0 for
// n < 2 or a NaN sd (no interval).
func HalfWidth(sd float64, n int) float64 {
	if n < 2 || math.IsNaN(sd) {
		return 0
	}
	return TQuantile(n-1) * sd / math.Sqrt(float64(n))
}

// TQuantile returns the 0.975 quantile of Student's t with df degrees of
// freedom (12.71 for 1, 4.30 for 2, 1.96 as df grows); df must be >= 1.
func TQuantile(df int) float64 {
	if df < 1 {
		panic(fmt.Sprintf("stats: t quantile with %d degrees of freedom", df))
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(1 - (1-Level)/2)
}

// Paired summarises the differences a[i] − b[i] of two samples paired by
// index (the same seeds). It returns an error if the lengths differ or
// are 0.
func Paired(a, b []float64) (Summary, error) {
	if len(a) != len(b) || len(a) == 0 {
		return Summary{}, errors.Errorf("stats: paired samples of %d and %d values", len(a), len(b))
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return Describe(d), nil
}

// PairedBootstrap summarises the mean of the paired differences d[s][j]
// (seed s, item j: the difference of the two encodings' scores of item j
// by the models of seed s) by a two-level bootstrap: each of reps
// replications draws len(d) seeds with replacement and, within each, as
// many items with replacement, and takes the mean over seeds of the
// per-seed item means. Mean is that of the data, SD the replications'
// standard deviation and [Lo, Hi] their 2.5% and 97.5% percentiles. It
// returns an error for no seeds, a seed without items, a NaN item, or
// reps < 100.
//
// A seed whose items take at most 16 distinct values (right/wrong
// differences take three: −1, 0, 1) is resampled through the counts of its
// values: a resample of n items has multinomially distributed counts,
// drawn as a chain of binomials, the same distribution as n draws of an
// item at a cost independent of n (10,000 test images cost what 3 do).
func PairedBootstrap(d [][]float64, reps int, rng *rand.Rand) (Summary, error) {
	if len(d) == 0 || reps < 100 {
		return Summary{}, errors.Errorf("stats: bootstrap of %d seeds with %d replications (at least 1 seed and 100 replications)", len(d), reps)
	}
	means := make([]float64, len(d))
	draws := make([]func() float64, len(d))
	src := randv2.NewPCG(uint64(rng.Int63()), uint64(rng.Int63()))
	for s, items := range d {
		if len(items) == 0 {
			return Summary{}, errors.Errorf("stats: bootstrap: seed %d has no items", s)
		}
		var sum float64
		for j, x := range items {
			if math.IsNaN(x) {
				return Summary{}, errors.Errorf("stats: bootstrap: seed %d item %d is NaN", s, j)
			}
			sum += x
		}
		means[s] = sum / float64(len(items))
		draws[s] = resampler(items, rng, src)
	}
	out := Summary{N: len(d), Mean: Describe(means).Mean, Method: "bootstrap", Replications: reps}
	reps64 := make([]float64, reps)
	for r := range reps64 {
		var total float64
		for range d {
			total += draws[rng.Intn(len(d))]()
		}
		reps64[r] = total / float64(len(d))
	}
	out.SD = Describe(reps64).SD
	sort.Float64s(reps64)
	out.Lo, out.Hi = quantile(reps64, (1-Level)/2), quantile(reps64, 1-(1-Level)/2)
	return out, nil
}

// maxDistinct is the number of distinct item values up to which a seed is
// resampled through its value counts.
const maxDistinct = 16

// resampler returns a function drawing the mean of one resample (with
// replacement, as many as there are) of items.
func resampler(items []float64, rng *rand.Rand, src randv2.Source) func() float64 {
	n := len(items)
	counts := map[float64]int{}
	for _, x := range items {
		if counts[x]++; len(counts) > maxDistinct {
			break
		}
	}
	if len(counts) > maxDistinct {
		return func() float64 {
			var sum float64
			for range items {
				sum += items[rng.Intn(n)]
			}
			return sum / float64(n)
		}
	}
	vals := make([]float64, 0, len(counts))
	for v := range counts {
		vals = append(vals, v)
	}
	sort.Float64s(vals)
	return func() float64 {
		left, mass := n, 1.0
		var sum float64
		for i, v := range vals {
			k := left
			if p := float64(counts[v]) / float64(n); i < len(vals)-1 && left > 0 {
				k = int(distuv.Binomial{N: float64(left), P: math.Min(1, p/mass), Src: src}.Rand())
				mass -= p
			}
			sum += v * float64(k)
			left -= k
		}
		return sum / float64(n)
	}
}

// quantile is the linear-interpolation quantile q of sorted xs.
func quantile(xs []float64, q float64) float64 {
	p := q * float64(len(xs)-1)
	i := int(math.Floor(p))
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (p-float64(i))*(xs[i+1]-xs[i])
}

// Resolved reports whether the interval excludes zero (false without an
// interval).
func (s Summary) Resolved() bool {
	return !math.IsNaN(s.Lo) && !math.IsNaN(s.Hi) && (s.Lo > 0 || s.Hi < 0)
}

// Direction says which way a metric improves.
type Direction int

const (
	// LowerIsBetter: losses, bits per byte.
	LowerIsBetter Direction = iota
	// HigherIsBetter: accuracies.
	HigherIsBetter
)

// Compare words the paired difference d = a − b of metric unit between
// encodings a and b: "a beats b by x unit [lo, hi]" (x the improvement,
// positive, and its interval) when the interval excludes zero, "a trails
// b by ..." when it excludes zero the other way, and "no difference
// resolved between a and b at this size (a − b = x [lo, hi] unit)"
// otherwise, or with a single pair ("one seed: no interval"). format is
// the fmt verb of the numbers, e.g. "%.3f".
func Compare(a, b string, d Summary, unit, format string, dir Direction) string {
	f := func(x float64) string { return fmt.Sprintf(format, x) }
	if d.N < 2 || math.IsNaN(d.Lo) {
		return fmt.Sprintf("%s − %s = %s %s on one seed: no interval, nothing resolved", a, b, f(d.Mean), unit)
	}
	if !d.Resolved() {
		return fmt.Sprintf("no difference resolved between %s and %s at this size (%s − %s = %s [%s, %s] %s, %d seeds)",
			a, b, a, b, f(d.Mean), f(d.Lo), f(d.Hi), unit, d.N)
	}
	gain, lo, hi := d.Mean, d.Lo, d.Hi
	if dir == LowerIsBetter {
		gain, lo, hi = -d.Mean, -d.Hi, -d.Lo
	}
	verb := "beats"
	if gain < 0 {
		verb, gain, lo, hi = "trails", -gain, -hi, -lo
	}
	return fmt.Sprintf("%s %s %s by %s %s [%s, %s] (%d seeds)", a, verb, b, f(gain), unit, f(lo), f(hi), d.N)
}

// Format renders a summary as "mean [lo, hi]" with format, or "mean (1
// seed)" without an interval.
func (s Summary) Format(format string) string {
	if s.N < 2 || math.IsNaN(s.Lo) {
		return fmt.Sprintf(format+" (n=%d)", s.Mean, s.N)
	}
	return fmt.Sprintf(format+" ["+format+", "+format+"]", s.Mean, s.Lo, s.Hi)
}
