package graph

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CoPEInterp reads a table of logits at fractional positions by linear
// interpolation between the two neighbouring integer positions, the lookup
// of contextual position encoding (CoPE, Golovneva et al. 2024):
//
//	p   = clamp(pos[..., k], 0, P-1)
//	out[..., k] = table[..., ceil(p)]·w + table[..., floor(p)]·(1-w),  w = p - floor(p)
//
// table is a float32 or float64 node [..., P] (P >= 1) and pos a node of
// the same dtype [..., K] with the same leading axes (rank >= 2); out is
// [..., K]. CoPE's positions are sums of sigmoid gates, so they are > 0;
// positions above P-1 read table[P-1] (the paper's clamp(max = npos-1)),
// negative ones table[0].
//
// Gradients are those of PyTorch's autograd of the paper's code: the table
// gets the scatter-add dy·w onto ceil(p) and dy·(1-w) onto floor(p); pos
// gets dy·(table[ceil(p)] - table[floor(p)]) for 0 <= pos <= P-1, which is 0
// at an integer position (ceil = floor), and 0 where the clamp acts
// (pos > P-1 or pos < 0). Both are computed by a gradient op
// (copeInterpGrad) that has no derivative itself. Shape and dtype errors are
// returned here, naming the op and both shapes; a NaN or infinite position
// makes the machine's run fail with an error naming its index.
func CoPEInterp(table, pos *G.Node) (*G.Node, error) {
	if err := checkFloatNode("CoPEInterp", "table", table); err != nil {
		return nil, err
	}
	if err := checkFloatNode("CoPEInterp", "pos", pos); err != nil {
		return nil, err
	}
	if table.Dtype() != pos.Dtype() {
		return nil, errors.Errorf("graph: CoPEInterp: table %v is %v, pos %v is %v", table.Shape(), table.Dtype(), pos.Shape(), pos.Dtype())
	}
	if err := checkCoPEShapes(table.Shape(), pos.Shape()); err != nil {
		return nil, err
	}
	return G.ApplyOp(&copeInterpOp{dims: table.Dims()}, table, pos)
}

// checkCoPEShapes returns an error naming CoPEInterp unless table [..., P]
// and pos [..., K] have rank >= 2, equal leading axes and P, K >= 1.
func checkCoPEShapes(ts, ps tensor.Shape) error {
	if len(ts) < 2 || len(ts) != len(ps) {
		return errors.Errorf("graph: CoPEInterp: table %v and pos %v must be [..., P] and [..., K] of the same rank >= 2", ts, ps)
	}
	for i := 0; i < len(ts)-1; i++ {
		if ts[i] != ps[i] {
			return errors.Errorf("graph: CoPEInterp: table %v and pos %v differ on axis %d", ts, ps, i)
		}
	}
	if ts[len(ts)-1] < 1 || ps[len(ps)-1] < 1 {
		return errors.Errorf("graph: CoPEInterp: table %v and pos %v need at least one position and one key", ts, ps)
	}
	return nil
}

// copeInterpOp: table [..., P], pos [..., K] -> [..., K].
type copeInterpOp struct {
	opBase
	dims int
	res  buf
}

func (op *copeInterpOp) Arity() int { return 2 }
func (op *copeInterpOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.dims), floatT(op.dims))
}
func (op *copeInterpOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	ts, ps, err := twoShapes(op, in)
	if err != nil {
		return nil, err
	}
	if err := checkCoPEShapes(ts, ps); err != nil {
		return nil, err
	}
	return ps.Clone(), nil
}
func (op *copeInterpOp) String() string        { return fmt.Sprintf("CoPEInterp{rank=%d}", op.dims) }
func (op *copeInterpOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *copeInterpOp) Hashcode() uint32      { return hashOf(op) }
func (op *copeInterpOp) DiffWRT(int) []bool    { return []bool{true, true} }

