package graph

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LayerNorm normalises x over its last axis and applies the learnable gain
// and bias (Ba, Kiros & Hinton 2016, "Layer Normalization"):
//
//	y = (x - mean) / sqrt(var + eps) * gamma + beta
//
// with the biased variance (divide by d), as PyTorch's nn.LayerNorm.
// x is [..., d] of rank >= 2; gamma and beta are [d]; y has x's shape.
// It is differentiable with respect to x, gamma and beta. It returns an error
// if the ranks, the last dimensions or the dtypes disagree, or if eps < 0.
func LayerNorm(x, gamma, beta *G.Node, eps float64) (*G.Node, error) {
	const name = "LayerNorm"
	for _, c := range []struct {
		what string
		n    *G.Node
	}{{"x", x}, {"gamma", gamma}, {"beta", beta}} {
		if err := checkFloatNode(name, c.what, c.n); err != nil {
			return nil, err
		}
	}
	xs, gs, bs := x.Shape(), gamma.Shape(), beta.Shape()
	if len(xs) < 2 {
		return nil, errors.Errorf("graph: LayerNorm: x %v must have rank >= 2", xs)
	}
	d := xs[len(xs)-1]
	if len(gs) != 1 || gs[0] != d || len(bs) != 1 || bs[0] != d {
		return nil, errors.Errorf("graph: LayerNorm: x %v needs gamma and beta of shape [%d], got gamma %v, beta %v", xs, d, gs, bs)
	}
	if gamma.Dtype() != x.Dtype() || beta.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: LayerNorm: dtypes differ: x %v, gamma %v, beta %v", x.Dtype(), gamma.Dtype(), beta.Dtype())
	}
	if !(eps >= 0) {
		return nil, errors.Errorf("graph: LayerNorm: eps %v must be >= 0", eps)
	}
	return G.ApplyOp(&layerNormOp{eps: eps, dims: len(xs), d: d}, x, gamma, beta)
}

// layerNormOp: x [..., d], gamma [d], beta [d] -> y [..., d].
type layerNormOp struct {
	opBase
	eps  float64
	dims int
	d    int
}

func (op *layerNormOp) Arity() int { return 3 }
func (op *layerNormOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(1), floatT(1), floatT(op.dims))
}
func (op *layerNormOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *layerNormOp) String() string {
	return fmt.Sprintf("LayerNorm{eps=%v, d=%d}", op.eps, op.d)
}
func (op *layerNormOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *layerNormOp) Hashcode() uint32      { return hashOf(op) }
func (op *layerNormOp) DiffWRT(int) []bool    { return []bool{true, true, true} }

func (op *layerNormOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	x, gamma := in[0], in[1]
	dx, err := G.ApplyOp(&layerNormGradXOp{eps: op.eps, dims: op.dims, d: op.d}, x, gamma, grad)
	if err != nil {
		return nil, err
	}
	dg, err := G.ApplyOp(&layerNormGradGammaOp{eps: op.eps, dims: op.dims, d: op.d}, x, grad)
	if err != nil {
		return nil, err
	}
	db, err := broadcastReduce(grad, tensor.Shape{op.d})
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dg, db}, nil
}

func (op *layerNormOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes("LayerNorm", vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return layerNormDo[float32](op, vs)
	}
	return layerNormDo[float64](op, vs)
}

func layerNormDo[T float](op *layerNormOp, vs []G.Value) (G.Value, error) {
	const name = "LayerNorm"
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	gm, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	bt, err := floats[T](name, vs[2])
	if err != nil {
		return nil, err
	}
	if len(gm) != op.d || len(bt) != op.d || len(x)%op.d != 0 {
		return nil, errors.Errorf("graph: LayerNorm: shapes x %v, gamma %v, beta %v at run time, want last dim %d", vs[0].Shape(), vs[1].Shape(), vs[2].Shape(), op.d)
	}
	out, y := newDense[T](vs[0].Shape())
	d := op.d
	for r := 0; r+d <= len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], op.eps)
		for j := 0; j < d; j++ {
			xh := (float64(x[r+j]) - mean) * rstd
			y[r+j] = T(xh*float64(gm[j]) + float64(bt[j]))
		}
	}
	return out, nil
}

