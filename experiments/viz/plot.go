package viz

import (
	"bytes"
	"image/color"
	"math"
	"strconv"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Default figure sizes, in pixels.
const (
	DefaultWidth  = 560
	DefaultHeight = 420
)

// px converts pixels at vgimg's default 96 dpi to a vg length.
func px(n int) vg.Length { return vg.Length(n) * vg.Inch / vgimg.DefaultDPI }

// HeatmapOptions configures Heatmap and HeatmapGrid. Zero fields take the
// defaults.
type HeatmapOptions struct {
	Title, XLabel, YLabel string
	// Width and Height are the figure's size in pixels (default
	// DefaultWidth × DefaultHeight; HeatmapGrid's default height grows
	// with the number of rows).
	Width, Height int
	// Min and Max fix the colour range; both zero: the data's range. A
	// range with both signs is made symmetric about zero and drawn with a
	// diverging blue-white-red map; a one-signed range with a sequential
	// one (dark = low).
	Min, Max float64
	// BarLabel labels the colour bar.
	BarLabel string
}

// Heatmap draws m as a heat map with a colour bar and returns the PNG. It
// returns an error if m is malformed or holds no finite value.
func Heatmap(m Matrix, o HeatmapOptions) ([]byte, error) {
	return HeatmapGrid([]Matrix{m}, []string{o.Title}, 1, o)
}

// HeatmapGrid draws the matrices as small multiples, cols per row, titled
// by titles (which may be nil or shorter), sharing one colour range and
// one colour bar; o.Title is not drawn when there is more than one matrix.
// It returns the PNG, or an error if a matrix is malformed, cols is not
// positive, or no matrix holds a finite value.
func HeatmapGrid(ms []Matrix, titles []string, cols int, o HeatmapOptions) (png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, errors.Errorf("viz: heat map: gonum/plot panicked: %v", r)
		}
	}()
	if len(ms) == 0 || cols <= 0 {
		return nil, errors.Errorf("viz: heat map grid of %d matrices in %d columns", len(ms), cols)
	}
	for i, m := range ms {
		if err := m.check(); err != nil {
			return nil, errors.WithMessagef(err, "matrix %d", i)
		}
	}
	cols = min(cols, len(ms))
	rows := (len(ms) + cols - 1) / cols
	lo, hi := o.Min, o.Max
	if lo == 0 && hi == 0 {
		lo, hi = Range(ms...)
	}
	if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi {
		return nil, errors.Errorf("viz: heat map: no finite values (range %g..%g)", lo, hi)
	}
	cmap, lo, hi := colorMap(lo, hi)
	pal := cmap.Palette(255)

	w, h := o.Width, o.Height
	if w <= 0 {
		w = DefaultWidth
	}
	if h <= 0 {
		h = DefaultHeight
		if rows > 1 {
			h = 60 + rows*DefaultHeight*2/3
		}
	}
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
		for c := range plots[r] {
			i := r*cols + c
			p := plot.New()
			plots[r][c] = p
			if i >= len(ms) {
				p.HideAxes()
				continue
			}
			if i < len(titles) {
				p.Title.Text = titles[i]
			}
			if len(ms) == 1 {
				p.Title.Text = o.Title
			}
			p.X.Label.Text, p.Y.Label.Text = o.XLabel, o.YLabel
			hm := plotter.NewHeatMap(grid{ms[i]}, pal)
			hm.Min, hm.Max = lo, hi
			hm.NaN = color.Gray{Y: 225}
			hm.Underflow, hm.Overflow = pal.Colors()[0], pal.Colors()[len(pal.Colors())-1]
			p.Add(hm)
			p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, flippedTicks{}
			p.X.Min, p.X.Max = ms[i].X0-0.5, ms[i].X0+float64(ms[i].Cols)-0.5
			p.Y.Min, p.Y.Max = -(ms[i].Y0 + float64(ms[i].Rows) - 0.5), -(ms[i].Y0 - 0.5)
		}
	}

	img := vgimg.New(px(w), px(h))
	dc := draw.New(img)
	barW := px(90)
	main := draw.Crop(dc, 0, -barW, 0, 0)
	// The data areas' vertical extent, to align the colour bar with.
	top, bottom := main.Max.Y, main.Min.Y
	if len(ms) > 1 {
		tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: px(10), PadY: px(10), PadTop: px(6), PadRight: px(6), PadBottom: px(4), PadLeft: px(4)}
		canvases := plot.Align(plots, tiles, main)
		for r := range plots {
			for c := range plots[r] {
				if r*cols+c < len(ms) {
					plots[r][c].Draw(canvases[r][c])
				}
			}
		}
		top = plots[0][0].DataCanvas(canvases[0][0]).Max.Y
		bottom = plots[rows-1][0].DataCanvas(canvases[rows-1][0]).Min.Y
	} else {
		c := draw.Crop(main, px(4), 0, px(4), -px(6))
		plots[0][0].Draw(c)
		d := plots[0][0].DataCanvas(c)
		top, bottom = d.Max.Y, d.Min.Y
	}

	bar := plot.New()
	cb := &plotter.ColorBar{ColorMap: cmap, Vertical: true, Colors: 255}
	bar.Add(cb)
	bar.HideX()
	bar.Y.Label.Text = o.BarLabel
	bar.Y.Min, bar.Y.Max = lo, hi
	bar.Y.Tick.Marker = niceTicks{}
	full := draw.Crop(dc, px(w)-barW+px(20), -px(8), 0, 0)
	inner := bar.DataCanvas(full)
	full.Min.Y = bottom - (inner.Min.Y - full.Min.Y)
	full.Max.Y = top + (full.Max.Y - inner.Max.Y)
	bar.Draw(full)

	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, errors.Wrap(err, "viz: encoding the PNG")
	}
	return buf.Bytes(), nil
}

