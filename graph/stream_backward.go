package graph

import (
	"fmt"
	"hash"
	"sync"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds StreamAttention's backward: the gradient op, its loop
// over key blocks, and the ops that hand out dk, dv and the tables'
// gradients.

// streamGradOp: q, k, v, [table], out, dout -> dq; it also computes dk, dv
// and dtable, handed out by streamGradPartOp.
type streamGradOp struct {
	opBase
	streamCfg
	fwd *streamAttnOp
	res buf
	// the other gradients of the last run
	dk, dv, dtab buf
	// the gradients of each term's table and QBias
	dterm, dqbias []buf
	dfire         []buf // FIRE's parameters' gradients
	scratch       streamScratch
}

func (op *streamGradOp) Arity() int { return op.arity() + 2 }
func (op *streamGradOp) Type() hm.Type {
	o := floatT(len(op.out.shape()))
	return hm.NewFnType(append(op.inTypes(), o, o, floatT(len(op.q.shape())))...)
}
func (op *streamGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.q.shape(), nil }
func (op *streamGradOp) String() string {
	return "streamAttentionGrad{" + op.streamCfg.String() + "}"
}
func (op *streamGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *streamGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *streamGradOp) DiffWRT(n int) []bool  { return make([]bool, n) }
func (op *streamGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *streamGradOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return streamBwdDo[float32](op, vs) },
		func() (G.Value, error) { return streamBwdDo[float64](op, vs) })
}

