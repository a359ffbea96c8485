package graph

import (
	"hash"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GELU applies the Gaussian error linear unit elementwise, in the tanh
// approximation of Hendrycks & Gimpel 2016 ("Gaussian Error Linear Units"),
// as PyTorch's gelu(approximate="tanh"):
//
//	y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))
//
// x is a float tensor of any shape (rank >= 1); y has x's shape. It returns
// an error for a nil, scalar or non-float x.
func GELU(x *G.Node) (*G.Node, error) {
	if err := checkFloatNode("GELU", "x", x); err != nil {
		return nil, err
	}
	if x.Dims() == 0 {
		return nil, errors.New("graph: GELU: x must be a tensor of rank >= 1, got a scalar")
	}
	return G.ApplyOp(&geluOp{dims: x.Dims()}, x)
}

const (
	geluC = 0.7978845608028654 // sqrt(2/pi)
	geluA = 0.044715
)

func gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(geluC*(x+geluA*x*x*x)))
}

func geluDeriv(x float64) float64 {
	t := math.Tanh(geluC * (x + geluA*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*geluC*(1+3*geluA*x*x)
}

// geluOp: x -> gelu(x); geluGradOp: x, dy -> dy * gelu'(x).
type geluOp struct {
	opBase
	dims int
	grad bool
	res  buf
}

func (op *geluOp) Arity() int {
	if op.grad {
		return 2
	}
	return 1
}
func (op *geluOp) Type() hm.Type {
	if op.grad {
		return hm.NewFnType(floatT(op.dims), floatT(op.dims), floatT(op.dims))
	}
	return hm.NewFnType(floatT(op.dims), floatT(op.dims))
}
func (op *geluOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *geluOp) String() string {
	if op.grad {
		return "geluGrad"
	}
	return "GELU"
}
func (op *geluOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *geluOp) Hashcode() uint32      { return hashOf(op) }
func (op *geluOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

func (op *geluOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, noSecondDerivative(op)
	}
	dx, err := G.ApplyOp(&geluOp{dims: op.dims, grad: true}, in[0], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

func (op *geluOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return geluDo[float32](op, vs) },
		func() (G.Value, error) { return geluDo[float64](op, vs) })
}

func geluDo[T float](op *geluOp, vs []G.Value) (G.Value, error) {
	var name any = op
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	out, y := bufFor[T](&op.res, vs[0].Shape())
	if !op.grad {
		parallelFor(len(x), 20, func(lo, hi int) {
			if isF32[T]() {
				k32.geluFwd(any(y[lo:hi]).([]float32), any(x[lo:hi]).([]float32))
				return
			}
			for i, v := range x[lo:hi] {
				y[lo+i] = T(gelu(float64(v)))
			}
		})
		return out, nil
	}
	dy, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	if len(dy) != len(x) {
		return nil, errors.Errorf("graph: %s: x %v and dy %v differ in size", name, vs[0].Shape(), vs[1].Shape())
	}
	parallelFor(len(x), 25, func(lo, hi int) {
		if isF32[T]() {
			k32.geluBwd(any(y[lo:hi]).([]float32), any(x[lo:hi]).([]float32), any(dy[lo:hi]).([]float32))
			return
		}
		for i, v := range x[lo:hi] {
			y[lo+i] = T(float64(dy[lo+i]) * geluDeriv(float64(v)))
		}
	})
	return out, nil
}

// gelu32 and geluDeriv32 are gelu and geluDeriv in float32 arithmetic with
// tanh32.
func gelu32[T float](x T) T {
	xf := float32(x)
	return T(0.5 * xf * (1 + tanh32(geluC*(xf+geluA*xf*xf*xf))))
}

func geluDeriv32[T float](x T) T {
	xf := float32(x)
	t := tanh32(geluC * (xf + geluA*xf*xf*xf))
	return T(0.5*(1+t) + 0.5*xf*(1-t*t)*geluC*(1+3*geluA*xf*xf))
}
