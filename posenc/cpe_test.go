package posenc_test

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

func TestCPEOptions(t *testing.T) {
	for _, c := range []struct {
		kernel, after int
		want          string // "" = accepted
	}{
		{3, 1, ""}, {1, 1, ""}, {5, 3, ""}, {7, 2, ""},
		{4, 1, "kernel 4 must be a positive odd number"},
		{2, 1, "kernel 2 must be a positive odd number"},
		{0, 1, "kernel 0 must be"},
		{-3, 1, "kernel -3 must be"},
		{3, 0, "CPEAfterBlock 0 must be >= 1"},
		{3, -1, "CPEAfterBlock -1"},
	} {
		e, err := posenc.NewCPE(c.kernel, c.after)
		if c.want == "" {
			if err != nil || e.Kernel != c.kernel || e.Block != c.after {
				t.Errorf("NewCPE(%d, %d) = %+v, %v", c.kernel, c.after, e, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "posenc cpe") {
			t.Errorf("NewCPE(%d, %d): error %v, want one containing %q", c.kernel, c.after, err, c.want)
		}
	}
	// through the registry: zero options take the defaults 3 and 1
	e, err := posenc.New("cpe", posenc.Options{})
	if err != nil || e.(*posenc.CPE).Kernel != 3 || e.(*posenc.CPE).Block != 1 {
		t.Fatalf("default cpe: %+v, %v", e, err)
	}
	if _, err := posenc.New("cpe", posenc.Options{CPEKernel: 4}); err == nil {
		t.Fatal("an even kernel was accepted through the registry")
	}
	info, _ := posenc.InfoOf("cpe")
	if info.Kind != posenc.KindConditional || !info.Learnable || !slices.Equal(info.Positions, []posenc.PosKind{posenc.PosGrid}) {
		t.Fatalf("info %+v", info)
	}
}

func TestGridNeighbours(t *testing.T) {
	raster, _ := posenc.NewGrid(2, 3)
	// (0,2) (1,0) (1,2) (0,0): a shuffled subset of the 2x3 grid
	holes, _ := posenc.NewGridCoords([]int{2, 3}, []int{0, 2, 1, 0, 1, 2, 0, 0}, []int{0, 2, 1, 0, 1, 2, 0, 0})
	cube, _ := posenc.NewGridCoords([]int{2, 2, 2}, []int{0, 0, 0, 1, 1, 1}, []int{0, 0, 0, 1, 1, 1})
	line, _ := posenc.NewGridCoords([]int{5}, []int{0, 1, 2}, []int{0, 1, 2})
	dup, _ := posenc.NewGridCoords([]int{2, 3}, []int{0, 0, 1, 2, 0, 0}, []int{0, 0, 1, 2, 0, 0})
	rp, _ := posenc.NewReal(1, []float64{0, 1}, []float64{0, 1})
	for _, c := range []struct {
		name string
		pos  *posenc.Positions
		k    int
		want []int
		err  string
	}{
		{"raster k3", raster, 3, []int{
			-1, -1, -1, -1, 0, 1, -1, 3, 4, // (0,0)
			-1, -1, -1, 0, 1, 2, 3, 4, 5, // (0,1)
			-1, -1, -1, 1, 2, -1, 4, 5, -1, // (0,2)
			-1, 0, 1, -1, 3, 4, -1, -1, -1, // (1,0)
			0, 1, 2, 3, 4, 5, -1, -1, -1, // (1,1)
			1, 2, -1, 4, 5, -1, -1, -1, -1, // (1,2)
		}, ""},
		{"raster k1", raster, 1, []int{0, 1, 2, 3, 4, 5}, ""},
		{"holes k3", holes, 3, []int{
			-1, -1, -1, -1, 0, -1, -1, 2, -1, // token 0 at (0,2); (0,1), (1,1) empty
			-1, 3, -1, -1, 1, -1, -1, -1, -1, // token 1 at (1,0)
			-1, 0, -1, -1, 2, -1, -1, -1, -1, // token 2 at (1,2)
			-1, -1, -1, -1, 3, -1, -1, 1, -1, // token 3 at (0,0)
		}, ""},
		{"3-D grid", cube, 3, nil, "needs a 2-D grid (rows, cols), got a 3-D grid 2x2x2"},
		{"1-D grid", line, 3, nil, "got a 1-D grid 5"},
		{"duplicate cell", dup, 3, nil, "tokens 0 and 2 both sit at grid cell (0, 0) of the grid 2x3"},
		{"real positions", rp, 3, nil, "needs grid positions, got real positions"},
		{"line positions", nil, 3, nil, "got line positions"},
		{"even kernel", raster, 2, nil, "kernel 2 must be a positive odd number"},
	} {
		got, err := posenc.GridNeighbours(c.pos, c.k)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v\nwant %v", c.name, got, err, c.want)
		}
	}
}

// cpeSite is a site of the hook on grid positions pos, for hidden states
// x [b, t, d].
func cpeSite(g *G.ExprGraph, p *graph.Params, layer, b, t, d int, pos *posenc.Positions) *posenc.Site {
	return &posenc.Site{G: g, Params: p, Layer: layer, Prefix: "block0", B: b, H: 1, DHead: d, DModel: d,
		Span: posenc.Span{TQ: t, TK: t}, Pos: pos}
}

// TestCPEAfterBlock: the hook acts after block CPEAfterBlock only (the
// same node is returned for every other block, and no parameter is
// created), creates cpe/w [k*k, d] and cpe/b [d] without weight decay and
// inside the U(-1/k, 1/k) init, and refuses bad sites with errors naming
// the problem.
func TestCPEAfterBlock(t *testing.T) {
	enc, err := posenc.NewCPE(5, 2)
	if err != nil {
		t.Fatal(err)
	}
	const b, d = 2, 6
	grid, _ := posenc.NewGrid(4, 3)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 3)
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, 12, d), G.WithName("x"), G.WithInit(G.Gaussian(0, 1)))
	for _, layer := range []int{0, 2, 3} {
		y, err := enc.AfterBlock(cpeSite(g, p, layer, b, 12, d, grid), x)
		if err != nil || y != x {
			t.Fatalf("layer %d: %v, %v: want x unchanged", layer, y, err)
		}
	}
	if n := len(p.Names()); n != 0 {
		t.Fatalf("parameters created by blocks the PEG does not act on: %v", p.Names())
	}
	y, err := enc.AfterBlock(cpeSite(g, p, 1, b, 12, d, grid), x)
	if err != nil || y == x || !y.Shape().Eq(x.Shape()) {
		t.Fatalf("layer 1: %v, %v", y, err)
	}
	for name, shape := range map[string]tensor.Shape{"cpe/w": {25, d}, "cpe/b": {d}} {
		info, ok := p.Info(name)
		if !ok || !info.Shape.Eq(shape) || info.Decay {
			t.Fatalf("%s: %+v (present %v), want shape %v without decay", name, info, ok, shape)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range p.Float64s(name) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if lo < -0.2 || hi > 0.2 || hi-lo < 0.05 {
			t.Fatalf("%s: init in [%v, %v], want spread inside U(-1/5, 1/5)", name, lo, hi)
		}
	}

	cube, _ := posenc.NewGridCoords([]int{2, 2, 3}, cpeSeqCoords(12, []int{2, 2, 3}), cpeSeqCoords(12, []int{2, 2, 3}))
	dupc := cpeSeqCoords(12, []int{4, 3})
	dupc[2*7], dupc[2*7+1] = 0, 1 // token 7 on token 1's cell
	dup, _ := posenc.NewGridCoords([]int{4, 3}, dupc, dupc)
	small, _ := posenc.NewGrid(3, 3)
	rp, _ := posenc.NewReal(1, make([]float64, 12), make([]float64, 12))
	x2 := G.NewTensor(g, tensor.Float64, 2, G.WithShape(12, d), G.WithName("x2"), G.WithInit(G.Gaussian(0, 1)))
	for _, c := range []struct {
		name string
		pos  *posenc.Positions
		x    *G.Node
		want string
	}{
		{"line", nil, x, "needs grid positions, the model gives it line positions"},
		{"real", rp, x, "the model gives it real positions"},
		{"3-D grid", cube, x, "needs a 2-D grid (rows, cols), got a 3-D grid 2x2x3"},
		{"duplicate", dup, x, "tokens 1 and 7 both sit at grid cell (0, 1)"},
		{"token count", small, x, "grid 3x3 positions have 9 tokens, the hidden states (2, 12, 6) have 12"},
		{"rank", grid, x2, "hidden states have shape (12, 6), want [B, T, d]"},
	} {
		_, err := enc.AfterBlock(cpeSite(g, p, 1, b, 12, d, c.pos), c.x)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "posenc cpe") {
			t.Errorf("%s: error %v, want one naming cpe and containing %q", c.name, err, c.want)
		}
	}
}

