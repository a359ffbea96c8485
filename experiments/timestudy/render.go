package timestudy

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rpe-go/rpe/experiments/stats"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/viz"
)

// The files Render writes in the output directory.
const (
	FileCSV   = study.FileCSV
	FileJSON  = study.FileJSON
	FileTable = study.FileTable
	FilePlot  = "repeats.png"
)

// File is results.json.
type File = study.Results[Plan, Row]

// LoadResults reads results.json of an output directory.
func LoadResults(dir string) (*File, error) { return study.ReadResults[Plan, Row](dir) }

// render writes results.csv, results.json, table.md and repeats.png.
func (r *runner) render(rows []Row, pending []string) error {
	f := &File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending}
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows, JSON: f,
		CSVHeader: csvHeader(), CSVRow: csvRow, Markdown: Markdown(f),
		Plots: []func(string) error{func(dir string) error { return Plot(f, filepath.Join(dir, FilePlot)) }},
	})
}

// column is one column of results.csv: its name, and how a row's field is
// written and read back.
type column struct {
	name string
	get  func(Row) string
	set  func(*Row, string) error
}

func strCol(name string, f func(*Row) *string) column {
	return column{name, func(r Row) string { return *f(&r) }, func(r *Row, s string) error { *f(r) = s; return nil }}
}

func intCol(name string, f func(*Row) *int) column {
	return column{name, func(r Row) string { return strconv.Itoa(*f(&r)) },
		func(r *Row, s string) (err error) { *f(r), err = strconv.Atoi(s); return err }}
}

func floatCol(name string, f func(*Row) *float64) column {
	return column{name, func(r Row) string { return strconv.FormatFloat(*f(&r), 'g', -1, 64) },
		func(r *Row, s string) (err error) { *f(r), err = strconv.ParseFloat(s, 64); return err }}
}

