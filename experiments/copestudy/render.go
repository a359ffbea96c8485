package copestudy

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
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

	"github.com/rpe-go/rpe/experiments/copetasks"
	"github.com/rpe-go/rpe/experiments/stats"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/viz"
)

// The files Render writes in the output directory.
const (
	FileCSV   = study.FileCSV
	FileJSON  = study.FileJSON
	FileTable = study.FileTable
	FilePlot  = "accuracy.png"
)

// File is results.json.
type File = study.Results[Plan, Row]

// LoadResults reads results.json of an output directory.
func LoadResults(dir string) (*File, error) { return study.ReadResults[Plan, Row](dir) }

// render writes results.csv, results.json, table.md and accuracy.png.
func (r *runner) render(rows []Row, pending []string) error {
	f := &File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending}
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows, JSON: f,
		CSVHeader: csvHeader, CSVRow: csvRow, Markdown: Markdown(f),
		Plots: []func(string) error{func(dir string) error { return Plot(f, filepath.Join(dir, FilePlot)) }},
	})
}

// csvHeader names the columns of results.csv (every field of Row but the
// per-sequence counts).
var csvHeader = []string{"preset", "task", "encoding", "base", "seed", "condition", "context", "eval_len", "train_context", "train_len",
	"status", "accuracy", "exact", "bits", "majority", "sequences", "answers", "eval_ms_per_seq", "train_steps", "train_ms_per_step",
	"train_loss", "val_accuracy", "params", "blas", "go_version", "git_rev", "git_dirty", "note", "machine"}

func csvRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	i := strconv.Itoa
	return []string{r.Preset, r.Task, r.Encoding, r.Base, strconv.FormatInt(r.Seed, 10), r.Condition, i(r.Context), i(r.EvalLen),
		i(r.TrainContext), i(r.TrainLen), r.Status, f(r.Accuracy), f(r.Exact), f(r.Bits), f(r.Majority), i(r.Sequences), i(r.Answers),
		f(r.EvalMsPerSeq), i(r.TrainSteps), f(r.TrainMsPerStep), f(r.TrainLoss), f(r.ValAccuracy), i(r.Params), r.BLAS, r.GoVersion,
		r.GitRev, strconv.FormatBool(r.GitDirty), r.Note, r.Machine}
}

// taskTitle is a task's name in headings.
func taskTitle(task string) string {
	switch task {
	case copetasks.TaskCopy:
		return "Selective copy"
	case copetasks.TaskCount:
		return "Counting"
	}
	return task
}

// condKey is the column of a (task, condition) in the cells.
func condKey(task, cond string) string { return task + "/" + cond }

// condLabel names a condition in the paired comparisons: "copy longer".
func condLabel(task, cond string) string { return task + " " + cond }

// cells aggregates a metric of the rows by (encoding, task/condition) over
// seeds, and lists the encodings in the rows' order.
func cells(rows []Row, metric func(Row) float64) (map[[2]string]study.Cell, []string) {
	return study.Cells(rows, func(r Row) string { return r.Encoding }, func(r Row) string { return condKey(r.Task, r.Condition) },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, metric)
}

// pairedSection renders the paired comparisons of the answer accuracy
// (study.PairedSection) under every task and condition, over seeds and
// over seeds and test sequences: sequence q's item is
// 100·right_q·S/A (S sequences, A answer tokens), whose mean is the
// accuracy in %.
func pairedSection(f *File) string {
	var conds []string
	for _, t := range f.Plan.Tasks {
		for _, c := range t.Conditions {
			conds = append(conds, condLabel(t.Name(), c.Name))
		}
	}
	var t study.ScoreTable
	for _, r := range f.Rows {
		if r.Status != StatusOK {
			continue
		}
		sc := study.Scores{Value: 100 * r.Accuracy}
		if len(r.Right) == r.Sequences && r.Answers > 0 {
			sc.Items = study.WeightedItems(r.Right, 100*float64(r.Sequences)/float64(r.Answers))
		}
		t.Add(r.Encoding, condLabel(r.Task, r.Condition), r.Seed, sc)
	}
	return study.PairedSection("Paired comparisons", conds, &t, "accuracy on answer tokens", "points", "test sequences", "%.2f", stats.HigherIsBetter)
}

// metric is one table of a task: its title, the value of a row, and
// whether it is a percentage (2 decimals, else 4).
type metric struct {
	title string
	value func(Row) float64
	pct   bool
}

