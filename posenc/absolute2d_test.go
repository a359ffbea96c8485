package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// runInput2D runs enc's input hook on x [b, pos.TQ, d] (random, seeded) at
// pos with the parameters of p, and returns x and the output.
func runInput2D(t *testing.T, enc posenc.Encoding, p *graph.Params, pos *posenc.Positions, b, d int, seed int64) (x, y []float64, err error) {
	t.Helper()
	g := G.NewGraph()
	tt := 1
	if pos != nil {
		tt = pos.TQ
	}
	rng := rand.New(rand.NewSource(seed))
	x = make([]float64, b*tt*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("x"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, x)))
	s := &posenc.Site{G: g, Params: p, Layer: -1, B: b, H: 1, DHead: d, DModel: d, Span: posenc.Span{TQ: tt, TK: tt}, Pos: pos}
	out, err := enc.(posenc.InputAdder).AddToInput(s, xn)
	if err != nil {
		return nil, nil, err
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return x, graph.ToFloat64s(out.Value()), nil
}

func TestResampleWeights(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		in, out int
		want    []float64 // [out, in]; nil: only the general checks
	}{
		// src = (i+0.5)/2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (upper tap clamped)
		{"bilinear", 2, 4, []float64{1, 0, 0.75, 0.25, 0.25, 0.75, 0, 1}},
		// src = 0.5, 2.5: halfway
		{"bilinear", 4, 2, []float64{0.5, 0.5, 0, 0, 0, 0, 0.5, 0.5}},
		// one input sample: every output copies it
		{"bicubic", 1, 3, []float64{1, 1, 1}},
		// src = 0.5 and 2.5: Keys' weights at t = 1/2 with A = -0.75 are
		// -0.09375, 0.59375, 0.59375, -0.09375; the tap at -1 clamps onto 0
		{"bicubic", 4, 2, []float64{0.5, 0.59375, -0.09375, 0, 0, -0.09375, 0.59375, 0.5}},
		{"bilinear", 3, 3, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1}},
		{"bicubic", 3, 3, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1}},
		{"bilinear", 7, 14, nil},
		{"bicubic", 7, 14, nil},
		{"bicubic", 14, 5, nil},
	} {
		w, err := posenc.ResampleWeights(tc.mode, tc.in, tc.out)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < tc.out; i++ {
			sum := 0.0
			for _, v := range w[i*tc.in : (i+1)*tc.in] {
				sum += v
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("%s %d->%d: row %d sums to %v, want 1", tc.mode, tc.in, tc.out, i, sum)
			}
		}
		for i, v := range tc.want {
			if math.Abs(w[i]-v) > 1e-15 {
				t.Fatalf("%s %d->%d: weights %v, want %v", tc.mode, tc.in, tc.out, w, tc.want)
			}
		}
	}
	for _, bad := range []struct {
		mode    string
		in, out int
	}{{"nearest", 2, 3}, {"bilinear", 0, 3}, {"bicubic", 2, -1}} {
		if _, err := posenc.ResampleWeights(bad.mode, bad.in, bad.out); err == nil {
			t.Errorf("ResampleWeights(%q, %d, %d) accepted", bad.mode, bad.in, bad.out)
		}
	}
	if _, err := posenc.ResampleMatrix("none", 2, 2, 3, 3); err == nil {
		t.Error("ResampleMatrix with mode none accepted")
	}
}

// TestResampleMatrixIsKron: M[i*C'+j, a*C+b] = Wrow[i, a]·Wcol[j, b] on a
// non-square grid (a row/column mix-up would change the shape or values).
func TestResampleMatrixIsKron(t *testing.T) {
	const r, c, r2, c2 = 3, 5, 4, 2
	m, err := posenc.ResampleMatrix("bicubic", r, c, r2, c2)
	if err != nil {
		t.Fatal(err)
	}
	wr, _ := posenc.ResampleWeights("bicubic", r, r2)
	wc, _ := posenc.ResampleWeights("bicubic", c, c2)
	if len(m) != r2*c2*r*c {
		t.Fatalf("%d entries, want %d", len(m), r2*c2*r*c)
	}
	for i := 0; i < r2; i++ {
		for j := 0; j < c2; j++ {
			for a := 0; a < r; a++ {
				for b := 0; b < c; b++ {
					if got, want := m[(i*c2+j)*r*c+a*c+b], wr[i*r+a]*wc[j*c+b]; got != want {
						t.Fatalf("M[(%d,%d), (%d,%d)] = %v, want %v", i, j, a, b, got, want)
					}
				}
			}
		}
	}
}

