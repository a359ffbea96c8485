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

// CrossEntropy is the mean categorical cross-entropy of logits against
// integer targets, as PyTorch's F.cross_entropy(logits, targets,
// ignore_index=<any negative>):
//
//	loss = mean over rows n with targets[n] >= 0 of
//	       logsumexp(logits[n, :]) - logits[n, targets[n]]
//
// logits is [N, V] (float32 or float64); targets is a tensor.Int [N]. A
// negative target marks its row as ignored (padding); the loss is 0 when every
// row is ignored. The result is a scalar of logits' dtype, differentiable with
// respect to logits only. Shape and dtype errors are returned here; a target
// >= V makes the machine's run fail with an error naming the target, its row
// and V.
func CrossEntropy(logits, targets *G.Node) (*G.Node, error) {
	if err := checkFloatNode("CrossEntropy", "logits", logits); err != nil {
		return nil, err
	}
	if err := checkIntNode("CrossEntropy", "targets", targets); err != nil {
		return nil, err
	}
	ls, ts := logits.Shape(), targets.Shape()
	if len(ls) != 2 || len(ts) != 1 || ts[0] != ls[0] {
		return nil, errors.Errorf("graph: CrossEntropy: want logits [N, V] and targets [N], got logits %v, targets %v", ls, ts)
	}
	return G.ApplyOp(&crossEntropyOp{n: ls[0], v: ls[1]}, logits, targets)
}

// crossEntropyOp: logits [N, V], targets Int [N] -> scalar;
// with grad: logits, targets, dy (scalar) -> dlogits [N, V].
type crossEntropyOp struct {
	opBase
	n, v int
	grad bool
	res  buf
	lse  []float64 // per-row scratch
}

func (op *crossEntropyOp) Arity() int {
	if op.grad {
		return 3
	}
	return 2
}
func (op *crossEntropyOp) Type() hm.Type {
	if op.grad {
		return hm.NewFnType(floatT(2), intT(1), tv, floatT(2))
	}
	return hm.NewFnType(floatT(2), intT(1), tv)
}
func (op *crossEntropyOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if op.grad {
		return tensor.Shape{op.n, op.v}, nil
	}
	return scalarShape.Clone(), nil
}
func (op *crossEntropyOp) String() string {
	if op.grad {
		return fmt.Sprintf("crossEntropyGrad{%d, %d}", op.n, op.v)
	}
	return fmt.Sprintf("CrossEntropy{%d, %d}", op.n, op.v)
}
func (op *crossEntropyOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *crossEntropyOp) Hashcode() uint32      { return hashOf(op) }
func (op *crossEntropyOp) DiffWRT(n int) []bool {
	if op.grad {
		return []bool{true, false, true}
	}
	return []bool{true, false}
}

func (op *crossEntropyOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, noSecondDerivative(op)
	}
	dl, err := G.ApplyOp(&crossEntropyOp{n: op.n, v: op.v, grad: true}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dl, nil}, nil
}

func (op *crossEntropyOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	fs := []G.Value{vs[0]}
	if op.grad {
		fs = append(fs, vs[2])
	}
	dt, err := checkDtypes(op, fs...)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return crossEntropyDo[float32](op, vs)
	}
	return crossEntropyDo[float64](op, vs)
}

