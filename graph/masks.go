package graph

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CausalMask returns the [tq, tk] attention mask of dtype dt (Float32 or
// Float64) that lets query i (at absolute position qStart+i) attend to key j
// (at kStart+j) iff kStart+j <= qStart+i: 1 where allowed, 0 where blocked.
// With qStart = kStart = 0 and tq = tk it is the usual lower-triangular
// mask; a query block that follows a cached or memory segment of keys has
// qStart > kStart. It panics on a dtype other than Float32 or Float64 or a
// negative size.
func CausalMask(dt tensor.Dtype, tq, tk, qStart, kStart int) *tensor.Dense {
	if tq < 0 || tk < 0 {
		panic(fmt.Sprintf("graph: CausalMask: negative size tq=%d, tk=%d", tq, tk))
	}
	data := make([]float64, tq*tk)
	for i := 0; i < tq; i++ {
		for j := 0; j < tk; j++ {
			if kStart+j <= qStart+i {
				data[i*tk+j] = 1
			}
		}
	}
	return fromFloat64(dt, tensor.Shape{tq, tk}, data)
}

// PaddingMask returns the [B, 1, 1, Tk] key-padding mask of dtype dt (Float32
// or Float64) that is 1 where valid[b][j] (key j of sequence b is a real
// token) and 0 where it is padding. It broadcasts over heads and queries in
// MaskedSoftmax and CombineMasks. It panics if valid is empty, if its rows
// differ in length, or on another dtype.
func PaddingMask(dt tensor.Dtype, valid [][]bool) *tensor.Dense {
	if len(valid) == 0 {
		panic("graph: PaddingMask: no rows")
	}
	tk := len(valid[0])
	data := make([]float64, len(valid)*tk)
	for b, row := range valid {
		if len(row) != tk {
			panic(fmt.Sprintf("graph: PaddingMask: row %d has %d entries, row 0 has %d", b, len(row), tk))
		}
		for j, ok := range row {
			if ok {
				data[b*tk+j] = 1
			}
		}
	}
	return fromFloat64(dt, tensor.Shape{len(valid), 1, 1, tk}, data)
}

// CombineMasks returns the elementwise product of two rank-4 masks under
// numpy broadcasting (each dimension pair equal, or one of them 1), e.g. a
// causal [1, 1, Tq, Tk] and a padding [B, 1, 1, Tk] mask give [B, 1, Tq, Tk].
// The result has the broadcast shape and a's dtype; it is allowed (1) where
// both are. It returns an error naming both shapes if either is not rank 4,
// the shapes do not broadcast, or the dtypes differ.
func CombineMasks(a, b *tensor.Dense) (*tensor.Dense, error) {
	if a == nil || b == nil {
		return nil, errors.New("graph: CombineMasks: nil mask")
	}
	as, bs := a.Shape(), b.Shape()
	if len(as) != 4 || len(bs) != 4 {
		return nil, errors.Errorf("graph: CombineMasks: masks must be rank 4, got %v and %v", as, bs)
	}
	if a.Dtype() != b.Dtype() || !isFloat(a.Dtype()) {
		return nil, errors.Errorf("graph: CombineMasks: dtypes %v and %v, want equal float dtypes", a.Dtype(), b.Dtype())
	}
	out := make(tensor.Shape, 4)
	for i := range out {
		switch {
		case as[i] == bs[i] || bs[i] == 1:
			out[i] = as[i]
		case as[i] == 1:
			out[i] = bs[i]
		default:
			return nil, errors.Errorf("graph: CombineMasks: shapes %v and %v do not broadcast (axis %d)", as, bs, i)
		}
	}
	ad, bd := ToFloat64s(a), ToFloat64s(b)
	ba, bb := newBcast(as, out), newBcast(bs, out)
	data := make([]float64, out.TotalSize())
	for r := 0; r < ba.rows; r++ {
		oa, ob := ba.rowOff[r], bb.rowOff[r]
		for j := 0; j < ba.cols; j++ {
			data[r*ba.cols+j] = ad[oa+j*ba.step] * bd[ob+j*bb.step]
		}
	}
	return fromFloat64(a.Dtype(), out, data), nil
}

// MaskNode returns a non-learnable input node of g holding mask m, for
// MaskedSoftmax. A mask of rank < 4 is right-aligned by prepending
// dimensions of 1 (numpy broadcasting), so a [tq, tk] mask becomes
// [1, 1, tq, tk]. The node's value shares m's data (it is a reshaped view of
// it). It can be rebound with G.Let to another mask of the node's (4-D)
// shape and dtype, e.g. when the graph is reused for the next batch. The
// node is named name, or "mask" if name is empty, with a suffix _1, _2, ...
// if g already has a node of that name (Gorgonia would otherwise merge it with
// an existing input node of the same shape, value and all). It panics if m is
// nil, of rank 0 or > 4, or not float.
func MaskNode(g *G.ExprGraph, m *tensor.Dense, name string) *G.Node {
	if m == nil {
		panic("graph: MaskNode: nil mask")
	}
	s := m.Shape()
	if len(s) == 0 || len(s) > 4 || !isFloat(m.Dtype()) {
		panic(fmt.Sprintf("graph: MaskNode: mask %v of dtype %v, want a float mask of rank 1 to 4", s, m.Dtype()))
	}
	v := m
	if len(s) < 4 {
		shape := make(tensor.Shape, 4-len(s), 4)
		for i := range shape {
			shape[i] = 1
		}
		shape = append(shape, s...)
		v = m.ShallowClone()
		if err := v.Reshape(shape...); err != nil {
			panic(fmt.Sprintf("graph: MaskNode: reshape %v to %v: %v", s, shape, err))
		}
	}
	return G.NewTensor(g, m.Dtype(), 4, G.WithShape(v.Shape()...), G.WithValue(v), G.WithName(freshName(g, name)))
}

// freshName returns name, or "mask" if name is empty, made unique in g by a
// suffix _1, _2, ... if needed. (Gorgonia merges input nodes of equal name,
// type and shape, unnamed ones included, into one node.)
func freshName(g *G.ExprGraph, name string) string {
	if name == "" {
		name = "mask"
	}
	if len(g.ByName(name)) == 0 {
		return name
	}
	for i := 1; ; i++ {
		n := fmt.Sprintf("%s_%d", name, i)
		if len(g.ByName(n)) == 0 {
			return n
		}
	}
}
