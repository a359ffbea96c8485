package stabilitystudy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rpe-go/rpe/experiments/stats"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/viz"
)

// The files Render writes in the output directory.
const (
	FileCSV     = study.FileCSV
	FileJSON    = study.FileJSON
	FileTable   = study.FileTable
	FileLoss    = "loss_high_lr.png"
	FileEffects = "effects.png"
	FileMonitor = "monitor.png"
)

// MonitorCopy is the name under which Render keeps the monitor records of
// the most unstable run in the output directory ("monitor-<key>.csv"), so
// that the figure can be redrawn without the model directories.
func MonitorCopy(key string) string { return "monitor-" + key + ".csv" }

// File is results.json: the plan, the rows without their curves, the
// effects and the most unstable run.
type File struct {
	study.Results[Plan, Row]
	Effects []Effect `json:"effects"`
	// Warnings say how early the monitor announces instability (Warnings,
	// over the warm-up updates).
	Warnings []Warning `json:"warnings,omitempty"`
	// Unstable is the key of the most unstable run (MostUnstable), whose
	// monitor figure is FileMonitor.
	Unstable string `json:"unstable,omitempty"`
}

// LoadResults reads results.json of an output directory.
func LoadResults(dir string) (*File, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errors.Wrapf(err, "%s", filepath.Join(dir, FileJSON))
	}
	return &f, nil
}

// render writes the outputs from the saved rows (with their curves).
func (r *runner) render(rows []Row, pending []string) error {
	p := r.plan
	for i := range rows {
		Summarize(&rows[i], p.Base.Warmup)
	}
	f := NewFile(p, rows, pending)
	plots := []func(string) error{
		func(dir string) error { return PlotLoss(p, rows, filepath.Join(dir, FileLoss)) },
		func(dir string) error { return PlotEffects(f, filepath.Join(dir, FileEffects)) },
		func(dir string) error { return r.plotMonitor(f.Unstable, dir) },
	}
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: f.Rows, JSON: f,
		CSVHeader: csvHeader(), CSVRow: csvRow, Markdown: Markdown(f), Plots: plots})
}

// NewFile returns results.json of rows (curves dropped) with the effects
// and the most unstable run.
func NewFile(p Plan, rows []Row, pending []string) *File {
	f := &File{Results: study.Results[Plan, Row]{Preset: p.Preset, Plan: p, Pending: pending}}
	f.Effects = Effects(p, rows)
	f.Warnings = Warnings(rows, p.LRs, p.Base.Warmup)
	if u, ok := MostUnstable(rows); ok {
		f.Unstable = KeyOf(u)
	}
	for _, r := range rows {
		r.Loss, r.GradNorm, r.Monitor = nil, nil, nil
		f.Rows = append(f.Rows, r)
	}
	return f
}

// KeyOf is the job key of a row.
func KeyOf(r Row) string {
	s := Setting{InitStd: math.NaN(), Alpha: r.Alpha, LR: r.LR}
	if r.InitStd != NA {
		s.InitStd, _ = strconv.ParseFloat(r.InitStd, 64)
	}
	if r.Clip != "off" {
		s.Clip, _ = strconv.ParseFloat(r.Clip, 64)
	}
	return Job{Encoding: r.Encoding, Setting: s, Seed: r.Seed}.Key()
}

// MostUnstable returns the most unstable run: the one that diverged
// earliest, else the one with the most loss spikes, then gradient-norm
// spikes, then the largest gradient norm; false if there are no rows.
func MostUnstable(rows []Row) (Row, bool) {
	if len(rows) == 0 {
		return Row{}, false
	}
	less := func(a, b Row) bool { // a is more unstable than b
		if a.Diverged() != b.Diverged() {
			return a.Diverged()
		}
		if a.Diverged() && a.DivergedStep != b.DivergedStep {
			return a.DivergedStep < b.DivergedStep
		}
		if a.Spikes != b.Spikes {
			return a.Spikes > b.Spikes
		}
		if a.GradSpikes != b.GradSpikes {
			return a.GradSpikes > b.GradSpikes
		}
		return float64(a.MaxGradNorm) > float64(b.MaxGradNorm)
	}
	best := rows[0]
	for _, r := range rows[1:] {
		if less(r, best) {
			best = r
		}
	}
	return best, true
}

