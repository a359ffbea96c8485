package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MaskedSoftmax is the softmax over the last axis of x ([..., Tq, Tk], rank
// >= 1) restricted to the entries that mask allows:
//
//	y[..., i, j] = exp(x[..., i, j] - m) / sum over allowed k of exp(x[..., i, k] - m)
//
// where m is the maximum of the row's allowed entries (so large logits do
// not overflow). mask is nil (everything allowed) or a float node of x's dtype
// and rank whose every dimension equals x's or is 1 (numpy broadcasting, e.g.
// a causal [1, 1, Tq, Tk] or a padding [B, 1, 1, Tk] mask, see CausalMask,
// PaddingMask, CombineMasks and MaskNode); an entry is allowed where mask !=
// 0 (1 = may attend, 0 = blocked). Blocked entries get probability exactly 0,
// whatever x holds there (even ±Inf or NaN), and a row with no allowed entry
// is all zeros, never NaN, with zero gradient. y has x's shape and is
// differentiable with respect to x; mask gets no gradient. Shape and dtype
// errors are returned here.
func MaskedSoftmax(x, mask *G.Node) (*G.Node, error) {
	if err := checkFloatNode("MaskedSoftmax", "x", x); err != nil {
		return nil, err
	}
	xs := x.Shape()
	if len(xs) < 1 {
		return nil, errors.New("graph: MaskedSoftmax: x must be a tensor of rank >= 1, got a scalar")
	}
	op := &maskedSoftmaxOp{shape: xs.Clone()}
	if mask == nil {
		return G.ApplyOp(op, x)
	}
	if err := checkFloatNode("MaskedSoftmax", "mask", mask); err != nil {
		return nil, err
	}
	ms := mask.Shape()
	if len(ms) != len(xs) || !broadcastable(ms, xs) {
		return nil, errors.Errorf("graph: MaskedSoftmax: mask %v must have x's rank and every dim equal to x's or 1 (x %v)", ms, xs)
	}
	if mask.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: MaskedSoftmax: mask dtype %v differs from x dtype %v", mask.Dtype(), x.Dtype())
	}
	op.mask = ms.Clone()
	op.bc = newBcast(op.mask, op.shape)
	return G.ApplyOp(op, x, mask)
}

// maskedSoftmaxOp: x, [mask] -> y of x's shape.
type maskedSoftmaxOp struct {
	opBase
	shape tensor.Shape // x's
	mask  tensor.Shape // nil if no mask
	bc    bcast        // mask onto x, computed on first run
	res   buf
}

func (op *maskedSoftmaxOp) Arity() int {
	if op.mask == nil {
		return 1
	}
	return 2
}
func (op *maskedSoftmaxOp) Type() hm.Type {
	t := floatT(len(op.shape))
	if op.mask == nil {
		return hm.NewFnType(t, t)
	}
	return hm.NewFnType(t, t, t)
}
func (op *maskedSoftmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *maskedSoftmaxOp) String() string {
	return fmt.Sprintf("MaskedSoftmax{x=%v, mask=%v}", op.shape, op.mask)
}
func (op *maskedSoftmaxOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *maskedSoftmaxOp) Hashcode() uint32      { return hashOf(op) }
func (op *maskedSoftmaxOp) DiffWRT(n int) []bool {
	if n == 2 {
		return []bool{true, false}
	}
	return []bool{true}
}

func (op *maskedSoftmaxOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&softmaxGradOp{shape: op.shape}, out, grad)
	if err != nil {
		return nil, err
	}
	if op.mask == nil {
		return G.Nodes{dx}, nil
	}
	return G.Nodes{dx, nil}, nil
}

func (op *maskedSoftmaxOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, "MaskedSoftmax", vs,
		func() (G.Value, error) { return maskedSoftmaxDo[float32](op, vs) },
		func() (G.Value, error) { return maskedSoftmaxDo[float64](op, vs) })
}

