package stats

import (
	"math"
	"math/rand"
	randv2 "math/rand/v2"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestTQuantile(t *testing.T) {
	// scipy.stats.t.ppf(0.975, df)
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706204736174698}, {2, 4.302652729749464}, {4, 2.7764451051977934}, {29, 2.045229642132703}, {10000, 1.9602012636213575}} {
		if got := TQuantile(c.df); !near(got, c.want, 1e-6) {
			t.Errorf("TQuantile(%d) = %.12g, want %.12g", c.df, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	s := Describe([]float64{1, 2, 3})
	half := 4.302652729749464 / math.Sqrt(3)
	if s.N != 3 || s.Mean != 2 || !near(s.SD, 1, 1e-15) || !near(s.Lo, 2-half, 1e-9) || !near(s.Hi, 2+half, 1e-9) {
		t.Errorf("Describe(1, 2, 3) = %+v", s)
	}
	if one := Describe([]float64{5}); one.Mean != 5 || one.SD != 0 || !math.IsNaN(one.Lo) || one.Resolved() {
		t.Errorf("Describe(5) = %+v: want mean 5, no interval", one)
	}
	if none := Describe(nil); none.N != 0 || !math.IsNaN(none.Mean) {
		t.Errorf("Describe() = %+v", none)
	}
}

func TestPaired(t *testing.T) {
	// a large common seed effect cancels: the differences are 0.1, 0.12, 0.11
	a := []float64{1.10, 2.12, 0.61}
	b := []float64{1.00, 2.00, 0.50}
	d, err := Paired(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !near(d.Mean, 0.11, 1e-12) || !d.Resolved() {
		t.Errorf("Paired = %+v: want 0.11, resolved", d)
	}
	// unpaired, the same samples' means are not resolved apart
	if sa, sb := Describe(a), Describe(b); sa.Lo > sb.Hi {
		t.Errorf("unpaired intervals %+v and %+v do not overlap: the test lost its point", sa, sb)
	}
	if _, err := Paired([]float64{1}, []float64{1, 2}); err == nil {
		t.Error("Paired of 1 and 2 values: no error")
	}
}

func TestPairedBootstrap(t *testing.T) {
	// constant differences: the interval is that constant
	c, err := PairedBootstrap([][]float64{{0.5, 0.5}, {0.5, 0.5, 0.5}}, 200, rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mean != 0.5 || c.Lo != 0.5 || c.Hi != 0.5 || c.Method != "bootstrap" {
		t.Errorf("constant differences: %+v", c)
	}
	// normal differences of mean 0.3, sd 1: 3 seeds x 400 items; the
	// interval contains 0.3 and excludes 0; it is at least as wide as the
	// items-only interval ±1.96/√1200 (resampling the three seeds adds
	// their spread) and not twice as wide
	rng := rand.New(rand.NewSource(7))
	d := make([][]float64, 3)
	for s := range d {
		for range 400 {
			d[s] = append(d[s], 0.3+rng.NormFloat64())
		}
	}
	b, err := PairedBootstrap(d, 2000, rand.New(rand.NewSource(2)))
	if err != nil {
		t.Fatal(err)
	}
	iid := 2 * 1.96 / math.Sqrt(1200)
	if w := b.Hi - b.Lo; !(b.Lo < 0.3 && 0.3 < b.Hi) || !b.Resolved() || w < iid || w > 2*iid {
		t.Errorf("bootstrap %+v: want an interval around 0.3 of width in [%.3f, %.3f]", b, iid, 2*iid)
	}
	// the same seed gives the same interval
	b2, _ := PairedBootstrap(d, 2000, rand.New(rand.NewSource(2)))
	if b2 != b {
		t.Errorf("bootstrap is not reproducible: %+v then %+v", b, b2)
	}
	for _, bad := range [][][]float64{nil, {{1}, {}}} {
		if _, err := PairedBootstrap(bad, 200, rng); err == nil {
			t.Errorf("PairedBootstrap(%v): no error", bad)
		}
	}
	if _, err := PairedBootstrap(d, 10, rng); err == nil {
		t.Error("PairedBootstrap with 10 replications: no error")
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		d    Summary
		dir  Direction
		want string
	}{
		{Summary{N: 3, Mean: -0.1, Lo: -0.15, Hi: -0.05}, LowerIsBetter, "A beats B by 0.100 bits/byte [0.050, 0.150] (3 seeds)"},
		{Summary{N: 3, Mean: 0.1, Lo: 0.05, Hi: 0.15}, LowerIsBetter, "A trails B by 0.100 bits/byte [0.050, 0.150] (3 seeds)"},
		{Summary{N: 3, Mean: 0.1, Lo: 0.05, Hi: 0.15}, HigherIsBetter, "A beats B by 0.100 bits/byte [0.050, 0.150] (3 seeds)"},
		{Summary{N: 3, Mean: -0.1, Lo: -0.3, Hi: 0.1}, LowerIsBetter, "no difference resolved between A and B at this size (A − B = -0.100 [-0.300, 0.100] bits/byte, 3 seeds)"},
		{Summary{N: 1, Mean: -0.1, Lo: math.NaN(), Hi: math.NaN()}, LowerIsBetter, "A − B = -0.100 bits/byte on one seed: no interval, nothing resolved"},
	} {
		if got := Compare("A", "B", c.d, "bits/byte", "%.3f", c.dir); got != c.want {
			t.Errorf("Compare(%+v, %v) =\n  %q\nwant\n  %q", c.d, c.dir, got, c.want)
		}
	}
	// an interval containing zero is never worded as a win
	if s := Compare("A", "B", Summary{N: 3, Mean: -0.5, Lo: -1, Hi: 0}, "bits", "%.2f", LowerIsBetter); strings.Contains(s, "beats") {
		t.Errorf("interval touching zero worded as a win: %s", s)
	}
}

// TestResamplerCounts: the resample of right/wrong differences drawn
// through value counts has the spread of the item-by-item resample, the
// sampling sd sqrt(var/n) of the mean; a NaN item is refused.
func TestResamplerCounts(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	items := make([]float64, 2000)
	for i := range items {
		items[i] = float64(rng.Intn(3) - 1) // -1, 0, 1
	}
	pop := Describe(items)
	want := pop.SD * math.Sqrt(float64(len(items)-1)/float64(len(items))) / math.Sqrt(float64(len(items)))
	src := randv2.NewPCG(1, 2)
	fast := resampler(items, rng, src)
	var xs []float64
	for range 20000 {
		xs = append(xs, fast())
	}
	got := Describe(xs)
	if math.Abs(got.SD-want) > 0.03*want || math.Abs(got.Mean-pop.Mean) > 4*want/math.Sqrt(20000) {
		t.Errorf("counts resample: mean %.5f sd %.5f, want mean %.5f sd %.5f", got.Mean, got.SD, pop.Mean, want)
	}
	// the same items with 17 distinct values take the item path: the same sd
	wide := append([]float64(nil), items...)
	for i := range 17 {
		wide[i] += 1e-9 * float64(i+1)
	}
	slow := resampler(wide, rng, src)
	xs = xs[:0]
	for range 4000 {
		xs = append(xs, slow())
	}
	if s := Describe(xs).SD; math.Abs(s-want) > 0.06*want {
		t.Errorf("item resample: sd %.5f, want %.5f", s, want)
	}
	nan := [][]float64{append([]float64{math.NaN()}, items[:10]...)}
	if _, err := PairedBootstrap(nan, 100, rng); err == nil || !strings.Contains(err.Error(), "item 0 is NaN") {
		t.Errorf("a NaN item: %v", err)
	}
}