// column is one column of results.csv.
type column struct {
	name string
	get  func(Row) string
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// columns are the columns of results.csv, in order.
var columns = []column{
	{"preset", func(r Row) string { return r.Preset }},
	{"encoding", func(r Row) string { return r.Encoding }},
	{"base", func(r Row) string { return r.Base }},
	{"init_std", func(r Row) string { return r.InitStd }},
	{"alpha", func(r Row) string { return r.Alpha }},
	{"clip", func(r Row) string { return r.Clip }},
	{"lr", func(r Row) string { return fmtF(r.LR) }},
	{"seed", func(r Row) string { return strconv.FormatInt(r.Seed, 10) }},
	{"status", func(r Row) string { return r.Status }},
	{"diverged_step", func(r Row) string { return strconv.Itoa(r.DivergedStep) }},
	{"steps", func(r Row) string { return strconv.Itoa(r.Steps) }},
	{"spikes", func(r Row) string { return strconv.Itoa(r.Spikes) }},
	{"grad_spikes", func(r Row) string { return strconv.Itoa(r.GradSpikes) }},
	{"max_grad_norm", func(r Row) string { return r.MaxGradNorm.String() }},
	{"final_train_bpb", func(r Row) string { return r.FinalTrain.String() }},
	{"val_bpb", func(r Row) string { return r.Val.String() }},
	{"min_entropy", func(r Row) string { return r.MinEntropy.String() }},
	{"max_abs_score", func(r Row) string { return r.MaxAbsScore.String() }},
	{"max_pos_rms", func(r Row) string { return r.MaxPosRMS.String() }},
	{"max_one_hot", func(r Row) string { return r.MaxOneHot.String() }},
	{"ms_per_update", func(r Row) string { return fmtF(r.MsPerUpdate) }},
	{"params", func(r Row) string { return strconv.Itoa(r.Params) }},
	{"blas", func(r Row) string { return r.BLAS }},
	{"go_version", func(r Row) string { return r.GoVersion }},
	{"git_rev", func(r Row) string { return r.GitRev }},
	{"git_dirty", func(r Row) string { return strconv.FormatBool(r.GitDirty) }},
	{"why", func(r Row) string { return r.Why }},
	{"machine", func(r Row) string { return r.Machine }},
}

func csvHeader() []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return out
}

func csvRow(r Row) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.get(r)
	}
	return out
}

