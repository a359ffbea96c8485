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

// This file holds the fused attention ops. Queries, keys, values and outputs
// may be laid out with the heads split, [B, H, T, dh], or merged as a Linear
// produces them, [B, T, H*dh]; the ops address head h of batch element b in
// either layout with a leading dimension, so no transpose is materialised.
// The per-head products run on the package's BLAS, one (b, h) pair per task,
// split over Threads() goroutines.

// headLayout says where the [rows, cols] matrix of batch element b and head h
// lives in a tensor: [B, H, rows, cols] (split), or [B, rows, H*cols]
// (merged: the heads side by side along the last axis).
type headLayout struct {
	merged bool
	// shared: one [rows, cols] matrix per head for every batch element,
	// [H, rows, cols] (a table shared by the batch); a product written to
	// a shared layout sums over the batch.
	shared           bool
	b, h, rows, cols int
}

func (l headLayout) shape() tensor.Shape {
	if l.shared {
		return tensor.Shape{l.h, l.rows, l.cols}
	}
	if l.merged {
		return tensor.Shape{l.b, l.rows, l.h * l.cols}
	}
	return tensor.Shape{l.b, l.h, l.rows, l.cols}
}

// off is the offset of element (0, 0) of the matrix of (b, h).
func (l headLayout) off(b, h int) int {
	if l.shared {
		return h * l.rows * l.cols
	}
	if l.merged {
		return b*l.rows*l.h*l.cols + h*l.cols
	}
	return (b*l.h + h) * l.rows * l.cols
}

// ld is the distance between consecutive rows of a matrix.
func (l headLayout) ld() int {
	if l.merged && !l.shared {
		return l.h * l.cols
	}
	return l.cols
}

func (l headLayout) String() string {
	if l.shared {
		return fmt.Sprintf("[%d %d %d] shared by %d", l.h, l.rows, l.cols, l.b)
	}
	if l.merged {
		return fmt.Sprintf("[%d %d %d*%d]", l.b, l.rows, l.h, l.cols)
	}
	return fmt.Sprintf("[%d %d %d %d]", l.b, l.h, l.rows, l.cols)
}

// layoutOf returns the layout of a node of shape s: rank 4 is split
// [B, H, T, c]; rank 3 is merged [B, T, heads*c] (heads > 0 must divide the
// last dimension).
func layoutOf(op, what string, s tensor.Shape, heads int) (headLayout, error) {
	switch len(s) {
	case 4:
		return headLayout{b: s[0], h: s[1], rows: s[2], cols: s[3]}, nil
	case 3:
		if heads <= 0 || s[2]%heads != 0 {
			return headLayout{}, errors.Errorf("graph: %s: %s %v has merged heads [B, T, H*dh] but %d heads do not divide %d", op, what, s, heads, s[2])
		}
		return headLayout{merged: true, b: s[0], h: heads, rows: s[1], cols: s[2] / heads}, nil
	}
	return headLayout{}, errors.Errorf("graph: %s: %s %v must be [B, H, T, dh] or [B, T, H*dh]", op, what, s)
}

// AttentionOpts are the optional inputs of AttentionProbs.
type AttentionOpts struct {
	// Heads is the number of heads when q and k have their heads merged,
	// [B, T, Heads*dh]; it is ignored for [B, H, T, dh] inputs.
	Heads int
	// Scale multiplies q·kᵀ + Terms; 0 means 1/sqrt(dh).
	Scale float64
	// Terms is nil or a node [B, H, Tq, Tk] added to q·kᵀ before scaling
	// (the content-position terms of Shaw, Transformer-XL, DeBERTa).
	Terms *G.Node
	// Bias is nil or a node that broadcasts onto [B, H, Tq, Tk] (for
	// example [H, Tq, Tk] or [1, Tq, Tk]), added after scaling (T5, ALiBi).
	Bias *G.Node
	// Mask is nil or a float node that broadcasts onto [B, H, Tq, Tk]
	// (1 = may attend, 0 = blocked), as for MaskedSoftmax.
	Mask *G.Node
}

