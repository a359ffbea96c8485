package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Concat returns a and b joined along axis: shapes equal except at axis,
// the result's axis a.axis + b.axis long. It copies contiguous blocks
// (Gorgonia's G.Concat copies element by element through an iterator:
// measured 72% of a cached decoding step, layers.Decoder, at a window of
// 512). The gradient is dy split back at a's length (ConcatSplit).
func Concat(axis int, a, b *G.Node) (*G.Node, error) {
	if err := checkFloatNode("Concat", "a", a); err != nil {
		return nil, err
	}
	if err := checkFloatNode("Concat", "b", b); err != nil {
		return nil, err
	}
	sa, sb := a.Shape(), b.Shape()
	if len(sa) != len(sb) || axis < 0 || axis >= len(sa) {
		return nil, errors.Errorf("graph: Concat: axis %d of shapes %v and %v", axis, sa, sb)
	}
	for i := range sa {
		if i != axis && sa[i] != sb[i] {
			return nil, errors.Errorf("graph: Concat: shapes %v and %v differ outside axis %d", sa, sb, axis)
		}
	}
	return G.ApplyOp(&concatOp{axis: axis, a: sa.Clone(), b: sb.Clone()}, a, b)
}

// ConcatSplit returns the part [lo, hi) of x along axis, as a copy.
func ConcatSplit(x *G.Node, axis, lo, hi int) (*G.Node, error) {
	if err := checkFloatNode("ConcatSplit", "x", x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if axis < 0 || axis >= len(s) || lo < 0 || hi > s[axis] || lo >= hi {
		return nil, errors.Errorf("graph: ConcatSplit: [%d, %d) of axis %d of shape %v", lo, hi, axis, s)
	}
	return G.ApplyOp(&splitOp{axis: axis, in: s.Clone(), lo: lo, hi: hi}, x)
}

// blocks returns, for shape s and axis, the number of outer blocks and the
// contiguous length of one block (s[axis] · prod(s[axis+1:])).
func blocks(s tensor.Shape, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for i, n := range s {
		if i < axis {
			outer *= n
		} else {
			inner *= n
		}
	}
	return outer, inner
}

type concatOp struct {
	opBase
	axis int
	a, b tensor.Shape
	res  buf
}

func (op *concatOp) out() tensor.Shape {
	s := op.a.Clone()
	s[op.axis] += op.b[op.axis]
	return s
}
func (op *concatOp) Arity() int { return 2 }
func (op *concatOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.a)), floatT(len(op.a)), floatT(len(op.a)))
}
func (op *concatOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out(), nil }
func (op *concatOp) String() string {
	return fmt.Sprintf("Concat{%d, %v, %v}", op.axis, op.a, op.b)
}
func (op *concatOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *concatOp) Hashcode() uint32      { return hashOf(op) }
func (op *concatOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *concatOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	m, n := op.a[op.axis], op.b[op.axis]
	da, err := ConcatSplit(grad, op.axis, 0, m)
	if err != nil {
		return nil, err
	}
	db, err := ConcatSplit(grad, op.axis, m, m+n)
	if err != nil {
		return nil, err
	}
	return G.Nodes{da, db}, nil
}
func (op *concatOp) Do(vs ...G.Value) (G.Value, error) {
	a, err := dense(op, vs[0])
	if err != nil {
		return nil, err
	}
	b, err := dense(op, vs[1])
	if err != nil {
		return nil, err
	}
	if !sameDims(a.Shape(), op.a) || !sameDims(b.Shape(), op.b) {
		return nil, errors.Errorf("graph: %s: inputs have shapes %v and %v at run time", op, a.Shape(), b.Shape())
	}
	outer, ia := blocks(op.a, op.axis)
	_, ib := blocks(op.b, op.axis)
	switch x := a.Data().(type) {
	case []float32:
		y, ok := b.Data().([]float32)
		if !ok {
			return nil, errors.Errorf("graph: %s: inputs of dtypes %v and %v", op, a.Dtype(), b.Dtype())
		}
		out, dst := bufFor[float32](&op.res, op.out())
		concatBlocks(dst, x, y, outer, ia, ib)
		return out, nil
	case []float64:
		y, ok := b.Data().([]float64)
		if !ok {
			return nil, errors.Errorf("graph: %s: inputs of dtypes %v and %v", op, a.Dtype(), b.Dtype())
		}
		out, dst := bufFor[float64](&op.res, op.out())
		concatBlocks(dst, x, y, outer, ia, ib)
		return out, nil
	default:
		return nil, errors.Errorf("graph: %s: unsupported dtype %v", op, a.Dtype())
	}
}

func concatBlocks[T float](dst, a, b []T, outer, ia, ib int) {
	for o := 0; o < outer; o++ {
		d := dst[o*(ia+ib):]
		copy(d[:ia], a[o*ia:(o+1)*ia])
		copy(d[ia:ia+ib], b[o*ib:(o+1)*ib])
	}
}

type splitOp struct {
	opBase
	axis   int
	in     tensor.Shape
	lo, hi int
	res    buf
}

func (op *splitOp) out() tensor.Shape {
	s := op.in.Clone()
	s[op.axis] = op.hi - op.lo
	return s
}
func (op *splitOp) Arity() int                                     { return 1 }
func (op *splitOp) Type() hm.Type                                  { return hm.NewFnType(floatT(len(op.in)), floatT(len(op.in))) }
func (op *splitOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out(), nil }
func (op *splitOp) String() string {
	return fmt.Sprintf("ConcatSplit{%d, %v, %d:%d}", op.axis, op.in, op.lo, op.hi)
}
func (op *splitOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *splitOp) Hashcode() uint32      { return hashOf(op) }
func (op *splitOp) DiffWRT(int) []bool    { return []bool{false} }
func (op *splitOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, errors.Errorf("graph: %s: second derivatives of Concat are not implemented", op)
}
func (op *splitOp) Do(vs ...G.Value) (G.Value, error) {
	x, err := dense(op, vs[0])
	if err != nil {
		return nil, err
	}
	if !sameDims(x.Shape(), op.in) {
		return nil, errors.Errorf("graph: %s: input has shape %v at run time", op, x.Shape())
	}
	outer, inner := blocks(op.in, op.axis)
	_, part := blocks(op.out(), op.axis)
	off := part / (op.hi - op.lo) * op.lo
	switch src := x.Data().(type) {
	case []float32:
		out, dst := bufFor[float32](&op.res, op.out())
		splitBlocks(dst, src, outer, inner, part, off)
		return out, nil
	case []float64:
		out, dst := bufFor[float64](&op.res, op.out())
		splitBlocks(dst, src, outer, inner, part, off)
		return out, nil
	default:
		return nil, errors.Errorf("graph: %s: unsupported dtype %v", op, x.Dtype())
	}
}

func splitBlocks[T float](dst, src []T, outer, inner, part, off int) {
	for o := 0; o < outer; o++ {
		copy(dst[o*part:(o+1)*part], src[o*inner+off:o*inner+off+part])
	}
}
