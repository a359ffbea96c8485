package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"unsafe"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds the plumbing shared by the custom ops of the package: the
// constant parts of the G.Op interface, hm types, access to the float data of
// a G.Value and numpy-style broadcasting offsets.

// float is the element type of the kernels.
type float interface{ ~float32 | ~float64 }

// opBase implements the parts of G.Op that are the same for every op here:
// results are freshly allocated, nothing is overwritten in place and nothing
// calls out of Go.
type opBase struct{}

func (opBase) ReturnsPtr() bool     { return false }
func (opBase) CallsExtern() bool    { return false }
func (opBase) OverwritesInput() int { return -1 }

// hashOf hashes an op by its String, which must therefore name every
// parameter that changes its result: Gorgonia merges nodes with equal hashes
// and equal children.
func hashOf(s fmt.Stringer) uint32 {
	h := fnv.New32a()
	fmt.Fprint(h, s.String())
	return h.Sum32()
}

func writeHash(h hash.Hash, s fmt.Stringer) { fmt.Fprint(h, s.String()) }

// tv is the element type variable of every op here. (Gorgonia's type
// inference uses 'b' for the result, so only 'a' is used.)
var tv = hm.TypeVariable('a')

// floatT is the hm type of a float tensor of the given rank; rank 0 is a
// scalar.
func floatT(dims int) hm.Type {
	if dims == 0 {
		return tv
	}
	return G.TensorType{Dims: dims, Of: tv}
}

// intT is the hm type of a tensor.Int tensor of the given rank (as
// op_by_indices.go types its index input).
func intT(dims int) hm.Type { return G.TensorType{Dims: dims, Of: tensor.Int} }

// isFloat reports whether dt is a dtype the ops support.
func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float64 || dt == tensor.Float32 }

// checkFloatNode returns an error naming op and what if n is nil or not a
// float32/float64 node.
func checkFloatNode(op, what string, n *G.Node) error {
	if n == nil {
		return errors.Errorf("graph: %s: %s is nil", op, what)
	}
	if !isFloat(n.Dtype()) {
		return errors.Errorf("graph: %s: %s %v has dtype %v, want float32 or float64", op, what, n.Shape(), n.Dtype())
	}
	return nil
}

// checkIntNode returns an error naming op and what if n is nil, not a
// tensor.Int node, or a scalar.
func checkIntNode(op, what string, n *G.Node) error {
	if n == nil {
		return errors.Errorf("graph: %s: %s is nil", op, what)
	}
	if n.Dtype() != tensor.Int {
		return errors.Errorf("graph: %s: %s %v has dtype %v, want tensor.Int", op, what, n.Shape(), n.Dtype())
	}
	if n.Dims() == 0 {
		return errors.Errorf("graph: %s: %s must be a tensor of rank >= 1, got a scalar", op, what)
	}
	return nil
}

// noSecondDerivative is the SymDiff of the gradient ops.
func noSecondDerivative(op fmt.Stringer) error {
	return errors.Errorf("graph: %v is a gradient op and has no derivative (second derivatives are not implemented)", op)
}

// dispatch is the body of most ops' Do: it turns a panic in the kernel into
// an error naming op (recoverOp), checks that the float inputs vs share a
// dtype (checkDtypes, errors naming name), and runs the float32 or float64
// instantiation of the kernel.
func dispatch(op fmt.Stringer, name any, vs []G.Value, f32, f64 func() (G.Value, error)) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes(name, vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return f32()
	}
	return f64()
}

// recoverOp turns a panic in an op's Do into an error naming the op, since a
// panic inside Gorgonia's tape machine goroutine would end the process.
func recoverOp(op fmt.Stringer, err *error) {
	if r := recover(); r != nil {
		*err = errors.Errorf("graph: %v: internal error: %v", op, r)
	}
}

// dense returns v as a contiguous *tensor.Dense (materialising views), or an
// error naming op if v is not a dense tensor.
func dense(op any, v G.Value) (*tensor.Dense, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, errors.Errorf("graph: %s: expected a *tensor.Dense input, got %T", op, v)
	}
	if d.RequiresIterator() {
		m, ok := d.Materialize().(*tensor.Dense)
		if !ok {
			return nil, errors.Errorf("graph: %s: cannot materialise a view of shape %v", op, d.Shape())
		}
		d = m
	}
	return d, nil
}

// floats returns the elements of a float tensor or scalar value v, of element
// type T, in row-major order. The slice aliases v's data for tensors.
func floats[T float](op any, v G.Value) ([]T, error) {
	if d, ok := v.(*tensor.Dense); ok && !d.IsScalar() && !d.RequiresIterator() {
		if x, ok := denseData[T](d); ok {
			n := d.Shape().TotalSize()
			if len(x) < n {
				return nil, errors.Errorf("graph: %s: value of shape %v holds %d elements", op, d.Shape(), len(x))
			}
			return x[:n], nil
		}
	}
	switch x := v.Data().(type) {
	case T:
		return []T{x}, nil
	case []T:
		if d, ok := v.(*tensor.Dense); ok {
			d, err := dense(op, d)
			if err != nil {
				return nil, err
			}
			x = d.Data().([]T)
		}
		n := v.Shape().TotalSize()
		if len(x) < n {
			return nil, errors.Errorf("graph: %s: value of shape %v holds %d elements", op, v.Shape(), len(x))
		}
		return x[:n], nil
	}
	return nil, errors.Errorf("graph: %s: expected %T data, got %T (dtype %v)", op, T(0), v.Data(), v.Dtype())
}