// Markdown renders table.md: the summary of the remedies at every lr, the
// effects per encoding, and the full grid.
func Markdown(f *File) string {
	p := f.Plan
	var b strings.Builder
	c := p.Base
	fmt.Fprintf(&b, "# Stability study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Byte-level causal LM (d=%d, %d heads, %d blocks, FFN %d) on Newton's Opticks, L = %d, batch %d, %d updates (%d warm-up, cosine to %g·lr), AdamW, %v, seeds %v. ",
		c.Model.DModel, c.Model.Heads, c.Model.Layers, c.Model.FFN, c.SeqLen, c.Batch, c.Steps, c.Warmup, c.FloorFrac, c.Dtype, p.Seeds)
	fmt.Fprintf(&b, "Grid: init std of the position parameters %v, alpha %v, clip %v (0: off), lr %v; an axis that does not change an encoding's parameters is n/a. ",
		p.InitStds, p.Alphas, p.Clips, p.LRs)
	fmt.Fprintf(&b, "A *spike* is an update after warm-up whose loss exceeds the mean of the previous %d by more than %g bits/byte (consecutive ones count once); "+
		"a *grad-norm spike* one whose gradient norm exceeds %d× the median of the previous %d. "+
		"A run *diverged* if an update had a non-finite loss, gradient norm or weights (training stops there) or its loss exceeded %d bits/byte (the uniform model) after warm-up (training goes on, and the validation of where it ended counts). "+
		"Final train: mean loss of the last %d updates. Val: bits/byte on the validation split at L.\n\n",
		Window, SpikeBits, GradSpikeFactor, Window, DivergedBits, FinalWindow)
	writeSummary(&b, f)
	writeWarnings(&b, f.Warnings)
	writeEffects(&b, f)
	writeGrid(&b, f, nil)
	if len(f.Rows) > 0 {
		r0 := f.Rows[0]
		dirty := ""
		if slices.ContainsFunc(f.Rows, func(r Row) bool { return r.GitDirty }) {
			dirty = " (uncommitted changes)"
		}
		fmt.Fprintf(&b, "\nBLAS: %s; %s; git %s%s.\n", r0.BLAS, r0.GoVersion, r0.GitRev, dirty)
	}
	if f.Unstable != "" {
		fmt.Fprintf(&b, "\nMost unstable run (monitor figure %s): %s.\n", FileMonitor, f.Unstable)
	}
	if len(f.Pending) > 0 {
		fmt.Fprintf(&b, "\nNot yet run: %s.\n", strings.Join(f.Pending, ", "))
	}
	return b.String()
}

// fmtPM is "m ± s [lo, hi]" with prec decimals, [lo, hi] the 95% t
// interval of the mean of n values of sample standard deviation s ("" for
// NaN; "m" alone for n = 1).
func fmtPM(mn, sn Num, n, prec int) string {
	m, s := float64(mn), float64(sn)
	switch {
	case math.IsNaN(m):
		return ""
	case n < 2:
		return fmt.Sprintf("%+.*f", prec, m)
	}
	h := stats.HalfWidth(s, n)
	return fmt.Sprintf("%+.*f ± %.*f [%+.*f, %+.*f]", prec, m, prec, s, prec, m-h, prec, m+h)
}

// effectsOf returns the effects of one encoding, remedy and lr.
func effectOf(f *File, enc, remedy string, lr float64) (Effect, bool) {
	for _, e := range f.Effects {
		if e.Encoding == enc && e.Remedy == remedy && e.LR == lr {
			return e, true
		}
	}
	return Effect{}, false
}

// encodings lists the encodings of the rows in order.
func encodings(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Encoding) {
			out = append(out, r.Encoding)
		}
	}
	return out
}

