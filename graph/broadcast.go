package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BroadcastAdd is a + b with b broadcast onto a's shape by numpy's rules,
// restricted to one side: rank(b) <= rank(a), b right-aligned against a, and
// every dimension of b equal to a's or 1 (b may also be a scalar node). The
// result has a's shape. The gradient of a is the output gradient; that of b
// is the output gradient summed over the broadcast axes.
//
// It replaces Gorgonia's BroadcastAdd, whose gradient is silently wrong for
// some 4-D patterns in v0.9.18 (broadcast axes {1, 2} or {0, 2}). It returns
// an error naming both shapes if b does not broadcast onto a, or if the
// dtypes differ.
func BroadcastAdd(a, b *G.Node) (*G.Node, error) {
	op, err := newBroadcastOp("BroadcastAdd", a, b, false)
	if err != nil {
		return nil, err
	}
	return G.ApplyOp(op, a, b)
}

// BroadcastMul is the elementwise product a * b with BroadcastAdd's
// broadcasting of b onto a's shape. The gradient of a is dy * b (broadcast),
// that of b is dy * a summed over the broadcast axes.
func BroadcastMul(a, b *G.Node) (*G.Node, error) {
	op, err := newBroadcastOp("BroadcastMul", a, b, true)
	if err != nil {
		return nil, err
	}
	return G.ApplyOp(op, a, b)
}

func newBroadcastOp(name string, a, b *G.Node, mul bool) (*broadcastOp, error) {
	if err := checkFloatNode(name, "a", a); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "b", b); err != nil {
		return nil, err
	}
	as, bs := a.Shape(), b.Shape()
	if a.Dims() == 0 {
		return nil, errors.Errorf("graph: %s: a must be a tensor of rank >= 1, got a scalar (b %v)", name, bs)
	}
	if b.Dims() == 0 {
		bs = tensor.Shape{}
	}
	if !broadcastable(bs, as) {
		return nil, errors.Errorf("graph: %s: b %v does not broadcast onto a %v (rank(b) <= rank(a), right-aligned, each dim of b equal to a's or 1)", name, bs, as)
	}
	if a.Dtype() != b.Dtype() {
		return nil, errors.Errorf("graph: %s: dtypes differ: a %v %v, b %v %v", name, as, a.Dtype(), bs, b.Dtype())
	}
	return &broadcastOp{a: as.Clone(), b: bs.Clone(), mul: mul}, nil
}

// broadcastOp: a, b -> a + b or a * b, b broadcast onto a.
type broadcastOp struct {
	opBase
	a, b tensor.Shape
	mul  bool
	bc   bcast // b onto a, computed on first run
	res  buf
}

func (op *broadcastOp) name() string {
	if op.mul {
		return "BroadcastMul"
	}
	return "BroadcastAdd"
}
func (op *broadcastOp) Arity() int { return 2 }
func (op *broadcastOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.a)), floatT(len(op.b)), floatT(len(op.a)))
}
func (op *broadcastOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.a.Clone(), nil }
func (op *broadcastOp) String() string {
	return fmt.Sprintf("%s{%v, %v}", op.name(), op.a, op.b)
}
func (op *broadcastOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *broadcastOp) Hashcode() uint32      { return hashOf(op) }
func (op *broadcastOp) DiffWRT(int) []bool    { return []bool{true, true} }

func (op *broadcastOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	a, b := in[0], in[1]
	if !op.mul {
		if op.b.TotalSize() == op.a.TotalSize() && len(op.b) == len(op.a) {
			return G.Nodes{grad, grad}, nil // same shape: nothing to reduce
		}
		db, err := broadcastReduce(grad, op.b)
		if err != nil {
			return nil, err
		}
		return G.Nodes{grad, db}, nil
	}
	da, err := BroadcastMul(grad, b)
	if err != nil {
		return nil, err
	}
	db, err := G.ApplyOp(&broadcastReduceOp{a: op.a, b: op.b, mul: true}, grad, a)
	if err != nil {
		return nil, err
	}
	return G.Nodes{da, db}, nil
}