// colorMap returns the colour map for the range lo..hi and the range it
// covers: diverging and symmetric about 0 if lo < 0 < hi, else sequential.
func colorMap(lo, hi float64) (palette.ColorMap, float64, float64) {
	if lo < 0 && hi > 0 {
		a := math.Max(-lo, hi)
		cm := moreland.SmoothBlueRed()
		cm.SetMin(-a)
		cm.SetMax(a)
		return cm, -a, a
	}
	cm := moreland.Kindlmann()
	if lo == hi {
		cm.SetMin(lo - 0.5)
		cm.SetMax(hi + 0.5)
		return cm, lo - 0.5, hi + 0.5
	}
	cm.SetMin(lo)
	cm.SetMax(hi)
	return cm, lo, hi
}

// grid adapts a Matrix to plotter.GridXYZ, with y negated so that row 0 is
// drawn on top (flippedTicks labels the axis with the positive values).
type grid struct{ m Matrix }

func (g grid) Dims() (c, r int)   { return g.m.Cols, g.m.Rows }
func (g grid) Z(c, r int) float64 { return g.m.At(r, c) }
func (g grid) X(c int) float64    { return g.m.X0 + float64(c) }
func (g grid) Y(r int) float64    { return -(g.m.Y0 + float64(r)) }

// niceTicks is plot.DefaultTicks with labels in the shortest form ("250",
// "0.05", "-2.5" instead of "250.00", "0.05", "-2.50").
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// logTicks marks a log axis: labelled ticks at the powers of ten, labelled
// "0.001", "1e-05" (exact, unlike plot.LogTicks's products), unlabelled ones
// at 2..9 times them.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) {
		return nil
	}
	var ts []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		for i := 1; i < 10; i++ {
			v := float64(i) * math.Pow10(k)
			if v < lo*(1-1e-12) || v > hi*(1+1e-12) {
				continue
			}
			t := plot.Tick{Value: v}
			if i == 1 {
				t.Label = strconv.FormatFloat(math.Pow10(k), 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// fixedTicks puts a labelled tick at each of its values.
type fixedTicks []float64

func (f fixedTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := make([]plot.Tick, len(f))
	for i, v := range f {
		ts[i] = plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)}
	}
	return ts
}

// flippedTicks labels a negated axis with the values before negation.
type flippedTicks struct{}

func (flippedTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := niceTicks{}.Ticks(-hi, -lo)
	for i := range ts {
		ts[i].Value = -ts[i].Value
	}
	return ts
}

// Series is one curve of a line plot: Y[i] at X[i].
type Series struct {
	Name string
	X, Y []float64
	// Points draws markers only (a scatter plot), Step a staircase
	// (the value holds until the next x) instead of straight segments.
	Points, Step bool
	// Style, if set, replaces SeriesStyle(i) for this series (e.g. two
	// series of one colour, one solid and one dashed).
	Style *Style
	// Lo and Hi, if set (both, one per point), draw each point's interval
	// [Lo[k], Hi[k]] as an error bar (a 95% interval over seeds).
	Lo, Hi []float64
}

// LineOptions configures Lines. Zero fields take the defaults.
type LineOptions struct {
	Title, XLabel, YLabel string
	// Width and Height are the figure's size in pixels (default
	// DefaultWidth × DefaultHeight).
	Width, Height int
	// LogY draws the y axis on a log scale (every value must be positive),
	// LogX the x axis.
	LogY, LogX bool
	// XTicks, if set, are the only ticks of the x axis, each labelled with
	// its value (e.g. the measured sequence lengths on a log axis).
	XTicks []float64
	// Diagonal adds the line y = x over the data's x range (for comparing
	// two quantities that should agree, as in a gradient check).
	Diagonal bool
	// LegendLeft and LegendBottom move the legend from the top right
	// corner to the left, the bottom, or the bottom left.
	LegendLeft, LegendBottom bool
}

// Lines draws the series on shared axes, series i in SeriesStyle(i), with a
// legend if any series is named, and returns the PNG. It returns an error if there is no series, a
// series' X and Y differ in length or hold a NaN or an infinity, or a value
// is not positive on a log y axis (or, with Diagonal, an x value).
func Lines(series []Series, o LineOptions) (png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, errors.Errorf("viz: line plot: gonum/plot panicked: %v", r)
		}
	}()
	p, err := linePlot(series, o)
	if err != nil {
		return nil, err
	}
	w, h := o.Width, o.Height
	if w <= 0 {
		w = DefaultWidth
	}
	if h <= 0 {
		h = DefaultHeight
	}
	wt, err := p.WriterTo(px(w), px(h), "png")
	if err != nil {
		return nil, errors.Wrap(err, "viz: rendering the line plot")
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, errors.Wrap(err, "viz: encoding the PNG")
	}
	return buf.Bytes(), nil
}

