package codestudy

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	FilePlot  = "bpb.png"
)

// File is results.json.
type File struct {
	Preset string `json:"preset"`
	Plan   Plan   `json:"plan"`
	// Corpus is the corpus summary (gocode.Corpus.Summary), Skipped its
	// count of files that did not parse or could not be read, Test the
	// description of the test windows.
	Corpus  string `json:"corpus"`
	Skipped int    `json:"skipped_files"`
	Test    string `json:"test_windows"`
	Rows    []Row  `json:"rows"`
	// Pending lists the jobs without saved rows when it was written.
	Pending []string `json:"pending,omitempty"`
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

// render writes results.csv, results.json, table.md and bpb.png.
func (r *runner) render(rows []Row, pending []string) error {
	f := File{Preset: r.plan.Preset, Plan: r.plan, Corpus: r.corpus.Summary(), Skipped: r.corpus.Skipped, Test: r.testDesc, Rows: rows, Pending: pending}
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows, JSON: f,
		CSVHeader: csvHeader, CSVRow: csvRow, Markdown: Markdown(&f),
		Plots: []func(string) error{func(dir string) error { return Plot(&f, filepath.Join(dir, FilePlot)) }},
	})
}

var csvHeader = []string{"preset", "encoding", "seed", "factor", "eval_len", "train_len", "status", "bits_per_byte",
	"bits_per_byte_last", "windows", "targets", "targets_last", "eval_ms_per_byte", "train_steps", "train_ms_per_step",
	"train_loss", "val_bpb", "params", "skipped_files", "blas", "go_version", "git_rev", "git_dirty", "note", "machine"}

func csvRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{r.Preset, r.Encoding, strconv.FormatInt(r.Seed, 10), strconv.Itoa(r.Factor), strconv.Itoa(r.EvalLen),
		strconv.Itoa(r.TrainLen), r.Status, f(r.BitsPerByte), f(r.BitsPerByteLast), strconv.Itoa(r.Windows), strconv.Itoa(r.Targets),
		strconv.Itoa(r.TargetsLast), f(r.EvalMsPerByte), strconv.Itoa(r.TrainSteps), f(r.TrainMsPerStep), f(r.TrainLoss), f(r.ValBPB),
		strconv.Itoa(r.Params), strconv.Itoa(r.Skipped), r.BLAS, r.GoVersion, r.GitRev, strconv.FormatBool(r.GitDirty), r.Note, r.Machine}
}

