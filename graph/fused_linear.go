package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Linear is the affine map y = x W + b over the last axis of x, as one op
// (one matrix product with the bias folded in) instead of Gorgonia's Mul, a
// copying reshape and a broadcast add:
//
//	x [..., In] (rank >= 2), W [In, Out], b [Out] or nil  ->  y [..., Out]
//
// It is differentiable with respect to x, W and b: dx = dy Wᵀ and dW = xᵀ dy
// (one matrix product each, x and dy flattened to [N, .] without copying) and
// db = dy summed over all but the last axis. The products run on the
// package's BLAS (OpenBLAS in the default build), split over Threads()
// goroutines. It returns an error if the shapes or dtypes disagree.
func Linear(x, w, b *G.Node) (*G.Node, error) {
	const name = "Linear"
	if err := checkFloatNode(name, "x", x); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "w", w); err != nil {
		return nil, err
	}
	xs, ws := x.Shape(), w.Shape()
	if len(xs) < 2 || len(ws) != 2 || xs[len(xs)-1] != ws[0] {
		return nil, errors.Errorf("graph: Linear: x %v and w %v: want x [..., In] of rank >= 2 and w [In, Out]", xs, ws)
	}
	if w.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: Linear: dtypes differ: x %v, w %v", x.Dtype(), w.Dtype())
	}
	op := &linearOp{x: xs.Clone(), in: ws[0], out: ws[1]}
	if b == nil {
		return G.ApplyOp(op, x, w)
	}
	if err := checkFloatNode(name, "b", b); err != nil {
		return nil, err
	}
	if bs := b.Shape(); len(bs) != 1 || bs[0] != ws[1] || b.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: Linear: bias %v (%v) does not match w %v (%v)", bs, b.Dtype(), ws, x.Dtype())
	}
	op.bias = true
	return G.ApplyOp(op, x, w, b)
}

// linearKind says which product a linearOp computes.
type linearKind int

const (
	linFwd   linearKind = iota // x, w, [b] -> x w + b        [..., Out]
	linGradX                   // dy, w -> dy wᵀ              [..., In]
	linGradW                   // x, dy -> xᵀ dy              [In, Out]
)

// linearOp is Linear and its gradient products. x is the shape of the
// forward input [..., In].
type linearOp struct {
	opBase
	kind    linearKind
	x       tensor.Shape
	in, out int
	bias    bool
	res     buf
}

func (op *linearOp) rows() int { return op.x.TotalSize() / op.in }

func (op *linearOp) yShape() tensor.Shape {
	s := op.x.Clone()
	s[len(s)-1] = op.out
	return s
}

func (op *linearOp) Arity() int {
	if op.kind == linFwd && op.bias {
		return 3
	}
	return 2
}

func (op *linearOp) Type() hm.Type {
	r := len(op.x)
	switch op.kind {
	case linGradX:
		return hm.NewFnType(floatT(r), floatT(2), floatT(r))
	case linGradW:
		return hm.NewFnType(floatT(r), floatT(r), floatT(2))
	}
	if op.bias {
		return hm.NewFnType(floatT(r), floatT(2), floatT(1), floatT(r))
	}
	return hm.NewFnType(floatT(r), floatT(2), floatT(r))
}

func (op *linearOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	switch op.kind {
	case linGradX:
		return op.x.Clone(), nil
	case linGradW:
		return tensor.Shape{op.in, op.out}, nil
	}
	return op.yShape(), nil
}

