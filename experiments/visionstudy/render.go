package visionstudy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/stats"
	"github.com/rpe-go/rpe/experiments/study"
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
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows,
		JSON:      File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending},
		CSVHeader: csvHeader, CSVRow: csvRow, Markdown: Markdown(r.plan, rows, pending),
		Plots: []func(string) error{func(dir string) error { return Plot(r.plan, rows, filepath.Join(dir, FilePlot)) }},
	})
}

var csvHeader = []string{"preset", "encoding", "eval", "seed", "resolution", "grid", "status", "accuracy", "loss_nats", "images",
	"eval_ms_per_image", "train_steps", "train_ms_per_step", "train_loss", "val_accuracy", "params", "peak_heap_bytes",
	"peak_rss_bytes", "blas", "go_version", "git_rev", "git_dirty", "note", "machine"}

func csvRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{r.Preset, r.Encoding, r.Eval, strconv.FormatInt(r.Seed, 10), r.Resolution, r.Grid, r.Status,
		f(r.Accuracy), f(r.Loss), strconv.Itoa(r.Images), f(r.EvalMsPerImage), strconv.Itoa(r.TrainSteps), f(r.TrainMsPerStep),
		f(r.TrainLoss), f(r.ValAccuracy), strconv.Itoa(r.Params), strconv.FormatUint(r.PeakHeap, 10),
		strconv.FormatUint(r.PeakRSS, 10), r.BLAS, r.GoVersion, r.GitRev, strconv.FormatBool(r.GitDirty), r.Note, r.Machine}
}

// label is the table label of a row: the encoding plus its evaluation
// setting.
func (r Row) label() string {
	if r.Eval == "" {
		return r.Encoding
	}
	return r.Encoding + " [" + r.Eval + "]"
}

// cells aggregates a metric of the rows by (label, resolution) over seeds
// (study.Aggregate) and lists the labels in the rows' order.
func cells(rows []Row, metric func(Row) float64) (map[[2]string]study.Cell, []string) {
	return study.Cells(rows, Row.label, func(r Row) string { return r.Resolution },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, metric)
}

