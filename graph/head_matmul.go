package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds headMatMul, the per-(batch, head) matrix product of the
// attention ops, and its public uses AttentionOutput, RelScores and
// KeyScores.

// headMatMul returns C = alpha op(A)·op(B) per batch element and head, A, B
// and C in the given layouts (op = transpose when tA, tB). It is the
// [B, H] batch of matrix products of attention: probs·v, and the gradient
// products of AttentionProbs and AttentionOutput.
func headMatMul(a, b *G.Node, la, lb, lc headLayout, tA, tB bool, alpha float64) (*G.Node, error) {
	op := &headMatMulOp{a: la, b: lb, c: lc, tA: tA, tB: tB, alpha: alpha}
	m, k := la.rows, la.cols
	if tA {
		m, k = k, m
	}
	k2, n := lb.rows, lb.cols
	if tB {
		k2, n = n, k2
	}
	if k != k2 || lc.rows != m || lc.cols != n || la.b != lb.b || la.b != lc.b || la.h != lb.h || la.h != lc.h {
		return nil, errors.Errorf("graph: %v: shapes do not agree", op)
	}
	if !a.Shape().Eq(la.shape()) || !b.Shape().Eq(lb.shape()) {
		return nil, errors.Errorf("graph: %v: inputs %v and %v", op, a.Shape(), b.Shape())
	}
	return G.ApplyOp(op, a, b)
}

// headMatMulOp: A, B -> C = alpha op(A)·op(B) for every (b, h).
type headMatMulOp struct {
	opBase
	a, b, c headLayout
	tA, tB  bool
	alpha   float64
	res     buf
}

func (op *headMatMulOp) Arity() int { return 2 }
func (op *headMatMulOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.a.shape())), floatT(len(op.b.shape())), floatT(len(op.c.shape())))
}
func (op *headMatMulOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.c.shape(), nil }
func (op *headMatMulOp) String() string {
	return fmt.Sprintf("headMatMul{%v%s · %v%s -> %v, alpha=%v}", op.a, tick(op.tA), op.b, tick(op.tB), op.c, op.alpha)
}
func (op *headMatMulOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *headMatMulOp) Hashcode() uint32      { return hashOf(op) }
func (op *headMatMulOp) DiffWRT(int) []bool    { return []bool{true, true} }

func tick(t bool) string {
	if t {
		return "ᵀ"
	}
	return ""
}

// SymDiff of C = alpha op(A) op(B):
//
//	dA = alpha dC op(B)ᵀ  (stored transposed when tA: alpha op(B) dCᵀ)
//	dB = alpha op(A)ᵀ dC  (stored transposed when tB: alpha dCᵀ op(A))
func (op *headMatMulOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	a, b := in[0], in[1]
	var da, db *G.Node
	var err error
	if !op.tA {
		da, err = headMatMul(grad, b, op.c, op.b, op.a, false, !op.tB, op.alpha)
	} else {
		da, err = headMatMul(b, grad, op.b, op.c, op.a, op.tB, true, op.alpha)
	}
	if err != nil {
		return nil, err
	}
	if !op.tB {
		db, err = headMatMul(a, grad, op.a, op.c, op.b, !op.tA, false, op.alpha)
	} else {
		db, err = headMatMul(grad, a, op.c, op.a, op.b, true, op.tA, op.alpha)
	}
	if err != nil {
		return nil, err
	}
	return G.Nodes{da, db}, nil
}

func (op *headMatMulOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return headMatMulDo[float32](op, vs) },
		func() (G.Value, error) { return headMatMulDo[float64](op, vs) })
}

func headMatMulDo[T float](op *headMatMulOp, vs []G.Value) (G.Value, error) {
	var name any = op
	if err := checkShape(name, "A", vs[0], op.a.shape()); err != nil {
		return nil, err
	}
	if err := checkShape(name, "B", vs[1], op.b.shape()); err != nil {
		return nil, err
	}
	a, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	b, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	t, c := bufFor[T](&op.res, op.c.shape())
	m, n, k := op.c.rows, op.c.cols, op.a.cols
	if op.tA {
		k = op.a.rows
	}
	h := op.c.h
	alpha := T(op.alpha)
	if op.c.shared { // sum over the batch: one task per head
		parallelFor(h, op.c.b*m*n*k, func(lo, hi int) {
			for hh := lo; hh < hi; hh++ {
				for bb := 0; bb < op.c.b; bb++ {
					var beta T
					if bb > 0 {
						beta = 1
					}
					gemmSerial(op.tA, op.tB, m, n, k, alpha, a[op.a.off(bb, hh):], op.a.ld(), b[op.b.off(bb, hh):], op.b.ld(), beta, c[op.c.off(bb, hh):], op.c.ld())
				}
			}
		})
		return t, nil
	}
	parallelFor(op.c.b*h, m*n*k, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			bb, hh := bh/h, bh%h
			gemmSerial(op.tA, op.tB, m, n, k, alpha, a[op.a.off(bb, hh):], op.a.ld(), b[op.b.off(bb, hh):], op.b.ld(), 0, c[op.c.off(bb, hh):], op.c.ld())
		}
	})
	return t, nil
}

