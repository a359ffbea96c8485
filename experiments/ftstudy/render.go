package ftstudy

import (
	"bytes"
	"fmt"
	"image/color"
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
	FilePlot  = "finetune.png"
)

// File is results.json.
type File = study.Results[Plan, Row]

// LoadResults reads results.json of an output directory.
func LoadResults(dir string) (*File, error) { return study.ReadResults[Plan, Row](dir) }

func (r *runner) render(rows []Row, pending []string) error {
	return study.WriteOutputs(r.opt.Dir, study.Outputs[Row]{Rows: rows,
		JSON:      File{Preset: r.plan.Preset, Plan: r.plan, Rows: rows, Pending: pending},
		CSVHeader: csvHeader, CSVRow: csvRow, Markdown: Markdown(r.plan, rows, pending, r.c.Path, len(r.text)-1),
		Plots: []func(string) error{func(dir string) error { return Plot(r.plan, rows, filepath.Join(dir, FilePlot)) }},
	})
}

var csvHeader = []string{"preset", "entry", "base", "seed", "ft_len", "ft_steps", "eval_len", "status", "bits_per_byte", "nats_per_target",
	"windows", "tokens", "rope_scale", "rope_train_len", "train_ms_per_step", "train_loss", "eval_ms_per_token", "source_sha256",
	"blas", "go_version", "git_rev", "git_dirty", "machine", "note"}

func csvRow(r Row) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	i := strconv.Itoa
	return []string{r.Preset, r.Entry, r.Base, strconv.FormatInt(r.Seed, 10), i(r.FTLen), i(r.FTSteps), i(r.EvalLen), r.Status,
		f(r.BitsPerByte), f(r.Nats), i(r.Windows), i(r.Tokens), f(r.RopeScale), i(r.RopeTrainLen), f(r.TrainMsPerStep),
		f(r.TrainLoss), f(r.EvalMsPerToken), r.SourceSHA256, r.BLAS, r.GoVersion, r.GitRev, strconv.FormatBool(r.GitDirty), r.Machine, r.Note}
}

// allSteps are the scored fine-tuning steps: 0 and Steps.
func (p Plan) allSteps() []int { return append([]int{0}, p.Steps...) }

type cellKey struct {
	entry     string
	le, steps int
}

// cells aggregates the bits per byte over seeds by entry, length and steps.
func cells(rows []Row) map[cellKey]study.Cell {
	return study.Aggregate(rows, func(r Row) cellKey { return cellKey{r.Entry, r.EvalLen, r.FTSteps} },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, func(r Row) float64 { return r.BitsPerByte })
}

