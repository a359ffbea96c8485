package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// refCoPEInterp is CoPEInterp element by element, with the gradients of
// PyTorch's autograd of the paper's code for an output gradient dy: out,
// dtable and dpos.
func refCoPEInterp(tab, pos, dy []float64, p, k int) (out, dtab, dpos []float64) {
	out, dpos = make([]float64, len(pos)), make([]float64, len(pos))
	dtab = make([]float64, len(tab))
	for i, x := range pos {
		r := i / k
		c := math.Min(math.Max(x, 0), float64(p-1))
		lo, hi := int(math.Floor(c)), int(math.Ceil(c))
		w := c - math.Floor(c)
		out[i] = tab[r*p+hi]*w + tab[r*p+lo]*(1-w)
		dtab[r*p+hi] += dy[i] * w
		dtab[r*p+lo] += dy[i] * (1 - w)
		if x >= 0 && x <= float64(p-1) {
			dpos[i] = dy[i] * (tab[r*p+hi] - tab[r*p+lo])
		}
	}
	return out, dtab, dpos
}

// copePositions draws positions for a case: "fractional" in (0, P-1) away
// from the integers, "integers" at 0..P-1 and beyond the clamp, "clamped"
// above P-1 and below 0 (away from the kinks).
func copePositions(rng *rand.Rand, kind string, n, p int) []float64 {
	out := make([]float64, n)
	for i := range out {
		switch kind {
		case "fractional":
			out[i] = float64(rng.Intn(p)) + 0.05 + 0.9*rng.Float64()
			if out[i] > float64(p-1) { // keep it inside the table
				out[i] -= 1
			}
			if p == 1 {
				out[i] = -0.5 - rng.Float64()
			}
		case "integers":
			out[i] = float64(rng.Intn(p + 3))
		case "clamped":
			if i%2 == 0 {
				out[i] = float64(p-1) + 0.1 + 3*rng.Float64()
			} else {
				out[i] = -0.1 - rng.Float64()
			}
		}
	}
	return out
}

var copeInterpCases = []struct {
	name  string
	lead  []int
	p, k  int
	kind  string
	gradP bool // check dpos by central differences (false at the kinks)
}{
	{"rank 2 fractional", []int{3}, 5, 4, "fractional", true},
	{"rank 4 fractional", []int{2, 2, 3}, 6, 3, "fractional", true},
	{"rank 3 one key", []int{2, 3}, 4, 1, "fractional", true},
	{"one position", []int{4}, 1, 3, "fractional", true},
	{"clamped above and below", []int{2, 3}, 4, 5, "clamped", true},
	{"integers and beyond the clamp", []int{2, 3}, 4, 6, "integers", false},
}

// TestCoPEInterpForwardAndGrad checks the output and both gradients against
// the element-by-element reference, and the gradients against central
// differences (float64) where the function is differentiable: w.r.t. the
// table always, w.r.t. the positions away from the integers.
func TestCoPEInterpForwardAndGrad(t *testing.T) {
	for ci, c := range copeInterpCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(ci + 1)))
			rows := 1
			for _, d := range c.lead {
				rows *= d
			}
			ts := append(append([]int(nil), c.lead...), c.p)
			ps := append(append([]int(nil), c.lead...), c.k)
			g := G.NewGraph()
			tv := randDense(rng, tensor.Float64, 1, ts...)
			pv := FromFloat64s(tensor.Float64, tensor.Shape(ps), copePositions(rng, c.kind, rows*c.k, c.p))
			tab, pos := input(g, "table", tv), input(g, "pos", pv)
			y := must(t)(CoPEInterp(tab, pos))
			if !y.Shape().Eq(tensor.Shape(ps)) {
				t.Fatalf("shape %v, want %v", y.Shape(), ps)
			}
			wv := randDense(rng, tensor.Float64, 1, ps...)
			w := input(g, "w", wv)
			loss := must(t)(G.Sum(must(t)(BroadcastMul(y, w))))
			grads, err := G.Grad(loss, tab, pos)
			if err != nil {
				t.Fatal(err)
			}
			run(t, g)
			wantY, wantDT, wantDP := refCoPEInterp(ToFloat64s(tv), ToFloat64s(pv), ToFloat64s(wv), c.p, c.k)
			checkClose(t, "CoPEInterp", ToFloat64s(y.Value()), wantY, 1e-14, 1e-14)
			checkClose(t, "dtable", ToFloat64s(grads[0].Value()), wantDT, 1e-14, 1e-14)
			checkClose(t, "dpos", ToFloat64s(grads[1].Value()), wantDP, 1e-14, 1e-14)
			if c.kind == "integers" {
				for i, d := range ToFloat64s(grads[1].Value()) {
					if d != 0 {
						t.Fatalf("dpos[%d] = %v at position %v, want 0 (PyTorch: ceil = floor)", i, d, ToFloat64s(pv)[i])
					}
				}
			}
			g2 := G.NewGraph()
			tab2, pos2 := input(g2, "table", tv), input(g2, "pos", pv)
			loss2 := must(t)(G.Sum(must(t)(BroadcastMul(must(t)(CoPEInterp(tab2, pos2)), input(g2, "w", wv)))))
			if c.gradP {
				gradCheck(t, g2, loss2, tab2, pos2)
			} else {
				gradCheck(t, g2, loss2, tab2)
			}
		})
	}
}

