package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/viz"
)

// The rendering of -cost: results.csv, table.md and cost.png from the cells
// of results.json (also alone, with -render).

// fitMinT is the smallest length of the growth-exponent fits.
const fitMinT = 2048

// fitPowerLaw fits y = c·x^k by least squares on log y against log x and
// returns k and c; ok is false with fewer than two distinct positive x (or
// a non-positive y).
func fitPowerLaw(x, y []float64) (k, c float64, ok bool) {
	if len(x) != len(y) || len(x) < 2 {
		return 0, 0, false
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		if !(x[i] > 0) || !(y[i] > 0) {
			return 0, 0, false
		}
		lx, ly := math.Log(x[i]), math.Log(y[i])
		sx, sy, sxx, sxy = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly
	}
	n := float64(len(x))
	den := n*sxx - sx*sx
	if den <= 1e-12*n*sxx {
		return 0, 0, false
	}
	k = (n*sxy - sx*sy) / den
	return k, math.Exp((sy - k*sx) / n), true
}

// costMetric is a quantity of the tables and the plot.
type costMetric struct {
	name, unit string
	value      func(c *costCell) float64
	format     string
}

var costMetrics = []costMetric{
	{"time", "ms per token", func(c *costCell) float64 { return c.MsPerToken }, "%.4f"},
	{"memory", "added peak RSS, MiB", func(c *costCell) float64 { return c.AddedMiB }, "%.0f"},
}

var costModeTitle = map[string]string{
	"fwd":   "forward pass (no gradient)",
	"train": "training step (forward, backward, clipping, AdamW)",
}

// costView indexes the cells for rendering.
type costView struct {
	res   *costResults
	pos   []string // in first-seen order
	modes []string
	seqs  []int
}

func newCostView(r *costResults) costView {
	v := costView{res: r}
	for _, c := range r.Cells {
		if !slices.Contains(v.pos, c.Pos) {
			v.pos = append(v.pos, c.Pos)
		}
		if !slices.Contains(v.seqs, c.T) {
			v.seqs = append(v.seqs, c.T)
		}
	}
	for _, m := range costModes {
		for _, c := range r.Cells {
			if c.Mode == m {
				v.modes = append(v.modes, m)
				break
			}
		}
	}
	slices.Sort(v.seqs)
	return v
}

// series returns the lengths and values of the ok cells of one series.
func (v costView) series(pos, side, mode string, m costMetric, minT int) (x, y []float64) {
	for _, t := range v.seqs {
		if c := v.res.find(pos, side, mode, t); c != nil && c.Status == cellOK && t >= minT && m.value(c) > 0 {
			x, y = append(x, float64(t)), append(y, m.value(c))
		}
	}
	return x, y
}

// exponent is the fitted growth exponent of a series over T >= fitMinT, or "-".
func (v costView) exponent(pos, side, mode string, m costMetric) string {
	if k, _, ok := fitPowerLaw(v.series(pos, side, mode, m, fitMinT)); ok {
		return fmt.Sprintf("%.2f", k)
	}
	return "-"
}

// sideLabel names a side's row: the Go side says whether it streamed.
func (v costView) sideLabel(pos, side, mode string) string {
	if side == "pytorch" {
		return "PyTorch"
	}
	seen := map[bool]bool{}
	for _, c := range v.res.Cells {
		if c.Pos == pos && c.Side == side && c.Mode == mode && c.Status == cellOK {
			seen[c.Stream] = true
		}
	}
	switch {
	case seen[true] && seen[false]:
		return "Go (mixed)"
	case seen[true]:
		return "Go (stream)"
	case seen[false]:
		return "Go (materialised)"
	}
	return "Go"
}

func (v costView) hasSide(side string) bool {
	for _, c := range v.res.Cells {
		if c.Side == side {
			return true
		}
	}
	return false
}