// TestLearned2DRows: on its own grid, the token at (r, c) gets row
// r*Cols + c, whatever the token order.
func TestLearned2DRows(t *testing.T) {
	const rows, cols, d = 3, 4, 2
	enc, err := posenc.New("learned-2d", posenc.Options{GridRows: rows, GridCols: cols})
	if err != nil {
		t.Fatal(err)
	}
	p := graph.NewParams(tensor.Float64, 1)
	tab := make([]float64, rows*cols*d)
	for i := range tab {
		tab[i] = float64(100 * i)
	}
	coords := []int{2, 3, 0, 0, 1, 2, 0, 3, 2, 0} // 5 tokens, shuffled
	pos, err := posenc.NewGridCoords([]int{rows, cols}, coords, coords)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runInput2D(t, enc, p, pos, 1, d, 1); err != nil { // creates the table
		t.Fatal(err)
	}
	if err := p.Set("pos_emb_2d", tab); err != nil {
		t.Fatal(err)
	}
	if info, _ := p.Info("pos_emb_2d"); info.Decay {
		t.Error("pos_emb_2d is weight-decayed")
	}
	x, y, err := runInput2D(t, enc, p, pos, 2, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		for i := 0; i < pos.TQ; i++ {
			row := coords[2*i]*cols + coords[2*i+1]
			for j := 0; j < d; j++ {
				k := (b*pos.TQ+i)*d + j
				if got, want := y[k]-x[k], tab[row*d+j]; math.Abs(got-want) > 1e-9 {
					t.Fatalf("example %d token %d at (%d, %d) channel %d: added %v, want row %d's %v", b, i, coords[2*i], coords[2*i+1], j, got, row, want)
				}
			}
		}
	}
}

func TestLearned2DErrors(t *testing.T) {
	enc, err := posenc.New("learned-2d", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	grid14, _ := posenc.NewGrid(14, 14)
	grid3d, _ := posenc.NewGridCoords([]int{7, 7, 2}, []int{0, 0, 0, 1, 2, 1}, []int{0, 0, 0, 1, 2, 1})
	real, _ := posenc.NewReal(1, []float64{0, 1}, []float64{0, 1})
	for _, tc := range []struct {
		label string
		pos   *posenc.Positions
		want  string
	}{
		{"other grid", grid14, "posenc learned-2d: table is 7x7, the input grid is 14x14; set -grid-resample bilinear or bicubic"},
		{"3-D grid", grid3d, "posenc learned-2d: needs 2-D grid positions"},
		{"line", nil, "posenc learned-2d: needs grid positions, got line positions"},
		{"real", real, "posenc learned-2d: needs grid positions, got real positions"},
	} {
		_, _, err := runInput2D(t, enc, graph.NewParams(tensor.Float64, 1), tc.pos, 1, 4, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.label, err, tc.want)
		}
	}
	for _, o := range []posenc.Options{{GridResample: "nearest"}, {GridRows: -1}, {InitStd: -1}} {
		if _, err := posenc.New("learned-2d", o); err == nil || !strings.Contains(err.Error(), "learned-2d") {
			t.Errorf("options %+v: error %v", o, err)
		}
	}
	// Through the ViT: a model trained on 3x4 evaluated on 4x3 without resampling.
	g := G.NewGraph()
	m, err := layers.NewViT(g, graph.NewParams(tensor.Float64, 1), tinyViT("learned-2d", posenc.Options{GridRows: 3, GridCols: 4}))
	if err != nil {
		t.Fatal(err)
	}
	in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 12, m.Cfg.PatchDim()), G.WithName("patches"), G.WithInit(G.Zeroes()))
	if _, err := m.Fwd(in, 4, 3); err == nil || !strings.Contains(err.Error(), "table is 3x4, the input grid is 4x3") {
		t.Errorf("ViT on another grid: %v", err)
	}
}