// TestCoPEInterpFloat32 runs the float32 kernel (forward and both
// gradients) on the values of a float64 run and compares.
func TestCoPEInterpFloat32(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	td := randDense(rng, tensor.Float64, 1, 2, 3, 5)
	pd := copePositions(rng, "fractional", 2*3*4, 5)
	wd := randDense(rng, tensor.Float64, 1, 2, 3, 4)
	var got [2][3][]float64
	for i, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		g := G.NewGraph()
		tab := input(g, "table", FromFloat64s(dt, tensor.Shape{2, 3, 5}, ToFloat64s(td)))
		pos := input(g, "pos", FromFloat64s(dt, tensor.Shape{2, 3, 4}, pd))
		y := must(t)(CoPEInterp(tab, pos))
		loss := must(t)(G.Sum(must(t)(BroadcastMul(y, input(g, "w", FromFloat64s(dt, tensor.Shape{2, 3, 4}, ToFloat64s(wd)))))))
		grads, err := G.Grad(loss, tab, pos)
		if err != nil {
			t.Fatal(err)
		}
		run(t, g)
		got[i] = [3][]float64{ToFloat64s(y.Value()), ToFloat64s(grads[0].Value()), ToFloat64s(grads[1].Value())}
	}
	for j, what := range []string{"out", "dtable", "dpos"} {
		checkClose(t, what+" float32", got[1][j], got[0][j], 1e-5, 1e-5)
	}
}