// rowStats returns the mean and 1/sqrt(biased variance + eps) of row,
// accumulated in float64.
func rowStats[T float](row []T, eps float64) (mean, rstd float64) {
	n := float64(len(row))
	for _, v := range row {
		mean += float64(v)
	}
	mean /= n
	var v2 float64
	for _, v := range row {
		c := float64(v) - mean
		v2 += c * c
	}
	return mean, 1 / math.Sqrt(v2/n+eps)
}

// layerNormGradXOp: x [..., d], gamma [d], dy [..., d] -> dx [..., d].
//
//	dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma
type layerNormGradXOp struct {
	opBase
	eps  float64
	dims int
	d    int
}

func (op *layerNormGradXOp) Arity() int { return 3 }
func (op *layerNormGradXOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(1), floatT(op.dims), floatT(op.dims))
}
func (op *layerNormGradXOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *layerNormGradXOp) String() string {
	return fmt.Sprintf("layerNormGradX{eps=%v, d=%d}", op.eps, op.d)
}
func (op *layerNormGradXOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *layerNormGradXOp) Hashcode() uint32      { return hashOf(op) }
func (op *layerNormGradXOp) DiffWRT(int) []bool    { return []bool{true, true, true} }
func (op *layerNormGradXOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *layerNormGradXOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes(op.String(), vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return layerNormGradXDo[float32](op, vs)
	}
	return layerNormGradXDo[float64](op, vs)
}

func layerNormGradXDo[T float](op *layerNormGradXOp, vs []G.Value) (G.Value, error) {
	name := op.String()
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	gm, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	dy, err := floats[T](name, vs[2])
	if err != nil {
		return nil, err
	}
	if len(gm) != op.d || len(dy) != len(x) || len(x)%op.d != 0 {
		return nil, errors.Errorf("graph: %s: shapes x %v, gamma %v, dy %v at run time", name, vs[0].Shape(), vs[1].Shape(), vs[2].Shape())
	}
	out, dx := newDense[T](vs[0].Shape())
	d := op.d
	for r := 0; r+d <= len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], op.eps)
		var mg, mgx float64
		for j := 0; j < d; j++ {
			g := float64(dy[r+j]) * float64(gm[j])
			mg += g
			mgx += g * (float64(x[r+j]) - mean) * rstd
		}
		mg /= float64(d)
		mgx /= float64(d)
		for j := 0; j < d; j++ {
			g := float64(dy[r+j]) * float64(gm[j])
			xh := (float64(x[r+j]) - mean) * rstd
			dx[r+j] = T(rstd * (g - mg - xh*mgx))
		}
	}
	return out, nil
}

// layerNormGradGammaOp: x [..., d], dy [..., d] -> dgamma [d] = sum over rows
// of dy * xhat.
type layerNormGradGammaOp struct {
	opBase
	eps  float64
	dims int
	d    int
}

func (op *layerNormGradGammaOp) Arity() int { return 2 }
func (op *layerNormGradGammaOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.dims), floatT(1))
}
func (op *layerNormGradGammaOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.d}, nil
}
func (op *layerNormGradGammaOp) String() string {
	return fmt.Sprintf("layerNormGradGamma{eps=%v, d=%d}", op.eps, op.d)
}
func (op *layerNormGradGammaOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *layerNormGradGammaOp) Hashcode() uint32      { return hashOf(op) }
func (op *layerNormGradGammaOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *layerNormGradGammaOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *layerNormGradGammaOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	dt, err := checkDtypes(op.String(), vs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return layerNormGradGammaDo[float32](op, vs)
	}
	return layerNormGradGammaDo[float64](op, vs)
}

func layerNormGradGammaDo[T float](op *layerNormGradGammaOp, vs []G.Value) (G.Value, error) {
	name := op.String()
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	dy, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	if len(dy) != len(x) || len(x)%op.d != 0 {
		return nil, errors.Errorf("graph: %s: shapes x %v, dy %v at run time", name, vs[0].Shape(), vs[1].Shape())
	}
	d := op.d
	acc := make([]float64, d)
	for r := 0; r+d <= len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], op.eps)
		for j := 0; j < d; j++ {
			acc[j] += float64(dy[r+j]) * (float64(x[r+j]) - mean) * rstd
		}
	}
	out, dg := newDense[T](tensor.Shape{d})
	for j := range acc {
		dg[j] = T(acc[j])
	}
	return out, nil
}