// cpeSeqCoords are the coordinates of tokens 0..n-1 in raster order of a grid
// with the given extent.
func cpeSeqCoords(n int, extent []int) []int {
	var out []int
	for i := 0; i < n; i++ {
		c := make([]int, len(extent))
		r := i
		for a := len(extent) - 1; a >= 0; a-- {
			c[a], r = r%extent[a], r/extent[a]
		}
		out = append(out, c...)
	}
	return out
}

// runCPE returns AfterBlock(x) of a new k×k PEG on the positions, with
// cpe/w and cpe/b set to weights.
func runCPE(t *testing.T, k int, pos *posenc.Positions, x []float64, b, d int, w, bias []float64) []float64 {
	t.Helper()
	enc, err := posenc.NewCPE(k, 1)
	if err != nil {
		t.Fatal(err)
	}
	return runCPEWith(t, enc, pos, x, b, d, w, bias)
}

// runCPEWith is runCPE with a given encoding.
func runCPEWith(t *testing.T, enc *posenc.CPE, pos *posenc.Positions, x []float64, b, d int, w, bias []float64) []float64 {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	tt := pos.TQ
	xn := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("x"),
		G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, x)))
	y, err := enc.AfterBlock(cpeSite(g, p, 0, b, tt, d, pos), xn)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("cpe/w", w); err != nil {
		t.Fatal(err)
	}
	if err := p.Set("cpe/b", bias); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(y.Value())
}