func maskedSoftmaxDo[T float](op *maskedSoftmaxOp, vs []G.Value) (G.Value, error) {
	const name = "MaskedSoftmax"
	if err := checkShape(name, "x", vs[0], op.shape); err != nil {
		return nil, err
	}
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	var mask []T
	var bc bcast
	if op.mask != nil {
		if err := checkShape(name, "mask", vs[1], op.mask); err != nil {
			return nil, err
		}
		if mask, err = floats[T](name, vs[1]); err != nil {
			return nil, err
		}
		if op.bc.rowOff == nil {
			op.bc = newBcast(op.mask, op.shape)
		}
		bc = op.bc
	}
	out, y := bufFor[T](&op.res, op.shape)
	n := op.shape[len(op.shape)-1]
	copy(y, x)
	parallelFor(len(x)/n, 4*n, func(lo, hi int) {
		var rowMax []T
		if isF32[T]() {
			rowMax = make([]T, hi-lo)
		}
		for r := lo; r < hi; r++ {
			var mk []T
			var off, step int
			if mask != nil {
				mk, off, step = mask, bc.rowOff[r], bc.step
			}
			if rowMax != nil {
				rowMax[r-lo] = maskRow(y[r*n:(r+1)*n], mk, off, step)
			} else {
				softmaxRow(y[r*n:(r+1)*n], mk, off, step)
			}
		}
		if rowMax != nil {
			k32.softmaxRows(any(y[lo*n:hi*n]).([]float32), n, any(rowMax).([]float32))
		}
	})
	return out, nil
}

// softmaxGradOp: y, dy -> dx = y * (dy - sum_k y_k dy_k) over the last axis.
// Entries with y = 0 (blocked, or rows with nothing allowed) get exactly 0
// and do not contribute to the sum, whatever dy holds there.
type softmaxGradOp struct {
	opBase
	shape tensor.Shape
	res   buf
}

func (op *softmaxGradOp) Arity() int { return 2 }
func (op *softmaxGradOp) Type() hm.Type {
	t := floatT(len(op.shape))
	return hm.NewFnType(t, t, t)
}
func (op *softmaxGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *softmaxGradOp) String() string        { return fmt.Sprintf("softmaxGrad{%v}", op.shape) }
func (op *softmaxGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *softmaxGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *softmaxGradOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *softmaxGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *softmaxGradOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return softmaxGradDo[float32](op, vs) },
		func() (G.Value, error) { return softmaxGradDo[float64](op, vs) })
}

func softmaxGradDo[T float](op *softmaxGradOp, vs []G.Value) (G.Value, error) {
	var name any = op
	for i, what := range []string{"y", "dy"} {
		if err := checkShape(name, what, vs[i], op.shape); err != nil {
			return nil, err
		}
	}
	y, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	dy, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	out, dx := bufFor[T](&op.res, op.shape)
	n := op.shape[len(op.shape)-1]
	parallelFor(len(y)/n, 2*n, func(lo, hi int) {
		if isF32[T]() {
			k32.softmaxGrad(any(dx[lo*n:hi*n]).([]float32), any(y[lo*n:hi*n]).([]float32), any(dy[lo*n:hi*n]).([]float32), n)
			return
		}
		for r := lo * n; r < hi*n; r += n {
			yr, dyr, dxr := y[r:r+n], dy[r:r+n], dx[r:r+n]
			var s float64
			for j, p := range yr {
				if p != 0 {
					s += float64(p) * float64(dyr[j])
				}
			}
			if isF32[T]() {
				st := T(s)
				for j, p := range yr {
					if p != 0 {
						dxr[j] = p * (dyr[j] - st)
					} else {
						dxr[j] = 0
					}
				}
				continue
			}
			for j, p := range yr {
				if p != 0 {
					dxr[j] = T(float64(p) * (float64(dyr[j]) - s))
				} else {
					dxr[j] = 0
				}
			}
		}
	})
	return out, nil
}
