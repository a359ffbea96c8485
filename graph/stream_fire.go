package graph

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds FIRE's score bias computed per tile inside
// StreamAttention (StreamOpts.FIRE): the MLP runs on each tile's pairs, so
// no table over the span's (distance, query position) pairs exists.

// FIREBias is FIRE's score bias (Li et al. 2024, posenc.FIRE) as
// parameter nodes, for StreamOpts.FIRE: for query i at p = QStart+i and key
// j at k = KStart+j,
//
//	x_ij          = log1p(|c|·|p−k|) / (log1p(|c|·max(L, p)) + Eps),   L = |LMult|·InitL
//	bias[h, i, j] = alpha · (ReLU(x_ij·W0 + B0) · W1 + B1)[h]
//
// with max(L, p) = p + ReLU(L − p) (the whole gradient to L at the tie, as
// Gorgonia's ReLU) and the gradients of |·| sign(·) (0 at 0), as the
// graph of posenc.FIRE. Shapes: C, LMult and Alpha [1], W0 [1, W], B0
// [W], W1 [W, H], B1 [H] (H the attention's heads), all of q's dtype;
// Alpha may be nil (1). Positions must be >= 0.
type FIREBias struct {
	C, LMult, W0, B0, W1, B1, Alpha *G.Node
	InitL, Eps                      float64
}

// fireCfg is the part of streamCfg for FIRE's bias: width W, heads H.
type fireCfg struct {
	width, heads int
	initL, eps   float64
	alpha        bool
}

func (f *fireCfg) String() string {
	return fmt.Sprintf("fire{w=%d, h=%d, initL=%v, eps=%v, alpha=%v}", f.width, f.heads, f.initL, f.eps, f.alpha)
}

// nparams is the number of FIRE's input nodes.
func (f *fireCfg) nparams() int {
	if f.alpha {
		return 7
	}
	return 6
}

// shapes are the shapes of the inputs C, LMult, W0, B0, W1, B1[, Alpha].
func (f *fireCfg) shapes() []tensor.Shape {
	s := []tensor.Shape{{1}, {1}, {1, f.width}, {f.width}, {f.width, f.heads}, {f.heads}, {1}}
	return s[:f.nparams()]
}

// fireParamNames name the inputs in errors and part ops.
var fireParamNames = [...]string{"c", "l_mult", "w0", "b0", "w1", "b1", "alpha"}

// checkFIRE checks o.FIRE against q (heads h) and returns its
// configuration and input nodes.
func checkFIRE(name string, fb *FIREBias, q *G.Node, h int) (*fireCfg, G.Nodes, error) {
	if fb.W0 == nil || fb.W0.Shape().Dims() != 2 || fb.W0.Shape()[0] != 1 || fb.W0.Shape()[1] < 1 {
		var s tensor.Shape
		if fb.W0 != nil {
			s = fb.W0.Shape()
		}
		return nil, nil, errors.Errorf("graph: %s: FIRE's W0 %v must be [1, W] with W >= 1", name, s)
	}
	if math.IsNaN(fb.InitL) || math.IsInf(fb.InitL, 0) || fb.InitL < 0 || math.IsNaN(fb.Eps) || math.IsInf(fb.Eps, 0) {
		return nil, nil, errors.Errorf("graph: %s: FIRE's InitL %v must be finite and >= 0 and Eps %v finite", name, fb.InitL, fb.Eps)
	}
	f := &fireCfg{width: fb.W0.Shape()[1], heads: h, initL: fb.InitL, eps: fb.Eps, alpha: fb.Alpha != nil}
	nodes := G.Nodes{fb.C, fb.LMult, fb.W0, fb.B0, fb.W1, fb.B1, fb.Alpha}[:f.nparams()]
	for i, want := range f.shapes() {
		n := nodes[i]
		what := "FIRE's " + fireParamNames[i]
		if n == nil {
			return nil, nil, errors.Errorf("graph: %s: %s is nil", name, what)
		}
		if err := checkFloatNode(name, what, n); err != nil {
			return nil, nil, err
		}
		if !n.Shape().Eq(want) || n.Dtype() != q.Dtype() {
			return nil, nil, errors.Errorf("graph: %s: %s is %v (%v), want %v (%v)", name, what, n.Shape(), n.Dtype(), want, q.Dtype())
		}
	}
	return f, nodes, nil
}

// fireTile is one thread's FIRE work space for a tile of n <= tq·tk
// pairs: x, its derivatives with respect to |c| and L, the hidden
// pre-activations z [n, W] and activations, and the MLP's output before
// alpha, per head [H, n].
type fireTile struct {
	x, dxc, dxl []float64
	z, act      []float64 // [n, W]: pre-activations and ReLU(z)
	out         []float64
	// parameters as float64
	w0, b0, w1, b1 []float64
	ac, alpha      float64
}

func newFireTile(f *fireCfg, n int) *fireTile {
	return &fireTile{x: make([]float64, n), dxc: make([]float64, n), dxl: make([]float64, n),
		z: make([]float64, n*f.width), act: make([]float64, n*f.width), out: make([]float64, n*f.heads)}
}

// floats is the tile's work space in float64s.
func (ft *fireTile) floats() int { return 3*len(ft.x) + len(ft.z) + len(ft.act) + len(ft.out) }