// TestLearned2DResampleGrad gradient-checks a ViT whose 3x4 table is
// resampled to other grids (bicubic: rows and columns up, then down;
// bilinear: rows up and columns down),
// and one attention-free input hook on shuffled coordinates of a resampled
// grid, w.r.t. the input and the table.
func TestLearned2DResampleGrad(t *testing.T) {
	for mode, grids := range map[string][][2]int{"bilinear": {{4, 2}}, "bicubic": {{5, 6}, {2, 3}}} {
		o := harnessOptions()
		o.GridResample = mode
		for _, g := range grids {
			checkGridGrad(t, "learned-2d", o, g[0], g[1])
		}
		enc, err := posenc.New("learned-2d", o)
		if err != nil {
			t.Fatal(err)
		}
		gr := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		coords := []int{4, 1, 0, 0, 2, 4, 1, 3}
		pos, _ := posenc.NewGridCoords([]int{5, 5}, coords, coords)
		x := G.NewTensor(gr, tensor.Float64, 3, G.WithShape(2, 4, 3), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
		s := &posenc.Site{G: gr, Params: p, Layer: -1, B: 2, H: 1, DHead: 3, DModel: 3, Span: posenc.Span{TQ: 4, TK: 4}, Pos: pos}
		y, err := enc.(posenc.InputAdder).AddToInput(s, x)
		if err != nil {
			t.Fatal(err)
		}
		w := G.NewTensor(gr, tensor.Float64, 3, G.WithShape(2, 4, 3), G.WithName("w"), G.WithInit(G.Gaussian(0, 1)))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, w))))
		randomizeParams(p, rand.New(rand.NewSource(3)))
		if err := graph.GradCheck(gr, loss, append(G.Nodes{x}, p.Nodes(gr)...), graph.GradCheckOpts{Seed: 6}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
	}
}

// TestSinusoid2DTable checks the MAE layout against the formula for d = 8
// (ω = 1, 1/100): [sin c, sin c/100, cos c, cos c/100, sin r, sin r/100,
// cos r, cos r/100].
func TestSinusoid2DTable(t *testing.T) {
	coords := []int{0, 0, 2, 5, 7, 1}
	tab, err := posenc.Sinusoid2DTable(coords, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r, c := float64(coords[2*i]), float64(coords[2*i+1])
		want := []float64{math.Sin(c), math.Sin(c / 100), math.Cos(c), math.Cos(c / 100),
			math.Sin(r), math.Sin(r / 100), math.Cos(r), math.Cos(r / 100)}
		for j, w := range want {
			if got := tab[i*8+j]; math.Abs(got-w) > 1e-15 {
				t.Fatalf("PE(%v, %v)[%d] = %v, want %v", r, c, j, got, w)
			}
		}
	}
	for _, d := range []int{0, 2, 6, 10} {
		if _, err := posenc.Sinusoid2DTable(coords, d); err == nil || !strings.Contains(err.Error(), "multiple of 4") {
			t.Errorf("d=%d: error %v", d, err)
		}
	}
	if _, err := posenc.Sinusoid2DTable([]int{1, 2, 3}, 4); err == nil {
		t.Error("an odd number of coordinates was accepted")
	}
}