// ReadCSV reads rows written to results.csv (the columns Row has).
func ReadCSV(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, errors.Wrapf(err, "%s", path)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], csvHeader) {
		return nil, errors.Errorf("%s: not a code study results.csv (header %v)", path, firstOr(recs))
	}
	var rows []Row
	for i, rec := range recs[1:] {
		var r Row
		var errs []error
		fl := func(s string) float64 { v, err := strconv.ParseFloat(s, 64); errs = append(errs, err); return v }
		in := func(s string) int { v, err := strconv.Atoi(s); errs = append(errs, err); return v }
		r.Preset, r.Encoding, r.Status, r.BLAS, r.GoVersion, r.GitRev, r.Note, r.Machine = rec[0], rec[1], rec[6], rec[19], rec[20], rec[21], rec[23], rec[24]
		r.Seed = int64(in(rec[2]))
		r.Factor, r.EvalLen, r.TrainLen = in(rec[3]), in(rec[4]), in(rec[5])
		r.BitsPerByte, r.BitsPerByteLast = fl(rec[7]), fl(rec[8])
		r.Windows, r.Targets, r.TargetsLast = in(rec[9]), in(rec[10]), in(rec[11])
		r.EvalMsPerByte, r.TrainSteps, r.TrainMsPerStep, r.TrainLoss, r.ValBPB = fl(rec[12]), in(rec[13]), fl(rec[14]), fl(rec[15]), fl(rec[16])
		r.Params, r.Skipped = in(rec[17]), in(rec[18])
		var derr error
		r.GitDirty, derr = strconv.ParseBool(rec[22])
		errs = append(errs, derr)
		for _, e := range errs {
			if e != nil {
				return nil, errors.Wrapf(e, "%s: row %d", path, i+1)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func firstOr(recs [][]string) []string {
	if len(recs) == 0 {
		return nil
	}
	return recs[0]
}

// cells aggregates a metric of the rows by (encoding, factor) over seeds
// and lists the encodings in the rows' order.
func cells(rows []Row, metric func(Row) float64) (map[[2]string]study.Cell, []string) {
	return study.Cells(rows, func(r Row) string { return r.Encoding }, func(r Row) string { return strconv.Itoa(r.Factor) },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, metric)
}

// pairedSections renders the paired comparisons of the test bits per byte
// (study.PairedSection) at each evaluation length, over all targets and
// over the last L, paired on the seeds and on the seeds and test windows
// (the rows' WindowBPB and WindowBPBLast; every encoding scores the same
// windows).
func pairedSections(f *File) string {
	L := f.Plan.TrainLen()
	var conds []string
	cond := func(r Row) string { return fmt.Sprintf("%d (%dL)", r.EvalLen, r.Factor) }
	for _, fc := range f.Plan.Factors {
		conds = append(conds, fmt.Sprintf("%d (%dL)", fc*L, fc))
	}
	var out strings.Builder
	for _, pr := range []struct {
		heading string
		value   func(Row) float64
		items   func(Row) []float32
	}{
		{"Paired comparisons, all targets", func(r Row) float64 { return r.BitsPerByte }, func(r Row) []float32 { return r.WindowBPB }},
		{fmt.Sprintf("Paired comparisons, last L = %d targets", L), func(r Row) float64 { return r.BitsPerByteLast }, func(r Row) []float32 { return r.WindowBPBLast }},
	} {
		var t study.ScoreTable
		for _, r := range f.Rows {
			if r.Status != StatusOK {
				continue
			}
			sc := study.Scores{Value: pr.value(r)}
			for _, v := range pr.items(r) {
				sc.Items = append(sc.Items, float64(v))
			}
			t.Add(r.Encoding, cond(r), r.Seed, sc)
		}
		out.WriteString(study.PairedSection(pr.heading, conds, &t, "bits per byte", "bits/byte", "test windows", "%.3f", stats.LowerIsBetter))
	}
	return out.String()
}

// Markdown renders table.md: bits per byte per encoding and evaluation
// length (every target, then the last L targets of each window), the
// training table, the corpus with its skipped-file count, and the windows
// counted.
func Markdown(f *File) string {
	p := f.Plan
	var b strings.Builder
	seeds := len(p.Seeds)
	L := p.TrainLen()
	fmt.Fprintf(&b, "# Code study, %s preset\n\n", p.Preset)
	fmt.Fprintf(&b, "Byte-level causal LM (d=%d, %d heads, %d blocks, FFN %d) on Go source, trained at L = %d bytes, %d updates of batch %d, seeds %v. ",
		p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN, L, p.Base.Steps, p.Base.Batch, p.Seeds)
	fmt.Fprintf(&b, "Tree relations: (up, down) steps through the lowest common ancestor of the bytes' innermost syntax nodes, clipped at %d up and %d down. ",
		p.Corpus.MaxUp, p.Corpus.MaxDown)
	fmt.Fprintf(&b, "Test bits per byte on held-out packages: %s, the same for every encoding; the windows of every length at one anchor end at the same byte (a shorter window is the tail of the %d·L one)", f.Test, p.Factors[len(p.Factors)-1])
	if seeds > 1 {
		fmt.Fprintf(&b, "; mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", seeds)
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "Corpus: %s.\n\n", strings.ReplaceAll(f.Corpus, "\n", "; "))
	fmt.Fprintf(&b, "**Files skipped (did not parse or could not be read): %d.**\n\n", f.Skipped)
	for _, pr := range []struct {
		title string
		value func(Row) float64
		count func(Row) int
	}{
		{"All targets of each window", func(r Row) float64 { return r.BitsPerByte }, func(r Row) int { return r.Targets }},
		{fmt.Sprintf("Last L = %d targets of each window (the same bytes at every length: any change comes from the longer context)", L),
			func(r Row) float64 { return r.BitsPerByteLast }, func(r Row) int { return r.TargetsLast }},
	} {
		fmt.Fprintf(&b, "## %s\n\n", pr.title)
		table(&b, f, pr.value, pr.count)
	}
	b.WriteString(pairedSections(f))
	b.WriteString("\n## Training\n\n")
	fmt.Fprintf(&b, "Parameters, training ms per update (a batch of %d windows of %d bytes; measured as the study ran, so it includes whatever else the machine ran), mean training loss of the last 10 updates and validation bits per byte at L (%d windows)", p.Base.Batch, L, p.ValWindows)
	if seeds > 1 {
		b.WriteString(", means over seeds")
	}
	b.WriteString(".\n\n| encoding | params | train ms/update | train bits/byte | val bits/byte |\n|---|---:|---:|---:|---:|\n")
	ms, labels := cells(rows1(f.Rows), func(r Row) float64 { return r.TrainMsPerStep })
	tl, _ := cells(rows1(f.Rows), func(r Row) float64 { return r.TrainLoss / math.Ln2 })
	vb, _ := cells(rows1(f.Rows), func(r Row) float64 { return r.ValBPB })
	par := map[string]int{}
	for _, r := range f.Rows {
		par[r.Encoding] = r.Params
	}
	for _, l := range labels {
		k := [2]string{l, "1"}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.4f | %.4f |\n", l, par[l], ms[k].Mean, tl[k].Mean, vb[k].Mean)
	}
	if len(f.Rows) > 0 {
		fmt.Fprintf(&b, "\nBLAS: %s; %s; git %s%s.\n", f.Rows[0].BLAS, f.Rows[0].GoVersion, f.Rows[0].GitRev, dirty(f.Rows))
	}
	if len(f.Pending) > 0 {
		fmt.Fprintf(&b, "\nNot yet run: %s.\n", strings.Join(f.Pending, ", "))
	}
	return b.String()
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

func dirty(rows []Row) string {
	for _, r := range rows {
		if r.GitDirty {
			return " (uncommitted changes)"
		}
	}
	return ""
}

// table writes one bits-per-byte table: an encoding per row, a length per
// column, and the windows and bytes counted per length.
func table(b *strings.Builder, f *File, value func(Row) float64, count func(Row) int) {
	p := f.Plan
	c, labels := cells(f.Rows, value)
	b.WriteString("| encoding |")
	for i, le := range p.Lengths() {
		fmt.Fprintf(b, " %d·L = %d |", p.Factors[i], le)
	}
	b.WriteString("\n|---|")
	for range p.Factors {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	var notes []string
	for _, l := range labels {
		fmt.Fprintf(b, "| %s |", l)
		for _, fac := range p.Factors {
			cell, ok := c[[2]string{l, strconv.Itoa(fac)}]
			switch {
			case !ok:
				b.WriteString(" |")
			case cell.NA:
				b.WriteString(" n/a |")
				notes = append(notes, fmt.Sprintf("%s at %d·L: %s", l, fac, cell.Note))
			case len(p.Seeds) > 1:
				fmt.Fprintf(b, " %s |", cell.Interval(4))
			default:
				fmt.Fprintf(b, " %.4f |", cell.Mean)
			}
		}
		b.WriteString("\n")
	}
	// windows and bytes counted per length (the same for every model)
	b.WriteString("| *windows / bytes scored* |")
	for _, fac := range p.Factors {
		w, n := 0, 0
		for _, r := range f.Rows {
			if r.Factor == fac && r.Status == StatusOK {
				w, n = r.Windows, count(r)
				break
			}
		}
		fmt.Fprintf(b, " %d / %d |", w, n)
	}
	b.WriteString("\n")
	if len(notes) > 0 {
		sort.Strings(notes)
		b.WriteString("\nn/a cells:\n\n")
		for _, n := range slices.Compact(notes) {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	b.WriteString("\n")
}

// errXY are points with symmetric y errors.
type errXY struct {
	plotter.XYs
	err []float64
}

func (e errXY) YError(i int) (float64, float64) { return e.err[i], e.err[i] }

// Plot draws bpb.png: test bits per byte against the evaluation length
// (log x axis), one line per encoding (viz.SeriesStyle), error bars of the
// 95% t interval of the mean over seeds when there are several; two panels
// (every target of each window, and its last L targets) and the legend on
// the right, where it hides no point.
func Plot(f *File, path string) error {
	p := f.Plan
	seeds := len(p.Seeds)
	bars := "one seed: no error bars"
	if seeds > 1 {
		bars = fmt.Sprintf("error bars: 95%% t interval of the mean over %d seeds", seeds)
	}
	panels := []struct {
		title string
		value func(Row) float64
	}{
		{fmt.Sprintf("Code study (%s preset): test bits per byte, all targets\n%s", p.Preset, bars), func(r Row) float64 { return r.BitsPerByte }},
		{fmt.Sprintf("last L = %d targets of each window\n(the same bytes at every length)", p.TrainLen()), func(r Row) float64 { return r.BitsPerByteLast }},
	}
	w, h, legW := 12*vg.Inch, 5.5*vg.Inch, 1.6*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	pw := (w - legW) / 2
	var leg plot.Legend
	for k, pn := range panels {
		pl, l, err := panel(f, pn.title, pn.value)
		if err != nil {
			return err
		}
		pl.Draw(draw.Crop(dc, vg.Length(k)*pw, -(w - vg.Length(k+1)*pw), 0, 0))
		leg = l
	}
	leg.Top, leg.Left = true, true
	leg.Draw(draw.Crop(dc, w-legW+0.1*vg.Inch, 0, 0, -0.6*vg.Inch))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}

// panel draws one panel of bpb.png and returns it with its legend.
func panel(f *File, title string, value func(Row) float64) (*plot.Plot, plot.Legend, error) {
	p := f.Plan
	c, labels := cells(f.Rows, value)
	pl := plot.New()
	leg := plot.NewLegend()
	leg.TextStyle.Font.Size = vg.Points(10)
	leg.ThumbnailWidth = vg.Points(28)
	pl.Title.Text = title
	pl.Title.TextStyle.Font.Size = vg.Points(10)
	pl.X.Label.Text = fmt.Sprintf("evaluation length (bytes; trained at L = %d)", p.TrainLen())
	pl.Y.Label.Text = "test bits per byte"
	pl.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, le := range p.Lengths() {
		ticks = append(ticks, plot.Tick{Value: float64(le), Label: fmt.Sprint(le)})
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	pl.Add(plotter.NewGrid())
	n := len(labels)
	for i, l := range labels {
		st := viz.SeriesStyle(i)
		var pts errXY
		for k, fac := range p.Factors {
			cell, ok := c[[2]string{l, strconv.Itoa(fac)}]
			if !ok || cell.NA || cell.N == 0 {
				continue
			}
			x := float64(p.Lengths()[k])
			if len(p.Seeds) > 1 { // dodge the error bars apart
				x *= math.Pow(1.015, float64(i)-float64(n-1)/2)
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: cell.Mean})
			_, half := cell.Err() // symmetric
			pts.err = append(pts.err, half)
		}
		if len(pts.XYs) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return nil, leg, errors.Wrapf(err, "plot %s", l)
		}
		line.Color, points.Color = st.Color, st.Color
		line.Width, line.Dashes = vg.Points(1.4), st.Dashes
		points.Shape, points.Radius = st.Shape, vg.Points(3)
		pl.Add(line, points)
		if len(p.Seeds) > 1 {
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, leg, errors.Wrapf(err, "plot %s", l)
			}
			eb.LineStyle.Color = st.Color
			pl.Add(eb)
		}
		leg.Add(l, line, points)
	}
	lens := p.Lengths()
	pl.X.Min, pl.X.Max = float64(lens[0])/1.2, float64(lens[len(lens)-1])*1.2
	return pl, leg, nil
}
