package study

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
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// Files written by Render in the output directory.
const (
	FileCSV   = "results.csv"
	FileJSON  = "results.json"
	FileTable = "table.md"
)

// PlotFile is the name of the plot of a protocol: "bpb_all.png",
// "bpb_last-L.png".
func PlotFile(protocol string) string { return "bpb_" + protocol + ".png" }

// Render writes the results of plan p found in opt.Dir as results.csv,
// results.json, table.md and one PNG plot per protocol, without training or
// evaluating anything; evaluations not done yet show as pending. It
// validates p and c like Run (the corpus defines the evaluation text the
// results must match).
func Render(p Plan, c *trainer.Corpus, opt Options) (*Outcome, error) {
	r, err := newRunner(p, c, opt)
	if err != nil {
		return nil, err
	}
	return r.out, r.render()
}

// collect reads every result of the plan, in table order.
func (r *runner) collect() ([]Row, map[string]trainer.Config, int, error) {
	byEnc := map[string][]Row{}
	configs := map[string]trainer.Config{}
	pending := 0
	for _, m := range r.plan.ModelJobs() {
		for _, j := range r.plan.EvalJobs(m) {
			f, err := r.loadEval(j)
			if err != nil {
				return nil, nil, 0, err
			}
			if f == nil {
				pending++
				continue
			}
			configs[m.Key()] = m.Cfg
			byEnc[j.Encoding] = append(byEnc[j.Encoding], f.Rows...)
		}
	}
	var rows []Row
	for _, e := range r.plan.EvalNames() {
		rows = append(rows, byEnc[e]...)
	}
	return rows, configs, pending, nil
}

func (r *runner) render() error {
	rows, configs, pending, err := r.collect()
	if err != nil {
		return err
	}
	r.out.Rows, r.out.Pending = rows, pending
	dir := r.opt.Dir
	path := func(n string) string { return filepath.Join(dir, n) }
	if err := WriteCSV(path(FileCSV), rows, configs); err != nil {
		return err
	}
	file := File{Preset: r.plan.Preset, Reduced: r.plan.Reduced, Corpus: corpusName(r.c), EvalText: r.textDesc(),
		Configs: configs, Rows: rows}
	if file.Rows == nil {
		file.Rows = []Row{}
	}
	if err := writeJSON(path(FileJSON), file); err != nil {
		return err
	}
	md := r.markdown(rows, pending)
	if err := writeFileAtomic(path(FileTable), []byte(md)); err != nil {
		return err
	}
	r.out.Files = []string{path(FileCSV), path(FileJSON), path(FileTable)}
	for _, pr := range Protocols {
		if err := r.plot(rows, pr, path(PlotFile(pr))); err != nil {
			return err
		}
		r.out.Files = append(r.out.Files, path(PlotFile(pr)))
	}
	fmt.Fprintf(r.opt.Log, "\n%s\nwrote %s\n", md, strings.Join(r.out.Files, ", "))
	return nil
}

// protocolTitle describes a protocol for tables and plots.
func protocolTitle(pr string, l int) string {
	if pr == ProtocolAll {
		return "(a) every target of non-overlapping windows of Le"
	}
	return fmt.Sprintf("(b) same windows, only the last L = %d targets scored", l)
}

// fmtCell formats an aggregated cell with prec decimals.
func fmtCell(c Cell, ok bool, prec int) string {
	switch {
	case !ok:
		return "pending"
	case c.NA:
		return "n/a"
	case c.N > 1:
		return fmt.Sprintf("%.*f ± %.*f", prec, c.Mean, prec, c.Std)
	}
	return fmt.Sprintf("%.*f", prec, c.Mean)
}

