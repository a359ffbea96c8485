package graphstudy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

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
	if r.plan.Molecules != nil {
		return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows,
			JSON:      File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending},
			CSVHeader: regressionCSVHeader, CSVRow: regressionCSVRow, Markdown: RegressionMarkdown(r.plan, rows, pending),
			Plots: []func(string) error{func(dir string) error { return RegressionPlot(r.plan, rows, filepath.Join(dir, FilePlot)) }},
		})
	}
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows,
		JSON:      File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending},
		CSVHeader: csvHeader, CSVRow: csvRow, Markdown: Markdown(r.plan, rows, pending),
		Plots: []func(string) error{func(dir string) error { return Plot(r.plan, rows, filepath.Join(dir, FilePlot)) }},
	})
}

// csvHeader is the header of results.csv.
var csvHeader = []string{"preset", "encoding", "seed", "test_set", "sizes", "accuracy", "graph_accuracy", "loss_nats", "graphs", "nodes",
	"eval_ms_per_graph", "train_steps", "train_ms_per_step", "train_loss", "val_accuracy", "params", "blas", "go_version", "git_rev", "git_dirty", "machine"}

func csvRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{r.Preset, r.Encoding, strconv.FormatInt(r.Seed, 10), r.TestSet, r.Sizes, f(r.Accuracy), f(r.GraphAccuracy),
		f(r.Loss), strconv.Itoa(r.Graphs), strconv.Itoa(r.Nodes), f(r.EvalMsPerGraph), strconv.Itoa(r.TrainSteps),
		f(r.TrainMsPerStep), f(r.TrainLoss), f(r.ValAccuracy), strconv.Itoa(r.Params), r.BLAS, r.GoVersion, r.GitRev,
		strconv.FormatBool(r.GitDirty), r.Machine}
}

// byEncoding aggregates a metric over seeds per (encoding, test set) and
// lists the encodings in the rows' order.
func byEncoding(rows []Row, metric func(Row) float64) (map[[2]string]study.Cell, []string) {
	var encs []string
	for _, r := range rows {
		if !slices.Contains(encs, r.Encoding) {
			encs = append(encs, r.Encoding)
		}
	}
	return study.Aggregate(rows, func(r Row) [2]string { return [2]string{r.Encoding, r.TestSet} },
		func(Row) (bool, string) { return false, "" }, metric), encs
}

// pairedSection renders "## Paired comparisons" of node accuracy
// (study.PairedSection) on each test set, over seeds and over seeds and
// graphs: graph g's item is 100·right_g·G/N (G graphs, N nodes), whose mean
// over the graphs is the node accuracy in %, so the bootstrap resamples
// graphs and keeps the accuracy's weighting by nodes.
func pairedSection(p Plan, rows []Row) string {
	var t study.ScoreTable
	for _, r := range rows {
		sc := study.Scores{Value: 100 * r.Accuracy}
		if right, err := study.UnpackCounts(r.Right, r.Graphs); err == nil && r.Right != "" && r.Nodes > 0 {
			sc.Items = study.WeightedItems(right, 100*float64(r.Graphs)/float64(r.Nodes))
		}
		t.Add(r.Encoding, r.TestSet, r.Seed, sc)
	}
	var conds []string
	for _, ts := range p.TestSets() {
		conds = append(conds, ts.Name)
	}
	return study.PairedSection("Paired comparisons", conds, &t, "node accuracy", "points", "graphs", "%.2f", stats.HigherIsBetter)
}