func (op *broadcastOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op.name(), vs,
		func() (G.Value, error) { return broadcastDo[float32](op, vs) },
		func() (G.Value, error) { return broadcastDo[float64](op, vs) })
}

func broadcastDo[T float](op *broadcastOp, vs []G.Value) (G.Value, error) {
	name := op // not op.name(): a string passed as any is allocated on every call
	if err := checkShape(name, "a", vs[0], op.a); err != nil {
		return nil, err
	}
	if err := checkShape(name, "b", vs[1], op.b); err != nil {
		return nil, err
	}
	a, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	b, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	out, y := bufFor[T](&op.res, op.a)
	if len(b) == len(a) { // same size: plain elementwise
		parallelFor(len(a), 1, func(lo, hi int) {
			if op.mul {
				for i, v := range a[lo:hi] {
					y[lo+i] = v * b[lo+i]
				}
				return
			}
			for i, v := range a[lo:hi] {
				y[lo+i] = v + b[lo+i]
			}
		})
		return out, nil
	}
	if op.bc.rowOff == nil {
		op.bc = newBcast(op.b, op.a)
	}
	bc := op.bc
	parallelFor(bc.rows, bc.cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			off, step, base := bc.rowOff[r], bc.step, r*bc.cols
			yr, ar := y[base:base+bc.cols], a[base:base+bc.cols]
			switch {
			case op.mul && step == 1:
				for j, v := range b[off : off+bc.cols] {
					yr[j] = ar[j] * v
				}
			case op.mul:
				for j := range yr {
					yr[j] = ar[j] * b[off+j*step]
				}
			case step == 1:
				for j, v := range b[off : off+bc.cols] {
					yr[j] = ar[j] + v
				}
			default:
				for j := range yr {
					yr[j] = ar[j] + b[off+j*step]
				}
			}
		}
	})
	return out, nil
}

// broadcastReduce sums dy (of some shape A) over the axes along which a
// tensor of shape b was broadcast onto A, giving b's shape.
func broadcastReduce(dy *G.Node, b tensor.Shape) (*G.Node, error) {
	a := dy.Shape()
	if !broadcastable(b, a) {
		return nil, errors.Errorf("graph: broadcastReduce: %v does not broadcast onto %v", b, a)
	}
	return G.ApplyOp(&broadcastReduceOp{a: a, b: b.Clone()}, dy)
}

// broadcastReduceOp: dy [A] -> [B] = sum of dy over the broadcast axes; with
// mul, dy [A], x [A] -> [B] = sum of dy * x over the broadcast axes.
type broadcastReduceOp struct {
	opBase
	a, b tensor.Shape
	mul  bool
	bc   bcast // b onto a, computed on first run
	res  buf
	acc  []float64
}

func (op *broadcastReduceOp) Arity() int {
	if op.mul {
		return 2
	}
	return 1
}
func (op *broadcastReduceOp) Type() hm.Type {
	if op.mul {
		return hm.NewFnType(floatT(len(op.a)), floatT(len(op.a)), floatT(len(op.b)))
	}
	return hm.NewFnType(floatT(len(op.a)), floatT(len(op.b)))
}
func (op *broadcastReduceOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if len(op.b) == 0 {
		return scalarShape.Clone(), nil
	}
	return op.b.Clone(), nil
}
func (op *broadcastReduceOp) String() string {
	if op.mul {
		return fmt.Sprintf("broadcastMulReduce{%v -> %v}", op.a, op.b)
	}
	return fmt.Sprintf("broadcastReduce{%v -> %v}", op.a, op.b)
}
func (op *broadcastReduceOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *broadcastReduceOp) Hashcode() uint32      { return hashOf(op) }
func (op *broadcastReduceOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}
func (op *broadcastReduceOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *broadcastReduceOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return broadcastReduceDo[float32](op, vs) },
		func() (G.Value, error) { return broadcastReduceDo[float64](op, vs) })
}