// AttentionOutput is the value stage of attention, probs·v per batch element
// and head:
//
//	probs [B, H, Tq, Tk], v [B, H, Tk, dh] or [B, Tk, H*dh]  ->
//	out [B, Tq, H*dh] (merge true: heads concatenated, ready for the output
//	projection) or [B, H, Tq, dh] (merge false)
//
// It is differentiable with respect to probs and v (dprobs = dout·vᵀ and
// dv = probsᵀ·dout per head). It returns an error if the shapes disagree.
func AttentionOutput(probs, v *G.Node, merge bool) (*G.Node, error) {
	const name = "AttentionOutput"
	if err := checkFloatNode(name, "probs", probs); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "v", v); err != nil {
		return nil, err
	}
	ps := probs.Shape()
	if len(ps) != 4 {
		return nil, errors.Errorf("graph: %s: probs %v must be [B, H, Tq, Tk]", name, ps)
	}
	vl, err := layoutOf(name, "v", v.Shape(), ps[1])
	if err != nil {
		return nil, err
	}
	if vl.b != ps[0] || vl.h != ps[1] || vl.rows != ps[3] || probs.Dtype() != v.Dtype() {
		return nil, errors.Errorf("graph: %s: probs %v (%v) and v %v (%v) do not agree", name, ps, probs.Dtype(), v.Shape(), v.Dtype())
	}
	pl := headLayout{b: ps[0], h: ps[1], rows: ps[2], cols: ps[3]}
	ol := headLayout{merged: merge, b: ps[0], h: ps[1], rows: ps[2], cols: vl.cols}
	return headMatMul(probs, v, pl, vl, ol, false, false, 1)
}

// RelScores returns x·tabᵀ per batch element and head:
//
//	x [B, H, T, dh], tab [H, R, dh] (shared by the batch)  ->  [B, H, T, R]
//
// the content-position products of Transformer-XL ((q+v)·Pᵀ) and DeBERTa
// (q·K_rᵀ, k·Q_rᵀ), as one op on the package's BLAS without transposing x,
// tab or the result. It is differentiable with respect to x and tab (dtab
// sums over the batch). It returns an error if the shapes disagree.
func RelScores(x, tab *G.Node) (*G.Node, error) {
	const name = "RelScores"
	if err := checkFloatNode(name, "x", x); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "tab", tab); err != nil {
		return nil, err
	}
	xs, ts := x.Shape(), tab.Shape()
	if len(xs) != 4 || len(ts) != 3 || ts[0] != xs[1] || ts[2] != xs[3] || x.Dtype() != tab.Dtype() {
		return nil, errors.Errorf("graph: %s: x %v (%v) and tab %v (%v): want x [B, H, T, dh] and tab [H, R, dh] of one dtype", name, xs, x.Dtype(), ts, tab.Dtype())
	}
	xl := headLayout{b: xs[0], h: xs[1], rows: xs[2], cols: xs[3]}
	tl := headLayout{shared: true, b: xs[0], h: xs[1], rows: ts[1], cols: ts[2]}
	ol := headLayout{b: xs[0], h: xs[1], rows: xs[2], cols: ts[1]}
	return headMatMul(x, tab, xl, tl, ol, false, true, 1)
}

// KeyScores returns tab·xᵀ per batch element and head:
//
//	tab [H, R, dh] (shared by the batch), x [B, H, T, dh]  ->  [B, H, R, T]
//
// Transformer-XL's key term u_h·k_j (R = 1: one row [B, H, 1, T] that
// broadcasts over the queries), as one product per head instead of an
// element-wise product [B, H, T, dh] and a sum over dh; at R = 1 each is a
// GEMV. It is differentiable with respect to both (dtab sums over the
// batch) and returns an error if the shapes disagree.
func KeyScores(tab, x *G.Node) (*G.Node, error) {
	const name = "KeyScores"
	if err := checkFloatNode(name, "tab", tab); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "x", x); err != nil {
		return nil, err
	}
	xs, ts := x.Shape(), tab.Shape()
	if len(xs) != 4 || len(ts) != 3 || ts[0] != xs[1] || ts[2] != xs[3] || x.Dtype() != tab.Dtype() {
		return nil, errors.Errorf("graph: %s: tab %v (%v) and x %v (%v): want tab [H, R, dh] and x [B, H, T, dh] of one dtype", name, ts, tab.Dtype(), xs, x.Dtype())
	}
	tl := headLayout{shared: true, b: xs[0], h: xs[1], rows: ts[1], cols: ts[2]}
	xl := headLayout{b: xs[0], h: xs[1], rows: xs[2], cols: xs[3]}
	ol := headLayout{b: xs[0], h: xs[1], rows: ts[1], cols: xs[2]}
	return headMatMul(tab, x, tl, xl, ol, false, true, 1)
}