// TestSinusoidal2DAdds: the hook adds Scale·PE (default 1/√d), depends only
// on the coordinates (a cell of a larger grid gets the same row: the table
// extrapolates), and refuses d not divisible by 4 and other positions.
func TestSinusoidal2DAdds(t *testing.T) {
	small, _ := posenc.NewGrid(2, 3)
	big, _ := posenc.NewGrid(9, 11)
	for _, tc := range []struct{ scale, want float64 }{{0, 1 / math.Sqrt(8)}, {1, 1}, {0.25, 0.25}} {
		enc, err := posenc.New("sinusoidal-2d", posenc.Options{SinusoidalScale: tc.scale})
		if err != nil {
			t.Fatal(err)
		}
		for _, pos := range []*posenc.Positions{small, big} {
			x, y, err := runInput2D(t, enc, graph.NewParams(tensor.Float64, 1), pos, 2, 8, 5)
			if err != nil {
				t.Fatal(err)
			}
			pe, _ := posenc.Sinusoid2DTable(pos.QCoords, 8)
			for b := 0; b < 2; b++ {
				for i := 0; i < pos.TQ; i++ {
					for j := 0; j < 8; j++ {
						k := (b*pos.TQ+i)*8 + j
						if got, want := y[k]-x[k], tc.want*pe[i*8+j]; math.Abs(got-want) > 1e-12 {
							t.Fatalf("scale %v, %s, token %d channel %d: added %v, want %v", tc.scale, pos.Describe(), i, j, got, want)
						}
					}
				}
			}
		}
		ps, _ := posenc.Sinusoid2DTable(small.QCoords, 8)
		pb, _ := posenc.Sinusoid2DTable(big.QCoords, 8)
		for i := 0; i < small.TQ; i++ {
			bi := (i/3)*11 + i%3
			for j := 0; j < 8; j++ {
				if ps[i*8+j] != pb[bi*8+j] {
					t.Fatalf("cell %d of the 2x3 grid and cell %d of the 9x11 grid differ", i, bi)
				}
			}
		}
	}
	enc, _ := posenc.New("sinusoidal-2d", posenc.Options{})
	if _, _, err := runInput2D(t, enc, graph.NewParams(tensor.Float64, 1), small, 1, 6, 1); err == nil || !strings.Contains(err.Error(), "sinusoidal-2d: width 6") {
		t.Errorf("d=6: %v", err)
	}
	if _, _, err := runInput2D(t, enc, graph.NewParams(tensor.Float64, 1), nil, 1, 8, 1); err == nil || !strings.Contains(err.Error(), "sinusoidal-2d: needs grid positions") {
		t.Errorf("line positions: %v", err)
	}
	if _, err := posenc.New("sinusoidal-2d", posenc.Options{SinusoidalScale: -1}); err == nil {
		t.Error("a negative scale was accepted")
	}
}

// TestAbsolute2DFloat32 builds both encodings in a float32 graph (the
// training dtype), learned-2d resampled, and compares with float64.
func TestAbsolute2DFloat32(t *testing.T) {
	grid, _ := posenc.NewGrid(4, 6)
	for _, name := range []string{"learned-2d", "sinusoidal-2d"} {
		enc, err := posenc.New(name, posenc.Options{GridRows: 3, GridCols: 4, GridResample: "bicubic"})
		if err != nil {
			t.Fatal(err)
		}
		var outs [2][]float64
		for k, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			g := G.NewGraph()
			p := graph.NewParams(dt, 1)
			xv := make([]float64, 24*8)
			for i := range xv {
				xv[i] = float64(i%5) * 0.1
			}
			x := G.NewTensor(g, dt, 3, G.WithShape(1, 24, 8), G.WithName("x"), G.WithValue(graph.FromFloat64s(dt, tensor.Shape{1, 24, 8}, xv)))
			s := &posenc.Site{G: g, Params: p, Layer: -1, B: 1, H: 1, DHead: 8, DModel: 8, Span: posenc.Span{TQ: 24, TK: 24}, Pos: grid}
			y, err := enc.(posenc.InputAdder).AddToInput(s, x)
			if err != nil {
				t.Fatalf("%s %v: %v", name, dt, err)
			}
			if err := runGraph(g); err != nil {
				t.Fatalf("%s %v: %v", name, dt, err)
			}
			outs[k] = graph.ToFloat64s(y.Value())
		}
		closeTo(t, name+" float32", outs[1], outs[0], 1e-6)
	}
	// A grid positions of 4 tokens given an input of 5.
	enc, _ := posenc.New("sinusoidal-2d", posenc.Options{})
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 5, 8), G.WithName("x"), G.WithInit(G.Zeroes()))
	small, _ := posenc.NewGrid(2, 2)
	s := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), Layer: -1, B: 1, H: 1, DHead: 8, DModel: 8, Span: posenc.Span{TQ: 5, TK: 5}, Pos: small}
	if _, err := enc.(posenc.InputAdder).AddToInput(s, x); err == nil || !strings.Contains(err.Error(), "grid 2x2 positions have 4 query positions, the input has 5 tokens") {
		t.Errorf("4 positions for 5 tokens: %v", err)
	}
}