// TestCPELocalAndTranslationEquivariant: on a 6×7 grid with k = 3, the
// output at a token depends on the tokens within Chebyshev distance 1 only
// (changing a token changes exactly the outputs of its 3×3 window), and
// shifting the content of the grid by (1, 2) shifts the outputs of the
// tokens whose window stays inside the grid: the encoding is translation
// equivariant, which is what lets it serve any grid size.
func TestCPELocalAndTranslationEquivariant(t *testing.T) {
	const rows, cols, d, k = 6, 7, 3, 3
	rng := rand.New(rand.NewSource(8))
	pos, _ := posenc.NewGrid(rows, cols)
	x := make([]float64, rows*cols*d)
	w := make([]float64, k*k*d)
	bias := make([]float64, d)
	for _, s := range [][]float64{x, w, bias} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	base := runCPE(t, k, pos, x, 1, d, w, bias)

	const cr, cc = 2, 4 // change token (2, 4)
	x2 := slices.Clone(x)
	x2[(cr*cols+cc)*d+1] += 1
	changed := runCPE(t, k, pos, x2, 1, d, w, bias)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			near := max(cpeAbs(r-cr), cpeAbs(c-cc)) <= k/2
			for ch := 0; ch < d; ch++ {
				i := (r*cols+c)*d + ch
				moved := base[i] != changed[i]
				if moved != (near && ch == 1) {
					t.Fatalf("token (%d, %d) channel %d: output moved %v after changing (%d, %d) channel 1", r, c, ch, moved, cr, cc)
				}
			}
		}
	}

	const dr, dc = 1, 2
	sh := make([]float64, len(x))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			if r-dr >= 0 && c-dc >= 0 {
				copy(sh[(r*cols+c)*d:(r*cols+c+1)*d], x[((r-dr)*cols+c-dc)*d:((r-dr)*cols+c-dc+1)*d])
			}
		}
	}
	shifted := runCPE(t, k, pos, sh, 1, d, w, bias)
	for r := 1; r+dr < rows-1; r++ {
		for c := 1; c+dc < cols-1; c++ {
			for ch := 0; ch < d; ch++ {
				got, want := shifted[((r+dr)*cols+c+dc)*d+ch], base[(r*cols+c)*d+ch]
				if math.Abs(got-want) > 1e-12 {
					t.Fatalf("token (%d, %d) shifted by (%d, %d): %v, unshifted %v", r, c, dr, dc, got, want)
				}
			}
		}
	}
}