// Markdown renders table.md: per task, the accuracy on the answer tokens
// (with the majority-answer baseline), the exact answers (copy) and the
// bits per answer token under every condition; the paired comparisons; the
// training table.
func Markdown(f *File) string {
	p := f.Plan
	var b strings.Builder
	fmt.Fprintf(&b, "# CoPE tasks study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Causal LM (d=%d, %d heads, %d blocks, FFN %d) trained on each task for %d updates of batch %d, seeds %v; the loss and every score are on the answer tokens only (teacher-forced: each answer token is predicted from the context and the answer tokens before it). ",
		p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN, p.Base.Steps, p.Base.Batch, p.Seeds)
	fmt.Fprintf(&b, "Scored on %d held-out test sequences (seed %d) per condition; %s.\n\n", p.TestSeqs, p.TestSeed, study.IntervalNote(len(p.Seeds)))
	for _, t := range p.Tasks {
		rows := slices.DeleteFunc(slices.Clone(f.Rows), func(r Row) bool { return r.Task != t.Name() })
		fmt.Fprintf(&b, "%s: %s; trained with contexts of %d tokens (T = %d). Conditions: %s.\n\n", taskTitle(t.Name()), t.Opts, t.Train, t.Opts.Len(t.Train), conditionsText(t))
		metrics := []metric{{"accuracy on answer tokens (%)", func(r Row) float64 { return 100 * r.Accuracy }, true}}
		if t.Opts.AnswerLen() > 1 {
			metrics = append(metrics, metric{"exact answers (%, every answer token right)", func(r Row) float64 { return 100 * r.Exact }, true})
		}
		metrics = append(metrics, metric{"bits per answer token", func(r Row) float64 { return r.Bits }, false})
		for k, m := range metrics {
			fmt.Fprintf(&b, "## %s: %s\n\n", taskTitle(t.Name()), m.title)
			table(&b, t, rows, len(p.Seeds), m.value, m.pct, k == 0)
		}
	}
	b.WriteString(pairedSection(f))
	b.WriteString("\n## Training\n\n")
	fmt.Fprintf(&b, "Parameters, training ms per update (a batch of %d sequences; measured as the study ran, so it includes whatever else the machine ran), mean training loss of the last 10 updates (bits per answer token) and validation accuracy on answer tokens (%d sequences of the training condition)", p.Base.Batch, p.ValSeqs)
	if len(p.Seeds) > 1 {
		b.WriteString(", means over seeds")
	}
	b.WriteString(".\n\n| task | encoding | params | train ms/update | train bits/answer token | val accuracy (%) |\n|---|---|---:|---:|---:|---:|\n")
	for _, t := range p.Tasks {
		var first []Row // one row per model: its first condition's
		for _, r := range f.Rows {
			if r.Task == t.Name() && r.Condition == t.Conditions[0].Name {
				r.Status = StatusOK
				first = append(first, r)
			}
		}
		ms, labels := cells(first, func(r Row) float64 { return r.TrainMsPerStep })
		tl, _ := cells(first, func(r Row) float64 { return r.TrainLoss / math.Ln2 })
		va, _ := cells(first, func(r Row) float64 { return 100 * r.ValAccuracy })
		params := map[string]int{}
		for _, r := range first {
			params[r.Encoding] = r.Params
		}
		for _, l := range labels {
			k := [2]string{l, condKey(t.Name(), t.Conditions[0].Name)}
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.4f | %.2f |\n", t.Name(), l, params[l], ms[k].Mean, tl[k].Mean, va[k].Mean)
		}
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

// conditionsText describes a task's conditions: "iid (context 32, T = 49),
// longer (context 64, T = 81)".
func conditionsText(t TaskPlan) string {
	s := make([]string, len(t.Conditions))
	for i, c := range t.Conditions {
		s[i] = fmt.Sprintf("%s (context %d, T = %d)", c.Name, c.Context, t.Opts.Len(c.Context))
	}
	return strings.Join(s, ", ")
}

// table writes one table of a task: an encoding per row, a condition per
// column; with baseline, a last row of the majority-answer accuracy.
func table(b *strings.Builder, t TaskPlan, rows []Row, seeds int, value func(Row) float64, pct, baseline bool) {
	c, labels := cells(rows, value)
	b.WriteString("| encoding |")
	for _, cd := range t.Conditions {
		fmt.Fprintf(b, " %s (T = %d) |", cd.Name, t.Opts.Len(cd.Context))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(t.Conditions)) + "\n")
	prec := 4
	if pct {
		prec = 2
	}
	for _, l := range labels {
		fmt.Fprintf(b, "| %s |", l)
		for _, cd := range t.Conditions {
			cell, ok := c[[2]string{l, condKey(t.Name(), cd.Name)}]
			switch {
			case !ok:
				b.WriteString(" |")
			case cell.NA:
				b.WriteString(" n/a |")
			case seeds > 1:
				fmt.Fprintf(b, " %s |", cell.Interval(prec))
			default:
				fmt.Fprintf(b, " %.*f |", prec, cell.Mean)
			}
		}
		b.WriteString("\n")
	}
	if baseline {
		b.WriteString("| *majority answer* |")
		for _, cd := range t.Conditions {
			b.WriteString(" " + majorityText(rows, cd.Name) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// majorityText is the majority-answer accuracy (%) of a condition's test
// sequences, from its first scored row ("" if none).
func majorityText(rows []Row, cond string) string {
	for _, r := range rows {
		if r.Condition == cond && r.Status == StatusOK {
			return fmt.Sprintf("%.2f", 100*r.Majority)
		}
	}
	return ""
}

// Plot draws accuracy.png: the accuracy on answer tokens per encoding, one
// panel per task, one marker per condition (side by side), with the
// majority-answer baseline of the training condition dashed; error bars of
// the 95% t interval of the mean over seeds when there are several.
func Plot(f *File, path string) error {
	p := f.Plan
	acc, labels := cells(f.Rows, func(r Row) float64 { return 100 * r.Accuracy })
	w, h := 12*vg.Inch, 5*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	pw := w / vg.Length(len(p.Tasks))
	for k, t := range p.Tasks {
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("CoPE tasks (%s preset): %s\naccuracy on answer tokens", p.Preset, strings.ToLower(taskTitle(t.Name())))
		if len(p.Seeds) > 1 {
			pl.Title.Text += fmt.Sprintf(" (error bars: 95%% t interval over %d seeds)", len(p.Seeds))
		}
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.Y.Label.Text = "accuracy on answer tokens (%)"
		// Room above 100% for the legend, which would otherwise cover the
		// best markers.
		pl.Y.Min, pl.Y.Max = 0, 100+12*float64(len(t.Conditions)+1)
		pl.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
			{Value: 75, Label: "75"}, {Value: 100, Label: "100"}})
		pl.Add(plotter.NewGrid())
		xmax := float64(len(labels)) - 0.4
		var rows []Row
		for _, r := range f.Rows {
			if r.Task == t.Name() {
				rows = append(rows, r)
			}
		}
		if m := majorityText(rows, t.Conditions[0].Name); m != "" {
			y, _ := strconv.ParseFloat(m, 64)
			bl, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: y}, {X: xmax, Y: y}})
			if err != nil {
				return err
			}
			bl.Color, bl.Dashes = color.Gray{Y: 110}, []vg.Length{vg.Points(4), vg.Points(3)}
			pl.Add(bl)
			pl.Legend.Add(fmt.Sprintf("majority answer, %s", t.Conditions[0].Name), bl)
		}
		nc := len(t.Conditions)
		for ci, cd := range t.Conditions {
			st := viz.SeriesStyle(ci)
			var pts plotter.XYs
			var errs plotter.YErrors
			for li, l := range labels {
				c, ok := acc[[2]string{l, condKey(t.Name(), cd.Name)}]
				if !ok || c.NA || c.N == 0 {
					continue
				}
				pts = append(pts, plotter.XY{X: float64(li) + 0.5*(float64(ci)-float64(nc-1)/2)/float64(nc), Y: c.Mean})
				lo, hi := c.Err()
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
			if len(pts) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			sc.Color, sc.Shape, sc.Radius = st.Color, st.Shape, vg.Points(4)
			pl.Add(sc)
			if len(p.Seeds) > 1 {
				eb, err := plotter.NewYErrorBars(struct {
					plotter.XYs
					plotter.YErrors
				}{pts, errs})
				if err != nil {
					return err
				}
				eb.LineStyle.Color = st.Color
				pl.Add(eb)
			}
			pl.Legend.Add(fmt.Sprintf("%s (T = %d)", cd.Name, t.Opts.Len(cd.Context)), sc)
		}
		pl.NominalX(labels...)
		pl.X.Min, pl.X.Max = -0.6, xmax
		pl.Legend.Top, pl.Legend.Left = true, true
		pl.Draw(draw.Crop(dc, vg.Length(k)*pw, -(w - vg.Length(k+1)*pw), 0, 0))
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}