// Markdown renders the tables of table.md: test accuracy (%) per encoding
// and resolution, then speed and memory.
func Markdown(p Plan, rows []Row, pending []string) string {
	var b strings.Builder
	seeds := len(p.Seeds)
	fmt.Fprintf(&b, "# Vision study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "ViT (d=%d, %d heads, %d blocks, FFN %d, mean pooling) on %s in %dx%d-pixel patches, %d updates of batch %d, seeds %v. ",
		p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN, p.DatasetTitle(), p.Patch, p.Patch, p.Base.Steps, p.Base.Batch, p.Seeds)
	test := "all test images"
	if p.TestImages > 0 {
		test = fmt.Sprintf("the first %d test images", p.TestImages)
	}
	fmt.Fprintf(&b, "\n\n## Accuracy\n\nAccuracy on %s at each resolution", test)
	if seeds > 1 {
		fmt.Fprintf(&b, ": mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", seeds)
	}
	b.WriteString(". n/a: the encoding cannot serve the grid (the note says why).\n\n")
	acc, labels := cells(rows, func(r Row) float64 { return 100 * r.Accuracy })
	grids := map[string]string{}
	for _, r := range rows {
		grids[r.Resolution] = r.Grid
	}
	b.WriteString("| encoding |")
	for _, res := range p.Resolutions {
		fmt.Fprintf(&b, " %s (%s) |", res.Name, grids[res.Name])
	}
	b.WriteString("\n|---|")
	for range p.Resolutions {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	var notes []string
	for _, l := range labels {
		fmt.Fprintf(&b, "| %s |", l)
		for _, res := range p.Resolutions {
			c, ok := acc[[2]string{l, res.Name}]
			switch {
			case !ok:
				b.WriteString(" |")
			case c.NA:
				b.WriteString(" n/a |")
				if c.Note != "" {
					notes = append(notes, fmt.Sprintf("%s at %s: %s", l, res.Name, c.Note))
				}
			case seeds > 1:
				fmt.Fprintf(&b, " %s |", c.Interval(2))
			default:
				fmt.Fprintf(&b, " %.2f |", c.Mean)
			}
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\nn/a cells:\n\n")
		sort.Strings(notes)
		notes = slices.Compact(notes)
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	b.WriteString(pairedSection(p, rows))
	b.WriteString("\n## Speed and memory\n\n")
	fmt.Fprintf(&b, "Training ms per update (a batch of %d images at the training grid), evaluation ms per image, and the peak RSS of the process while one batch of %d images is classified at each resolution (means over seeds; measured as the study ran, so they include whatever else the machine ran).\n\n", p.Base.Batch, p.Base.EvalBatch)
	b.WriteString("| encoding | params | train ms/update |")
	for _, res := range p.Resolutions {
		fmt.Fprintf(&b, " eval ms/image %s | peak RSS MiB %s |", res.Name, res.Name)
	}
	b.WriteString("\n|---|---:|---:|")
	for range p.Resolutions {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	ms, _ := cells(rows, func(r Row) float64 { return r.EvalMsPerImage })
	rss, _ := cells(rows, func(r Row) float64 { return float64(r.PeakRSS) / (1 << 20) })
	tr, _ := cells(rows, func(r Row) float64 { return r.TrainMsPerStep })
	par := map[string]int{}
	trained := map[string]string{} // label -> a resolution it has rows at
	for _, r := range rows {
		par[r.label()] = r.Params
		if _, ok := trained[r.label()]; !ok && r.Status == StatusOK {
			trained[r.label()] = r.Resolution
		}
	}
	for _, l := range labels {
		// the training time is the model's, on every row of it
		fmt.Fprintf(&b, "| %s | %d | %.1f |", l, par[l], tr[[2]string{l, trained[l]}].Mean)
		for _, res := range p.Resolutions {
			k := [2]string{l, res.Name}
			if c := ms[k]; c.N > 0 {
				fmt.Fprintf(&b, " %.3f | %.0f |", c.Mean, rss[k].Mean)
			} else {
				b.WriteString(" n/a | n/a |")
			}
		}
		b.WriteString("\n")
	}
	if len(rows) > 0 {
		fmt.Fprintf(&b, "\nBLAS: %s; %s.\n", rows[0].BLAS, rows[0].GoVersion)
	}
	if len(pending) > 0 {
		fmt.Fprintf(&b, "\nNot yet run: %s.\n", strings.Join(pending, ", "))
	}
	return b.String()
}

// pairedSection renders "## Paired comparisons" (study.PairedSection): at
// each resolution, the encoding of the best mean accuracy against every
// other, paired on the seeds and on seeds and test images (the rows' Hits).
func pairedSection(p Plan, rows []Row) string {
	var t study.ScoreTable
	for _, r := range rows {
		if r.Status != StatusOK {
			continue
		}
		sc := study.Scores{Value: 100 * r.Accuracy}
		if hits, err := study.UnpackHits(r.Hits, r.Images); err == nil && r.Hits != "" {
			sc.Items = make([]float64, len(hits))
			for i, h := range hits {
				if h {
					sc.Items[i] = 100
				}
			}
		}
		t.Add(r.label(), r.Resolution, r.Seed, sc)
	}
	conds := make([]string, len(p.Resolutions))
	for i, res := range p.Resolutions {
		conds[i] = res.Name
	}
	return study.PairedSection("Paired comparisons", conds, &t, "accuracy", "points", "test images", "%.2f", stats.HigherIsBetter)
}

// Plot draws accuracy.png: one group of bars per encoding, one bar per
// resolution, error bars of the 95% t interval of the mean over seeds; n/a cells
// are left empty and marked in the x labels.
func Plot(p Plan, rows []Row, path string) error {
	acc, labels := cells(rows, func(r Row) float64 { return 100 * r.Accuracy })
	pl := plot.New()
	title := fmt.Sprintf("Vision study (%s preset): %s test accuracy by position encoding", p.Preset, p.DatasetTitle())
	if n := len(p.Seeds); n > 1 {
		title += fmt.Sprintf("\nerror bars: 95%% t interval of the mean over %d seeds", n)
	} else {
		title += "\none seed: no error bars"
	}
	pl.Title.Text = title
	pl.Y.Label.Text = "test accuracy (%)"
	// headroom above 100% for the legend, so it hides no bar
	pl.Y.Min, pl.Y.Max = 0, 122
	pl.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 25, Label: "25"},
		{Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}})
	w := vg.Points(7)
	nres := len(p.Resolutions)
	for i, res := range p.Resolutions {
		vals := make(plotter.Values, len(labels))
		errs := make(plotter.YErrors, len(labels))
		for k, l := range labels {
			c := acc[[2]string{l, res.Name}]
			if !c.NA && c.N > 0 {
				vals[k] = c.Mean
				errs[k].Low, errs[k].High = c.Err()
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(nres-1)/2)
		pl.Add(bars)
		pl.Legend.Add(fmt.Sprintf("%s (%s grid)", res.Name, gridOf(rows, res.Name)), bars)
		if len(p.Seeds) > 1 {
			// error bars on the cells that have a value (none on n/a cells)
			var pts plotter.XYs
			var es plotter.YErrors
			for k, l := range labels {
				if c := acc[[2]string{l, res.Name}]; !c.NA && c.N > 0 {
					pts = append(pts, plotter.XY{X: float64(k), Y: vals[k]})
					es = append(es, errs[k])
				}
			}
			if len(pts) == 0 {
				continue
			}
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{pts, es})
			if err != nil {
				return err
			}
			eb.LineStyle.Width = vg.Points(0.8)
			eb.CapWidth = vg.Points(3)
			pl.Add(offsetErrors{eb, bars.Offset})
		}
	}
	chance := plotter.NewFunction(func(float64) float64 { return 100 / float64(images.Classes) })
	chance.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	chance.Width = vg.Points(0.8)
	pl.Add(chance)
	pl.Legend.Add(fmt.Sprintf("chance (%.0f%%)", 100/float64(images.Classes)), chance)
	names := make([]string, len(labels))
	for k, l := range labels {
		names[k] = l
		for _, res := range p.Resolutions[1:] {
			if c := acc[[2]string{l, res.Name}]; c.NA {
				names[k] = l + " *"
			}
		}
	}
	pl.NominalX(names...)
	pl.X.Tick.Label.Rotation = 0.7
	pl.X.Tick.Label.XAlign = draw.XRight
	pl.Legend.Top = true
	pl.Legend.Left = true
	pl.Add(plotter.NewGrid())
	pl.X.Label.Text = "* n/a on a larger grid (no bar)"
	img := vg.Length(11) * vg.Inch
	var buf bytes.Buffer
	wt, err := pl.WriterTo(img, 6*vg.Inch, "png")
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

func gridOf(rows []Row, res string) string {
	for _, r := range rows {
		if r.Resolution == res {
			return r.Grid
		}
	}
	return "?"
}

// offsetErrors draws error bars shifted horizontally by the bar offset.
type offsetErrors struct {
	*plotter.YErrorBars
	off vg.Length
}

func (o offsetErrors) Plot(c draw.Canvas, p *plot.Plot) {
	c.Rectangle.Min.X += o.off
	c.Rectangle.Max.X += o.off
	o.YErrorBars.Plot(c, p)
}