// LineGrid draws small multiples of line plots, cols per row: panel i
// holds panels[i] on its own axes (Lines' rules for each), titled by
// titles[i]. An empty panel is drawn as its title alone (a figure that does
// not apply). o's labels, LogY and legend placement apply to every panel;
// o.Width and o.Height are the whole figure's size (default DefaultWidth
// wide and DefaultHeight*2/3 per row). It returns the PNG, or an error if
// cols is not positive, no panel holds a series, or a panel's series
// breaks Lines' rules (the error names the panel).
func LineGrid(panels [][]Series, titles []string, cols int, o LineOptions) (png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, errors.Errorf("viz: line grid: gonum/plot panicked: %v", r)
		}
	}()
	if cols <= 0 || len(panels) == 0 {
		return nil, errors.Errorf("viz: line grid of %d panels in %d columns", len(panels), cols)
	}
	cols = min(cols, len(panels))
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	some := false
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
		for c := range plots[r] {
			i := r*cols + c
			var p *plot.Plot
			if i < len(panels) && len(panels[i]) > 0 {
				po := o
				po.Title = ""
				if p, err = linePlot(panels[i], po); err != nil {
					return nil, errors.WithMessagef(err, "panel %d", i)
				}
				some = true
			} else {
				p = plot.New()
				p.HideAxes()
			}
			if i < len(titles) {
				p.Title.Text = titles[i]
			}
			plots[r][c] = p
		}
	}
	if !some {
		return nil, errors.New("viz: line grid without any series")
	}
	w, h := o.Width, o.Height
	if w <= 0 {
		w = DefaultWidth
	}
	if h <= 0 {
		h = 40 + rows*DefaultHeight*2/3
	}
	img := vgimg.New(px(w), px(h))
	dc := draw.New(img)
	if o.Title != "" {
		t := plot.New()
		t.Title.Text = o.Title
		t.HideAxes()
		t.Draw(draw.Crop(dc, 0, 0, dc.Max.Y-dc.Min.Y-px(30), 0))
		dc = draw.Crop(dc, 0, 0, 0, -px(30))
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: px(14), PadY: px(10), PadTop: px(6), PadRight: px(6), PadBottom: px(4), PadLeft: px(4)}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, errors.Wrap(err, "viz: encoding the PNG")
	}
	return buf.Bytes(), nil
}

