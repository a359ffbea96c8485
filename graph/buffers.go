package graph

import (
	"gorgonia.org/tensor"
)

// buf is an op's output tensor, reused by every run of the op's node instead
// of allocating (and zeroing) a fresh tensor per run. The value an op
// returns is therefore valid until the node runs again: a caller that keeps
// a node's value across runs must copy it (layers' segment runner and the
// trainer copy what they keep).
//
// A buffer is reused only if it still has the requested shape and element
// type and is a plain contiguous tensor; otherwise (for example after a
// Gorgonia op has reshaped or transposed it in place) a new one is made.
type buf struct{ t *tensor.Dense }

// bufFor returns b's tensor of element type T and the given shape, together
// with its data, allocating it on first use. The contents are those of the
// previous run (not zeroed): kernels must write every element, or clear the
// slice first.
func bufFor[T float](b *buf, shape tensor.Shape) (*tensor.Dense, []T) {
	if t := b.t; t != nil && t.Shape().Eq(shape) && !t.IsView() && !t.IsMaterializable() {
		if d, ok := denseData[T](t); ok && len(d) == shape.TotalSize() {
			return t, d
		}
	}
	t, d := newDense[T](shape)
	b.t = t
	return t, d
}

// zeroed returns bufFor's tensor with every element set to 0.
func zeroed[T float](b *buf, shape tensor.Shape) (*tensor.Dense, []T) {
	t, d := bufFor[T](b, shape)
	clear(d)
	return t, d
}