// AttentionProbs is the fused score and softmax stage of scaled dot-product
// attention (Vaswani et al. 2017):
//
//	probs = MaskedSoftmax((q·kᵀ + Terms) * Scale + Bias, Mask)   // [B, H, Tq, Tk]
//
// per batch element and head, as one op: no [B, H, Tq, Tk] intermediate
// other than the result, and no transpose of q or k. q is [B, H, Tq, dh] or
// [B, Tq, H*dh] (heads merged, o.Heads set), k likewise with Tk keys. The
// masking semantics are MaskedSoftmax's: blocked entries are exactly 0 and
// a row with nothing allowed is all zeros with zero gradient.
//
// It is differentiable with respect to q, k, Terms and Bias (not Mask). The
// gradient computes dZ = softmax backward of the incoming gradient once, then
// dq = Scale dZ·k and dk = Scale dZᵀ·q per head (in q's and k's layouts),
// dTerms = Scale dZ and dBias = dZ summed over the broadcast axes. It
// returns an error naming the shapes if they disagree.
func AttentionProbs(q, k *G.Node, o AttentionOpts) (*G.Node, error) {
	const name = "AttentionProbs"
	if err := checkFloatNode(name, "q", q); err != nil {
		return nil, err
	}
	if err := checkFloatNode(name, "k", k); err != nil {
		return nil, err
	}
	if q.Dims() != k.Dims() || q.Dtype() != k.Dtype() {
		return nil, errors.Errorf("graph: %s: q %v (%v) and k %v (%v) differ in rank or dtype", name, q.Shape(), q.Dtype(), k.Shape(), k.Dtype())
	}
	ql, err := layoutOf(name, "q", q.Shape(), o.Heads)
	if err != nil {
		return nil, err
	}
	kl, err := layoutOf(name, "k", k.Shape(), o.Heads)
	if err != nil {
		return nil, err
	}
	if ql.b != kl.b || ql.h != kl.h || ql.cols != kl.cols {
		return nil, errors.Errorf("graph: %s: q %v and k %v: batch, heads and head width must agree", name, q.Shape(), k.Shape())
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(ql.cols))
	}
	op := &attnProbsOp{q: ql, k: kl, scale: scale, iTerms: -1, iBias: -1, iMask: -1}
	out := op.outShape()
	inputs := G.Nodes{q, k}
	add := func(what string, n *G.Node, exact bool) (int, tensor.Shape, error) {
		if err := checkFloatNode(name, what, n); err != nil {
			return -1, nil, err
		}
		s := n.Shape()
		if n.Dtype() != q.Dtype() {
			return -1, nil, errors.Errorf("graph: %s: %s dtype %v differs from q's %v", name, what, n.Dtype(), q.Dtype())
		}
		if exact && !s.Eq(out) || !exact && !broadcastable(s, out) {
			return -1, nil, errors.Errorf("graph: %s: %s %v does not fit the scores %v", name, what, s, out)
		}
		inputs = append(inputs, n)
		return len(inputs) - 1, s.Clone(), nil
	}
	if o.Terms != nil {
		if op.iTerms, _, err = add("terms", o.Terms, true); err != nil {
			return nil, err
		}
	}
	if o.Bias != nil {
		if op.iBias, op.bias, err = add("bias", o.Bias, false); err != nil {
			return nil, err
		}
		op.biasBc = newBcast(op.bias, out)
	}
	if o.Mask != nil {
		if op.iMask, op.mask, err = add("mask", o.Mask, false); err != nil {
			return nil, err
		}
		op.maskBc = newBcast(op.mask, out)
	}
	op.ranks = make([]int, len(inputs))
	for i, n := range inputs {
		op.ranks[i] = n.Dims()
	}
	return G.ApplyOp(op, inputs...)
}

// attnProbsOp: q, k, [terms], [bias], [mask] -> probs [B, H, Tq, Tk].
type attnProbsOp struct {
	opBase
	q, k                 headLayout
	scale                float64
	iTerms, iBias, iMask int          // input positions, -1 if absent
	bias, mask           tensor.Shape // shapes of the optional inputs
	biasBc, maskBc       bcast
	ranks                []int
	res                  buf
}

func (op *attnProbsOp) outShape() tensor.Shape {
	return tensor.Shape{op.q.b, op.q.h, op.q.rows, op.k.rows}
}

// scores is the layout of the [B, H, Tq, Tk] probabilities.
func (op *attnProbsOp) scores() headLayout {
	return headLayout{b: op.q.b, h: op.q.h, rows: op.q.rows, cols: op.k.rows}
}

