package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds SplitHeads and MergeHeads.

// SplitHeads maps x [B, T, H*dh] to [B, H, T, dh] (head h takes columns
// h*dh:(h+1)*dh), as a copy; the gradient is MergeHeads of the output
// gradient.
func SplitHeads(x *G.Node, heads int) (*G.Node, error) {
	if err := checkFloatNode("SplitHeads", "x", x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if len(s) != 3 || heads <= 0 || s[2]%heads != 0 {
		return nil, errors.Errorf("graph: SplitHeads: x %v must be [B, T, H*dh] with H = %d dividing the last axis", s, heads)
	}
	return G.ApplyOp(&headsOp{l: headLayout{merged: true, b: s[0], h: heads, rows: s[1], cols: s[2] / heads}, split: true}, x)
}

// MergeHeads maps x [B, H, T, dh] to [B, T, H*dh], the inverse of
// SplitHeads (as a copy); the gradient is SplitHeads of the output gradient.
func MergeHeads(x *G.Node) (*G.Node, error) {
	if err := checkFloatNode("MergeHeads", "x", x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if len(s) != 4 {
		return nil, errors.Errorf("graph: MergeHeads: x %v must be [B, H, T, dh]", s)
	}
	return G.ApplyOp(&headsOp{l: headLayout{merged: true, b: s[0], h: s[1], rows: s[2], cols: s[3]}}, x)
}

// headsOp is SplitHeads (split) or MergeHeads; l is the merged layout.
type headsOp struct {
	opBase
	l     headLayout
	split bool
	res   buf
}

func (op *headsOp) splitL() headLayout { s := op.l; s.merged = false; return s }
func (op *headsOp) in() headLayout {
	if op.split {
		return op.l
	}
	return op.splitL()
}
func (op *headsOp) outL() headLayout {
	if op.split {
		return op.splitL()
	}
	return op.l
}
func (op *headsOp) Arity() int { return 1 }
func (op *headsOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.in().shape())), floatT(len(op.outL().shape())))
}
func (op *headsOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.outL().shape(), nil }
func (op *headsOp) String() string {
	if op.split {
		return fmt.Sprintf("SplitHeads{%v}", op.l)
	}
	return fmt.Sprintf("MergeHeads{%v}", op.l)
}
func (op *headsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *headsOp) Hashcode() uint32      { return hashOf(op) }
func (op *headsOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *headsOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := G.ApplyOp(&headsOp{l: op.l, split: !op.split}, grad)
	return G.Nodes{d}, err
}

func (op *headsOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return headsDo[float32](op, vs[0]) },
		func() (G.Value, error) { return headsDo[float64](op, vs[0]) })
}

func headsDo[T float](op *headsOp, v G.Value) (G.Value, error) {
	var name any = op
	il, ol := op.in(), op.outL()
	if err := checkShape(name, "x", v, il.shape()); err != nil {
		return nil, err
	}
	x, err := floats[T](name, v)
	if err != nil {
		return nil, err
	}
	t, y := bufFor[T](&op.res, ol.shape())
	l := op.l
	parallelFor(l.b*l.h, l.rows*l.cols, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			b, h := bh/l.h, bh%l.h
			io, ild, oo, old := il.off(b, h), il.ld(), ol.off(b, h), ol.ld()
			for r := 0; r < l.rows; r++ {
				copy(y[oo+r*old:oo+r*old+l.cols], x[io+r*ild:io+r*ild+l.cols])
			}
		}
	})
	return t, nil
}