// fireScratch is FIRE's work space per thread (fireTile), in float64s.
func (c *streamCfg) fireScratch() int {
	if c.fire == nil {
		return 0
	}
	return c.tq * c.tk * (3 + 2*c.fire.width + c.fire.heads)
}

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// loadFire computes FIRE's MLP on the pairs of the tile (all heads).
func (t *streamTile[T]) loadFire() {
	c, f, ft := t.c, t.c.fire, t.fire
	p := t.in.fire
	f64 := func(x []T) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	}
	if ft.w0 == nil { // the parameters are fixed during a run
		ft.ac = math.Abs(float64(p[0][0]))
		ft.w0, ft.b0, ft.w1, ft.b1 = f64(p[2]), f64(p[3]), f64(p[4]), f64(p[5])
		ft.alpha = 1
		if f.alpha {
			ft.alpha = float64(p[6][0])
		}
	}
	ac := ft.ac
	L := math.Abs(float64(p[1][0])) * f.initL
	ni, nj := t.i1-t.i0, t.j1-t.j0
	n, w, h := ni*nj, f.width, f.heads
	for a := 0; a < ni; a++ {
		pq := float64(c.qStart + t.i0 + a)
		lp := L - pq
		tie := 0.0 // dM/dL
		if lp >= 0 {
			tie = 1
		} else {
			lp = 0
		}
		m := pq + lp
		den := math.Log1p(m*ac) + f.eps
		for j := 0; j < nj; j++ {
			d := math.Abs(pq - float64(c.kStart+t.j0+j))
			num := math.Log1p(d * ac)
			x := num / den
			e := a*nj + j
			ft.x[e] = x
			// dx/d|c| and dx/dL
			ft.dxc[e] = d/(1+ac*d)/den - x/den*m/(1+ac*m)
			ft.dxl[e] = -x / den * ac / (1 + ac*m) * tie
			z := ft.z[e*w : (e+1)*w]
			for k := range z {
				z[k] = x*ft.w0[k] + ft.b0[k]
			}
		}
	}
	act := ft.act[:n*w]
	for e, v := range ft.z[:n*w] {
		act[e] = max(v, 0)
	}
	// out [H, n] = W1ᵀ · ReLU(z)ᵀ + B1
	gemmSerial(true, true, h, n, w, 1, ft.w1, h, act, w, 0, ft.out, n)
	for hh := 0; hh < h; hh++ {
		o, b := ft.out[hh*n:(hh+1)*n], ft.b1[hh]
		for e := range o {
			o[e] += b
		}
	}
}

// addFire adds head h's FIRE bias to row a of the tile's scores.
func (t *streamTile[T]) addFire(h, a int, row []T) {
	ft := t.fire
	n, nj := (t.i1-t.i0)*(t.j1-t.j0), len(row)
	o := ft.out[h*n+a*nj : h*n+(a+1)*nj]
	for j, v := range o {
		row[j] += T(ft.alpha * v)
	}
}

// fireBias is head h's bias of entry e of the tile (for the probe).
func (t *streamTile[T]) fireBias(h, e int) float64 {
	n := (t.i1 - t.i0) * (t.j1 - t.j0)
	return t.fire.alpha * t.fire.out[h*n+e]
}

// fireAcc is one head's float64 gradient accumulator of FIRE's parameters:
// d|c|, dL, dW0 [W], dB0 [W], dW1[:, h] [W], dB1[h], dalpha.
type fireAcc struct {
	dc, dl, db1, dalpha float64
	dw0, db0, dw1       []float64
}

func newFireAccs(f *fireCfg) []fireAcc {
	w := f.width
	buf := make([]float64, 3*w*f.heads)
	a := make([]fireAcc, f.heads)
	for h := range a {
		g := buf[3*w*h : 3*w*(h+1)]
		a[h] = fireAcc{dw0: g[:w], db0: g[w : 2*w], dw1: g[2*w:]}
	}
	return a
}

// fireBwd accumulates into acc (head h's) the gradients of FIRE's
// parameters from dS [ni, nj] of the tile.
func (t *streamTile[T]) fireBwd(h int, ds []T, acc *fireAcc) {
	f, ft := t.c.fire, t.fire
	w, nh := f.width, f.heads
	n := len(ds)
	o := ft.out[h*n : (h+1)*n]
	for e, gv := range ds {
		if gv == 0 {
			continue
		}
		g := float64(gv)
		acc.dalpha += g * o[e]
		g *= ft.alpha
		acc.db1 += g
		z := ft.z[e*w : (e+1)*w]
		x := ft.x[e]
		dx := 0.0
		for k, v := range z {
			if v < 0 {
				continue
			}
			acc.dw1[k] += g * v
			dz := g * ft.w1[k*nh+h]
			acc.dw0[k] += dz * x
			acc.db0[k] += dz
			dx += dz * ft.w0[k]
		}
		acc.dc += dx * ft.dxc[e]
		acc.dl += dx * ft.dxl[e]
	}
}

// fireGrads merges the heads' accumulators in head order into the
// gradients of FIRE's inputs, in dst (one buffer per input).
func fireGrads[T float](f *fireCfg, in [][]T, accs []fireAcc, dst []buf) {
	w, nh := f.width, f.heads
	g := make([][]float64, f.nparams())
	for i, s := range f.shapes() {
		g[i] = make([]float64, s.TotalSize())
	}
	for h := range accs {
		a := &accs[h]
		g[0][0] += a.dc
		g[1][0] += a.dl
		for k := 0; k < w; k++ {
			g[2][k] += a.dw0[k]
			g[3][k] += a.db0[k]
			g[4][k*nh+h] += a.dw1[k]
		}
		g[5][h] += a.db1
		if f.alpha {
			g[6][0] += a.dalpha
		}
	}
	g[0][0] *= sign(float64(in[0][0]))
	g[1][0] *= sign(float64(in[1][0])) * f.initL
	for i, s := range f.shapes() {
		_, d := zeroed[T](&dst[i], s)
		for x, v := range g[i] {
			d[x] = T(v)
		}
	}
}