// Markdown renders table.md: for every length, bits per byte against
// fine-tuning updates per entry (mean [95% t interval] over seeds); the
// paired comparisons of the entries at each length and step count; the
// cost of fine-tuning.
func Markdown(p Plan, rows []Row, pending []string, corpus string, targets int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fine-tuning to a longer length, %s preset\n\n", p.Preset)
	if p.Reduced != "" {
		fmt.Fprintf(&b, "Reduced: %s.\n\n", p.Reduced)
	}
	src := p.Source
	fmt.Fprintf(&b, "- Source: the models of the extrapolation study's %s preset in `%s` (trained at L = %d, %d updates of batch %d, corpus %s)\n",
		src.Preset, p.From, src.TrainLen(), src.Base.Steps, src.Base.Batch, corpus)
	fmt.Fprintf(&b, "- Fine-tuning (`trainer.RunOptions.InitFrom`): at %d, batch %d, %d updates, peak lr %g after %d warm-up updates, cosine to %g; a fresh optimizer; the same batches for every entry of a seed. A RoPE scaling is fine-tuned from the rope model with rope-scale %d/%d and rope-train-len %d (`trainer.InitConfig`), and scored with them at every length\n",
		p.Len, p.Batch, p.LastStep(), p.LR, p.Warmup, p.LR*p.FloorFrac, p.Len, src.TrainLen(), src.TrainLen())
	fmt.Fprintf(&b, "- Scored after 0 (the source model under the entry's configuration), %s updates, at %s, on %d targets (every target of non-overlapping windows; the same text at every length)%s\n",
		strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.Steps)), ", "), "[]"), strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.EvalLens)), ", "), "[]"),
		targets, map[bool]string{true: ", with the streamed attention", false: ""}[p.Stream])
	if revs := distinct(rows, func(r Row) string { return r.GitRev }); len(revs) > 0 {
		fmt.Fprintf(&b, "- Git revision: %s; BLAS %s; %s\n", strings.Join(revs, ", "), strings.Join(distinct(rows, func(r Row) string { return r.BLAS }), ", "),
			strings.Join(distinct(rows, func(r Row) string { return r.Machine }), "; "))
	}
	fmt.Fprintf(&b, "- %s\n", study.IntervalNote(len(p.Seeds)))
	if len(pending) > 0 {
		fmt.Fprintf(&b, "- **Incomplete**: %d of %d job(s) pending: %s\n", len(pending), len(p.Jobs()), strings.Join(pending, ", "))
	}
	cs := cells(rows)
	steps := p.allSteps()
	for _, le := range p.EvalLens {
		fmt.Fprintf(&b, "\n## Bits per byte at %d (lower is better), after n fine-tuning updates at %d\n\n| entry |", le, p.Len)
		for _, s := range steps {
			fmt.Fprintf(&b, " n = %d |", s)
		}
		b.WriteString("\n|---|")
		for range steps {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		for _, e := range p.Entries {
			fmt.Fprintf(&b, "| %s |", e)
			for _, s := range steps {
				c, ok := cs[cellKey{e, le, s}]
				switch {
				case !ok:
					b.WriteString(" pending |")
				case c.NA:
					b.WriteString(" n/a |")
				default:
					fmt.Fprintf(&b, " %s |", c.Interval(3))
				}
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(paired(p, rows))
	b.WriteString("\n## Cost of fine-tuning\n\n| entry | ms/update | scoring ms/target at the longest length |\n|---|---:|---:|\n")
	lmax := p.EvalLens[len(p.EvalLens)-1]
	for _, e := range p.Entries {
		var ms, ev []float64
		for _, r := range rows {
			if r.Entry == e && r.Status == StatusOK && r.EvalLen == lmax && r.FTSteps == p.LastStep() {
				ms, ev = append(ms, r.TrainMsPerStep), append(ev, r.EvalMsPerToken)
			}
		}
		if len(ms) == 0 {
			fmt.Fprintf(&b, "| %s | pending | pending |\n", e)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", e, study.NewCell(ms).Interval(0), study.NewCell(ev).Interval(3))
	}
	b.WriteString("\nTimings are wall-clock on a shared machine.\n")
	return b.String()
}

// paired renders the paired comparisons (study.PairedSection) of the
// entries at every length and number of updates, paired on the seeds and
// on the seeds and evaluation windows.
func paired(p Plan, rows []Row) string {
	var out strings.Builder
	for _, le := range p.EvalLens {
		var t study.ScoreTable
		var conds []string
		for _, s := range p.allSteps() {
			conds = append(conds, fmt.Sprintf("n = %d", s))
		}
		for _, e := range p.Entries {
			for _, r := range rows {
				if r.Entry != e || r.EvalLen != le || r.Status != StatusOK {
					continue
				}
				sc := study.Scores{Value: r.BitsPerByte}
				if len(r.WindowBits) == r.Windows && r.Tokens > 0 {
					w := float64(r.Windows) / float64(r.Tokens)
					for _, v := range r.WindowBits {
						sc.Items = append(sc.Items, float64(v)*w)
					}
				}
				t.Add(e, fmt.Sprintf("n = %d", r.FTSteps), r.Seed, sc)
			}
		}
		out.WriteString(study.PairedSection(fmt.Sprintf("Paired comparisons at %d", le), conds, &t, "bits per byte", "bits/byte",
			"evaluation windows", "%.3f", stats.LowerIsBetter))
	}
	return out.String()
}

func distinct(rows []Row, key func(Row) string) []string {
	var out []string
	for _, r := range rows {
		if k := key(r); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Plot draws finetune.png: one panel per length, bits per byte against the
// fine-tuning updates (at evenly spaced positions labelled 0, 25, 100,
// ...), one line per entry with its 95% t interval over seeds.
func Plot(p Plan, rows []Row, path string) error {
	cs := cells(rows)
	steps := p.allSteps()
	n := len(p.EvalLens)
	w, h := vg.Length(5*n)*vg.Inch, 6*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: n, PadX: vg.Points(8), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	bars := "one seed: no error bars"
	if len(p.Seeds) > 1 {
		bars = fmt.Sprintf("error bars: 95%% t interval over %d seeds", len(p.Seeds))
	}
	for i, le := range p.EvalLens {
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("%s preset: scored at %d\n(fine-tuned at %d; %s)", p.Preset, le, p.Len, bars)
		pl.X.Label.Text = fmt.Sprintf("fine-tuning updates at %d", p.Len)
		pl.Y.Label.Text = "bits per byte"
		var ticks []plot.Tick
		for k, s := range steps {
			ticks = append(ticks, plot.Tick{Value: float64(k), Label: strconv.Itoa(s)})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
		pl.X.Min, pl.X.Max = -0.2, float64(len(steps)-1)+0.2
		pl.Add(plotter.NewGrid())
		for k, e := range p.Entries {
			var pts plotter.XYs
			var errs plotter.YErrors
			for x, s := range steps {
				c, ok := cs[cellKey{e, le, s}]
				if !ok || c.NA || c.N == 0 {
					continue
				}
				lo, hi := c.Err()
				pts = append(pts, plotter.XY{X: float64(x), Y: c.Mean})
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
			if len(pts) == 0 {
				continue
			}
			st := viz.SeriesStyle(k)
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, line.Dashes, line.Width = st.Color, st.Dashes, vg.Points(1.5)
			points.Color, points.Shape = st.Color, st.Shape
			pl.Add(line, points)
			if len(p.Seeds) > 1 {
				eb, err := plotter.NewYErrorBars(struct {
					plotter.XYs
					plotter.YErrors
				}{pts, errs})
				if err != nil {
					return err
				}
				eb.Color, eb.CapWidth = st.Color, vg.Points(4)
				pl.Add(eb)
			}
			if i == 0 {
				pl.Legend.Add(e, line, points)
			}
		}
		pl.Legend.Top = true
		pl.Draw(tiles.At(dc, i, 0))
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
}
