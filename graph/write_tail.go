package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// WriteTail writes x [B, T, d] into the last T rows of each sequence of
// cache [B, W, d] (T <= W), in place, and returns cache: the result is the
// cache's own memory, rows 0..W-T-1 as they were and rows W-T..W-1 equal
// to x. It is the append of a key/value cache that already holds the room
// for the new rows (layers.Decoder), which Concat would copy whole at
// every step: at a window of 8192 the two copies of a step (Concat, then
// the cache's slide) moved 32 MB.
//
// The op has no gradient (it mutates its input): forward-only graphs only.
// cache must be an input node whose value the caller owns; x any node.
func WriteTail(cache, x *G.Node) (*G.Node, error) {
	if err := checkFloatNode("WriteTail", "cache", cache); err != nil {
		return nil, err
	}
	if err := checkFloatNode("WriteTail", "x", x); err != nil {
		return nil, err
	}
	sc, sx := cache.Shape(), x.Shape()
	if sc.Dims() != 3 || sx.Dims() != 3 || sc[0] != sx[0] || sc[2] != sx[2] || sx[1] > sc[1] {
		return nil, errors.Errorf("graph: WriteTail: cache %v and rows %v, want [B, W, d] and [B, T, d] with T <= W", sc, sx)
	}
	if cache.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: WriteTail: cache of %v and rows of %v", cache.Dtype(), x.Dtype())
	}
	return G.ApplyOp(&writeTailOp{cache: sc.Clone(), x: sx.Clone()}, cache, x)
}

type writeTailOp struct {
	opBase
	cache, x tensor.Shape
}

func (op *writeTailOp) Arity() int { return 2 }
func (op *writeTailOp) Type() hm.Type {
	return hm.NewFnType(floatT(3), floatT(3), floatT(3))
}
func (op *writeTailOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.cache.Clone(), nil }
func (op *writeTailOp) String() string {
	return fmt.Sprintf("WriteTail{%v, %v}", op.cache, op.x)
}
func (op *writeTailOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *writeTailOp) Hashcode() uint32      { return hashOf(op) }
func (op *writeTailOp) DiffWRT(int) []bool    { return []bool{false, false} }
func (op *writeTailOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, errors.Errorf("graph: %s has no gradient (it writes into its input): forward-only graphs only", op)
}
func (op *writeTailOp) Do(vs ...G.Value) (G.Value, error) {
	c, err := dense(op, vs[0])
	if err != nil {
		return nil, err
	}
	x, err := dense(op, vs[1])
	if err != nil {
		return nil, err
	}
	if !sameDims(c.Shape(), op.cache) || !sameDims(x.Shape(), op.x) {
		return nil, errors.Errorf("graph: %s: inputs have shapes %v and %v at run time", op, c.Shape(), x.Shape())
	}
	w, t, d := op.cache[1], op.x[1], op.x[2]
	switch cd := c.Data().(type) {
	case []float32:
		xd, ok := x.Data().([]float32)
		if !ok {
			return nil, errors.Errorf("graph: %s: inputs of dtypes %v and %v", op, c.Dtype(), x.Dtype())
		}
		writeTail(cd, xd, op.cache[0], w, t, d)
	case []float64:
		xd, ok := x.Data().([]float64)
		if !ok {
			return nil, errors.Errorf("graph: %s: inputs of dtypes %v and %v", op, c.Dtype(), x.Dtype())
		}
		writeTail(cd, xd, op.cache[0], w, t, d)
	default:
		return nil, errors.Errorf("graph: %s: unsupported dtype %v", op, c.Dtype())
	}
	return c, nil
}

func writeTail[T float](c, x []T, b, w, t, d int) {
	for i := 0; i < b; i++ {
		copy(c[(i*w+w-t)*d:(i+1)*w*d], x[i*t*d:(i+1)*t*d])
	}
}