// TestCPESharedEncoding: one encoding value serving several grids with the
// same number of tokens (3×4, 4×3, a shuffled 3×4, 2×6) in turn gives
// exactly what a fresh encoding gives on each: its cached neighbour tables
// are keyed by the positions, not by their size.
func TestCPESharedEncoding(t *testing.T) {
	const b, d, k = 2, 3, 3
	rng := rand.New(rand.NewSource(12))
	x := make([]float64, b*12*d)
	w := make([]float64, k*k*d)
	bias := make([]float64, d)
	for _, s := range [][]float64{x, w, bias} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	g34, _ := posenc.NewGrid(3, 4)
	g43, _ := posenc.NewGrid(4, 3)
	g26, _ := posenc.NewGrid(2, 6)
	perm := rng.Perm(12)
	pc := make([]int, 0, 24)
	for _, c := range perm {
		pc = append(pc, c/4, c%4)
	}
	shuf, _ := posenc.NewGridCoords([]int{3, 4}, pc, pc)
	shared, _ := posenc.NewCPE(k, 1)
	for round := 0; round < 2; round++ {
		for _, pos := range []*posenc.Positions{g34, g43, shuf, g26} {
			got := runCPEWith(t, shared, pos, x, b, d, w, bias)
			want := runCPE(t, k, pos, x, b, d, w, bias)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s: the shared encoding differs from a fresh one", round, pos.Describe())
			}
		}
	}
}

func cpeAbs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TestCPEGridGrad gradient-checks the tiny ViT with a 5×5 PEG after its
// second (last) block on a 4×5 grid and with a 3×3 PEG on a 2×6 grid.
func TestCPEGridGrad(t *testing.T) {
	o := harnessOptions()
	o.CPEKernel, o.CPEAfterBlock = 5, 2
	checkGridGrad(t, "cpe", o, 4, 5)
	o.CPEKernel, o.CPEAfterBlock = 3, 1
	checkGridGrad(t, "cpe", o, 2, 6)
}

// TestCPEAnyGrid: one ViT with cpe (parameters created on a 3×4 grid) runs
// unchanged on 7×5 and 1×9 grids with the same parameters, and a depth
// beyond the model's leaves the encoding out.
func TestCPEAnyGrid(t *testing.T) {
	o := harnessOptions()
	p := graph.NewParams(tensor.Float64, 1)
	var names []string
	for _, grid := range [][2]int{{3, 4}, {7, 5}, {1, 9}} {
		g := G.NewGraph()
		m, err := layers.NewViT(g, p, tinyViT("cpe", o))
		if err != nil {
			t.Fatal(err)
		}
		n := grid[0] * grid[1]
		in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, n, m.Cfg.PatchDim()), G.WithName("patches"), G.WithInit(G.Gaussian(0, 1)))
		logits, err := m.Fwd(in, grid[0], grid[1])
		if err != nil {
			t.Fatalf("grid %v: %v", grid, err)
		}
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Close()
		for _, v := range graph.ToFloat64s(logits.Value()) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("grid %v: logit %v", grid, v)
			}
		}
		if names == nil {
			names = p.Names()
		} else if !slices.Equal(names, p.Names()) {
			t.Fatalf("grid %v: parameters %v, first grid %v", grid, p.Names(), names)
		}
	}
	if !slices.Contains(names, "cpe/w") || !slices.Contains(names, "cpe/b") {
		t.Fatalf("parameters %v", names)
	}

	o.CPEAfterBlock = 3 // the tiny ViT has 2 blocks
	g := G.NewGraph()
	q := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewViT(g, q, tinyViT("cpe", o))
	if err != nil {
		t.Fatal(err)
	}
	in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 12, m.Cfg.PatchDim()), G.WithName("patches"), G.WithInit(G.Gaussian(0, 1)))
	if _, err := m.Fwd(in, 3, 4); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(q.Names(), "cpe/w") {
		t.Fatalf("a PEG after block 3 of 2 was built: %v", q.Names())
	}
}