// linePlot builds the plot Lines draws.
func linePlot(series []Series, o LineOptions) (*plot.Plot, error) {
	if len(series) == 0 {
		return nil, errors.New("viz: line plot without series")
	}
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = o.Title, o.XLabel, o.YLabel
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
	if o.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	if o.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if len(o.XTicks) > 0 {
		p.X.Tick.Marker = fixedTicks(o.XTicks)
	}
	named := false
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return nil, errors.Errorf("viz: series %d %q has %d x and %d y values", i, s.Name, len(s.X), len(s.Y))
		}
		xy := make(plotter.XYs, len(s.X))
		for k := range s.X {
			if o.LogY && !(s.Y[k] > 0) {
				return nil, errors.Errorf("viz: series %d %q: y[%d] = %g on a log axis", i, s.Name, k, s.Y[k])
			}
			if o.LogX && !(s.X[k] > 0) {
				return nil, errors.Errorf("viz: series %d %q: x[%d] = %g on a log axis", i, s.Name, k, s.X[k])
			}
			xy[k].X, xy[k].Y = s.X[k], s.Y[k]
			xlo, xhi = math.Min(xlo, s.X[k]), math.Max(xhi, s.X[k])
		}
		st := SeriesStyle(i)
		if s.Style != nil {
			st = *s.Style
		}
		var thumbs []plot.Thumbnailer
		if s.Points {
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, errors.Wrapf(err, "viz: series %d %q", i, s.Name)
			}
			sc.GlyphStyle.Color = st.Color
			sc.GlyphStyle.Shape = st.Shape
			sc.GlyphStyle.Radius = vg.Points(2.5)
			p.Add(sc)
			thumbs = append(thumbs, sc)
		} else {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, errors.Wrapf(err, "viz: series %d %q", i, s.Name)
			}
			l.LineStyle.Color = st.Color
			l.LineStyle.Width = vg.Points(1.5)
			l.LineStyle.Dashes = st.Dashes
			if s.Step {
				l.StepStyle = plotter.PostStep
			}
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		if s.Lo != nil || s.Hi != nil {
			if len(s.Lo) != len(s.X) || len(s.Hi) != len(s.X) {
				return nil, errors.Errorf("viz: series %d %q has %d points and %d/%d interval bounds", i, s.Name, len(s.X), len(s.Lo), len(s.Hi))
			}
			errs := make(plotter.YErrors, len(s.X))
			for k := range s.X {
				if !(s.Lo[k] <= s.Y[k] && s.Y[k] <= s.Hi[k]) {
					return nil, errors.Errorf("viz: series %d %q: point %d, %g outside its interval [%g, %g]", i, s.Name, k, s.Y[k], s.Lo[k], s.Hi[k])
				}
				errs[k].Low, errs[k].High = s.Y[k]-s.Lo[k], s.Hi[k]-s.Y[k]
			}
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{xy, errs})
			if err != nil {
				return nil, errors.Wrapf(err, "viz: series %d %q", i, s.Name)
			}
			eb.Color, eb.CapWidth = st.Color, vg.Points(4)
			p.Add(eb)
		}
		if s.Name != "" {
			named = true
			p.Legend.Add(s.Name, thumbs...)
		}
	}
	if o.Diagonal {
		if o.LogY && !(xlo > 0) {
			return nil, errors.Errorf("viz: the diagonal y = x on a log axis needs positive x, the smallest is %g", xlo)
		}
		d, err := plotter.NewLine(plotter.XYs{{X: xlo, Y: xlo}, {X: xhi, Y: xhi}})
		if err != nil {
			return nil, errors.Wrap(err, "viz: diagonal")
		}
		d.LineStyle.Color = color.Gray{Y: 120}
		d.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(d)
		p.Legend.Add("y = x", d)
		named = true
	}
	// A log axis over one value (gonum/plot would pad it by ±1, below
	// zero for a value under 1): a factor of 2 either side.
	for _, ax := range []struct {
		log bool
		a   *plot.Axis
	}{{o.LogX, &p.X}, {o.LogY, &p.Y}} {
		if ax.log && ax.a.Min == ax.a.Max {
			ax.a.Min, ax.a.Max = ax.a.Min/2, ax.a.Max*2
		}
	}
	if named {
		p.Legend.Top = !o.LegendBottom
		p.Legend.Left = o.LegendLeft
		p.Legend.XOffs = -px(6)
		if o.LegendLeft {
			p.Legend.XOffs = px(6)
		}
	}
	return p, nil
}

// Ints returns the integers as float64 (for Series.X and Series.Y).
func Ints(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// IntRange returns start, start+1, ..., end (inclusive) as float64, for the
// x values of a curve over distances (nil if end < start).
func IntRange(start, end int) []float64 {
	if end < start {
		return nil
	}
	return seq(float64(start), end-start+1)
}

// LogLogGrid draws small multiples of log-log line plots (LineGrid with
// o.LogX and o.LogY set), for quantities that grow as a power of x: a
// power law y = c·x^k is a straight line of slope k. Panels, titles, cols
// and o are as for LineGrid; every x and y value must be positive. Name the
// series of one panel only to draw a single legend.
func LogLogGrid(panels [][]Series, titles []string, cols int, o LineOptions) ([]byte, error) {
	o.LogX, o.LogY = true, true
	return LineGrid(panels, titles, cols, o)
}