// Markdown renders table.md: node accuracy, graphs all right and loss per
// encoding and test set, then training speed.
func Markdown(p Plan, rows []Row, pending []string) string {
	var b strings.Builder
	seeds := len(p.Seeds)
	m := p.Base.Model
	fmt.Fprintf(&b, "# Graph study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Graph Transformer (d=%d, %d heads, %d blocks, FFN %d) on %s: per node, the shortest-path distance to a marked node (classes 0..%d, %d: unreachable), node order shuffled. ",
		m.DModel, m.Heads, m.Layers, m.FFN, p.Task.Kind, p.Task.MaxDist, p.Task.MaxDist+1)
	fmt.Fprintf(&b, "Trained on %d graphs of %d-%d nodes (G(n, p), average degree %g, connected; %.0f/%.0f/%.0f%% train/validation/test), %d updates of %d graphs; ",
		p.Task.Count, p.Task.MinNodes, p.Task.MaxNodes, p.Task.AvgDegree, 100*p.Fracs[0], 100*p.Fracs[1], 100*p.Fracs[2], p.Base.Steps, p.Base.Batch)
	fmt.Fprintf(&b, "tested on the held-out split and on %d larger graphs of %d-%d nodes (seed %d). Relations clipped at distance %d; laplacian = %d eigenvectors with random sign flips in training. Seeds %v",
		p.OOD.Count, p.OOD.MinNodes, p.OOD.MaxNodes, p.OOD.Seed, p.MaxDist, p.LapK, p.Seeds)
	if seeds > 1 {
		fmt.Fprintf(&b, "; mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", seeds)
	}
	b.WriteString(".\n\n")
	sets := p.TestSets()
	acc, encs := byEncoding(rows, func(r Row) float64 { return 100 * r.Accuracy })
	gacc, _ := byEncoding(rows, func(r Row) float64 { return 100 * r.GraphAccuracy })
	loss, _ := byEncoding(rows, func(r Row) float64 { return r.Loss })
	cell := func(c study.Cell, ok bool, prec int) string {
		switch {
		case !ok || c.N == 0:
			return ""
		case seeds > 1:
			return c.Interval(prec)
		}
		return fmt.Sprintf("%.*f", prec, c.Mean)
	}
	b.WriteString("## Accuracy\n\n| encoding |")
	for _, what := range []string{"node accuracy %", "graphs all right %", "loss (nats/node)"} {
		for _, s := range sets {
			fmt.Fprintf(&b, " %s, %s (%d-%d) |", what, s.Name, s.MinNodes, s.MaxNodes)
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", 3*len(sets)) + "\n")
	for _, e := range encs {
		fmt.Fprintf(&b, "| %s |", e)
		for i, tab := range []map[[2]string]study.Cell{acc, gacc, loss} {
			prec := 2
			if i == 2 {
				prec = 3
			}
			for _, s := range sets {
				c, ok := tab[[2]string{e, s.Name}]
				fmt.Fprintf(&b, " %s |", cell(c, ok, prec))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(pairedSection(p, rows))
	b.WriteString(speedSection(rows, encs, sets, fmt.Sprintf("Training ms per update (%d graphs padded to %d nodes) and evaluation ms per graph", p.Base.Batch, p.Task.MaxNodes), "graph", pending))
	return b.String()
}

// Plot draws accuracy.png: node accuracy per encoding, one bar per test
// set (trained sizes, larger graphs), error bars of the 95% t interval
// over seeds when there are several.
func Plot(p Plan, rows []Row, path string) error {
	acc, encs := byEncoding(rows, func(r Row) float64 { return 100 * r.Accuracy })
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Graph study (%s preset): node accuracy on %s by encoding", p.Preset, p.Task.Kind)
	if n := len(p.Seeds); n > 1 {
		pl.Title.Text += fmt.Sprintf("\nerror bars: 95%% t interval of the mean over %d seeds", n)
	}
	pl.Y.Label.Text = "node accuracy (%)"
	pl.Y.Min, pl.Y.Max = 0, 120
	sets := p.TestSets()
	w := vg.Points(28)
	for i, s := range sets {
		var vals plotter.Values
		var pts plotter.XYs
		var errs plotter.YErrors
		for k, e := range encs {
			c := acc[[2]string{e, s.Name}]
			vals = append(vals, c.Mean)
			if c.N > 1 {
				pts = append(pts, plotter.XY{X: float64(k), Y: c.Mean})
				lo, hi := c.Err()
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(sets)-1)/2)
		pl.Add(bars)
		pl.Legend.Add(fmt.Sprintf("%s (%d-%d nodes)", s.Name, s.MinNodes, s.MaxNodes), bars)
		if len(pts) > 0 {
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{pts, errs})
			if err != nil {
				return err
			}
			eb.LineStyle.Width = vg.Points(0.8)
			eb.CapWidth = vg.Points(4)
			pl.Add(shifted{eb, bars.Offset})
		}
	}
	pl.NominalX(encs...)
	pl.X.Min, pl.X.Max = -0.6, float64(len(encs))-0.4 // room for the outer bars
	pl.X.Tick.Label.Rotation = 0.35
	pl.X.Tick.Label.XAlign = draw.XRight
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Add(plotter.NewGrid())
	var buf bytes.Buffer
	wt, err := pl.WriterTo(9*vg.Inch, 5.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

// shifted draws error bars moved sideways onto their bar.
type shifted struct {
	*plotter.YErrorBars
	dx vg.Length
}

func (s shifted) Plot(c draw.Canvas, p *plot.Plot) {
	c.Rectangle.Min.X += s.dx
	c.Rectangle.Max.X += s.dx
	s.YErrorBars.Plot(c, p)
}

// regressionCSVHeader is the header of a molecule plan's results.csv.
var regressionCSVHeader = []string{"preset", "encoding", "seed", "test_set", "heavy_atoms", "rmse", "mae", "r2", "mse_std", "graphs", "nodes",
	"eval_ms_per_graph", "train_steps", "train_ms_per_step", "train_loss", "val_rmse", "params", "blas", "go_version", "git_rev", "git_dirty", "machine"}

func regressionCSVRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{r.Preset, r.Encoding, strconv.FormatInt(r.Seed, 10), r.TestSet, r.Sizes, f(r.RMSE), f(r.MAE), f(r.R2),
		f(r.Loss), strconv.Itoa(r.Graphs), strconv.Itoa(r.Nodes), f(r.EvalMsPerGraph), strconv.Itoa(r.TrainSteps),
		f(r.TrainMsPerStep), f(r.TrainLoss), f(r.ValRMSE), strconv.Itoa(r.Params), r.BLAS, r.GoVersion, r.GitRev,
		strconv.FormatBool(r.GitDirty), r.Machine}
}

// regressionSizes returns the heavy-atom range of each test set from the
// rows ("" if no row has it).
func regressionSizes(rows []Row) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		if out[r.TestSet] == "" {
			out[r.TestSet] = r.Sizes
		}
	}
	return out
}

// RegressionMarkdown renders a molecule plan's table.md: RMSE, MAE and R²
// per encoding and test set, paired comparisons of the MAE (over seeds,
// and over seeds and molecules: the item of a molecule is its absolute
// error, whose mean is the MAE), then training speed.
func RegressionMarkdown(p Plan, rows []Row, pending []string) string {
	var b strings.Builder
	seeds := len(p.Seeds)
	m := p.Base.Model
	mt := p.Molecules
	sizes := regressionSizes(rows)
	fmt.Fprintf(&b, "# Graph study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Graph Transformer (d=%d, %d heads, %d blocks, FFN %d) regressing each molecule's TPSA (Å², standardised on the training molecules; loss: mean squared error) from its mean-pooled node states; nodes are atoms with one-hot features (element, aromatic, charge, hydrogens), no bond features. ",
		m.DModel, m.Heads, m.Layers, m.FFN)
	fmt.Fprintf(&b, "The largest %g%% of the molecules by heavy atoms are the test \"ood\" (%s heavy atoms); the others are split %.0f/%.0f/%.0f%% in file order into training, validation and \"test\" (%s heavy atoms). %d updates of %d molecules. ",
		mt.TestPercent, sizes["ood"], 100*mt.Fracs[0], 100*mt.Fracs[1], 100*mt.Fracs[2], sizes["test"], p.Base.Steps, p.Base.Batch)
	unreach := p.Unreachable
	if unreach == "" {
		unreach = UnreachableBucket
	}
	fmt.Fprintf(&b, "Relations clipped at distance %d; unreachable pairs (salts): %s; laplacian = %d eigenvectors with random sign flips in training. Seeds %v", p.MaxDist, unreach, p.LapK, p.Seeds)
	if seeds > 1 {
		fmt.Fprintf(&b, "; mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", seeds)
	}
	b.WriteString(".\n\n")
	sets := p.TestSets()
	rmse, encs := byEncoding(rows, func(r Row) float64 { return r.RMSE })
	mae, _ := byEncoding(rows, func(r Row) float64 { return r.MAE })
	r2, _ := byEncoding(rows, func(r Row) float64 { return r.R2 })
	cell := func(c study.Cell, ok bool, prec int) string {
		switch {
		case !ok || c.N == 0:
			return ""
		case seeds > 1:
			return c.Interval(prec)
		}
		return fmt.Sprintf("%.*f", prec, c.Mean)
	}
	b.WriteString("## Error\n\n| encoding |")
	for _, what := range []string{"RMSE Å²", "MAE Å²", "R²"} {
		for _, s := range sets {
			fmt.Fprintf(&b, " %s, %s (%s) |", what, s.Name, sizes[s.Name])
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", 3*len(sets)) + "\n")
	for _, e := range encs {
		fmt.Fprintf(&b, "| %s |", e)
		for i, tab := range []map[[2]string]study.Cell{rmse, mae, r2} {
			prec := 2
			if i == 2 {
				prec = 3
			}
			for _, s := range sets {
				c, ok := tab[[2]string{e, s.Name}]
				fmt.Fprintf(&b, " %s |", cell(c, ok, prec))
			}
		}
		b.WriteString("\n")
	}
	var t study.ScoreTable
	for _, r := range rows {
		t.Add(r.Encoding, r.TestSet, r.Seed, study.Scores{Value: r.MAE, Items: r.AbsErr})
	}
	var conds []string
	for _, ts := range sets {
		conds = append(conds, ts.Name)
	}
	b.WriteString(study.PairedSection("Paired comparisons", conds, &t, "MAE", "Å²", "molecules", "%.2f", stats.LowerIsBetter))
	b.WriteString(speedSection(rows, encs, sets, fmt.Sprintf("Training ms per update (%d molecules padded to the largest training molecule) and evaluation ms per molecule", p.Base.Batch), "molecule", pending))
	return b.String()
}

// RegressionPlot draws a molecule plan's accuracy.png: the test RMSE per
// encoding, one bar per test set, error bars of the 95% t interval over
// seeds when there are several.
func RegressionPlot(p Plan, rows []Row, path string) error {
	rmse, encs := byEncoding(rows, func(r Row) float64 { return r.RMSE })
	sizes := regressionSizes(rows)
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Graph study (%s preset): TPSA RMSE by encoding (lower is better)", p.Preset)
	if n := len(p.Seeds); n > 1 {
		pl.Title.Text += fmt.Sprintf("\nerror bars: 95%% t interval of the mean over %d seeds", n)
	}
	pl.Y.Label.Text = "RMSE (Å²)"
	pl.Y.Min = 0
	w := vg.Points(28)
	sets := p.TestSets()
	for i, s := range sets {
		var vals plotter.Values
		var pts plotter.XYs
		var errs plotter.YErrors
		for k, e := range encs {
			c := rmse[[2]string{e, s.Name}]
			vals = append(vals, c.Mean)
			if c.N > 1 {
				pts = append(pts, plotter.XY{X: float64(k), Y: c.Mean})
				lo, hi := c.Err()
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(sets)-1)/2)
		pl.Add(bars)
		pl.Legend.Add(fmt.Sprintf("%s (%s heavy atoms)", s.Name, sizes[s.Name]), bars)
		if len(pts) > 0 {
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{pts, errs})
			if err != nil {
				return err
			}
			eb.LineStyle.Width = vg.Points(0.8)
			eb.CapWidth = vg.Points(4)
			pl.Add(shifted{eb, bars.Offset})
		}
	}
	pl.NominalX(encs...)
	pl.X.Min, pl.X.Max = -0.6, float64(len(encs))-0.4
	pl.X.Tick.Label.Rotation = 0.35
	pl.X.Tick.Label.XAlign = draw.XRight
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Add(plotter.NewGrid())
	var buf bytes.Buffer
	wt, err := pl.WriterTo(9*vg.Inch, 5.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

// speedSection is the "Speed" section of table.md: per encoding (encs, in
// order) its parameters, training ms per update and evaluation ms per item
// on each test set (what names the two measures, item the unit of the
// second), then the BLAS and the jobs not yet run.
func speedSection(rows []Row, encs []string, sets []TestSet, what, item string, pending []string) string {
	var b strings.Builder
	tr, _ := byEncoding(rows, func(r Row) float64 { return r.TrainMsPerStep })
	ev, _ := byEncoding(rows, func(r Row) float64 { return r.EvalMsPerGraph })
	par := map[string]int{}
	for _, r := range rows {
		par[r.Encoding] = r.Params
	}
	b.WriteString("\n## Speed\n\n")
	fmt.Fprintf(&b, "%s (means over seeds; measured as the study ran, so they include whatever else the machine ran).\n\n", what)
	b.WriteString("| encoding | params | train ms/update |")
	for _, s := range sets {
		fmt.Fprintf(&b, " eval ms/%s %s |", item, s.Name)
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(sets)) + "\n")
	for _, e := range encs {
		fmt.Fprintf(&b, "| %s | %d | %.1f |", e, par[e], tr[[2]string{e, sets[0].Name}].Mean)
		for _, s := range sets {
			fmt.Fprintf(&b, " %.2f |", ev[[2]string{e, s.Name}].Mean)
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
