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
	res  buf
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
	// The dx op also accumulates dgamma and dbeta (one pass over x and dy);
	// two small ops hand them out, after dx (their input) has run. They
	// refer to the op of the node in the graph, which may be an earlier,
	// equal node that Gorgonia merged this one into.
	src, ok := dx.Op().(*layerNormGradXOp)
	if !ok {
		return nil, errors.Errorf("graph: LayerNorm: gradient node has op %v", dx.Op())
	}
	dg, err := G.ApplyOp(&layerNormParamGradOp{src: src, beta: false}, dx)
	if err != nil {
		return nil, err
	}
	db, err := G.ApplyOp(&layerNormParamGradOp{src: src, beta: true}, dx)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dg, db}, nil
}

func (op *layerNormOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, "LayerNorm", vs,
		func() (G.Value, error) { return layerNormDo[float32](op, vs) },
		func() (G.Value, error) { return layerNormDo[float64](op, vs) })
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
	out, y := bufFor[T](&op.res, vs[0].Shape())
	d := op.d
	parallelFor(len(x)/d, 4*d, func(lo, hi int) {
		if isF32[T]() {
			k32.layerNorm(any(y[lo*d:hi*d]).([]float32), any(x[lo*d:hi*d]).([]float32), any(gm).([]float32), any(bt).([]float32), float32(op.eps))
			return
		}
		for r := lo * d; r < hi*d; r += d {
			mean, rstd := rowStats(x[r:r+d], op.eps)
			for j := 0; j < d; j++ {
				xh := (float64(x[r+j]) - mean) * rstd
				y[r+j] = T(xh*float64(gm[j]) + float64(bt[j]))
			}
		}
	})
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
	res  buf
	// dgamma and dbeta of the last run, handed out by
	// layerNormParamGradOp.
	dgamma, dbeta []float64
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

func (op *layerNormGradXOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return layerNormGradXDo[float32](op, vs) },
		func() (G.Value, error) { return layerNormGradXDo[float64](op, vs) })
}

func layerNormGradXDo[T float](op *layerNormGradXOp, vs []G.Value) (G.Value, error) {
	var name any = op
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
	out, dx := bufFor[T](&op.res, vs[0].Shape())
	d := op.d
	rows := len(x) / d
	p := Threads()
	if p > rows {
		p = rows
	}
	if p < 1 {
		p = 1
	}
	// per-chunk partial sums of dgamma and dbeta
	part := make([]float64, 2*d*p)
	chunk := func(c, lo, hi int) {
		pg, pb := part[2*d*c:2*d*c+d], part[2*d*c+d:2*d*(c+1)]
		if isF32[T]() {
			g32, b32 := make([]float32, d), make([]float32, d)
			k32.layerNormGrad(any(dx[lo*d:hi*d]).([]float32), any(x[lo*d:hi*d]).([]float32), any(gm).([]float32),
				any(dy[lo*d:hi*d]).([]float32), float32(op.eps), g32, b32)
			for j := range g32 {
				pg[j], pb[j] = float64(g32[j]), float64(b32[j])
			}
			return
		}
		for r := lo * d; r < hi*d; r += d {
			mean, rstd := rowStats(x[r:r+d], op.eps)
			var mg, mgx float64
			for j := 0; j < d; j++ {
				g := float64(dy[r+j]) * float64(gm[j])
				xh := (float64(x[r+j]) - mean) * rstd
				mg += g
				mgx += g * xh
				pg[j] += float64(dy[r+j]) * xh
				pb[j] += float64(dy[r+j])
			}
			mg /= float64(d)
			mgx /= float64(d)
			for j := 0; j < d; j++ {
				g := float64(dy[r+j]) * float64(gm[j])
				xh := (float64(x[r+j]) - mean) * rstd
				dx[r+j] = T(rstd * (g - mg - xh*mgx))
			}
		}
	}
	if p == 1 || rows*d < 1<<14 {
		chunk(0, 0, rows)
		p = 1
	} else {
		threadedRuns.Add(1)
		done := make(chan struct{}, p)
		for c := 0; c < p; c++ {
			go func(c int) {
				chunk(c, c*rows/p, (c+1)*rows/p)
				done <- struct{}{}
			}(c)
		}
		for c := 0; c < p; c++ {
			<-done
		}
	}
	if len(op.dgamma) != d {
		op.dgamma, op.dbeta = make([]float64, d), make([]float64, d)
	}
	copy(op.dgamma, part[:d])
	copy(op.dbeta, part[d:2*d])
	for c := 1; c < p; c++ {
		for j := 0; j < d; j++ {
			op.dgamma[j] += part[2*d*c+j]
			op.dbeta[j] += part[2*d*c+d+j]
		}
	}
	return out, nil
}

// layerNormParamGradOp: dx (only for ordering) -> dgamma or dbeta [d], as
// accumulated by the run of src that produced dx.
type layerNormParamGradOp struct {
	opBase
	src  *layerNormGradXOp
	beta bool
	res  buf
}

func (op *layerNormParamGradOp) Arity() int { return 1 }
func (op *layerNormParamGradOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.src.dims), floatT(1))
}
func (op *layerNormParamGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.src.d}, nil
}
func (op *layerNormParamGradOp) String() string {
	which := "Gamma"
	if op.beta {
		which = "Beta"
	}
	// The source op's address ties the node to its dx node's op.
	return fmt.Sprintf("layerNormGrad%s{eps=%v, d=%d, src=%p}", which, op.src.eps, op.src.d, op.src)
}
func (op *layerNormParamGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *layerNormParamGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *layerNormParamGradOp) DiffWRT(int) []bool    { return []bool{false} }
func (op *layerNormParamGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *layerNormParamGradOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	acc := op.src.dgamma
	if op.beta {
		acc = op.src.dbeta
	}
	if len(acc) != op.src.d {
		return nil, errors.Errorf("graph: %v: the dx op has not run", op)
	}
	switch vs[0].Dtype() {
	case tensor.Float32:
		t, g := bufFor[float32](&op.res, tensor.Shape{op.src.d})
		for j, v := range acc {
			g[j] = float32(v)
		}
		return t, nil
	case tensor.Float64:
		t, g := bufFor[float64](&op.res, tensor.Shape{op.src.d})
		copy(g, acc)
		return t, nil
	}
	return nil, errors.Errorf("graph: %v: unsupported dtype %v", op, vs[0].Dtype())
}