func crossEntropyDo[T float](op *crossEntropyOp, vs []G.Value) (G.Value, error) {
	var name any = op
	logits, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	targets, err := ints(name, vs[1])
	if err != nil {
		return nil, err
	}
	n, v := op.n, op.v
	if len(logits) != n*v || len(targets) != n {
		return nil, errors.Errorf("graph: %s: logits %v and targets %v at run time, want [%d %d] and [%d]", name, vs[0].Shape(), vs[1].Shape(), n, v, n)
	}
	count := 0
	for i, t := range targets {
		if t >= v {
			return nil, errors.Errorf("graph: CrossEntropy: target %d at row %d is out of range for V = %d", t, i, v)
		}
		if t >= 0 {
			count++
		}
	}
	if len(op.lse) != n {
		op.lse = make([]float64, n)
	}
	lse := op.lse
	parallelFor(n, 2*v, func(lo, hi int) {
		if isF32[T]() {
			crossEntropyLSE32(any(logits).([]float32), v, lo, hi, lse)
			return
		}
		for i := lo; i < hi; i++ {
			if targets[i] >= 0 {
				lse[i] = logSumExp(logits[i*v : (i+1)*v])
			}
		}
	})
	if !op.grad {
		var loss float64
		for i, t := range targets {
			if t < 0 {
				continue
			}
			loss += lse[i] - float64(logits[i*v+t])
		}
		if count > 0 {
			loss /= float64(count)
		}
		return scalarValue[T](loss), nil
	}
	dys, err := floats[T](name, vs[2])
	if err != nil {
		return nil, err
	}
	if len(dys) != 1 {
		return nil, errors.Errorf("graph: %s: dy has shape %v, want a scalar", name, vs[2].Shape())
	}
	out, dl := bufFor[T](&op.res, tensor.Shape{n, v})
	if count == 0 {
		clear(dl)
		return out, nil
	}
	scale := float64(dys[0]) / float64(count)
	parallelFor(n, 2*v, func(lo, hi int) {
		if isF32[T]() {
			shift := make([]float32, hi-lo)
			for i := lo; i < hi; i++ {
				shift[i-lo] = float32(lse[i])
			}
			k32.expScaleRows(any(dl[lo*v:hi*v]).([]float32), any(logits[lo*v:hi*v]).([]float32), v, shift, float32(scale))
			for i := lo; i < hi; i++ {
				if t := targets[i]; t < 0 {
					clear(dl[i*v : (i+1)*v])
				} else {
					dl[i*v+t] -= T(scale)
				}
			}
			return
		}
		for i := lo; i < hi; i++ {
			t := targets[i]
			drow := dl[i*v : (i+1)*v]
			if t < 0 {
				clear(drow)
				continue
			}
			row := logits[i*v : (i+1)*v]
			for j, x := range row {
				p := math.Exp(float64(x) - lse[i])
				if j == t {
					p--
				}
				drow[j] = T(p * scale)
			}
		}
	})
	return out, nil
}

// crossEntropyLSE32 sets lse[i] = logsumexp of row i of logits [., v] for
// rows lo..hi-1, the exponentials by the float32 kernels.
func crossEntropyLSE32(logits []float32, v, lo, hi int, lse []float64) {
	shift := make([]float32, hi-lo)
	sums := make([]float32, hi-lo)
	for i := lo; i < hi; i++ {
		m := float32(math.Inf(-1))
		for _, x := range logits[i*v : (i+1)*v] {
			if x > m || x != x {
				m = x
			}
		}
		if math.IsInf(float64(m), 0) || m != m {
			m = 0 // the sum then carries the Inf or NaN
		}
		shift[i-lo] = m
	}
	k32.expSumRows(logits[lo*v:hi*v], v, shift, sums)
	for i := lo; i < hi; i++ {
		lse[i] = float64(shift[i-lo]) + math.Log(float64(sums[i-lo]))
	}
}

// logSumExp is log(sum(exp(row))), computed stably in float64 (the
// exponentials in T).
func logSumExp[T float](row []T) float64 {
	m := math.Inf(-1)
	for _, x := range row {
		if xf := float64(x); xf > m || xf != xf {
			m = xf
		}
	}
	if math.IsInf(m, 0) || m != m {
		return m
	}
	var s float64
	if isF32[T]() {
		mt := T(m)
		for _, x := range row {
			s += float64(expT(x - mt))
		}
		return m + math.Log(s)
	}
	for _, x := range row {
		s += math.Exp(float64(x) - m)
	}
	return m + math.Log(s)
}