func (op *attnProbsOp) Arity() int { return len(op.ranks) }
func (op *attnProbsOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(op.ranks)+1)
	for _, r := range op.ranks {
		ts = append(ts, floatT(r))
	}
	return hm.NewFnType(append(ts, floatT(4))...)
}
func (op *attnProbsOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.outShape(), nil }
func (op *attnProbsOp) String() string {
	return fmt.Sprintf("AttentionProbs{q=%v, k=%v, scale=%v, terms=%v, bias=%v, mask=%v}", op.q, op.k, op.scale, op.iTerms >= 0, op.bias, op.mask)
}
func (op *attnProbsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *attnProbsOp) Hashcode() uint32      { return hashOf(op) }
func (op *attnProbsOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = i != op.iMask
	}
	return r
}

func (op *attnProbsOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	sc := op.scores()
	dz, err := G.ApplyOp(&softmaxGradOp{shape: op.outShape()}, out, grad)
	if err != nil {
		return nil, err
	}
	res := make(G.Nodes, len(in))
	if res[0], err = headMatMul(dz, in[1], sc, op.k, op.q, false, false, op.scale); err != nil {
		return nil, err
	}
	if res[1], err = headMatMul(dz, in[0], sc, op.q, op.k, true, false, op.scale); err != nil {
		return nil, err
	}
	if op.iTerms >= 0 {
		if res[op.iTerms], err = Scale(dz, op.scale); err != nil {
			return nil, err
		}
	}
	if op.iBias >= 0 {
		if res[op.iBias], err = broadcastReduce(dz, op.bias); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (op *attnProbsOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return attnProbsDo[float32](op, vs) },
		func() (G.Value, error) { return attnProbsDo[float64](op, vs) })
}

func attnProbsDo[T float](op *attnProbsOp, vs []G.Value) (G.Value, error) {
	var name any = op
	if err := checkShape(name, "q", vs[0], op.q.shape()); err != nil {
		return nil, err
	}
	if err := checkShape(name, "k", vs[1], op.k.shape()); err != nil {
		return nil, err
	}
	q, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	k, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	opt := func(i int, what string, s tensor.Shape) ([]T, error) {
		if i < 0 {
			return nil, nil
		}
		if err := checkShape(name, what, vs[i], s); err != nil {
			return nil, err
		}
		return floats[T](name, vs[i])
	}
	out := op.outShape()
	terms, err := opt(op.iTerms, "terms", out)
	if err != nil {
		return nil, err
	}
	bias, err := opt(op.iBias, "bias", op.bias)
	if err != nil {
		return nil, err
	}
	mask, err := opt(op.iMask, "mask", op.mask)
	if err != nil {
		return nil, err
	}
	t, p := bufFor[T](&op.res, out)
	h, tq, tk, dh := op.q.h, op.q.rows, op.k.rows, op.q.cols
	scale := T(op.scale)
	parallelFor(op.q.b*h, tq*tk*dh, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			b, hh := bh/h, bh%h
			pm := p[bh*tq*tk : (bh+1)*tq*tk]
			var beta T
			if terms != nil {
				copy(pm, terms[bh*tq*tk:])
				beta = scale
			}
			gemmSerial(false, true, tq, tk, dh, scale, q[op.q.off(b, hh):], op.q.ld(), k[op.k.off(b, hh):], op.k.ld(), beta, pm, tk)
			var rowMax []T
			if isF32[T]() {
				rowMax = make([]T, tq)
			}
			for i := 0; i < tq; i++ {
				r := bh*tq + i
				row := pm[i*tk : (i+1)*tk]
				if bias != nil {
					addBcastRow(row, bias, op.biasBc.rowOff[r], op.biasBc.step)
				}
				var mk []T
				var off, step int
				if mask != nil {
					mk, off, step = mask, op.maskBc.rowOff[r], op.maskBc.step
				}
				if rowMax != nil {
					rowMax[i] = maskRow(row, mk, off, step)
				} else {
					softmaxRow(row, mk, off, step)
				}
			}
			if rowMax != nil {
				k32.softmaxRows(any(pm).([]float32), tk, any(rowMax).([]float32))
			}
		}
	})
	return t, nil
}

// addBcastRow adds b[off + j*step] to row[j].
func addBcastRow[T float](row, b []T, off, step int) {
	if step == 0 {
		v := b[off]
		for j := range row {
			row[j] += v
		}
		return
	}
	if step == 1 {
		for j, v := range b[off : off+len(row)] {
			row[j] += v
		}
		return
	}
	for j := range row {
		row[j] += b[off+j*step]
	}
}

