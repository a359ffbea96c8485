package extrapstudy

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

	"github.com/rpe-go/rpe/experiments/stats"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/viz"
)

// Files written by Render in the output directory (the framework's
// names).
const (
	FileCSV   = study.FileCSV
	FileJSON  = study.FileJSON
	FileTable = study.FileTable
)

// PlotFile is the name of the plot of a protocol: "bpb_all.png",
// "bpb_last-L.png".
func PlotFile(protocol string) string {
	return "bpb_" + strings.ReplaceAll(protocol, ":", "-") + ".png"
}

// isLongText reports whether pr is a long-text protocol (trainer.Protocol's
// text form), not one of Protocols.
func isLongText(pr string) bool { return !slices.Contains(Protocols, pr) }

// protocolEncodings are the encodings with rows under protocol pr, in table
// order: every evaluated one for Protocols, the trained ones for a
// long-text protocol.
func (p Plan) protocolEncodings(pr string) []string {
	if isLongText(pr) {
		return p.Labels()
	}
	return p.EvalNames()
}

// order puts the saved rows in table order (the encodings as evaluated,
// EvalNames; within one, the models in plan order), fills in what each row
// records of the plan (describeRow), and returns the training
// configuration of every model with rows.
func (r *runner) order(saved []Row) ([]Row, map[string]trainer.Config) {
	evals := map[[2]string]EvalJob{}
	for _, m := range r.jobs {
		for _, j := range r.plan.EvalJobs(m) {
			evals[[2]string{m.Key(), j.Encoding}] = j
		}
	}
	byEnc := map[string][]Row{}
	configs := map[string]trainer.Config{}
	for _, row := range saved {
		j, ok := evals[[2]string{row.Model, row.Encoding}]
		if !ok {
			continue // saved under a spec that matches, so this cannot happen
		}
		configs[row.Model] = j.Model.Cfg
		describeRow(&row, r.plan, j)
		byEnc[row.Encoding] = append(byEnc[row.Encoding], row)
	}
	var rows []Row
	for _, e := range r.plan.EvalNames() {
		rows = append(rows, byEnc[e]...)
	}
	return rows, configs
}

// describeRow sets the row's BaseEncoding, Overrides and PosOptions from
// the plan: the configuration of evaluation job j at the row's length.
func describeRow(row *Row, p Plan, j EvalJob) {
	cfg := p.EvalModel(j, row.EvalLen)
	row.BaseEncoding, row.Overrides = cfg.Model.Pos, ""
	if j.Encoding == j.Model.Encoding {
		if v, err := study.ParseVariant(j.Model.Encoding); err == nil {
			row.Overrides = v.OverridesString()
		}
	}
	row.PosOptions = resolvedPosOptions(cfg.Model)
}

// render writes the outputs from the saved rows of the jobs that are done
// (study.Jobs.Render, under its render lock); pending are the others.
func (r *runner) render(saved []Row, pending []string) error {
	rows, configs := r.order(saved)
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
	if err := study.WriteJSON(path(FileJSON), file); err != nil {
		return err
	}
	md := r.markdown(rows, pending)
	if err := study.WriteFileAtomic(path(FileTable), []byte(md)); err != nil {
		return err
	}
	r.out.Files = []string{path(FileCSV), path(FileJSON), path(FileTable)}
	for _, pr := range r.plan.ProtocolNames() {
		if err := r.plot(rows, pr, path(PlotFile(pr))); err != nil {
			return err
		}
		r.out.Files = append(r.out.Files, path(PlotFile(pr)))
	}
	if len(r.plan.LongText) > 0 && slices.ContainsFunc(rows, func(r Row) bool { return isLongText(r.Protocol) }) {
		if err := ProtocolPlot(rows, path(FileProtocols)); err != nil {
			return err
		}
		r.out.Files = append(r.out.Files, path(FileProtocols))
	}
	fmt.Fprintf(r.opt.Log, "\n%s\nwrote %s\n", md, strings.Join(r.out.Files, ", "))
	return nil
}