// table writes the Markdown table of one mode and metric: per encoding a
// row per side and a Go/PyTorch row, a column per T, and the exponent.
func (v costView) table(w io.Writer, mode string, m costMetric) {
	fmt.Fprintf(w, "| encoding | side |")
	for _, t := range v.seqs {
		fmt.Fprintf(w, " %d |", t)
	}
	fmt.Fprintf(w, " exponent (T ≥ %d) |\n|---|---|%s---:|\n", fitMinT, strings.Repeat("---:|", len(v.seqs)))
	py := v.hasSide("pytorch")
	for _, pos := range v.pos {
		sides := []string{"go"}
		if py {
			sides = append(sides, "pytorch")
		}
		for i, side := range sides {
			name := ""
			if i == 0 {
				name = pos
			}
			fmt.Fprintf(w, "| %s | %s |", name, v.sideLabel(pos, side, mode))
			for _, t := range v.seqs {
				fmt.Fprintf(w, " %s |", v.cellText(v.res.find(pos, side, mode, t), m))
			}
			fmt.Fprintf(w, " %s |\n", v.exponent(pos, side, mode, m))
		}
		if py {
			fmt.Fprintf(w, "| | Go/PyTorch |")
			for _, t := range v.seqs {
				g, p := v.res.find(pos, "go", mode, t), v.res.find(pos, "pytorch", mode, t)
				s := "-"
				if g != nil && p != nil && g.Status == cellOK && p.Status == cellOK && m.value(p) > 0 {
					s = fmt.Sprintf("%.2f", m.value(g)/m.value(p))
				}
				fmt.Fprintf(w, " %s |", s)
			}
			fmt.Fprintf(w, " |\n")
		}
	}
}

func (v costView) cellText(c *costCell, m costMetric) string {
	switch {
	case c == nil:
		return ""
	case c.Status == cellOK:
		return fmt.Sprintf(m.format, m.value(c))
	}
	return c.Status
}

