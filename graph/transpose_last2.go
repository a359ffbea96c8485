package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds TransposeLast2.

// TransposeLast2 swaps the last two axes of x ([..., M, N] -> [..., N, M])
// as a copy (Gorgonia's Transpose walks an iterator element by element);
// the gradient is TransposeLast2 of the output gradient.
func TransposeLast2(x *G.Node) (*G.Node, error) {
	if err := checkFloatNode("TransposeLast2", "x", x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if len(s) < 2 {
		return nil, errors.Errorf("graph: TransposeLast2: x %v must have rank >= 2", s)
	}
	return G.ApplyOp(&swapOp{in: s.Clone()}, x)
}

// swapOp: x [..., M, N] -> [..., N, M].
type swapOp struct {
	opBase
	in  tensor.Shape
	res buf
}

func (op *swapOp) out() tensor.Shape {
	o := op.in.Clone()
	r := len(o)
	o[r-2], o[r-1] = o[r-1], o[r-2]
	return o
}
func (op *swapOp) Arity() int { return 1 }
func (op *swapOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.in)), floatT(len(op.in)))
}
func (op *swapOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out(), nil }
func (op *swapOp) String() string                                 { return fmt.Sprintf("TransposeLast2{%v}", op.in) }
func (op *swapOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *swapOp) Hashcode() uint32                               { return hashOf(op) }
func (op *swapOp) DiffWRT(int) []bool                             { return []bool{true} }
func (op *swapOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := TransposeLast2(grad)
	return G.Nodes{d}, err
}

func (op *swapOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return swapDo[float32](op, vs[0]) },
		func() (G.Value, error) { return swapDo[float64](op, vs[0]) })
}

func swapDo[T float](op *swapOp, v G.Value) (G.Value, error) {
	if err := checkShape(op, "x", v, op.in); err != nil {
		return nil, err
	}
	x, err := floats[T](op, v)
	if err != nil {
		return nil, err
	}
	t, y := bufFor[T](&op.res, op.out())
	r := len(op.in)
	m, n := op.in[r-2], op.in[r-1]
	mats := len(x) / (m * n)
	parallelFor(mats, m*n, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			xm, ym := x[k*m*n:(k+1)*m*n], y[k*m*n:(k+1)*m*n]
			for i := 0; i < m; i++ {
				for j, val := range xm[i*n : (i+1)*n] {
					ym[j*m+i] = val
				}
			}
		}
	})
	return t, nil
}