// writeSummary writes, per lr, a table of encodings by remedy: the mean
// paired change in val bits/byte and the diverged runs with / without.
func writeSummary(b *strings.Builder, f *File) {
	p := f.Plan
	rms := p.Remedies()
	b.WriteString("## Which remedies matter\n\n")
	b.WriteString("Paired effect of each remedy (runs equal in every other factor and seed): change in validation bits/byte, with remedy minus without " +
		"(negative: the remedy helps; mean ± sample std [95% t interval] over the pairs in which both runs have a validation), then diverged runs with / without the remedy, then the change in loss spikes.\n\n")
	for _, lr := range p.LRs {
		fmt.Fprintf(b, "### lr %g\n\n| encoding |", lr)
		for _, rm := range rms {
			fmt.Fprintf(b, " %s: Δ val | diverged | Δ spikes |", rm.Title)
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|---:|---:|", len(rms)) + "\n")
		for _, enc := range encodings(f.Rows) {
			fmt.Fprintf(b, "| %s |", enc)
			for _, rm := range rms {
				e, ok := effectOf(f, enc, rm.Name, lr)
				switch {
				case !ok || e.Pairs == 0 && !e.NA:
					b.WriteString(" | | |")
				case e.NA:
					b.WriteString(" n/a | | |")
				default:
					fmt.Fprintf(b, " %s | %d / %d | %s |", fmtPM(e.ValMean, e.ValStd, e.ValN, 3), e.DivOn, e.DivOff, fmtPM(e.SpikesMean, e.SpikesStd, e.Pairs, 1))
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// writeEffects writes the effects in full: per encoding, remedy and lr.
func writeEffects(b *strings.Builder, f *File) {
	b.WriteString("## Effects in full\n\n")
	b.WriteString("| encoding | remedy | lr | pairs | Δ val bits/byte | pairs with val | Δ spikes | Δ grad-norm spikes | diverged with / without |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	titles := map[string]string{}
	for _, rm := range f.Plan.Remedies() {
		titles[rm.Name] = rm.Title
	}
	for _, e := range f.Effects {
		if e.NA {
			fmt.Fprintf(b, "| %s | %s | %g | n/a | | | | | |\n", e.Encoding, titles[e.Remedy], e.LR)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %g | %d | %s | %d | %s | %s | %d / %d |\n", e.Encoding, titles[e.Remedy], e.LR, e.Pairs,
			fmtPM(e.ValMean, e.ValStd, e.ValN, 4), e.ValN, fmtPM(e.SpikesMean, e.SpikesStd, e.Pairs, 2),
			fmtPM(e.GradSpikesMean, e.GradSpikesStd, e.Pairs, 2), e.DivOn, e.DivOff)
	}
	b.WriteString("\n")
}

// gridKey is a setting of one encoding (a row of the grid table).
type gridKey struct {
	enc, init, alpha, clip string
	lr                     float64
}

// SummaryMarkdown is the "which remedies matter" section of table.md.
func SummaryMarkdown(f *File) string {
	var b strings.Builder
	writeSummary(&b, f)
	return b.String()
}

// GridMarkdown is the full grid of table.md, restricted to the given
// encodings (all of them if none is given).
func GridMarkdown(f *File, encodings ...string) string {
	var b strings.Builder
	writeGrid(&b, f, encodings)
	return b.String()
}

// writeGrid writes the full grid: one line per encoding (of encs, or
// every one if encs is empty) and setting, aggregated over seeds.
func writeGrid(b *strings.Builder, f *File, encs []string) {
	b.WriteString("## Full grid\n\n")
	b.WriteString("Per setting, over seeds: runs, diverged runs (at updates), mean loss spikes and grad-norm spikes, largest gradient norm, final train loss and val bits/byte (mean ± std [95% t interval] over the runs that trained to the end), " +
		"and the attention monitor's extremes over heads, layers and recorded updates (smallest attention entropy in nats, largest |score|, largest position-term RMS, largest fraction of one-hot queries), and ms per update.\n\n")
	b.WriteString("| encoding | init std | alpha | clip | lr | runs | diverged | spikes | grad spikes | max grad norm | final train | val | min entropy | max abs score | max pos RMS | max one-hot | ms/update |\n")
	b.WriteString("|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var keys []gridKey
	group := map[gridKey][]Row{}
	for _, r := range f.Rows {
		if len(encs) > 0 && !slices.Contains(encs, r.Encoding) {
			continue
		}
		k := gridKey{r.Encoding, r.InitStd, r.Alpha, r.Clip, r.LR}
		if _, ok := group[k]; !ok {
			keys = append(keys, k)
		}
		group[k] = append(group[k], r)
	}
	for _, k := range keys {
		rs := group[k]
		var div []string
		var spikes, gspikes, ms []float64
		var train, val []float64
		maxGN, minEnt, maxScore, maxRMS, maxOH := math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		for _, r := range rs {
			if r.Diverged() {
				div = append(div, strconv.Itoa(r.DivergedStep))
			}
			if !math.IsNaN(float64(r.Val)) { // runs that trained to the end
				train = append(train, float64(r.FinalTrain))
				val = append(val, float64(r.Val))
			}
			spikes = append(spikes, float64(r.Spikes))
			gspikes = append(gspikes, float64(r.GradSpikes))
			ms = append(ms, r.MsPerUpdate)
			maxGN = nanMax(maxGN, float64(r.MaxGradNorm))
			minEnt = -nanMax(-minEnt, -float64(r.MinEntropy))
			maxScore = nanMax(maxScore, float64(r.MaxAbsScore))
			maxRMS = nanMax(maxRMS, float64(r.MaxPosRMS))
			maxOH = nanMax(maxOH, float64(r.MaxOneHot))
		}
		d := strconv.Itoa(len(div))
		if len(div) > 0 {
			d += " (" + strings.Join(div, ", ") + ")"
		}
		mean := func(v []float64) float64 { m, _ := study.MeanStd(v); return m }
		pm := func(v []float64) string {
			if len(v) == 0 {
				return ""
			}
			return study.NewCell(v).Interval(4)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %g | %d | %s | %.1f | %.1f | %s | %s | %s | %s | %s | %s | %s | %.1f |\n",
			k.enc, k.init, k.alpha, k.clip, k.lr, len(rs), d, mean(spikes), mean(gspikes), fmtG(maxGN), pm(train), pm(val),
			fmtG(minEnt), fmtG(maxScore), fmtG(maxRMS), fmtG(maxOH), mean(ms))
	}
}

// nanMax is the larger of a and b, ignoring NaN.
func nanMax(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Max(a, b)
}

// fmtG is v with 3 significant digits ("" for NaN).
func fmtG(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// settingName names a row's setting in legends: "init 0.02, alpha off,
// clip 1" (n/a axes left out).
func settingName(r Row) string {
	var s []string
	if r.InitStd != NA {
		s = append(s, "init "+r.InitStd)
	}
	if r.Alpha != NA {
		s = append(s, "alpha "+r.Alpha)
	}
	s = append(s, "clip "+r.Clip)
	return strings.Join(s, ", ")
}

// LossYMax is the highest top of the loss panels (bits/byte): higher
// losses are clipped.
const LossYMax = 10

// PlotLoss draws FileLoss: one panel per encoding at the highest lr of
// the plan, one line per remedy setting (the training loss of the plan's
// first seed; a diverged run's line ends where it stopped).
func PlotLoss(p Plan, rows []Row, path string) error {
	lr := slices.Max(p.LRs)
	encs := encodings(rows)
	cols := min(4, len(encs))
	nrows := (len(encs) + cols - 1) / cols
	w, h := vg.Length(cols)*4*vg.Inch, vg.Length(nrows)*3.2*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Points(4), PadY: vg.Points(4), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	for i, enc := range encs {
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("%s, lr %g, seed %d", enc, lr, p.Seeds[0])
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.X.Label.Text, pl.Y.Label.Text = "update", "train loss (bits/byte)"
		pl.Add(plotter.NewGrid())
		lo, hi := math.Inf(1), math.Inf(-1)
		k := 0
		for _, r := range rows {
			if r.Encoding != enc || r.LR != lr || r.Seed != p.Seeds[0] || len(r.Loss) == 0 {
				continue
			}
			xy := make(plotter.XYs, len(r.Loss))
			for s, v := range r.Loss {
				xy[s] = plotter.XY{X: float64(s + 1), Y: math.Min(v, 2*LossYMax)}
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return errors.Wrapf(err, "%s: %s", path, KeyOf(r))
			}
			st := viz.SeriesStyle(k)
			l.LineStyle.Color, l.LineStyle.Dashes, l.LineStyle.Width = st.Color, st.Dashes, vg.Points(1)
			pl.Add(l)
			name := settingName(r)
			if r.Diverged() {
				name += fmt.Sprintf(" (diverged at %d)", r.DivergedStep)
			}
			pl.Legend.Add(name, l)
			k++
		}
		if k > 0 { // the data's range, up to LossYMax, with room for the legend
			pl.Y.Min, pl.Y.Max = math.Floor(lo), math.Min(LossYMax, math.Ceil(hi))+0.3*float64(k)
		}
		pl.Legend.Top = true
		pl.Legend.TextStyle.Font.Size = vg.Points(7)
		pl.Draw(tiles.At(dc, i%cols, i/cols))
	}
	return writePNG(img, path)
}

// writePNG encodes img to path atomically.
func writePNG(img *vgimg.Canvas, path string) error {
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

// PlotEffects draws FileEffects: one panel per lr, the paired change in
// validation bits/byte of each remedy (mean ± std over pairs) per
// encoding; n/a remedies and those without pairs are left out.
func PlotEffects(f *File, path string) error {
	p := f.Plan
	encs := encodings(f.Rows)
	rms := p.Remedies()
	w, h := vg.Length(len(p.LRs))*6*vg.Inch, 4.5*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(p.LRs), PadX: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	for li, lr := range p.LRs {
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("Effect of each remedy on val bits/byte at lr %g\n(with minus without; 95%% t interval over matched pairs)", lr)
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.Y.Label.Text = "Δ val bits/byte"
		pl.Add(plotter.NewGrid())
		zero, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: 0}, {X: float64(len(encs)) - 0.4, Y: 0}})
		if err != nil {
			return err
		}
		zero.Color = color.Gray{Y: 110}
		pl.Add(zero)
		for ri, rm := range rms {
			st := viz.SeriesStyle(ri)
			var pts errXY
			for ei, enc := range encs {
				e, ok := effectOf(f, enc, rm.Name, lr)
				if !ok || e.NA || e.ValN == 0 {
					continue
				}
				off := 0.2 * (float64(ri) - float64(len(rms)-1)/2)
				pts.XYs = append(pts.XYs, plotter.XY{X: float64(ei) + off, Y: float64(e.ValMean)})
				pts.err = append(pts.err, stats.HalfWidth(float64(e.ValStd), e.ValN))
			}
			if len(pts.XYs) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(pts.XYs)
			if err != nil {
				return err
			}
			sc.Color, sc.Shape, sc.Radius = st.Color, st.Shape, vg.Points(3)
			pl.Add(sc)
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return err
			}
			eb.LineStyle.Color = st.Color
			pl.Add(eb)
			pl.Legend.Add(rm.Title, sc)
		}
		if lo, hi := pl.Y.Min, pl.Y.Max; hi > lo { // room for the legend above the points
			pl.Y.Max = hi + 0.35*(hi-lo)
		}
		pl.NominalX(encs...)
		pl.X.Tick.Label.Rotation = math.Pi / 4
		pl.X.Tick.Label.XAlign, pl.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
		pl.X.Min, pl.X.Max = -0.6, float64(len(encs))-0.4
		pl.Legend.Top = true
		pl.Draw(tiles.At(dc, li, 0))
	}
	return writePNG(img, path)
}

// errXY are points with symmetric y errors.
type errXY struct {
	plotter.XYs
	err []float64
}

// YError implements plotter.YErrorer.
func (e errXY) YError(i int) (float64, float64) { return e.err[i], e.err[i] }

// plotMonitor draws FileMonitor from the monitor records of the run key:
// those of its model directory (copied to MonitorCopy(key) in dir), or
// that copy when the model directory is gone. Copies of other runs are
// removed. Without records it draws nothing.
func (r *runner) plotMonitor(key, dir string) error {
	old, _ := filepath.Glob(filepath.Join(dir, MonitorCopy("*")))
	for _, o := range old {
		if filepath.Base(o) != MonitorCopy(key) {
			os.Remove(o)
		}
	}
	if key == "" {
		return nil
	}
	cp := filepath.Join(dir, MonitorCopy(key))
	src := monitorPath(filepath.Join(dir, "models", key, "ckpt.safetensors"))
	if b, err := os.ReadFile(src); err == nil {
		if err := study.WriteFileAtomic(cp, b); err != nil {
			return err
		}
	}
	if _, err := os.Stat(cp); err != nil {
		return nil
	}
	return drawMonitor(cp, fmt.Sprintf("Most unstable run: %s", key), filepath.Join(dir, FileMonitor))
}