// notes lists why cells are not ok, one line per encoding, side, mode and
// reason, naming the lengths.
func (v costView) notes(w io.Writer) {
	type key struct{ pos, side, mode, status, reason string }
	var order []key
	ts := map[key][]string{}
	for _, c := range v.res.Cells {
		if c.Status == cellOK {
			continue
		}
		reason := c.Reason
		if c.Status == cellSkipped || c.Status == cellOverLimit {
			reason = "" // the numbers differ per length; the JSON has them
		}
		k := key{c.Pos, c.Side, c.Mode, c.Status, reason}
		if _, ok := ts[k]; !ok {
			order = append(order, k)
		}
		ts[k] = append(ts[k], strconv.Itoa(c.T))
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintf(w, "Cells without a measurement:\n\n")
	for _, k := range order {
		side := map[string]string{"go": "Go", "pytorch": "PyTorch"}[k.side]
		fmt.Fprintf(w, "- %s, %s, %s, T = %s: %s", k.pos, side, k.mode, strings.Join(ts[k], ", "), k.status)
		if k.reason != "" {
			fmt.Fprintf(w, " (%s)", k.reason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// targets checks issue #17's targets on the cells: the added peak RSS of
// evaluation at the largest T under 1 GiB, and, in each mode, Go's time per
// token at T >= 4096 at most 0.5x PyTorch's where PyTorch ran.
func (v costView) targets(w io.Writer) {
	if len(v.seqs) == 0 {
		return
	}
	fmt.Fprintf(w, "Targets (issue #17):\n\n")
	tmax := v.seqs[len(v.seqs)-1]
	if slices.Contains(v.modes, "fwd") {
		var under, over, missing []string
		for _, pos := range v.pos {
			c := v.res.find(pos, "go", "fwd", tmax)
			switch {
			case c == nil || c.Status != cellOK:
				missing = append(missing, pos)
			case c.AddedMiB < 1024:
				under = append(under, pos)
			default:
				over = append(over, fmt.Sprintf("%s (%.0f MiB)", pos, c.AddedMiB))
			}
		}
		fmt.Fprintf(w, "- Go evaluation at T = %d, added peak RSS under 1 GiB: %s; above: %s; not measured: %s.\n",
			tmax, list(under), list(over), list(missing))
	}
	for _, mode := range v.modes {
		var fast, slow []string
		for _, pos := range v.pos {
			if worst, ok := v.worstRatio(pos, mode, 4096); !ok {
				continue
			} else if worst <= 0.5 {
				fast = append(fast, fmt.Sprintf("%s (%.2f)", pos, worst))
			} else {
				slow = append(slow, fmt.Sprintf("%s (%.2f)", pos, worst))
			}
		}
		if fast != nil || slow != nil {
			fmt.Fprintf(w, "- %s: Go's time per token at T ≥ 4096 at most 0.5x PyTorch's (worst ratio where PyTorch ran): met by %s; missed by %s.\n",
				costModeTitle[mode], list(fast), list(slow))
		}
	}
	fmt.Fprintln(w)
}

// worstRatio is the largest Go/PyTorch time ratio of pos in mode over the
// lengths T >= minT where both sides ran; ok is false if there is none.
func (v costView) worstRatio(pos, mode string, minT int) (worst float64, ok bool) {
	for _, t := range v.seqs {
		if r, has := v.ratio(pos, mode, t, costMetrics[0]); has && t >= minT {
			worst, ok = math.Max(worst, r), true
		}
	}
	return worst, ok
}

// ratio is Go's value of m over PyTorch's for pos in mode at length t, if
// both cells are ok.
func (v costView) ratio(pos, mode string, t int, m costMetric) (float64, bool) {
	g, p := v.res.find(pos, "go", mode, t), v.res.find(pos, "pytorch", mode, t)
	if g == nil || p == nil || g.Status != cellOK || p.Status != cellOK || !(m.value(p) > 0) {
		return 0, false
	}
	return m.value(g) / m.value(p), true
}

// summary writes one mode's table of the README: per encoding Go's and
// PyTorch's time per token at 4096 and their ratio, the ratio at 8192,
// Go's time and added memory at the largest T, PyTorch's added memory at
// 8192, and the memory exponents of both sides.
func (v costView) summary(w io.Writer, mode string) {
	if len(v.seqs) == 0 {
		return
	}
	tmax := v.seqs[len(v.seqs)-1]
	tm, mem := costMetrics[0], costMetrics[1]
	fmt.Fprintf(w, "| encoding | Go ms/token, 4096 | PyTorch | Go/PyTorch | Go/PyTorch, 8192 | Go ms/token, %d | Go +MiB, %d | PyTorch +MiB, 8192 | memory exponent, Go / PyTorch |\n", tmax, tmax)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	val := func(pos, side string, t int, m costMetric, format string) string {
		c := v.res.find(pos, side, mode, t)
		switch {
		case c == nil:
			return "-"
		case c.Status == cellOK:
			return fmt.Sprintf(format, m.value(c))
		case side == "pytorch" && c.Status == cellSkipped:
			return "over the limit (est.)"
		}
		return c.Status
	}
	rat := func(pos string, t int) string {
		if r, ok := v.ratio(pos, mode, t, tm); ok {
			return fmt.Sprintf("%.2f", r)
		}
		return "-"
	}
	for _, pos := range v.pos {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", pos,
			val(pos, "go", 4096, tm, "%.3f"), val(pos, "pytorch", 4096, tm, "%.3f"), rat(pos, 4096), rat(pos, 8192),
			val(pos, "go", tmax, tm, "%.3f"), val(pos, "go", tmax, mem, "%.0f"), val(pos, "pytorch", 8192, mem, "%.0f"),
			v.exponent(pos, "go", mode, mem), v.exponent(pos, "pytorch", mode, mem))
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// renderCost writes results.csv, table.md and cost.png into dir and prints
// table.md to w.
func renderCost(r *costResults, dir string, w io.Writer) error {
	v := newCostView(r)
	if err := writeCostCSV(r, filepath.Join(dir, "results.csv")); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Cost of the encodings: time per token and added peak memory over T\n\n")
	fmt.Fprintf(&md, "Setup: %s. Go %s, %s", r.Setup, r.Go, r.BLAS)
	if r.Torch != "" {
		fmt.Fprintf(&md, "; PyTorch %s", r.Torch)
	}
	fmt.Fprintf(&md, ".\nEach cell is a fresh process; time: median timed pass per token (best thread configuration); memory: peak RSS minus the RSS before the model was built. Exponent: least-squares slope of log value on log T over T ≥ %d. Go/PyTorch: the ratio of the two sides.\n\n", fitMinT)
	for _, mode := range v.modes {
		for _, m := range costMetrics {
			fmt.Fprintf(&md, "## %s: %s, %s\n\n", mode, costModeTitle[mode], m.unit)
			v.table(&md, mode, m)
			fmt.Fprintln(&md)
		}
	}
	v.notes(&md)
	v.targets(&md)
	for _, mode := range v.modes {
		fmt.Fprintf(&md, "## Summary, %s (the README's table)\n\n", costModeTitle[mode])
		v.summary(&md, mode)
		fmt.Fprintln(&md)
	}
	if err := os.WriteFile(filepath.Join(dir, "table.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	png, err := v.plot()
	if err != nil {
		return err
	}
	if png != nil {
		if err := os.WriteFile(filepath.Join(dir, "cost.png"), png, 0o644); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, md.String())
	return err
}

// plot draws time and memory against T, log-log, one panel per mode and
// metric, a colour per encoding: Go solid, PyTorch dashed. It returns nil
// if no cell is ok.
func (v costView) plot() ([]byte, error) {
	var panels [][]viz.Series
	var titles []string
	any := false
	for _, mode := range v.modes {
		for _, m := range costMetrics {
			var ss []viz.Series
			for i, pos := range v.pos {
				for _, side := range []string{"go", "pytorch"} {
					x, y := v.series(pos, side, mode, m, 0)
					if len(x) == 0 {
						continue
					}
					st := viz.SeriesStyle(i)
					st.Dashes = nil
					name := ""
					if side == "pytorch" {
						st = viz.Style{Color: st.Color, Dashes: viz.SeriesStyle(1).Dashes}
					} else if len(panels) == 0 {
						name = pos // one legend, in the first panel
					}
					ss = append(ss, viz.Series{Name: name, X: x, Y: y, Style: &st})
					any = true
				}
			}
			panels = append(panels, ss)
			titles = append(titles, fmt.Sprintf("%s: %s", mode, m.unit))
		}
	}
	if !any {
		return nil, nil
	}
	png, err := viz.LogLogGrid(panels, titles, len(costMetrics), viz.LineOptions{
		Title:  "cost over T, batch 1 (solid: Go, dashed: PyTorch)",
		XLabel: "T (tokens)", XTicks: viz.Ints(v.seqs), LegendLeft: true,
		Width: 1100, Height: 60 + 450*len(v.modes),
	})
	return png, errors.WithMessage(err, "cost: plot")
}

// writeCostCSV writes one row per cell.
func writeCostCSV(r *costResults, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"mode", "encoding", "side", "T", "status", "stream", "threads", "warmup", "passes",
		"ms_per_token", "base_mib", "peak_mib", "added_mib", "loss", "seconds", "reason"})
	num := func(x float64, prec int) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'f', prec, 64)
	}
	for _, c := range r.Cells {
		cw.Write([]string{c.Mode, c.Pos, c.Side, strconv.Itoa(c.T), c.Status, strconv.FormatBool(c.Stream), c.Threads,
			strconv.Itoa(c.Warmup), strconv.Itoa(len(c.Times)), num(c.MsPerToken, 6), num(mib(c.BaseRSS), 1),
			num(mib(c.PeakRSS), 1), num(c.AddedMiB, 1), num(c.Loss, 4), num(c.Seconds, 1), c.Reason})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