func broadcastReduceDo[T float](op *broadcastReduceOp, vs []G.Value) (G.Value, error) {
	var name any = op
	for _, v := range vs {
		if err := checkShape(name, "input", v, op.a); err != nil {
			return nil, err
		}
	}
	dy, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	var x []T
	if op.mul {
		if x, err = floats[T](name, vs[1]); err != nil {
			return nil, err
		}
	}
	nb := op.b.TotalSize()
	if len(op.acc) != nb {
		op.acc = make([]float64, nb)
	}
	acc := op.acc
	clear(acc)
	if !op.mul && nb > 0 && len(dy)%nb == 0 && isSuffix(op.b, op.a) {
		// b is a's trailing axes: sum of the rows of dy viewed as [N, nb].
		sumRows(dy, nb, acc)
	} else {
		if op.bc.rowOff == nil {
			op.bc = newBcast(op.b, op.a)
		}
		bc := op.bc
		for r := 0; r < bc.rows; r++ {
			off, step, base := bc.rowOff[r], bc.step, r*bc.cols
			if op.mul {
				for j := 0; j < bc.cols; j++ {
					acc[off+j*step] += float64(dy[base+j]) * float64(x[base+j])
				}
			} else {
				for j := 0; j < bc.cols; j++ {
					acc[off+j*step] += float64(dy[base+j])
				}
			}
		}
	}
	if len(op.b) == 0 {
		return scalarValue[T](acc[0]), nil
	}
	out, db := bufFor[T](&op.res, op.b)
	for i, v := range acc {
		db[i] = T(v)
	}
	return out, nil
}

// isSuffix reports whether b equals the trailing axes of a, ignoring
// leading 1s of b.
func isSuffix(b, a tensor.Shape) bool {
	for len(b) > 0 && b[0] == 1 {
		b = b[1:]
	}
	if len(b) > len(a) {
		return false
	}
	return b.Eq(a[len(a)-len(b):]) || len(b) == 0
}

// sumRows adds the rows of x, viewed as [len(x)/n, n], into acc [n], in
// float64, splitting the rows over Threads() goroutines.
func sumRows[T float](x []T, n int, acc []float64) {
	if isF32[T]() {
		sumRows32(any(x).([]float32), n, acc)
		return
	}
	rows := len(x) / n
	p := Threads()
	if p > rows {
		p = rows
	}
	if p <= 1 || len(x) < 1<<15 {
		for r := 0; r < rows; r++ {
			for j, v := range x[r*n : (r+1)*n] {
				acc[j] += float64(v)
			}
		}
		return
	}
	part := make([]float64, p*n)
	parallelFor(p, len(x)/p, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			pc := part[c*n : (c+1)*n]
			for r := c * rows / p; r < (c+1)*rows/p; r++ {
				for j, v := range x[r*n : (r+1)*n] {
					pc[j] += float64(v)
				}
			}
		}
	})
	for c := 0; c < p; c++ {
		for j, v := range part[c*n : (c+1)*n] {
			acc[j] += v
		}
	}
}

// sumRows32 is sumRows with the float32 kernels (float32 partial sums per
// thread, added in float64).
func sumRows32(x []float32, n int, acc []float64) {
	rows := len(x) / n
	p := Threads()
	if p > rows {
		p = rows
	}
	if p < 1 || len(x) < 1<<15 {
		p = 1
	}
	part := make([]float32, p*n)
	parallelFor(p, 1<<15, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			k32.colSums(part[c*n:(c+1)*n], x[c*rows/p*n:(c+1)*rows/p*n])
		}
	})
	for c := 0; c < p; c++ {
		for j, v := range part[c*n : (c+1)*n] {
			acc[j] += float64(v)
		}
	}
}