func (op *copeInterpOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dt, err := G.ApplyOp(&copeInterpGradOp{dims: op.dims, wrtPos: false}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	dp, err := G.ApplyOp(&copeInterpGradOp{dims: op.dims, wrtPos: true}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dt, dp}, nil
}

func (op *copeInterpOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 2 {
		return nil, errors.Errorf("graph: %v: expected 2 inputs, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copeInterpDo[float32](op, &op.res, vs, false, false) },
		func() (G.Value, error) { return copeInterpDo[float64](op, &op.res, vs, false, false) })
}

// copeInterpGradOp: table, pos, dy [..., K] -> dtable [..., P] (wrtPos
// false) or dpos [..., K] (wrtPos true). A gradient op: no derivative.
type copeInterpGradOp struct {
	opBase
	dims   int
	wrtPos bool
	res    buf
}

func (op *copeInterpGradOp) Arity() int { return 3 }
func (op *copeInterpGradOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.dims), floatT(op.dims), floatT(op.dims))
}
func (op *copeInterpGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	ts, ps, err := twoShapes(op, in)
	if err != nil {
		return nil, err
	}
	if err := checkCoPEShapes(ts, ps); err != nil {
		return nil, err
	}
	if op.wrtPos {
		return ps.Clone(), nil
	}
	return ts.Clone(), nil
}
func (op *copeInterpGradOp) String() string {
	return fmt.Sprintf("copeInterpGrad{rank=%d, wrtPos=%v}", op.dims, op.wrtPos)
}
func (op *copeInterpGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *copeInterpGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *copeInterpGradOp) DiffWRT(int) []bool    { return []bool{false, false, false} }
func (op *copeInterpGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *copeInterpGradOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 3 {
		return nil, errors.Errorf("graph: %v: expected 3 inputs, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copeInterpDo[float32](op, &op.res, vs, true, op.wrtPos) },
		func() (G.Value, error) { return copeInterpDo[float64](op, &op.res, vs, true, op.wrtPos) })
}

// copeInterpDo runs the forward lookup (grad false: vs = table, pos) or one
// of the gradients (grad true: vs = table, pos, dy; wrtPos picks dpos or
// dtable) into res.
func copeInterpDo[T float](op fmt.Stringer, res *buf, vs []G.Value, grad, wrtPos bool) (G.Value, error) {
	var name any = op
	ts, ps := vs[0].Shape(), vs[1].Shape()
	if err := checkCoPEShapes(ts, ps); err != nil {
		return nil, err
	}
	tab, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	pos, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	var dy []T
	if grad {
		if err := checkShape(name, "gradient", vs[2], ps); err != nil {
			return nil, err
		}
		if dy, err = floats[T](name, vs[2]); err != nil {
			return nil, err
		}
	}
	np, nk := ts[len(ts)-1], ps[len(ps)-1]
	rows := len(pos) / nk
	for i, p := range pos {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
			return nil, errors.Errorf("graph: %v: position %v at index %d (row %d, key %d) is not finite", op, p, i, i/nk, i%nk)
		}
	}
	maxP := float64(np - 1)
	lookup := func(p T) (lo, hi int, w T, clamped bool) { return copeLookup(p, maxP) }
	switch {
	case !grad:
		out, y := bufFor[T](res, ps)
		parallelFor(rows, 4*nk, func(a, b int) {
			for r := a; r < b; r++ {
				tr := tab[r*np : (r+1)*np]
				for k := r * nk; k < (r+1)*nk; k++ {
					lo, hi, w, _ := lookup(pos[k])
					y[k] = tr[hi]*w + tr[lo]*(1-w)
				}
			}
		})
		return out, nil
	case wrtPos:
		out, dp := bufFor[T](res, ps)
		parallelFor(rows, 4*nk, func(a, b int) {
			for r := a; r < b; r++ {
				tr := tab[r*np : (r+1)*np]
				for k := r * nk; k < (r+1)*nk; k++ {
					lo, hi, _, clamped := lookup(pos[k])
					if clamped {
						dp[k] = 0
						continue
					}
					dp[k] = dy[k] * (tr[hi] - tr[lo])
				}
			}
		})
		return out, nil
	default:
		out, dt := zeroed[T](res, ts)
		parallelFor(rows, 4*nk, func(a, b int) {
			for r := a; r < b; r++ {
				dr := dt[r*np : (r+1)*np]
				for k := r * nk; k < (r+1)*nk; k++ {
					lo, hi, w, _ := lookup(pos[k])
					dr[hi] += dy[k] * w
					dr[lo] += dy[k] * (1 - w)
				}
			}
		})
		return out, nil
	}
}

// CoPEPositions computes the contextual positions of CoPE (Golovneva et
// al. 2024) from attention logits x [..., Tq, Tk] (float32 or float64, rank
// >= 2) of queries at positions qStart+i and keys at kStart+j:
//
//	g[..., i, j] = σ(scale·x[..., i, j]) if kStart+j <= qStart+i, else 0
//	p[..., i, j] = Σ_{k=j..Tk-1} g[..., i, k]
//
// p has x's shape: the gates of the keys from key j to the query, a
// reverse cumulative sum over the last axis (the paper's
// gates.flip(-1).cumsum(-1).flip(-1), with the causal mask by position).
// It fuses the sigmoid, the mask and the sum into one pass; the sigmoid is
// computed in float64 as 1/(1+exp(-z)). The gradient is
//
//	dx[..., i, j] = scale·g(1-g)·Σ_{j'=0..j} dp[..., i, j']   (0 for masked keys)
//
// computed by a gradient op (copePositionsGrad) that has no derivative
// itself. Errors (a nil, non-float or rank < 2 x, a scale that is not
// finite) name the op.
func CoPEPositions(x *G.Node, qStart, kStart int, scale float64) (*G.Node, error) {
	if err := checkFloatNode("CoPEPositions", "x", x); err != nil {
		return nil, err
	}
	if x.Dims() < 2 {
		return nil, errors.Errorf("graph: CoPEPositions: x %v must be [..., Tq, Tk] of rank >= 2", x.Shape())
	}
	if math.IsNaN(scale) || math.IsInf(scale, 0) {
		return nil, errors.Errorf("graph: CoPEPositions: scale %v is not finite (x %v)", scale, x.Shape())
	}
	return G.ApplyOp(&copePositionsOp{copePosAttrs: copePosAttrs{dims: x.Dims(), qStart: qStart, kStart: kStart, scale: scale}}, x)
}

