package timestudy

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"github.com/pkg/errors"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/graph"
)

// LoadModel returns the weights of job j of plan p from its checkpoint in
// the output directory, and the evaluation of its model at T events (for
// Attention and Evaluate). It returns an error if the job has not been
// trained.
func LoadModel(p Plan, opt Options, j Job) (*graph.Params, EvalSpec, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, EvalSpec{}, err
	}
	task, _, err := r.newTask(j)
	if err != nil {
		return nil, EvalSpec{}, err
	}
	js, _, err := r.jobs()
	if err != nil {
		return nil, EvalSpec{}, err
	}
	ckpt, err := js.CkptOf(j.Key())
	if err != nil {
		return nil, EvalSpec{}, err
	}
	params, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, EvalSpec{}, err
	}
	return params, task.EvalSpec(p.TrainLen()), nil
}

// Attention runs the model of s (weights p) on the first s.Length events
// of each sequence and returns the attention probabilities of block layer,
// [len(seqs)][H] matrices [Length, Length] (query row, key column), and
// the examples (their query and key times). It returns an error for a
// block that does not exist or a sequence shorter than s.Length.
func Attention(p *graph.Params, s EvalSpec, seqs []Sequence, layer int) ([][]viz.Matrix, []Example, error) {
	if layer < 0 || layer >= s.Model.Layers {
		return nil, nil, errors.Errorf("time attention: block %d does not exist (the model has %d)", layer, s.Model.Layers)
	}
	if len(seqs) == 0 {
		return nil, nil, errors.New("time attention: no sequences")
	}
	g := G.NewGraph()
	defer p.Forget(g)
	m, err := newModel(g, p, s.Model, len(seqs), s.Length, s.Time, s.Period)
	if err != nil {
		return nil, nil, err
	}
	exs, err := m.fill(seqs)
	if err != nil {
		return nil, nil, err
	}
	probs := m.lm.Blocks[layer].Attn.Probs() // [B, H, T, T]
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, nil, errors.Wrap(err, "time attention")
	}
	vals := graph.ToFloat64s(probs.Value())
	t, h := s.Length, s.Model.Heads
	out := make([][]viz.Matrix, len(seqs))
	for b := range out {
		out[b] = make([]viz.Matrix, h)
		for hh := range out[b] {
			o := (b*h + hh) * t * t
			if out[b][hh], err = viz.NewMatrix(t, t, append([]float64(nil), vals[o:o+t*t]...)); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, exs, nil
}

// SourceAttention returns, per head, the mean attention probability that a
// repeated event's query gives the key of its source (the key P earlier),
// over every repeated event of the examples: near 1 for a head that looks
// back exactly one bar. attn and exs are Attention's results of one block.
func SourceAttention(attn [][]viz.Matrix, exs []Example, seqs []Sequence) ([]float64, error) {
	if len(attn) != len(exs) || len(exs) != len(seqs) || len(attn) == 0 {
		return nil, errors.Errorf("time attention: %d attention sets, %d examples and %d sequences", len(attn), len(exs), len(seqs))
	}
	out := make([]float64, len(attn[0]))
	n := 0
	for b, e := range exs {
		for i, rep := range e.Repeat {
			if !rep {
				continue
			}
			key := seqs[b].Source[i] + 1 // the position holding the source's token
			for h := range out {
				out[h] += attn[b][h].At(i, key)
			}
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("time attention: no repeated event")
	}
	for h := range out {
		out[h] /= float64(n)
	}
	return out, nil
}

// AttentionByTime returns, per head, the attention mass by relative time
// key - query (the key's onset minus the query's), in bins of width bin
// from -span to 0, averaged over every query of the examples: a head that
// looks back one bar peaks at -P. The series are for viz.Lines (x: the
// bins' centres).
func AttentionByTime(attn [][]viz.Matrix, exs []Example, span, bin float64) ([]viz.Series, error) {
	if len(attn) != len(exs) || len(attn) == 0 {
		return nil, errors.Errorf("time attention: %d attention sets for %d examples", len(attn), len(exs))
	}
	if !(bin > 0) || !(span >= bin) {
		return nil, errors.Errorf("time attention: bins of %g over a span of %g: want 0 < bin <= span", bin, span)
	}
	nb := int(math.Ceil(span / bin))
	h := len(attn[0])
	mass := make([][]float64, h)
	for hh := range mass {
		mass[hh] = make([]float64, nb)
	}
	queries := 0
	for b, e := range exs {
		for i := range e.QTimes {
			queries++
			for j := 0; j <= i; j++ {
				d := e.KTimes[j] - e.QTimes[i]
				k := int(math.Floor((d + span) / bin))
				if k < 0 || k >= nb {
					continue
				}
				for hh := range mass {
					mass[hh][k] += attn[b][hh].At(i, j)
				}
			}
		}
	}
	out := make([]viz.Series, h)
	for hh := range out {
		x, y := make([]float64, nb), make([]float64, nb)
		for k := range x {
			x[k] = -span + (float64(k)+0.5)*bin
			y[k] = mass[hh][k] / float64(queries)
		}
		out[hh] = viz.Series{Name: fmt.Sprintf("head %d", hh), X: x, Y: y}
	}
	return out, nil
}

// DrawSequence draws the first n events of s on a time axis (x: onset, y:
// token), bar lines every period, new events as circles and repeats as
// filled triangles, each repeat linked to its source by a line; it returns
// the PNG (width x height pixels; 0: 1000 x 420).
func DrawSequence(s Sequence, n int, period float64, title string, width, height int) ([]byte, error) {
	if n < 1 || n > s.Len() {
		return nil, errors.Errorf("time sequence: %d events of a sequence of %d", n, s.Len())
	}
	if !(period > 0) {
		return nil, errors.Errorf("time sequence: period %g must be positive", period)
	}
	if width <= 0 || height <= 0 {
		width, height = 1000, 420
	}
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = "onset (time units)"
	pl.Y.Label.Text = "token"
	end := s.Times[n-1]
	for b := 0.0; b <= end+period; b += period {
		l, err := plotter.NewLine(plotter.XYs{{X: b, Y: -0.5}, {X: b, Y: float64(maxToken(s, n)) + 0.5}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = color.Gray{Y: 200}, vg.Points(0.7)
		pl.Add(l)
	}
	var fresh, reps plotter.XYs
	for i := 0; i < n; i++ {
		pt := plotter.XY{X: s.Times[i], Y: float64(s.Tokens[i])}
		m := s.Source[i]
		if m < 0 {
			fresh = append(fresh, pt)
			continue
		}
		reps = append(reps, pt)
		l, err := plotter.NewLine(plotter.XYs{{X: s.Times[m], Y: float64(s.Tokens[m])}, pt})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = viz.SeriesStyle(1).Color, vg.Points(0.8)
		pl.Add(l)
	}
	for _, set := range []struct {
		pts   plotter.XYs
		name  string
		style int
		shape draw.GlyphDrawer
	}{{fresh, "new event", 0, draw.CircleGlyph{}}, {reps, "repeat (linked to its source, P earlier)", 1, draw.TriangleGlyph{}}} {
		if len(set.pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(set.pts)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = viz.SeriesStyle(set.style).Color, set.shape, vg.Points(3.5)
		pl.Add(sc)
		pl.Legend.Add(set.name, sc)
	}
	pl.Legend.Top = true
	pl.X.Min, pl.X.Max = 0, end+period*0.05
	var buf bytes.Buffer
	wt, err := pl.WriterTo(vg.Length(width)*vg.Inch/100, vg.Length(height)*vg.Inch/100, "png")
	if err != nil {
		return nil, err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, errors.Wrap(err, "drawing the sequence")
	}
	return buf.Bytes(), nil
}

// maxToken is the largest token of the first n events.
func maxToken(s Sequence, n int) int {
	m := 0
	for _, t := range s.Tokens[:n] {
		m = max(m, t)
	}
	return m
}

// SourceHead returns the block and head of the model of s (weights p)
// whose queries of repeated events give their sources the most attention
// (SourceAttention over seqs), that share, and the attention of that block
// over seqs (Attention). Errors are Attention's and SourceAttention's.
func SourceHead(p *graph.Params, s EvalSpec, seqs []Sequence) (layer, head int, share float64, attn [][]viz.Matrix, err error) {
	share = -1
	for l := 0; l < s.Model.Layers; l++ {
		a, exs, err := Attention(p, s, seqs, l)
		if err != nil {
			return 0, 0, 0, nil, err
		}
		src, err := SourceAttention(a, exs, seqs)
		if err != nil {
			return 0, 0, 0, nil, err
		}
		for h, v := range src {
			if v > share {
				layer, head, share, attn = l, h, v, a
			}
		}
	}
	return layer, head, share, attn, nil
}