// ints returns the elements of a tensor.Int value.
func ints(op any, v G.Value) ([]int, error) {
	switch x := v.Data().(type) {
	case int:
		return []int{x}, nil
	case []int:
		if d, ok := v.(*tensor.Dense); ok {
			d, err := dense(op, d)
			if err != nil {
				return nil, err
			}
			x = d.Data().([]int)
		}
		n := v.Shape().TotalSize()
		if len(x) < n {
			return nil, errors.Errorf("graph: %s: value of shape %v holds %d elements", op, v.Shape(), len(x))
		}
		return x[:n], nil
	}
	return nil, errors.Errorf("graph: %s: expected tensor.Int indices, got %T (dtype %v)", op, v.Data(), v.Dtype())
}

// newDense allocates a zeroed tensor of element type T and the given shape,
// together with its data slice.
func newDense[T float](shape tensor.Shape) (*tensor.Dense, []T) {
	var dt tensor.Dtype = tensor.Float64
	var zero T
	if _, ok := any(zero).(float32); ok {
		dt = tensor.Float32
	}
	t := tensor.New(tensor.WithShape(shape.Clone()...), tensor.Of(dt))
	d, _ := denseData[T](t)
	return t, d
}

// denseData returns the backing slice of d if its elements are of type T,
// without the reflection and allocation of (*tensor.Dense).Data (which
// builds a []T through reflect on every call: a measurable share of a
// one-token decoding step). The slice is the whole backing array (d's
// elements for a non-view tensor). ok is false for another dtype.
func denseData[T float](d *tensor.Dense) (x []T, ok bool) {
	var zero T
	switch any(zero).(type) {
	case float32:
		if d.Dtype() != tensor.Float32 {
			return nil, false
		}
		s := d.Float32s()
		return *(*[]T)(unsafe.Pointer(&s)), true
	default:
		if d.Dtype() != tensor.Float64 {
			return nil, false
		}
		s := d.Float64s()
		return *(*[]T)(unsafe.Pointer(&s)), true
	}
}

// scalarValue returns x as a G scalar of element type T.
func scalarValue[T float](x float64) G.Value {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return G.NewF32(float32(x))
	}
	return G.NewF64(x)
}

// checkSize returns an error naming op if v's shape differs from want.
func checkShape(op any, what string, v G.Value, want tensor.Shape) error {
	got := v.Shape()
	if got.TotalSize() != want.TotalSize() || (len(want) > 0 && !got.Eq(want)) {
		return errors.Errorf("graph: %s: %s has shape %v at run time, want %v", op, what, got, want)
	}
	return nil
}

// checkDtypes returns the common dtype of vs, or an error naming op.
func checkDtypes(op any, vs ...G.Value) (tensor.Dtype, error) {
	dt := vs[0].Dtype()
	if !isFloat(dt) {
		return dt, errors.Errorf("graph: %s: unsupported dtype %v", op, dt)
	}
	for _, v := range vs[1:] {
		if v.Dtype() != dt {
			return dt, errors.Errorf("graph: %s: mixed dtypes %v and %v", op, dt, v.Dtype())
		}
	}
	return dt, nil
}

// broadcastable reports whether in broadcasts onto out under numpy rules
// restricted to one side: rank(in) <= rank(out), right-aligned, every dim of
// in equal to out's or 1.
func broadcastable(in, out tensor.Shape) bool {
	if len(in) > len(out) {
		return false
	}
	off := len(out) - len(in)
	for i, d := range in {
		if d != out[off+i] && d != 1 {
			return false
		}
	}
	return true
}

// bcast maps the elements of a tensor of shape out onto those of a tensor of
// shape in that broadcasts onto it (see broadcastable). Rows are the
// vectors along out's last axis: element j of row r of out reads element
// rowOff[r] + j*step of in.
type bcast struct {
	rows, cols int
	rowOff     []int
	step       int
}

// newBcast precomputes the row offsets; in must be broadcastable onto out,
// and out must have rank >= 1.
func newBcast(in, out tensor.Shape) bcast {
	r := len(out)
	// strides of in, aligned to out's axes, 0 where in is broadcast
	str := make([]int, r)
	s := 1
	off := r - len(in)
	for i := len(in) - 1; i >= 0; i-- {
		if in[i] != 1 {
			str[off+i] = s
		}
		s *= in[i]
	}
	b := bcast{cols: out[r-1], step: str[r-1]}
	b.rows = 1
	for _, d := range out[:r-1] {
		b.rows *= d
	}
	b.rowOff = make([]int, b.rows)
	idx := make([]int, r-1)
	o := 0
	for row := 0; row < b.rows; row++ {
		b.rowOff[row] = o
		for ax := r - 2; ax >= 0; ax-- {
			idx[ax]++
			o += str[ax]
			if idx[ax] < out[ax] {
				break
			}
			o -= str[ax] * idx[ax]
			idx[ax] = 0
		}
	}
	return b
}

// scalarShape is tensor.ScalarShape().
var scalarShape = tensor.ScalarShape()