// TestCoPEInterpErrors: bad shapes and dtypes are errors naming the op when
// the node is built; a non-finite position fails the run with an error
// naming it, never a panic.
func TestCoPEInterpErrors(t *testing.T) {
	g := G.NewGraph()
	mk := func(name string, dt tensor.Dtype, shape ...int) *G.Node {
		return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	cases := []struct {
		name       string
		table, pos *G.Node
	}{
		{"rank 1", mk("t1", tensor.Float64, 5), mk("p1", tensor.Float64, 4)},
		{"ranks differ", mk("t2", tensor.Float64, 2, 5), mk("p2", tensor.Float64, 2, 1, 4)},
		{"leading axes differ", mk("t3", tensor.Float64, 2, 5), mk("p3", tensor.Float64, 3, 4)},
		{"dtypes differ", mk("t4", tensor.Float64, 2, 5), mk("p4", tensor.Float32, 2, 4)},
		{"int table", mk("t5", tensor.Int, 2, 5), mk("p5", tensor.Float64, 2, 4)},
		{"nil pos", mk("t6", tensor.Float64, 2, 5), nil},
	}
	for _, c := range cases {
		if _, err := CoPEInterp(c.table, c.pos); err == nil || !strings.Contains(err.Error(), "CoPEInterp") {
			t.Errorf("%s: error %v, want one naming CoPEInterp", c.name, err)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		g := G.NewGraph()
		tab := input(g, "table", FromFloat64s(tensor.Float64, tensor.Shape{1, 3}, []float64{1, 2, 3}))
		pos := input(g, "pos", FromFloat64s(tensor.Float64, tensor.Shape{1, 2}, []float64{0.5, bad}))
		must(t)(CoPEInterp(tab, pos))
		m := G.NewTapeMachine(g)
		err := m.RunAll()
		m.Close()
		if err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("position %v: error %v, want one saying it is not finite", bad, err)
		}
	}
}

// refCoPEPositions is CoPEPositions element by element: the sum of the
// visible gates from key j to the end of the row, and dx for an output
// gradient dp.
func refCoPEPositions(x, dp []float64, tq, tk, qStart, kStart int, scale float64) (p, dx []float64) {
	p, dx = make([]float64, len(x)), make([]float64, len(x))
	for r := 0; r < len(x)/tk; r++ {
		i := r % tq
		for j := 0; j < tk; j++ {
			for k := j; k < tk; k++ {
				if kStart+k <= qStart+i {
					p[r*tk+j] += 1 / (1 + math.Exp(-scale*x[r*tk+k]))
				}
			}
			if kStart+j <= qStart+i {
				g := 1 / (1 + math.Exp(-scale*x[r*tk+j]))
				for jj := 0; jj <= j; jj++ {
					dx[r*tk+j] += scale * g * (1 - g) * dp[r*tk+jj]
				}
			}
		}
	}
	return p, dx
}

// TestCoPEPositions checks the positions and their gradient against the
// element-by-element reference and central differences (float64) for
// self-attention, offsets, memory spans (Tk > Tq, keys after some queries),
// a query before every key, and float32 against float64.
func TestCoPEPositions(t *testing.T) {
	cases := []struct {
		name           string
		shape          []int
		qStart, kStart int
		scale          float64
	}{
		{"self rank 2", []int{5, 5}, 0, 0, 0.5},
		{"self rank 4", []int{2, 2, 4, 4}, 3, 3, 1},
		{"memory", []int{2, 3, 7}, 6, 2, 0.7},
		{"queries before some keys", []int{1, 3, 4}, 0, 1, 2},
		{"cross tq > tk", []int{2, 6, 3}, 0, 0, 1},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(30 + ci)))
			tq, tk := c.shape[len(c.shape)-2], c.shape[len(c.shape)-1]
			xv := randDense(rng, tensor.Float64, 2, c.shape...)
			wv := randDense(rng, tensor.Float64, 1, c.shape...)
			var got [2][2][]float64
			for di, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				g := G.NewGraph()
				x := input(g, "x", FromFloat64s(dt, tensor.Shape(c.shape), ToFloat64s(xv)))
				p := must(t)(CoPEPositions(x, c.qStart, c.kStart, c.scale))
				loss := must(t)(G.Sum(must(t)(BroadcastMul(p, input(g, "w", FromFloat64s(dt, tensor.Shape(c.shape), ToFloat64s(wv)))))))
				grads, err := G.Grad(loss, x)
				if err != nil {
					t.Fatal(err)
				}
				run(t, g)
				got[di] = [2][]float64{ToFloat64s(p.Value()), ToFloat64s(grads[0].Value())}
			}
			wantP, wantDX := refCoPEPositions(ToFloat64s(xv), ToFloat64s(wv), tq, tk, c.qStart, c.kStart, c.scale)
			checkClose(t, "positions", got[0][0], wantP, 1e-13, 1e-13)
			checkClose(t, "dx", got[0][1], wantDX, 1e-13, 1e-13)
			checkClose(t, "positions float32", got[1][0], wantP, 1e-5, 1e-5)
			checkClose(t, "dx float32", got[1][1], wantDX, 1e-5, 1e-5)
			g := G.NewGraph()
			x := input(g, "x", xv)
			p := must(t)(CoPEPositions(x, c.qStart, c.kStart, c.scale))
			gradCheck(t, g, must(t)(G.Sum(must(t)(BroadcastMul(p, input(g, "w", wv))))), x)
		})
	}
}

// TestCoPEPositionsErrors: bad inputs are errors naming the op.
func TestCoPEPositionsErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 3), G.WithName("x"))
	for _, c := range []struct {
		name  string
		x     *G.Node
		scale float64
	}{
		{"nil", nil, 1},
		{"rank 1", G.NewTensor(g, tensor.Float64, 1, G.WithShape(3), G.WithName("x1")), 1},
		{"int", G.NewTensor(g, tensor.Int, 2, G.WithShape(3, 3), G.WithName("xi")), 1},
		{"NaN scale", x, math.NaN()},
		{"infinite scale", x, math.Inf(1)},
	} {
		if _, err := CoPEPositions(c.x, 0, 0, c.scale); err == nil || !strings.Contains(err.Error(), "CoPEPositions") {
			t.Errorf("%s: error %v, want one naming CoPEPositions", c.name, err)
		}
	}
}