// softmaxRow replaces row by its softmax over the entries allowed by mask
// (mask[off + j*step] != 0; everything when mask is nil). Blocked entries
// become exactly 0, and a row with nothing allowed becomes all zeros.
func softmaxRow[T float](row, mask []T, off, step int) {
	allowed := func(j int) bool { return mask == nil || mask[off+j*step] != 0 }
	m := T(math.Inf(-1))
	some := false
	for j, v := range row {
		if allowed(j) {
			if !some || v > m || v != v {
				m = v
			}
			some = true
		}
	}
	if !some {
		clear(row)
		return
	}
	var s float64
	for j, v := range row {
		if allowed(j) {
			e := expT(v - m)
			row[j] = e
			s += float64(e)
		} else {
			row[j] = 0
		}
	}
	inv := 1 / s
	if isF32[T]() {
		f := T(inv)
		for j := range row {
			row[j] *= f
		}
		return
	}
	for j := range row {
		row[j] = T(float64(row[j]) / s)
	}
}

// maskRow prepares a row for kernels32.softmaxRows: blocked entries (mask
// as in softmaxRow) become -Inf, and it returns the maximum of the allowed
// entries (NaN if one is NaN), or, when nothing is allowed, sets the whole
// row to -Inf and returns 0 (the kernel then leaves the row all zeros).
func maskRow[T float](row, mask []T, off, step int) T {
	ninf := T(math.Inf(-1))
	m := ninf
	some := false
	for j, v := range row {
		if mask != nil && mask[off+j*step] == 0 {
			row[j] = ninf
			continue
		}
		if !some || v > m || v != v {
			m = v
		}
		some = true
	}
	if !some {
		for j := range row {
			row[j] = ninf
		}
		return 0
	}
	return m
}

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

// TransposeLast2 swaps the last two axes of x ([..., M, N] -> [..., N, M])
// as a copy (Gorgonia's Transpose walks an iterator element by element);
// the gradient is TransposeLast2 of the output gradient.
func TransposeLast2(x *G.Node) (*G.Node, error) {
	if err := checkFloatNode("TransposeLast2", "x", x); err != nil {
		return nil, err
	}
	s := x.Shape()
	if len(s) < 2 {
		return nil, errors.Errorf("graph: TransposeLast2: x %v must have rank >= 2", s)
	}
	return G.ApplyOp(&swapOp{in: s.Clone()}, x)
}

// swapOp: x [..., M, N] -> [..., N, M].
type swapOp struct {
	opBase
	in  tensor.Shape
	res buf
}

func (op *swapOp) out() tensor.Shape {
	o := op.in.Clone()
	r := len(o)
	o[r-2], o[r-1] = o[r-1], o[r-2]
	return o
}
func (op *swapOp) Arity() int { return 1 }
func (op *swapOp) Type() hm.Type {
	return hm.NewFnType(floatT(len(op.in)), floatT(len(op.in)))
}
func (op *swapOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out(), nil }
func (op *swapOp) String() string                                 { return fmt.Sprintf("TransposeLast2{%v}", op.in) }
func (op *swapOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *swapOp) Hashcode() uint32                               { return hashOf(op) }
func (op *swapOp) DiffWRT(int) []bool                             { return []bool{true} }
func (op *swapOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := TransposeLast2(grad)
	return G.Nodes{d}, err
}

func (op *swapOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return swapDo[float32](op, vs[0]) },
		func() (G.Value, error) { return swapDo[float64](op, vs[0]) })
}

func swapDo[T float](op *swapOp, v G.Value) (G.Value, error) {
	if err := checkShape(op, "x", v, op.in); err != nil {
		return nil, err
	}
	x, err := floats[T](op, v)
	if err != nil {
		return nil, err
	}
	t, y := bufFor[T](&op.res, op.out())
	r := len(op.in)
	m, n := op.in[r-2], op.in[r-1]
	mats := len(x) / (m * n)
	parallelFor(mats, m*n, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			xm, ym := x[k*m*n:(k+1)*m*n], y[k*m*n:(k+1)*m*n]
			for i := 0; i < m; i++ {
				for j, val := range xm[i*n : (i+1)*n] {
					ym[j*m+i] = val
				}
			}
		}
	})
	return t, nil
}