// copePosAttrs are the attributes of CoPEPositions and of its gradient.
type copePosAttrs struct {
	dims           int
	qStart, kStart int
	scale          float64
}

func (a copePosAttrs) String() string {
	return fmt.Sprintf("rank=%d, qStart=%d, kStart=%d, scale=%v", a.dims, a.qStart, a.kStart, a.scale)
}

// copePositionsOp: x [..., Tq, Tk] -> p [..., Tq, Tk].
type copePositionsOp struct {
	opBase
	copePosAttrs
	res buf
}

func (op *copePositionsOp) Arity() int { return 1 }
func (op *copePositionsOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.dims))
}
func (op *copePositionsOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(in))
	}
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, errors.Errorf("graph: %v: cannot infer the shape from %T", op, in[0])
	}
	return s.Clone(), nil
}
func (op *copePositionsOp) String() string {
	return fmt.Sprintf("CoPEPositions{%v}", op.copePosAttrs)
}
func (op *copePositionsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *copePositionsOp) Hashcode() uint32      { return hashOf(op) }
func (op *copePositionsOp) DiffWRT(int) []bool    { return []bool{true} }

func (op *copePositionsOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&copePositionsGradOp{copePosAttrs: op.copePosAttrs}, in[0], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

func (op *copePositionsOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copePositionsDo[float32](op, op.copePosAttrs, &op.res, vs) },
		func() (G.Value, error) { return copePositionsDo[float64](op, op.copePosAttrs, &op.res, vs) })
}

// copePositionsGradOp: x, dp -> dx. A gradient op: no derivative.
type copePositionsGradOp struct {
	opBase
	copePosAttrs
	res buf
}

func (op *copePositionsGradOp) Arity() int { return 2 }
func (op *copePositionsGradOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.dims), floatT(op.dims))
}
func (op *copePositionsGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	xs, _, err := twoShapes(op, in)
	if err != nil {
		return nil, err
	}
	return xs.Clone(), nil
}
func (op *copePositionsGradOp) String() string {
	return fmt.Sprintf("copePositionsGrad{%v}", op.copePosAttrs)
}
func (op *copePositionsGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *copePositionsGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *copePositionsGradOp) DiffWRT(int) []bool    { return []bool{false, false} }
func (op *copePositionsGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *copePositionsGradOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 2 {
		return nil, errors.Errorf("graph: %v: expected 2 inputs, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copePositionsDo[float32](op, op.copePosAttrs, &op.res, vs) },
		func() (G.Value, error) { return copePositionsDo[float64](op, op.copePosAttrs, &op.res, vs) })
}

// copePositionsDo runs CoPEPositions (vs = x) or its gradient (vs = x, dp)
// into res.
func copePositionsDo[T float](op fmt.Stringer, a copePosAttrs, res *buf, vs []G.Value) (G.Value, error) {
	var name any = op
	xs := vs[0].Shape()
	if len(xs) != a.dims || len(xs) < 2 {
		return nil, errors.Errorf("graph: %v: x has shape %v", op, xs)
	}
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	var dp []T
	if len(vs) == 2 {
		if err := checkShape(name, "gradient", vs[1], xs); err != nil {
			return nil, err
		}
		if dp, err = floats[T](name, vs[1]); err != nil {
			return nil, err
		}
	}
	tq, tk := xs[len(xs)-2], xs[len(xs)-1]
	out, y := bufFor[T](res, xs)
	sc := a.scale
	parallelFor(len(x)/tk, 8*tk, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			// keys 0..nv-1 are visible from query i: kStart+j <= qStart+i
			nv := min(max(a.qStart+r%tq-a.kStart+1, 0), tk)
			xr, yr := x[r*tk:(r+1)*tk], y[r*tk:(r+1)*tk]
			clear(yr[nv:])
			if dp == nil {
				var acc T
				for j := nv - 1; j >= 0; j-- {
					acc += T(1 / (1 + math.Exp(-sc*float64(xr[j]))))
					yr[j] = acc
				}
				continue
			}
			dr := dp[r*tk : (r+1)*tk]
			var acc T
			for j := 0; j < nv; j++ {
				acc += dr[j]
				g := 1 / (1 + math.Exp(-sc*float64(xr[j])))
				yr[j] = T(sc*g*(1-g)) * acc
			}
		}
	})
	return out, nil
}

// copeLookup returns the two table positions that CoPEInterp reads at
// position p of a table of maxP+1 positions (floor and ceil of p clamped to
// [0, maxP]), the weight w of ceil, and whether the clamp acts (then there
// is no gradient w.r.t. the position). StreamCoPE uses it too, so that both
// interpolate identically.
func copeLookup[T float](p T, maxP float64) (lo, hi int, w T, clamped bool) {
	x := float64(p)
	switch {
	case x > maxP:
		x, clamped = maxP, true
	case x < 0:
		x, clamped = 0, true
	}
	f := math.Floor(x)
	lo, hi = int(f), int(math.Ceil(x))
	return lo, hi, T(x) - T(f), clamped
}
