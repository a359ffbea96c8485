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
	return G.ApplyOp(op, x, mask)
}

// maskedSoftmaxOp: x, [mask] -> y of x's shape.
type maskedSoftmaxOp struct {
	opBase
	shape tensor.Shape // x's
	mask  tensor.Shape // nil if no mask
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

func (op *maskedSoftmaxOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes("MaskedSoftmax", vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return maskedSoftmaxDo[float32](op, vs)
	}
	return maskedSoftmaxDo[float64](op, vs)
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
		bc = newBcast(op.mask, op.shape)
	}
	out, y := newDense[T](op.shape)
	n := op.shape[len(op.shape)-1]
	rows := len(x) / n
	e := make([]float64, n)
	for r := 0; r < rows; r++ {
		xr := x[r*n : (r+1)*n]
		yr := y[r*n : (r+1)*n]
		allowed := func(j int) bool { return true }
		if mask != nil {
			off, step := bc.rowOff[r], bc.step
			allowed = func(j int) bool { return mask[off+j*step] != 0 }
		}
		m := math.Inf(-1)
		some := false
		for j, v := range xr {
			if allowed(j) {
				some = true
				m = math.Max(m, float64(v))
			}
		}
		if !some {
			continue // row stays all zeros
		}
		var s float64
		for j, v := range xr {
			e[j] = 0
			if allowed(j) {
				e[j] = math.Exp(float64(v) - m)
				s += e[j]
			}
		}
		for j := range yr {
			yr[j] = T(e[j] / s)
		}
	}
	return out, nil
}

// softmaxGradOp: y, dy -> dx = y * (dy - sum_k y_k dy_k) over the last axis.
// Entries with y = 0 (blocked, or rows with nothing allowed) get exactly 0
// and do not contribute to the sum, whatever dy holds there.
type softmaxGradOp struct {
	opBase
	shape tensor.Shape
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

func (op *softmaxGradOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes(op.String(), vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return softmaxGradDo[float32](op, vs)
	}
	return softmaxGradDo[float64](op, vs)
}

func softmaxGradDo[T float](op *softmaxGradOp, vs []G.Value) (G.Value, error) {
	name := op.String()
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
	out, dx := newDense[T](op.shape)
	n := op.shape[len(op.shape)-1]
	for r := 0; r+n <= len(y); r += n {
		var s float64
		for j := r; j < r+n; j++ {
			if y[j] != 0 {
				s += float64(y[j]) * float64(dy[j])
			}
		}
		for j := r; j < r+n; j++ {
			if y[j] != 0 {
				dx[j] = T(float64(y[j]) * (float64(dy[j]) - s))
			}
		}
	}
	return out, nil
}