// markdown renders table.md.
func (r *runner) markdown(rows []Row, pending int) string {
	p := r.plan
	L := p.TrainLen()
	var b strings.Builder
	fmt.Fprintf(&b, "# Length extrapolation: %s preset\n\n", p.Preset)
	if p.Reduced != "" {
		fmt.Fprintf(&b, "**This is the %s preset**, reduced for speed: %s. The reference study is `-preset full`.\n\n", p.Preset, p.Reduced)
	}
	cfg := p.Base
	m := cfg.Model
	fmt.Fprintf(&b, "- Command: `%s`\n", r.opt.Command)
	fmt.Fprintf(&b, "- Corpus: %s (%d training / %d validation bytes); evaluation text: %s\n", corpusName(r.c), len(r.c.Train), len(r.c.Val), r.textDesc())
	fmt.Fprintf(&b, "- Model: d=%d, %d heads, %d layers, FFN %d, %v; trained at L = %d, batch %d, %d updates (warm-up %d, peak lr %g), seeds %v\n",
		m.DModel, m.Heads, m.Layers, m.FFN, cfg.Dtype, L, cfg.Batch, cfg.Steps, cfg.Warmup, cfg.LR, p.Seeds)
	if p.hasRope() {
		fmt.Fprintf(&b, "- RoPE scalings (%s) are the trained rope model evaluated with RopeScale = Le/L and RopeTrainLen = L, without retraining\n",
			strings.Join(p.Scalings, ", "))
	}
	revs := map[string]bool{}
	for _, row := range rows {
		revs[row.GitRev] = true
	}
	var rl []string
	for k := range revs {
		rl = append(rl, k)
	}
	slices.Sort(rl)
	if len(rl) > 0 {
		fmt.Fprintf(&b, "- Git revision: %s\n", strings.Join(rl, ", "))
	}
	if len(p.Seeds) > 1 {
		fmt.Fprintf(&b, "- Cells: mean ± sample standard deviation over %d seeds\n", len(p.Seeds))
	}
	if pending > 0 {
		fmt.Fprintf(&b, "- **Incomplete**: %d evaluation job(s) pending\n", pending)
	}
	b.WriteString("- n/a: learned absolute positions have no embedding beyond the training length\n")

	lens := p.Lengths()
	header := func() {
		b.WriteString("| encoding |")
		for i, le := range lens {
			fmt.Fprintf(&b, " %d (%dL) |", le, p.Factors[i])
		}
		b.WriteString("\n|---|")
		for range lens {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
	}
	table := func(value func(Row) float64, prec int) {
		for _, pr := range Protocols {
			fmt.Fprintf(&b, "\n%s\n\n", protocolTitle(pr, L))
			cells := aggregate(rows, value)
			header()
			for _, e := range p.EvalNames() {
				fmt.Fprintf(&b, "| %s |", e)
				for _, le := range lens {
					if e != "rope" && slices.Contains(p.Scalings, e) && le == L {
						b.WriteString(" = rope |")
						continue
					}
					c, ok := cells[cellKey{e, le, pr}]
					fmt.Fprintf(&b, " %s |", fmtCell(c, ok, prec))
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\n## Bits per byte (lower is better)\n")
	table(func(r Row) float64 { return r.BitsPerByte }, 3)
	b.WriteString("\n## Byte-level perplexity (2^bits per byte)\n")
	table(func(r Row) float64 { return r.Perplexity }, 2)

	lmax := lens[len(lens)-1]
	fmt.Fprintf(&b, "\n## Cost\n\nTraining at L = %d, batch %d; evaluation at Le = %d (%d windows per pass); peak memory while scoring the first batch at %d with GOGC=10 (Go heap in use, sampled every 2 ms, and process RSS).\n\n",
		L, cfg.Batch, lmax, max(1, p.EvalTokens/lmax), lmax)
	b.WriteString("| encoding | train ms/update | train tokens/s | eval ms/token | peak Go heap MiB | peak RSS MiB |\n|---|---:|---:|---:|---:|---:|\n")
	sel := func(e string, f func(Row) float64) string {
		var v []float64
		na := false
		for _, row := range rows {
			if row.Encoding != e || row.EvalLen != lmax || row.Protocol != ProtocolAll {
				continue
			}
			if row.Status == StatusNA {
				na = true
				continue
			}
			v = append(v, f(row))
		}
		if len(v) == 0 {
			if na {
				return "n/a"
			}
			return "pending"
		}
		c := Cell{N: len(v)}
		c.Mean, c.Std = meanStd(v)
		if c.Mean >= 100 {
			return fmtCell(c, true, 0)
		}
		return fmtCell(c, true, 2)
	}
	trainSel := func(e string, f func(Row) float64) string {
		if slices.Contains(p.Scalings, e) && !slices.Contains(p.Encodings, e) {
			return "(rope)"
		}
		var v []float64
		seen := map[int64]bool{}
		for _, row := range rows {
			if row.Encoding == e && !seen[row.Seed] && row.TrainMsPerStep > 0 {
				seen[row.Seed] = true
				v = append(v, f(row))
			}
		}
		if len(v) == 0 {
			return "pending"
		}
		c := Cell{N: len(v)}
		c.Mean, c.Std = meanStd(v)
		return fmtCell(c, true, 0)
	}
	for _, e := range p.EvalNames() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", e,
			trainSel(e, func(r Row) float64 { return r.TrainMsPerStep }),
			trainSel(e, func(r Row) float64 { return r.TrainTokensPerSec }),
			sel(e, func(r Row) float64 { return r.EvalMsPerToken }),
			sel(e, func(r Row) float64 { return r.PeakHeapMB }),
			sel(e, func(r Row) float64 { return r.PeakRSSMB }))
	}
	b.WriteString("\nTimings are wall-clock on a shared machine and fluctuate with its load; the memory peaks include the process's baseline (weights, corpus, runtime).\n")
	return b.String()
}

// errXY is an XYer with symmetric Y errors.
type errXY struct {
	plotter.XYs
	err []float64
}

func (e errXY) YError(i int) (float64, float64) { return e.err[i], e.err[i] }

// plot draws bits per byte against the evaluation length for protocol pr,
// one line per encoding (the RoPE scalings dashed, starting from rope's
// point at Le = L, where they are rope), error bars of one standard
// deviation over seeds when there are several, the legend on the right.
func (r *runner) plot(rows []Row, pr, path string) error {
	p := r.plan
	L := p.TrainLen()
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("%s preset: %s", p.Preset, protocolTitle(pr, L))
	pl.Title.TextStyle.Font.Size = vg.Points(10)
	pl.X.Label.Text = fmt.Sprintf("evaluation length Le (bytes; trained at L = %d)", L)
	pl.Y.Label.Text = "validation bits per byte"
	pl.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, le := range p.Lengths() {
		ticks = append(ticks, plot.Tick{Value: float64(le), Label: fmt.Sprint(le)})
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	pl.Y.Tick.Marker = precTicks{}
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(9)
	pl.Add(plotter.NewGrid())
	cells := aggregate(rows, func(r Row) float64 { return r.BitsPerByte })
	ymin, ymax := math.Inf(1), math.Inf(-1)
	names := p.EvalNames()
	for i, e := range names {
		var pts errXY
		for _, le := range p.Lengths() {
			c, ok := cells[cellKey{e, le, pr}]
			if !ok && le == L && slices.Contains(RopeScalings, e) {
				// At Le = L every scaling has s = 1 and is rope itself.
				c, ok = cells[cellKey{"rope", le, pr}]
			}
			if !ok || c.NA || c.N == 0 {
				continue
			}
			x := float64(le)
			if len(p.Seeds) > 1 { // dodge the error bars of the encodings apart
				x *= math.Pow(1.012, float64(i)-float64(len(names)-1)/2)
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: c.Mean})
			pts.err = append(pts.err, c.Std)
			ymin, ymax = math.Min(ymin, c.Mean-c.Std), math.Max(ymax, c.Mean+c.Std)
		}
		if len(pts.XYs) == 0 {
			continue
		}
		col := plotutil.Color(i)
		if i >= 7 { // plotutil has 7 colours; vary the shade
			col = darken(plotutil.Color(i % 7))
		}
		line, points, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return errors.Wrapf(err, "plot %s", e)
		}
		line.Color, points.Color = col, col
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		if slices.Contains(RopeScalings, e) {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			line.Width = vg.Points(1)
		}
		pl.Add(line, points)
		if len(p.Seeds) > 1 {
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return errors.Wrapf(err, "plot %s", e)
			}
			eb.LineStyle.Color = col
			pl.Add(eb)
		}
		leg.Add(e, line, points)
	}
	if !math.IsInf(ymin, 0) {
		pad := math.Max(0.05*(ymax-ymin), 0.02)
		pl.Y.Min, pl.Y.Max = ymin-pad, ymax+pad
	}
	pl.X.Min, pl.X.Max = float64(L)/1.2, float64(p.Lengths()[len(p.Factors)-1])*1.2
	// The legend goes to the right of the plot, where it hides no point.
	img := vgimg.NewWith(vgimg.UseWH(8.5*vg.Inch, 5*vg.Inch), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	pl.Draw(draw.Crop(dc, 0, -1.6*vg.Inch, 0, 0))
	leg.Draw(draw.Crop(dc, 7.05*vg.Inch, 0, 0, -0.45*vg.Inch))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing plot %s", path)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// precTicks are plot.DefaultTicks labelled with the fewest decimals (the
// same for every label) that show each labelled tick's value exactly, to
// 1e-9 relative: ticks at 3.05, 3.20, 3.35 print as such, not as "3.1",
// "3.2", "3.3" (the default labels of a narrow range repeat).
type precTicks struct{}

func (precTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	prec := 0
	for ; prec < 15; prec++ {
		exact := true
		for _, t := range ts {
			if t.Label != "" && !labelExact(t.Value, prec) {
				exact = false
				break
			}
		}
		if exact {
			break
		}
	}
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', prec, 64)
		}
	}
	return ts
}

// labelExact reports whether v printed with prec decimals reads back as v
// to 1e-9 relative (1e-12 absolute near 0).
func labelExact(v float64, prec int) bool {
	back, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', prec, 64), 64)
	return err == nil && math.Abs(back-v) <= math.Max(1e-9*math.Abs(v), 1e-12)
}

// darken returns c at 60% brightness.
func darken(c color.Color) color.Color {
	r, g, b, a := c.RGBA()
	return color.RGBA{R: uint8(r * 6 / 10 >> 8), G: uint8(g * 6 / 10 >> 8), B: uint8(b * 6 / 10 >> 8), A: uint8(a >> 8)}
}
