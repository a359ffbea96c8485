package stabilitystudy

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// effectRows are hand-made rows of encoding "e" at lr 1 (init std and clip
// axes, alpha n/a, seeds 1 and 2; one run diverged, one pair incomplete)
// and of "rope" (no init std axis).
func effectRows() []Row {
	row := func(enc, init, clip string, seed int64, val float64, spikes int, diverged bool) Row {
		r := Row{Encoding: enc, Base: enc, InitStd: init, Alpha: NA, Clip: clip, LR: 1, Seed: seed, Status: StatusOK, Val: Num(val), Spikes: spikes}
		if diverged {
			r.Status, r.DivergedStep, r.Val = StatusDiverged, 40, Num(math.NaN())
		}
		return r
	}
	return []Row{
		row("e", "0.02", "off", 1, 3.0, 0, false),
		row("e", "1", "off", 1, 3.5, 2, false),
		row("e", "0.02", "off", 2, 3.2, 1, false),
		row("e", "1", "off", 2, 0, 4, true),
		row("e", "0.02", "1", 1, 3.0, 0, false),
		row("e", "1", "1", 1, 3.1, 1, false),
		row("e", "1", "1", 3, 3.1, 1, false), // no partner
		row("rope", NA, "off", 1, 2.5, 0, false),
		row("rope", NA, "1", 1, 2.4, 0, false),
	}
}

// TestEffects checks the paired effects against hand-computed values.
func TestEffects(t *testing.T) {
	p := tinyPlan("t5")
	p.LRs = []float64{1}
	es := Effects(p, effectRows())
	if len(es) != 2*3 {
		t.Fatalf("%d effects, want 6", len(es))
	}
	near := func(a Num, b float64) bool { return math.Abs(float64(a)-b) < 1e-12 }
	for _, c := range []struct {
		i                                      int
		enc, remedy                            string
		na                                     bool
		pairs, valN                            int
		valMean, valStd, spikesMean, spikesStd float64
		divOn, divOff                          int
	}{
		// init: pairs (off,1): -0.5, spikes -2; (off,2): no val (off
		// diverged), spikes -3; (1,1): -0.1, spikes -1.
		{0, "e", "init", false, 3, 2, -0.3, math.Sqrt(0.08), -2, 1, 0, 1},
		{1, "e", "alpha", true, 0, 0, math.NaN(), math.NaN(), math.NaN(), math.NaN(), 0, 0},
		// clip: pairs (0.02,1): 0, spikes 0; (1,1): -0.4, spikes -1.
		{2, "e", "clip", false, 2, 2, -0.2, math.Sqrt(0.08), -0.5, math.Sqrt(0.5), 0, 0},
		{3, "rope", "init", true, 0, 0, math.NaN(), math.NaN(), math.NaN(), math.NaN(), 0, 0},
		{5, "rope", "clip", false, 1, 1, -0.1, 0, 0, 0, 0, 0},
	} {
		e := es[c.i]
		nanOK := func(a Num, b float64) bool { return math.IsNaN(b) && math.IsNaN(float64(a)) || near(a, b) }
		if e.Encoding != c.enc || e.Remedy != c.remedy || e.NA != c.na || e.Pairs != c.pairs || e.ValN != c.valN ||
			!nanOK(e.ValMean, c.valMean) || !nanOK(e.ValStd, c.valStd) || !nanOK(e.SpikesMean, c.spikesMean) ||
			!nanOK(e.SpikesStd, c.spikesStd) || e.DivOn != c.divOn || e.DivOff != c.divOff {
			t.Errorf("effect %d: %+v\nwant %+v", c.i, e, c)
		}
	}
}

// TestRenderRows renders hand-made rows: the summary, the effects and the
// grid in table.md, results.csv with empty cells for NaN, and the figures.
func TestRenderRows(t *testing.T) {
	p := tinyPlan("e", "rope")
	p.LRs = []float64{1}
	rows := effectRows()
	for i := range rows {
		rows[i].Loss = []float64{8, 6, 5, 4.5, 4.2, 9, 4.1, 4}[:4+i%5]
		rows[i].GradNorm = []float64{1, 2, 1, 1, 1, 50, 1, 1}[:4+i%5]
	}
	f := NewFile(p, rows, []string{"pending-run"})
	if f.Unstable != "e-init1-alphana-clipoff-lr1-seed2" {
		t.Errorf("most unstable %s", f.Unstable)
	}
	md := Markdown(f)
	for _, want := range []string{
		"| e | -0.300 ± 0.283 [-2.841, +2.241] | 0 / 1 | -2.0 ± 1.0 [-4.5, +0.5] | n/a | | | -0.200 ± 0.283 [-2.741, +2.341] | 0 / 0 | -0.5 ± 0.7 [-6.9, +5.9] |",
		"| rope | n/a | | | n/a | | | -0.100 | 0 / 0 | +0.0 |",
		"| e | 1 | n/a | off | 1 | 2 | 1 (40) | 3.0 | 0.0 |",
		"Not yet run: pending-run.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table.md lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	for _, plot := range []func() error{
		func() error { return PlotLoss(p, rows, filepath.Join(dir, FileLoss)) },
		func() error { return PlotEffects(f, filepath.Join(dir, FileEffects)) },
	} {
		if err := plot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{FileLoss, FileEffects} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", name, err)
		}
	}
	rec := csvRow(rows[3])
	for i, name := range csvHeader() {
		if name == "val_bpb" && rec[i] != "" || name == "status" && rec[i] != StatusDiverged {
			t.Errorf("csv %s = %q", name, rec[i])
		}
	}
}

// TestMarkdownParts checks the notebook's pieces of table.md.
func TestMarkdownParts(t *testing.T) {
	p := tinyPlan("e", "rope")
	p.LRs = []float64{1}
	f := NewFile(p, effectRows(), nil)
	g := GridMarkdown(f, "rope")
	if !strings.Contains(g, "| rope | n/a | n/a | off | 1 |") || strings.Contains(g, "| e |") {
		t.Errorf("grid of rope:\n%s", g)
	}
	if s := SummaryMarkdown(f); !strings.Contains(s, "## Which remedies matter") || strings.Contains(s, "## Full grid") {
		t.Errorf("summary:\n%s", s)
	}
}
