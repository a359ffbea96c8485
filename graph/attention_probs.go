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

// This file holds AttentionProbs, the fused score and softmax stage of
// attention (see attention_layout.go for the head layouts).

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
	// Probe, if not nil, records the attention's statistics per head while
	// it is armed (see AttentionProbe); it never changes the result.
	Probe *AttentionProbe
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
	op := &attnProbsOp{q: ql, k: kl, scale: scale, iTerms: -1, iBias: -1, iMask: -1, probe: o.Probe}
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
	// probe is not part of the op's identity (String, hash): it observes.
	probe *AttentionProbe
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
	var acc []headAcc // per (batch, head), when the probe records
	if op.probe.Armed() {
		acc = make([]headAcc, op.q.b*h)
		for i := range acc {
			acc[i] = newHeadAcc()
		}
	}
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
			var pa *headAcc
			var allowed []int
			if acc != nil {
				pa, allowed = &acc[bh], make([]int, tq)
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
				if pa != nil {
					var tr []T
					if terms != nil {
						tr = terms[(bh*tq+i)*tk : (bh*tq+i+1)*tk]
					}
					var boff, bstep int
					if bias != nil {
						boff, bstep = op.biasBc.rowOff[r], op.biasBc.step
					}
					allowed[i] = probeScores(pa, row, tr, scale, bias, boff, bstep, mk, off, step)
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
			if pa != nil {
				for i := range tq {
					probeProbs(pa, pm[i*tk:(i+1)*tk], allowed[i])
				}
			}
		}
	})
	if acc != nil {
		op.probe.merge(acc, h)
	}
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
