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
	// lookup returns floor, ceil, the weight w of ceil and whether the
	// clamp acts (no gradient w.r.t. the position).
	lookup := func(p T) (lo, hi int, w T, clamped bool) {
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
