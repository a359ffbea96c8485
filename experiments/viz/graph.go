package viz

import (
	"bytes"
	"image/color"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// GraphOptions configures DrawGraph. Zero fields take the defaults.
type GraphOptions struct {
	Title string
	// Width and Height are the figure's size in pixels (default
	// DefaultHeight × DefaultHeight).
	Width, Height int
	// Values, if not nil, colours node i by Values[i] (len = the nodes;
	// NaN: grey), with the heat maps' colour maps (diverging for a range
	// with both signs) and a colour bar labelled BarLabel.
	Values   []float64
	BarLabel string
	// Labels, if not nil, writes Labels[i] next to node i (default: the
	// node's index).
	Labels []string
	// Highlight, if in range, draws node Highlight with a thick black ring
	// (the marked or query node).
	Highlight int
	// Seed seeds the layout (the same seed, the same picture).
	Seed uint64
}

// Layout places the n nodes of an undirected graph in the unit square by
// Fruchterman & Reingold's force-directed algorithm (1991: adjacent nodes
// attract, all pairs repel, with a cooling step), from seeded random
// starting points, so that the same graph and seed give the same layout.
// It returns x and y [n]; an edge with an end outside [0, n) is an error.
func Layout(n int, edges [][2]int, seed uint64) (x, y []float64, err error) {
	if n < 0 {
		return nil, nil, errors.Errorf("viz: layout of %d nodes", n)
	}
	for _, e := range edges {
		if e[0] < 0 || e[0] >= n || e[1] < 0 || e[1] >= n {
			return nil, nil, errors.Errorf("viz: edge %v of a graph of %d nodes", e, n)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c61796f7574))
	x, y = make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = rng.Float64(), rng.Float64()
	}
	if n < 2 {
		return x, y, nil
	}
	k := math.Sqrt(1 / float64(n)) // ideal edge length in the unit square
	dx, dy := make([]float64, n), make([]float64, n)
	const iters = 300
	for it := 0; it < iters; it++ {
		temp := 0.1 * (1 - float64(it)/iters)
		clear(dx)
		clear(dy)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				ex, ey := x[i]-x[j], y[i]-y[j]
				d := math.Max(math.Hypot(ex, ey), 1e-4)
				f := k * k / d // repulsion
				dx[i], dy[i] = dx[i]+ex/d*f, dy[i]+ey/d*f
				dx[j], dy[j] = dx[j]-ex/d*f, dy[j]-ey/d*f
			}
		}
		for _, e := range edges {
			i, j := e[0], e[1]
			ex, ey := x[i]-x[j], y[i]-y[j]
			d := math.Max(math.Hypot(ex, ey), 1e-4)
			f := d * d / k // attraction
			dx[i], dy[i] = dx[i]-ex/d*f, dy[i]-ey/d*f
			dx[j], dy[j] = dx[j]+ex/d*f, dy[j]+ey/d*f
		}
		for i := range x {
			d := math.Max(math.Hypot(dx[i], dy[i]), 1e-9)
			step := math.Min(d, temp)
			x[i] += dx[i] / d * step
			y[i] += dy[i] / d * step
		}
	}
	return x, y, nil
}

// DrawGraph draws an undirected graph of n nodes (edges as node pairs) as a
// node-link diagram laid out by Layout, nodes coloured by o.Values if set,
// and returns the PNG (the title's second line gives the colour scale). It returns an error for an edge outside the graph,
// Values or Labels of the wrong length, or no node.
func DrawGraph(n int, edges [][2]int, o GraphOptions) (png []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			png, err = nil, errors.Errorf("viz: graph drawing: gonum/plot panicked: %v", r)
		}
	}()
	if n < 1 {
		return nil, errors.New("viz: drawing a graph with no nodes")
	}
	if o.Values != nil && len(o.Values) != n {
		return nil, errors.Errorf("viz: %d node values for %d nodes", len(o.Values), n)
	}
	if o.Labels != nil && len(o.Labels) != n {
		return nil, errors.Errorf("viz: %d node labels for %d nodes", len(o.Labels), n)
	}
	x, y, err := Layout(n, edges, o.Seed)
	if err != nil {
		return nil, err
	}
	p := plot.New()
	p.Title.Text = o.Title
	p.HideAxes()
	for _, e := range edges {
		l, err := plotter.NewLine(plotter.XYs{{X: x[e[0]], Y: y[e[0]]}, {X: x[e[1]], Y: y[e[1]]}})
		if err != nil {
			return nil, errors.Wrap(err, "viz: edge")
		}
		l.LineStyle.Color = color.Gray{Y: 140}
		l.LineStyle.Width = vg.Points(1.2)
		p.Add(l)
	}
	fill := func(int) color.Color { return color.RGBA{R: 120, G: 160, B: 210, A: 255} }
	if o.Values != nil {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range o.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if lo > hi {
			return nil, errors.New("viz: no finite node value")
		}
		if lo == hi {
			lo, hi = lo-1, hi+1
		}
		cm, lo2, hi2 := colorMap(lo, hi)
		fill = func(i int) color.Color {
			v := o.Values[i]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return color.Gray{Y: 210}
			}
			c, err := cm.At(math.Min(math.Max(v, lo2), hi2))
			if err != nil {
				return color.Gray{Y: 210}
			}
			return c
		}
		scale := "dark " + fmtG(lo2) + " … light " + fmtG(hi2)
		if lo2 < 0 && hi2 > 0 {
			scale = "blue " + fmtG(lo2) + " … white 0 … red " + fmtG(hi2)
		}
		p.Title.Text += "\n" + o.BarLabel + ": " + scale
	}
	xy := make(plotter.XYs, n)
	for i := range xy {
		xy[i].X, xy[i].Y = x[i], y[i]
	}
	sc, err := plotter.NewScatter(xy)
	if err != nil {
		return nil, errors.Wrap(err, "viz: nodes")
	}
	sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
		return draw.GlyphStyle{Color: fill(i), Shape: draw.CircleGlyph{}, Radius: vg.Points(9)}
	}
	p.Add(sc)
	if o.Highlight >= 0 && o.Highlight < n {
		ring, err := plotter.NewScatter(plotter.XYs{xy[o.Highlight]})
		if err != nil {
			return nil, errors.Wrap(err, "viz: highlight")
		}
		ring.GlyphStyle = draw.GlyphStyle{Color: color.Black, Shape: draw.RingGlyph{}, Radius: vg.Points(11)}
		p.Add(ring)
	}
	labels := make([]string, n)
	for i := range labels {
		if o.Labels != nil {
			labels[i] = o.Labels[i]
		} else {
			labels[i] = strconv.Itoa(i)
		}
	}
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
	if err != nil {
		return nil, errors.Wrap(err, "viz: labels")
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].XAlign, lb.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		lb.TextStyle[i].Font.Size = vg.Points(8)
	}
	p.Add(lb)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = minOf(x)-0.08, maxOf(x)+0.08, minOf(y)-0.08, maxOf(y)+0.08
	w, h := o.Width, o.Height
	if w <= 0 {
		w = DefaultHeight
	}
	if h <= 0 {
		h = DefaultHeight
	}
	wt, err := p.WriterTo(px(w), px(h), "png")
	if err != nil {
		return nil, errors.Wrap(err, "viz: rendering the graph")
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, errors.Wrap(err, "viz: encoding the PNG")
	}
	return buf.Bytes(), nil
}

func fmtG(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
