package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Why these exist: Gorgonia's Reshape returns a view that shares memory with
// its input, while its elementwise ops (Add, Mul, ...) overwrite their first
// input in place when the register allocator thinks it is dead. A node that is
// both reshaped and added to (the residual stream of a Transformer) then has
// its reshaped view overwritten before the backward pass reads it: the
// gradients of everything computed from the view come out silently wrong
// (measured: two residual attention layers, wrong d(wk) of the second). The
// ops here always write to memory of their own (never their input's).

// Reshape returns x with a new shape of the same size, as a copy (never a
// view). The gradient is dy reshaped back.
func Reshape(x *G.Node, shape ...int) (*G.Node, error) {
	if err := checkFloatNode("Reshape", "x", x); err != nil {
		return nil, err
	}
	to := tensor.Shape(append([]int(nil), shape...))
	if to.TotalSize() != x.Shape().TotalSize() || len(to) == 0 {
		return nil, errors.Errorf("graph: Reshape: cannot reshape %v to %v", x.Shape(), to)
	}
	if sameDims(x.Shape(), to) {
		return x, nil
	}
	return G.ApplyOp(&reshapeOp{from: x.Shape().Clone(), to: to}, x)
}

type reshapeOp struct {
	opBase
	from, to tensor.Shape
	res      buf
}

func (op *reshapeOp) Arity() int { return 1 }
func (op *reshapeOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.from)), floatT(len(op.to)))
}
func (op *reshapeOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.to.Clone(), nil }
func (op *reshapeOp) String() string                                 { return fmt.Sprintf("Reshape%v->%v", op.from, op.to) }
func (op *reshapeOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *reshapeOp) Hashcode() uint32                               { return hashOf(op) }
func (op *reshapeOp) DiffWRT(n int) []bool                           { return []bool{true} }
func (op *reshapeOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&reshapeOp{from: op.to, to: op.from}, grad)
	return G.Nodes{dx}, err
}
func (op *reshapeOp) Do(vs ...G.Value) (G.Value, error) {
	d, err := dense(op, vs[0])
	if err != nil {
		return nil, err
	}
	if d.Shape().TotalSize() != op.to.TotalSize() {
		return nil, errors.Errorf("graph: %s: input has shape %v at run time", op, d.Shape())
	}
	switch src := d.Data().(type) {
	case []float32:
		out, dst := bufFor[float32](&op.res, op.to)
		copy(dst, src)
		return out, nil
	case []float64:
		out, dst := bufFor[float64](&op.res, op.to)
		copy(dst, src)
		return out, nil
	default:
		return nil, errors.Errorf("graph: %s: unsupported dtype %v", op, d.Dtype())
	}
}

// Scale returns c*x for a host constant c, into memory of its own (see Reshape for
// why not Gorgonia's Mul by a scalar). The gradient is c*dy.
func Scale(x *G.Node, c float64) (*G.Node, error) {
	if err := checkFloatNode("Scale", "x", x); err != nil {
		return nil, err
	}
	if x.Dims() == 0 {
		return nil, errors.New("graph: Scale: x must be a tensor, got a scalar")
	}
	return G.ApplyOp(&scaleOp{dims: x.Dims(), c: c}, x)
}

type scaleOp struct {
	opBase
	dims int
	c    float64
	res  buf
}

func (op *scaleOp) Arity() int    { return 1 }
func (op *scaleOp) Type() hm.Type { return hm.NewFnType(floatT(op.dims), floatT(op.dims)) }
func (op *scaleOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *scaleOp) String() string        { return fmt.Sprintf("Scale(%v)", op.c) }
func (op *scaleOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *scaleOp) Hashcode() uint32      { return hashOf(op) }
func (op *scaleOp) DiffWRT(n int) []bool  { return []bool{true} }
func (op *scaleOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&scaleOp{dims: op.dims, c: op.c}, grad)
	return G.Nodes{dx}, err
}
func (op *scaleOp) Do(vs ...G.Value) (G.Value, error) {
	d, err := dense(op, vs[0])
	if err != nil {
		return nil, err
	}
	switch src := d.Data().(type) {
	case []float32:
		out, dst := bufFor[float32](&op.res, d.Shape())
		c := float32(op.c)
		for i, v := range src[:len(dst)] {
			dst[i] = c * v
		}
		return out, nil
	case []float64:
		out, dst := bufFor[float64](&op.res, d.Shape())
		for i, v := range src[:len(dst)] {
			dst[i] = op.c * v
		}
		return out, nil
	default:
		return nil, errors.Errorf("graph: %s: unsupported dtype %v", op, d.Dtype())
	}
}

// Add returns a + b for a and b of equal shape (or b broadcastable onto a),
// into memory of its own; use it instead of Gorgonia's Add (see Reshape).
func Add(a, b *G.Node) (*G.Node, error) { return BroadcastAdd(a, b) }

// sameDims reports whether a and b have the same rank and dimensions
// (tensor.Shape.Eq treats a vector [n] and a column [n, 1] as equal).
func sameDims(a, b tensor.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