func streamBwdDo[T float](op *streamGradOp, vs []G.Value) (G.Value, error) {
	c := &op.streamCfg
	in, err := streamInputs[T](op, c, vs)
	if err != nil {
		return nil, err
	}
	n := c.arity()
	if err := checkShape(op, "out", vs[n], c.out.shape()); err != nil {
		return nil, err
	}
	if err := checkShape(op, "dout", vs[n+1], c.out.shape()); err != nil {
		return nil, err
	}
	o, err := floats[T](op, vs[n])
	if err != nil {
		return nil, err
	}
	do, err := floats[T](op, vs[n+1])
	if err != nil {
		return nil, err
	}
	h, tq, nqb := c.q.h, c.q.rows, c.qBlocks()
	lse, ok := op.fwd.lse.([]T)
	if !ok || len(lse) != c.q.b*h*tq {
		return nil, errors.Errorf("graph: %v: the forward op has not run", op)
	}
	res, dq := zeroed[T](&op.res, c.q.shape())
	_, dk := zeroed[T](&op.dk, c.k.shape())
	_, dv := zeroed[T](&op.dv, c.v.shape())
	var dacc []float64 // dtable per head, [H][R]
	if c.rows > 0 {
		dacc = make([]float64, h*c.rows)
	}
	accs := make([]termAcc, len(c.terms)) // per head, each head's own part
	for x, tc := range c.terms {
		accs[x].tab = make([]float64, h*tc.rows*tc.w)
		if tc.bias {
			accs[x].bias = make([]float64, h*c.q.cols)
		}
	}
	var faccs []fireAcc // FIRE's gradients per head
	if c.fire != nil {
		faccs = newFireAccs(c.fire)
	}
	fe := firstErr{op: "StreamAttention", hint: "the indexer's?"}
	var mu sync.Mutex
	var used streamScratch
	parallelFor(h, c.q.b*tq*c.k.rows*(2*c.q.cols+2*c.v.cols), func(lo, hi int) {
		defer fe.recover()
		// This thread's heads [lo, hi) share the table rows of each tile.
		nh := hi - lo
		t := newStreamTile(c, &in)
		defer func() { // the terms' buffers, grown by then
			mu.Lock()
			used = used.add(t.termBuffers())
			mu.Unlock()
		}()
		f := make([]T, c.tq*c.tk+2*nh*c.tq)
		dp, d, ls := f[:c.tq*c.tk], f[c.tq*c.tk:c.tq*c.tk+nh*c.tq], f[c.tq*c.tk+nh*c.tq:]
		mu.Lock()
		used.Floats += len(t.s) + len(f)
		used.Ints += len(t.idx)
		if t.fire != nil {
			used.F64 += t.fire.floats()
		}
		mu.Unlock()
		qld, kld, vld, old := c.q.ld(), c.k.ld(), c.v.ld(), c.out.ld()
		scale := T(c.scale)
		for b := 0; b < c.q.b && !fe.bad.Load(); b++ {
			for qb := 0; qb < nqb; qb++ {
				i0, i1 := qb*c.tq, min((qb+1)*c.tq, tq)
				ni := i1 - i0
				jend := c.keyEnd(i1)
				if jend == 0 {
					continue
				}
				// D = rowsum(dO ∘ O) and the log-sum-exp of the block's rows
				for hh := lo; hh < hi; hh++ {
					oo := c.out.off(b, hh)
					for a := 0; a < ni; a++ {
						var s T
						orow := o[oo+(i0+a)*old : oo+(i0+a)*old+c.out.cols]
						for y, g := range do[oo+(i0+a)*old : oo+(i0+a)*old+c.out.cols] {
							s += g * orow[y]
						}
						d[(hh-lo)*c.tq+a] = s
						ls[(hh-lo)*c.tq+a] = lse[(b*h+hh)*tq+i0+a]
					}
				}
				for j0 := 0; j0 < jend; j0 += c.tk {
					j1 := min(j0+c.tk, jend)
					if !c.keysPresent(b, j0, j1) {
						continue
					}
					nj := j1 - j0
					t.at(b, i0, i1, j0, j1)
					if err := t.loadIndex(); err != nil {
						fe.set(err)
						return
					}
					for hh := lo; hh < hi; hh++ {
						qo, ko, vo, oo := c.q.off(b, hh), c.k.off(b, hh), c.v.off(b, hh), c.out.off(b, hh)
						dh, lh := d[(hh-lo)*c.tq:], ls[(hh-lo)*c.tq:(hh-lo)*c.tq+ni]
						t.scores(hh, nil, nil, nil)
						p := t.s[:ni*nj]
						expRows(p, nj, lh)
						// dV += Pᵀ dO
						gemmSerial(true, false, nj, c.v.cols, ni, 1, p, nj, do[oo+i0*old:], old, 1, dv[vo+j0*vld:], vld)
						// dP = dO Vᵀ
						gemmSerial(false, true, ni, nj, c.v.cols, 1, do[oo+i0*old:], old, in.v[vo+j0*vld:], vld, 0, dp, nj)
						t.valueTermsBwd(hh, p, dp, do[oo+i0*old:], old, accs)
						// dS = P ∘ (dP - D), into dp
						dsRows(dp[:ni*nj], p, nj, dh)
						if dacc != nil {
							scatterAddF64(dacc[hh*c.rows:(hh+1)*c.rows], t.idx[:ni*nj], dp)
						}
						if faccs != nil {
							t.fireBwd(hh, dp[:ni*nj], &faccs[hh])
						}
						// dQ += scale dS K, dK += scale dSᵀ Q
						gemmSerial(false, false, ni, c.q.cols, nj, scale, dp, nj, in.k[ko+j0*kld:], kld, 1, dq[qo+i0*qld:], qld)
						gemmSerial(true, false, nj, c.k.cols, ni, scale, dp, nj, in.q[qo+i0*qld:], qld, 1, dk[ko+j0*kld:], kld)
						t.scoreTermsBwd(hh, dp, dq, dk, accs)
					}
				}
			}
		}
	})
	if fe.err != nil {
		return nil, fe.err
	}
	if c.rows > 0 {
		used.F64 += h * c.rows
		_, dt := zeroed[T](&op.dtab, tensor.Shape{c.rows, c.hc})
		for hh := 0; hh < h; hh++ {
			col := 0
			if c.hc > 1 {
				col = hh
			}
			for r, x := range dacc[hh*c.rows : (hh+1)*c.rows] {
				dt[r*c.hc+col] += T(x)
			}
		}
	}
	if len(op.dterm) != len(c.terms) {
		op.dterm, op.dqbias = make([]buf, len(c.terms)), make([]buf, len(c.terms))
	}
	for x := range c.terms {
		tc := &c.terms[x]
		_, dt := zeroed[T](&op.dterm[x], tensor.Shape{tc.rows, tc.cols})
		for hh := 0; hh < h; hh++ {
			src := accs[x].tab[hh*tc.rows*tc.w : (hh+1)*tc.rows*tc.w]
			for r := 0; r < tc.rows; r++ {
				row := dt[r*tc.cols+tc.hoff(hh) : r*tc.cols+tc.hoff(hh)+tc.w]
				for y := range row {
					row[y] += T(src[r*tc.w+y])
				}
			}
		}
		if tc.bias {
			_, db := zeroed[T](&op.dqbias[x], tensor.Shape{h * c.q.cols})
			for y, v := range accs[x].bias {
				db[y] = T(v)
			}
		}
	}
	if c.fire != nil {
		used.F64 += len(faccs) * (4 + 3*c.fire.width)
		if len(op.dfire) != c.fire.nparams() {
			op.dfire = make([]buf, c.fire.nparams())
		}
		fireGrads(c.fire, in.fire, faccs, op.dfire)
	}
	op.scratch = used
	return res, nil
}

// streamPart names a gradient handed out by streamGradPartOp.
type streamPart int

const (
	partK streamPart = iota
	partV
	partTable
	partTermTable // term's table (streamGradPartOp.term)
	partTermBias  // term's QBias
	partEmb       // StreamCoPE's emb
	partFire      // FIRE's parameter (streamGradPartOp.term: fireParamNames)
)