func (op *linearOp) String() string {
	switch op.kind {
	case linGradX:
		return fmt.Sprintf("linearGradX{%v, %dx%d}", op.x, op.in, op.out)
	case linGradW:
		return fmt.Sprintf("linearGradW{%v, %dx%d}", op.x, op.in, op.out)
	}
	return fmt.Sprintf("Linear{%v, %dx%d, bias=%v}", op.x, op.in, op.out, op.bias)
}
func (op *linearOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *linearOp) Hashcode() uint32      { return hashOf(op) }
func (op *linearOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

// SymDiff of the forward op: dx = dy wᵀ, dW = xᵀ dy, db = colsum(dy). The
// gradient products are linear in each input, so they are differentiated in
// turn as products (second derivatives work).
func (op *linearOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	g := func(k linearKind, a, b *G.Node) (*G.Node, error) {
		return G.ApplyOp(&linearOp{kind: k, x: op.x, in: op.in, out: op.out}, a, b)
	}
	switch op.kind {
	case linGradX: // z = dy wᵀ: d(dy) = dz w, dw = dzᵀ dy
		dy, w := in[0], in[1]
		ddy, err := Linear(grad, w, nil) // [..., In] x [In, Out]
		if err != nil {
			return nil, err
		}
		dw, err := g(linGradW, grad, dy) // gradᵀ dy [In, Out]
		return G.Nodes{ddy, dw}, err
	case linGradW: // z = xᵀ dy: dx = dy dzᵀ, d(dy) = x dz
		x, dy := in[0], in[1]
		dx, err := g(linGradX, dy, grad)
		if err != nil {
			return nil, err
		}
		ddy, err := Linear(x, grad, nil)
		return G.Nodes{dx, ddy}, err
	}
	x, w := in[0], in[1]
	dx, err := g(linGradX, grad, w)
	if err != nil {
		return nil, err
	}
	dw, err := g(linGradW, x, grad)
	if err != nil {
		return nil, err
	}
	if !op.bias {
		return G.Nodes{dx, dw}, nil
	}
	db, err := broadcastReduce(grad, tensor.Shape{op.out})
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw, db}, nil
}

func (op *linearOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return linearDo[float32](op, vs) },
		func() (G.Value, error) { return linearDo[float64](op, vs) })
}

func linearDo[T float](op *linearOp, vs []G.Value) (G.Value, error) {
	var name any = op
	n, in, out := op.rows(), op.in, op.out
	a, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	b, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	switch op.kind {
	case linGradX: // dy [N, Out], w [In, Out] -> dy wᵀ [N, In]
		if len(a) != n*out || len(b) != in*out {
			return nil, errors.Errorf("graph: %s: dy %v and w %v at run time", name, vs[0].Shape(), vs[1].Shape())
		}
		t, c := bufFor[T](&op.res, op.x)
		gemm(false, true, n, in, out, 1, a, out, b, out, 0, c, in)
		return t, nil
	case linGradW: // x [N, In], dy [N, Out] -> xᵀ dy [In, Out]
		if len(a) != n*in || len(b) != n*out {
			return nil, errors.Errorf("graph: %s: x %v and dy %v at run time", name, vs[0].Shape(), vs[1].Shape())
		}
		t, c := bufFor[T](&op.res, tensor.Shape{in, out})
		gemm(true, false, in, out, n, 1, a, in, b, out, 0, c, out)
		return t, nil
	}
	if len(a) != n*in || len(b) != in*out {
		return nil, errors.Errorf("graph: %s: x %v and w %v at run time, want %v and [%d %d]", name, vs[0].Shape(), vs[1].Shape(), op.x, in, out)
	}
	t, c := bufFor[T](&op.res, op.yShape())
	if !op.bias {
		gemm(false, false, n, out, in, 1, a, in, b, out, 0, c, out)
		return t, nil
	}
	bias, err := floats[T](name, vs[2])
	if err != nil {
		return nil, err
	}
	if len(bias) != out {
		return nil, errors.Errorf("graph: %s: bias %v at run time, want [%d]", name, vs[2].Shape(), out)
	}
	// Blocks of rows small enough to stay in cache between the bias fill
	// and the product that accumulates onto it (beta = 1).
	const blockBytes = 1 << 18
	rb := max(8, blockBytes/(4*out))
	blocks := (n + rb - 1) / rb
	parallelFor(blocks, rb*out*in, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			r0, r1 := k*rb, min(n, (k+1)*rb)
			fillRows(c[r0*out:r1*out], bias)
			gemmSerial(false, false, r1-r0, out, in, 1, a[r0*in:], in, b, out, 1, c[r0*out:], out)
		}
	})
	return t, nil
}

// fillRows sets every row of c (rows of len(row)) to row, doubling the
// filled prefix with each copy.
func fillRows[T float](c, row []T) {
	if len(c) == 0 {
		return
	}
	k := copy(c, row)
	for k < len(c) {
		k += copy(c[k:], c[:k])
	}
}