// columns are the columns of results.csv, in order.
var columns = []column{
	strCol("preset", func(r *Row) *string { return &r.Preset }),
	strCol("encoding", func(r *Row) *string { return &r.Encoding }),
	strCol("base", func(r *Row) *string { return &r.Base }),
	strCol("positions", func(r *Row) *string { return &r.Positions }),
	{"seed", func(r Row) string { return strconv.FormatInt(r.Seed, 10) },
		func(r *Row, s string) (err error) { r.Seed, err = strconv.ParseInt(s, 10, 64); return err }},
	intCol("factor", func(r *Row) *int { return &r.Factor }),
	intCol("eval_len", func(r *Row) *int { return &r.EvalLen }),
	intCol("train_len", func(r *Row) *int { return &r.TrainLen }),
	strCol("status", func(r *Row) *string { return &r.Status }),
	floatCol("repeat_accuracy", func(r *Row) *float64 { return &r.RepeatAccuracy }),
	floatCol("repeat_bits", func(r *Row) *float64 { return &r.RepeatBits }),
	floatCol("bits", func(r *Row) *float64 { return &r.Bits }),
	floatCol("new_bits", func(r *Row) *float64 { return &r.NewBits }),
	intCol("sequences", func(r *Row) *int { return &r.Sequences }),
	intCol("events", func(r *Row) *int { return &r.Events }),
	intCol("repeats", func(r *Row) *int { return &r.Repeats }),
	floatCol("eval_ms_per_event", func(r *Row) *float64 { return &r.EvalMsPerEvent }),
	intCol("train_steps", func(r *Row) *int { return &r.TrainSteps }),
	floatCol("train_ms_per_step", func(r *Row) *float64 { return &r.TrainMsPerStep }),
	floatCol("train_loss", func(r *Row) *float64 { return &r.TrainLoss }),
	floatCol("val_repeat_accuracy", func(r *Row) *float64 { return &r.ValRepeatAcc }),
	intCol("params", func(r *Row) *int { return &r.Params }),
	strCol("blas", func(r *Row) *string { return &r.BLAS }),
	strCol("go_version", func(r *Row) *string { return &r.GoVersion }),
	strCol("git_rev", func(r *Row) *string { return &r.GitRev }),
	{"git_dirty", func(r Row) string { return strconv.FormatBool(r.GitDirty) },
		func(r *Row, s string) (err error) { r.GitDirty, err = strconv.ParseBool(s); return err }},
	strCol("note", func(r *Row) *string { return &r.Note }),
	strCol("machine", func(r *Row) *string { return &r.Machine }),
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

// ReadCSV reads the rows of a results.csv written by this study. It
// returns an error naming the file for another header or a value that does
// not parse (naming the row and column).
func ReadCSV(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, errors.Wrapf(err, "%s", path)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], csvHeader()) {
		return nil, errors.Errorf("%s: not a time study results.csv", path)
	}
	rows := make([]Row, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		var r Row
		for k, c := range columns {
			if err := c.set(&r, rec[k]); err != nil {
				return nil, errors.Wrapf(err, "%s: row %d, column %s", path, i+1, c.name)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// cells aggregates a metric of the rows by (encoding label, factor) over
// seeds and lists the labels in the rows' order.
func cells(rows []Row, metric func(Row) float64) (map[[2]string]study.Cell, []string) {
	return study.Cells(rows, func(r Row) string { return r.Encoding }, func(r Row) string { return strconv.Itoa(r.Factor) },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, metric)
}

// pairedSection renders the paired comparisons of the accuracy on repeated
// events (study.PairedSection) at each evaluation length, over seeds and
// over seeds and test sequences: sequence q's item is 100·right_q·S/R (S
// sequences, R repeated events), whose mean is the accuracy in %.
func pairedSection(f *File) string {
	T := f.Plan.TrainLen()
	var conds []string
	for _, fc := range f.Plan.Factors {
		conds = append(conds, fmt.Sprintf("%d (%dT)", fc*T, fc))
	}
	var t study.ScoreTable
	for _, r := range f.Rows {
		if r.Status != StatusOK {
			continue
		}
		sc := study.Scores{Value: 100 * r.RepeatAccuracy}
		if len(r.RepeatRight) == r.Sequences && r.Repeats > 0 {
			sc.Items = study.WeightedItems(r.RepeatRight, 100*float64(r.Sequences)/float64(r.Repeats))
		}
		t.Add(r.Encoding, fmt.Sprintf("%d (%dT)", r.EvalLen, r.Factor), r.Seed, sc)
	}
	return study.PairedSection("Paired comparisons", conds, &t, "accuracy on repeated events", "points", "test sequences", "%.2f", stats.HigherIsBetter)
}

// Markdown renders table.md: per encoding and positions, the accuracy and
// bits on the repeated events, the bits per event and on new events at
// every evaluation length, and the training table.
func Markdown(f *File) string {
	p := f.Plan
	var b strings.Builder
	seeds := len(p.Seeds)
	T := p.TrainLen()
	fmt.Fprintf(&b, "# Time study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Causal LM over event tokens (d=%d, %d heads, %d blocks, FFN %d) trained on sequences of T = %d events, %d updates of batch %d, seeds %v. ",
		p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN, T, p.Base.Steps, p.Base.Batch, p.Seeds)
	fmt.Fprintf(&b, "Sequences: %s; onsets on a grid of 1/1024 time units. ", p.Seqs)
	fmt.Fprintf(&b, "`index` models get positions 0..T-1; `@time` models get the onsets as real positions (query i at t_i, key i at t_{i-1}). ")
	fmt.Fprintf(&b, "Scored on %d held-out test sequences (seed %d), the first %s events of each", p.TestSeqs, p.TestSeed, lengthsText(p))
	if seeds > 1 {
		fmt.Fprintf(&b, "; mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", seeds)
	}
	b.WriteString(".\n\n")
	for _, pr := range []struct {
		title string
		value func(Row) float64
		pct   bool
	}{
		{fmt.Sprintf("Accuracy on repeated events (%%; chance %.2f%%, exact copy from the event P earlier: 100%%)", 100/float64(p.Seqs.Vocab)),
			func(r Row) float64 { return 100 * r.RepeatAccuracy }, true},
		{fmt.Sprintf("Bits on repeated events (uniform: %.3f)", math.Log2(float64(p.Seqs.Vocab))), func(r Row) float64 { return r.RepeatBits }, false},
		{"Bits per event, every event", func(r Row) float64 { return r.Bits }, false},
		{fmt.Sprintf("Bits on new events (unpredictable: %.3f at best)", math.Log2(float64(p.Seqs.Vocab))), func(r Row) float64 { return r.NewBits }, false},
	} {
		fmt.Fprintf(&b, "## %s\n\n", pr.title)
		table(&b, f, pr.value, pr.pct)
	}
	b.WriteString(pairedSection(f))
	b.WriteString("\n## Training\n\n")
	fmt.Fprintf(&b, "Parameters, training ms per update (a batch of %d sequences of %d events; measured as the study ran, so it includes whatever else the machine ran), mean training loss of the last 10 updates (bits per event) and validation accuracy on repeated events at T (%d sequences)", p.Base.Batch, T, p.ValSeqs)
	if seeds > 1 {
		b.WriteString(", means over seeds")
	}
	b.WriteString(".\n\n| encoding | positions | params | train ms/update | train bits/event | val repeat accuracy (%) |\n|---|---|---:|---:|---:|---:|\n")
	one := rows1(f.Rows)
	ms, labels := cells(one, func(r Row) float64 { return r.TrainMsPerStep })
	tl, _ := cells(one, func(r Row) float64 { return r.TrainLoss / math.Ln2 })
	va, _ := cells(one, func(r Row) float64 { return 100 * r.ValRepeatAcc })
	info := map[string]Row{}
	for _, r := range f.Rows {
		info[r.Encoding] = r
	}
	for _, l := range labels {
		k := [2]string{l, "1"}
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.4f | %.2f |\n", l, info[l].Positions, info[l].Params, ms[k].Mean, tl[k].Mean, va[k].Mean)
	}
	if len(f.Rows) > 0 {
		r0 := f.Rows[0]
		dirty := ""
		if slices.ContainsFunc(f.Rows, func(r Row) bool { return r.GitDirty }) {
			dirty = " (uncommitted changes)"
		}
		fmt.Fprintf(&b, "\nBLAS: %s; %s; git %s%s.\n", r0.BLAS, r0.GoVersion, r0.GitRev, dirty)
	}
	if len(f.Pending) > 0 {
		fmt.Fprintf(&b, "\nNot yet run: %s.\n", strings.Join(f.Pending, ", "))
	}
	return b.String()
}

// lengthsText is "64 and 128".
func lengthsText(p Plan) string {
	s := make([]string, len(p.Factors))
	for i, le := range p.Lengths() {
		s[i] = strconv.Itoa(le)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// rows1 keeps one row per model (the first length's, which every model has
// whether or not it runs there): the training columns are the model's.
func rows1(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Factor == 1 {
			r.Status = StatusOK
			out = append(out, r)
		}
	}
	return out
}

// table writes one table: an encoding per row, a length per column.
func table(b *strings.Builder, f *File, value func(Row) float64, pct bool) {
	p := f.Plan
	c, labels := cells(f.Rows, value)
	b.WriteString("| encoding |")
	for i, le := range p.Lengths() {
		fmt.Fprintf(b, " %d·T = %d |", p.Factors[i], le)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(p.Factors)) + "\n")
	prec := 4
	if pct {
		prec = 2
	}
	for _, l := range labels {
		fmt.Fprintf(b, "| %s |", l)
		for _, fac := range p.Factors {
			cell, ok := c[[2]string{l, strconv.Itoa(fac)}]
			switch {
			case !ok:
				b.WriteString(" |")
			case cell.NA:
				b.WriteString(" n/a |")
			case len(p.Seeds) > 1:
				fmt.Fprintf(b, " %s |", cell.Interval(prec))
			default:
				fmt.Fprintf(b, " %.*f |", prec, cell.Mean)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| *events / repeats scored* |")
	for _, fac := range p.Factors {
		ev, rep := 0, 0
		for _, r := range f.Rows {
			if r.Factor == fac && r.Status == StatusOK {
				ev, rep = r.Events, r.Repeats
				break
			}
		}
		fmt.Fprintf(b, " %d / %d |", ev, rep)
	}
	b.WriteString("\n\n")
}

// Plot draws repeats.png: the accuracy on repeated events per encoding,
// index positions and time positions side by side, one panel per
// evaluation length, with the chance level; error bars of one sample
// 95% t interval of the mean over seeds when there are several.
func Plot(f *File, path string) error {
	p := f.Plan
	acc, _ := cells(f.Rows, func(r Row) float64 { return 100 * r.RepeatAccuracy })
	var bases []string
	has := map[[2]string]string{} // (base, positions) -> label
	for _, r := range f.Rows {
		if !slices.Contains(bases, r.Base) {
			bases = append(bases, r.Base)
		}
		has[[2]string{r.Base, r.Positions}] = r.Encoding
	}
	w, h := 12*vg.Inch, 5*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	n := len(p.Factors)
	pw := w / vg.Length(n)
	for k, fac := range p.Factors {
		pl := plot.New()
		// Every panel has a two-line title, so that their axes line up.
		pl.Title.Text = fmt.Sprintf("Time study (%s preset): accuracy on repeated events\nat %d·T = %d events", p.Preset, fac, p.Lengths()[k])
		if len(p.Seeds) > 1 {
			pl.Title.Text += fmt.Sprintf(" (error bars: 95%% t interval over %d seeds)", len(p.Seeds))
		}
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.Y.Label.Text = "accuracy on repeated events (%)"
		pl.Y.Min, pl.Y.Max = 0, 105
		pl.Add(plotter.NewGrid())
		chance := 100 / float64(p.Seqs.Vocab)
		cl, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: chance}, {X: float64(len(bases)) - 0.4, Y: chance}})
		if err != nil {
			return err
		}
		cl.Color, cl.Dashes = color.Gray{Y: 110}, []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(cl)
		pl.Legend.Add(fmt.Sprintf("chance (1/%d)", p.Seqs.Vocab), cl)
		for si, pos := range []string{"index", "time"} {
			st := viz.SeriesStyle(si)
			var pts errXY
			for bi, base := range bases {
				label, ok := has[[2]string{base, pos}]
				if !ok {
					continue
				}
				c := acc[[2]string{label, strconv.Itoa(fac)}]
				if c.NA || c.N == 0 {
					continue
				}
				pts.XYs = append(pts.XYs, plotter.XY{X: float64(bi) + 0.18*(float64(si)-0.5), Y: c.Mean})
				_, half := c.Err() // symmetric
				pts.err = append(pts.err, half)
			}
			if len(pts.XYs) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(pts.XYs)
			if err != nil {
				return err
			}
			sc.Color, sc.Shape, sc.Radius = st.Color, st.Shape, vg.Points(4)
			pl.Add(sc)
			if len(p.Seeds) > 1 {
				eb, err := plotter.NewYErrorBars(pts)
				if err != nil {
					return err
				}
				eb.LineStyle.Color = st.Color
				pl.Add(eb)
			}
			pl.Legend.Add(pos+" positions", sc)
		}
		pl.NominalX(bases...)
		pl.X.Min, pl.X.Max = -0.6, float64(len(bases))-0.4
		pl.Legend.Top, pl.Legend.Left = true, true
		pl.Draw(draw.Crop(dc, vg.Length(k)*pw, -(w - vg.Length(k+1)*pw), 0, 0))
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

// errXY are points with symmetric y errors.
type errXY struct {
	plotter.XYs
	err []float64
}

// YError implements plotter.YErrorer.
func (e errXY) YError(i int) (float64, float64) { return e.err[i], e.err[i] }