// protocolTitle describes a protocol for tables and plots.
func protocolTitle(pr string, l int) string {
	switch pr {
	case ProtocolAll:
		return "(a) every target of non-overlapping windows of Le"
	case ProtocolLast:
		return fmt.Sprintf("(b) same windows, only the last L = %d targets scored", l)
	}
	desc := pr
	if tp, err := trainer.ParseProtocol(pr, l); err == nil {
		desc = tp.Describe()
	}
	return fmt.Sprintf("protocol %s: every target of the windows of Le, each scored in %s", pr, desc)
}

// fmtCell formats an aggregated cell with prec decimals.
func fmtCell(c study.Cell, ok bool, prec int) string {
	switch {
	case !ok:
		return "pending"
	case c.NA:
		return "n/a"
	}
	return c.Interval(prec)
}

// markdown renders table.md.
func (r *runner) markdown(rows []Row, pending []string) string {
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
		fmt.Fprintf(&b, "- Git revision: %s%s\n", strings.Join(rl, ", "), dirtyNote(rows))
	}
	if bs := distinct(rows, func(r Row) string { return r.BLAS }); len(bs) > 0 {
		fmt.Fprintf(&b, "- Build: BLAS %s; %s\n", strings.Join(bs, ", "), strings.Join(distinct(rows, func(r Row) string { return r.GoVersion }), ", "))
	}
	if ms := distinct(rows, func(r Row) string { return r.Machine }); len(ms) > 0 {
		fmt.Fprintf(&b, "- Machine: %s\n", strings.Join(ms, "; "))
	}
	fmt.Fprintf(&b, "- %s\n", seedNote(len(p.Seeds)))
	if vs := p.variantLines(); len(vs) > 0 {
		b.WriteString("- Variants: `name@option=value` is the encoding trained with that option of the configuration overridden:")
		for _, v := range vs {
			fmt.Fprintf(&b, " %s;", v)
		}
		b.WriteString(" every row's resolved position options are in results.csv and results.json\n")
	}
	if len(pending) > 0 {
		fmt.Fprintf(&b, "- **Incomplete**: %d of %d model job(s) pending: %s\n", len(pending), len(r.jobs), strings.Join(pending, ", "))
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
		for _, pr := range p.ProtocolNames() {
			fmt.Fprintf(&b, "\n%s\n\n", protocolTitle(pr, L))
			cells := aggregate(rows, value)
			header()
			for _, e := range p.protocolEncodings(pr) {
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
	b.WriteString(pairedSections(rows, p))
	b.WriteString(contrastSection(rows, p))

	lmax := lens[len(lens)-1]
	fmt.Fprintf(&b, "\n## Cost\n\nTraining at L = %d, batch %d; evaluation at Le = %d (%d windows per pass); peak memory while scoring the first batch at %d with GOGC=10 (Go heap in use, sampled every 2 ms, and process RSS). %s\n\n",
		L, cfg.Batch, lmax, max(1, p.EvalTokens/lmax), lmax, seedNote(len(p.Seeds)))
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
		c := study.NewCell(v)
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
		c := study.NewCell(v)
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
	b.WriteString(protocolCost(rows, p, lmax))
	return b.String()
}

// seedNote says what a cell holds: mean ± sample standard deviation over n
// seeds, or a single value for one seed.
// pairedSections renders the paired comparisons of the bits per byte
// (study.PairedSection) at each evaluation length, one section per
// protocol, paired on the seeds and on the seeds and evaluation windows
// (the rows' WindowBits: every model scores the same windows of the same
// text at one length). A window's item is its bits scaled by
// windows/tokens, so the items' mean is the row's bits per byte (the tail
// window, with fewer targets, weighs less). A RoPE scaling at Le = L is
// rope itself and is left out there.
func pairedSections(rows []Row, p Plan) string {
	L := p.TrainLen()
	cond := func(le int) string { return fmt.Sprintf("%d (%dL)", le, le/L) }
	var conds []string
	for _, f := range p.Factors {
		conds = append(conds, cond(f*L))
	}
	var out strings.Builder
	for _, pr := range p.ProtocolNames() {
		var t study.ScoreTable
		for _, e := range p.protocolEncodings(pr) { // the table's order
			for _, r := range rows {
				if r.Encoding != e || r.Protocol != pr || r.Status != StatusOK || (e != "rope" && slices.Contains(p.Scalings, e) && r.EvalLen == L) {
					continue
				}
				sc := study.Scores{Value: r.BitsPerByte}
				if len(r.WindowBits) == r.Windows && r.Tokens > 0 {
					w := float64(r.Windows) / float64(r.Tokens)
					for _, v := range r.WindowBits {
						sc.Items = append(sc.Items, float64(v)*w)
					}
				}
				t.Add(e, cond(r.EvalLen), r.Seed, sc)
			}
		}
		heading := "Paired comparisons, every target"
		switch {
		case isLongText(pr):
			heading = fmt.Sprintf("Paired comparisons, protocol %s", pr)
		case pr != ProtocolAll:
			heading = fmt.Sprintf("Paired comparisons, the last L = %d targets of each window", L)
		}
		out.WriteString(study.PairedSection(heading, conds, &t, "bits per byte", "bits/byte", "evaluation windows", "%.3f", stats.LowerIsBetter))
	}
	return out.String()
}

func seedNote(n int) string {
	if n > 1 {
		return fmt.Sprintf("Cells: mean ± sample standard deviation (denominator n-1) [95%% t interval of the mean] over %d seeds.", n)
	}
	return "Cells: one seed, single values (no ±)."
}

// dirtyNote is " (uncommitted changes)" if a row was computed from a work
// tree with uncommitted changes.
func dirtyNote(rows []Row) string {
	for _, r := range rows {
		if r.GitDirty {
			return " (with uncommitted changes)"
		}
	}
	return ""
}

// distinct returns the distinct non-empty values of key over rows, sorted.
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

// variantLines describes the plan's variants: "label: option = value
// (default d)".
func (p Plan) variantLines() []string {
	var out []string
	for _, e := range p.Encodings {
		v, err := study.ParseVariant(e)
		if err != nil || len(v.Overrides) == 0 {
			continue
		}
		def := resolvedPosOptions(p.Config(v.Base, 0).Model)
		var os []string
		for _, o := range v.Overrides {
			d := ""
			if dv, ok := def[o.Key]; ok {
				d = " (default " + dv + ")"
			}
			os = append(os, fmt.Sprintf("%s = %s%s", o.Key, o.Value, d))
		}
		out = append(out, fmt.Sprintf("`%s` is %s with %s", v.Label(), v.Base, strings.Join(os, ", ")))
	}
	return out
}

// errXY is an XYer with symmetric Y errors.
type errXY struct {
	plotter.XYs
	err []float64
}

func (e errXY) YError(i int) (float64, float64) { return e.err[i], e.err[i] }

// flatMargin is the zoom panel's criterion: an encoding is drawn there if
// every mean beyond L is within flatMargin bits per byte of its mean at L.
const flatMargin = 0.1

// series is one encoding's curve: means over seeds and the half-widths of
// their 95% t intervals (std)
// at the lengths it has a result at.
type series struct {
	name  string
	style viz.Style
	le    []int
	mean  []float64
	std   []float64
}

// curves returns the curve of every evaluated encoding under protocol pr,
// in table order (a RoPE scaling starts from rope's point at Le = L, where
// it is rope); encodings without results are left out but keep their
// style, so a style always means the same encoding.
func (r *runner) curves(rows []Row, pr string) []series {
	p := r.plan
	L := p.TrainLen()
	cells := aggregate(rows, func(r Row) float64 { return r.BitsPerByte })
	var out []series
	for i, e := range p.protocolEncodings(pr) {
		s := series{name: e, style: viz.SeriesStyle(i)}
		for _, le := range p.Lengths() {
			c, ok := cells[cellKey{e, le, pr}]
			if !ok && le == L && slices.Contains(RopeScalings, e) && !isLongText(pr) {
				c, ok = cells[cellKey{"rope", le, pr}]
			}
			if !ok || c.NA || c.N == 0 {
				continue
			}
			_, half := c.Err() // the t interval is symmetric
			s.le, s.mean, s.std = append(s.le, le), append(s.mean, c.Mean), append(s.std, half)
		}
		if len(s.le) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// flat reports whether s has results beyond L (its first point) and every
// one within flatMargin of its value at L.
func (s series) flat(L int) bool {
	if len(s.le) < 2 || s.le[0] != L {
		return false
	}
	for _, m := range s.mean[1:] {
		if math.Abs(m-s.mean[0]) > flatMargin {
			return false
		}
	}
	return true
}

// panel draws ss on a log-x plot of bits per byte against Le; with error
// bars if seeds > 1. Its y range is fitted to ss.
func (r *runner) panel(ss []series, title string, seeds int) (*plot.Plot, map[string][]plot.Thumbnailer, error) {
	p := r.plan
	L := p.TrainLen()
	pl := plot.New()
	pl.Title.Text = title
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
	pl.Add(plotter.NewGrid())
	thumbs := map[string][]plot.Thumbnailer{}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	n := len(p.EvalNames())
	for _, s := range ss {
		i := slices.Index(p.EvalNames(), s.name)
		var pts errXY
		for k, le := range s.le {
			x := float64(le)
			if seeds > 1 { // dodge the error bars of the encodings apart
				x *= math.Pow(1.012, float64(i)-float64(n-1)/2)
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: s.mean[k]})
			pts.err = append(pts.err, s.std[k])
			ymin, ymax = math.Min(ymin, s.mean[k]-s.std[k]), math.Max(ymax, s.mean[k]+s.std[k])
		}
		line, points, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return nil, nil, errors.Wrapf(err, "plot %s", s.name)
		}
		line.Color, points.Color = s.style.Color, s.style.Color
		line.Width = vg.Points(1.4)
		line.Dashes = s.style.Dashes
		points.Shape = s.style.Shape
		points.Radius = vg.Points(3)
		pl.Add(line, points)
		if seeds > 1 {
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, nil, errors.Wrapf(err, "plot %s", s.name)
			}
			eb.LineStyle.Color = s.style.Color
			pl.Add(eb)
		}
		thumbs[s.name] = []plot.Thumbnailer{line, points}
	}
	if !math.IsInf(ymin, 0) {
		pad := math.Max(0.05*(ymax-ymin), 0.01)
		pl.Y.Min, pl.Y.Max = ymin-pad, ymax+pad
	}
	pl.X.Min, pl.X.Max = float64(L)/1.2, float64(p.Lengths()[len(p.Factors)-1])*1.2
	return pl, thumbs, nil
}

// plot draws bits per byte against the evaluation length for protocol pr,
// one line per encoding in its own style (viz.SeriesStyle: colour, dash
// pattern and marker), error bars of the 95% t interval of the mean over
// seeds when there are several (the title says so), in two panels: every
// encoding, and a zoom on those that stay within flatMargin of their value
// at L, so that they can be told apart; the legend on the right.
func (r *runner) plot(rows []Row, pr, path string) error {
	p := r.plan
	L := p.TrainLen()
	seeds := len(p.Seeds)
	bars := "one seed: no error bars"
	if seeds > 1 {
		bars = fmt.Sprintf("error bars: 95%% t interval of the mean over %d seeds", seeds)
	}
	ss := r.curves(rows, pr)
	top, thumbs, err := r.panel(ss, fmt.Sprintf("%s preset: %s\n%s", p.Preset, protocolTitle(pr, L), bars), seeds)
	if err != nil {
		return err
	}
	var flat []series
	for _, s := range ss {
		if s.flat(L) {
			flat = append(flat, s)
		}
	}
	zoomTitle := fmt.Sprintf("zoom: the encodings within ±%g bits/byte of their value at L at every length", flatMargin)
	if len(flat) == 0 {
		zoomTitle = fmt.Sprintf("zoom: no encoding stays within ±%g bits/byte of its value at L", flatMargin)
	}
	bottom, _, err := r.panel(flat, zoomTitle, seeds)
	if err != nil {
		return err
	}
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.ThumbnailWidth = vg.Points(28)
	for _, s := range ss {
		leg.Add(s.name, thumbs[s.name]...)
	}
	// The legend goes to the right of the panels, where it hides no point.
	w, h, legW := 10.5*vg.Inch, 9*vg.Inch, 2.7*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	top.Draw(draw.Crop(dc, 0, -legW, h/2, 0))
	bottom.Draw(draw.Crop(dc, 0, -legW, 0, -h/2))
	leg.Draw(draw.Crop(dc, w-legW+0.1*vg.Inch, 0, 0, -0.5*vg.Inch))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return errors.Wrapf(err, "drawing plot %s", path)
	}
	return study.WriteFileAtomic(path, buf.Bytes())
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

// protocolCost is the table of quality and cost of every protocol at the
// longest length lmax: for each trained encoding and protocol, the bits per
// byte, the evaluation time per target and the peak memory (mean [95% t
// interval] over seeds). "" if the plan has no long-text protocol.
func protocolCost(rows []Row, p Plan, lmax int) string {
	if len(p.LongText) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Long-text protocols at Le = %d: quality and cost\n\n", lmax)
	fmt.Fprintf(&b, "Each protocol scores every target of the same text (windows of %d): %s; %s. %s\n\n", lmax,
		"full is protocol (a), the whole window in one pass", strings.Join(func() []string {
			var d []string
			for _, pr := range p.LongText {
				d = append(d, fmt.Sprintf("%s is %s", pr, pr.Describe()))
			}
			return d
		}(), "; "), seedNote(len(p.Seeds)))
	b.WriteString("Memory is what scoring the first batch added to the process (peak minus the value when the measurement began, after a collection: the model and the text are not counted), as Go heap in use and RSS.\n\n")
	b.WriteString("| encoding | protocol | bits/byte | eval ms/token | added Go heap MiB | added RSS MiB |\n|---|---|---:|---:|---:|---:|\n")
	cell := func(e, pr string, f func(Row) float64, prec int) string {
		var v []float64
		na, seen := false, false
		for _, row := range rows {
			if row.Encoding != e || row.EvalLen != lmax || row.Protocol != pr {
				continue
			}
			seen = true
			if row.Status == StatusNA {
				na = true
				continue
			}
			v = append(v, f(row))
		}
		switch {
		case len(v) > 0:
			return fmtCell(study.NewCell(v), true, prec)
		case na:
			return "n/a"
		case seen:
			return "-"
		}
		return "pending"
	}
	for _, e := range p.Labels() {
		for _, pr := range append([]string{ProtocolAll}, p.ProtocolNames()[len(Protocols):]...) {
			name := pr
			if pr == ProtocolAll {
				name = "full"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", e, name,
				cell(e, pr, func(r Row) float64 { return r.BitsPerByte }, 3),
				cell(e, pr, func(r Row) float64 { return r.EvalMsPerToken }, 3),
				cell(e, pr, func(r Row) float64 { return max(0, r.PeakHeapMB-r.BaseHeapMB) }, 0),
				cell(e, pr, func(r Row) float64 { return max(0, r.PeakRSSMB-r.BaseRSSMB) }, 0))
		}
	}
	for _, row := range rows {
		if row.Status == StatusNA && isLongText(row.Protocol) && row.EvalLen == lmax && row.Seed == p.Seeds[0] {
			fmt.Fprintf(&b, "\nn/a for %s with %s: %s.", row.Encoding, row.Protocol, row.Note)
		}
	}
	b.WriteString("\n")
	return b.String()
}