// streamParts lists the gradients that parts hand out, for the inputs
// after q: k, v, [table], then each term's table [and QBias].
func (c *streamCfg) streamParts() (parts []streamPart, terms []int) {
	parts, terms = []streamPart{partK, partV}, []int{0, 0}
	if c.rows > 0 {
		parts, terms = append(parts, partTable), append(terms, 0)
	}
	for x, t := range c.terms {
		parts, terms = append(parts, partTermTable), append(terms, x)
		if t.bias {
			parts, terms = append(parts, partTermBias), append(terms, x)
		}
	}
	if c.fire != nil {
		for x := 0; x < c.fire.nparams(); x++ {
			parts, terms = append(parts, partFire), append(terms, x)
		}
	}
	return parts, terms
}

// partSource is a fused gradient op (streamGradOp, copeGradOp) whose
// result is dq and which keeps the gradients of its other inputs for
// streamGradPartOp to hand out.
type partSource interface {
	// partShape is the shape of a part (term: the term of partTermTable
	// and partTermBias).
	partShape(p streamPart, term int) tensor.Shape
	// partBuf is the buffer of a part, nil if the op cannot have run.
	partBuf(p streamPart, term int) *buf
	// partName begins the String of the part ops.
	partName() string
	// dqRank is the rank of dq.
	dqRank() int
}

// gradPartNodes returns the gradients of a fused op's inputs: dq, the
// result of src's node, then a streamGradPartOp node per entry of parts
// (and terms), for the inputs after q.
func gradPartNodes(dq *G.Node, src partSource, parts []streamPart, terms []int) (G.Nodes, error) {
	res := make(G.Nodes, len(parts)+1)
	res[0] = dq
	for i, w := range parts {
		var err error
		if res[i+1], err = G.ApplyOp(&streamGradPartOp{src: src, part: w, term: terms[i]}, dq); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (op *streamGradOp) partShape(p streamPart, term int) tensor.Shape {
	switch p {
	case partK:
		return op.k.shape()
	case partV:
		return op.v.shape()
	case partTermTable:
		t := op.terms[term]
		return tensor.Shape{t.rows, t.cols}
	case partTermBias:
		return tensor.Shape{op.q.h * op.q.cols}
	case partFire:
		return op.fire.shapes()[term]
	}
	return tensor.Shape{op.rows, op.hc}
}

func (op *streamGradOp) partBuf(p streamPart, term int) *buf {
	switch p {
	case partTermTable, partTermBias:
		if term >= len(op.dterm) {
			return nil
		}
		if p == partTermBias {
			return &op.dqbias[term]
		}
		return &op.dterm[term]
	case partFire:
		if term >= len(op.dfire) {
			return nil
		}
		return &op.dfire[term]
	case partK:
		return &op.dk
	case partV:
		return &op.dv
	}
	return &op.dtab
}

func (op *streamGradOp) partName() string { return "streamAttentionGrad" }
func (op *streamGradOp) dqRank() int      { return len(op.q.shape()) }

// streamGradPartOp: dq (only for ordering) -> dk, dv, dtable, a term's
// gradient or demb, as computed by the run of src that produced dq.
type streamGradPartOp struct {
	opBase
	src  partSource
	part streamPart
	term int // the term of partTermTable and partTermBias
	res  buf
}

func (op *streamGradPartOp) shape() tensor.Shape { return op.src.partShape(op.part, op.term) }
func (op *streamGradPartOp) Arity() int          { return 1 }
func (op *streamGradPartOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.src.dqRank()), floatT(len(op.shape())))
}
func (op *streamGradPartOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.shape(), nil }
func (op *streamGradPartOp) String() string {
	// The source op's address ties the node to its dq node's op.
	return fmt.Sprintf("%s%s{src=%p, term=%d}", op.src.partName(), [...]string{"K", "V", "Table", "TermTable", "TermBias", "Emb", "Fire"}[op.part], op.src, op.term)
}
func (op *streamGradPartOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *streamGradPartOp) Hashcode() uint32      { return hashOf(op) }
func (op *streamGradPartOp) DiffWRT(int) []bool    { return []bool{false} }
func (op *streamGradPartOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *streamGradPartOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return streamPartDo[float32](op) },
		func() (G.Value, error) { return streamPartDo[float64](op) })
}

func streamPartDo[T float](op *streamGradPartOp) (G.Value, error) {
	b := op.src.partBuf(op.part, op.term)
	if b == nil || b.t == nil || !b.t.Shape().Eq(op.shape()) {
		return nil, errors.Errorf("graph: %v: the gradient op has not run", op)
	}
	src, ok := b.t.Data().([]T)
	if !ok {
		return nil, errors.Errorf("graph: %v: gradient of dtype %v", op, b.t.Dtype())
	}
	t, d := bufFor[T](&op.res, op.shape())
	copy(d, src)
	return t, nil
}
