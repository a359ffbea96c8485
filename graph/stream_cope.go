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

// This file holds StreamCoPE, StreamAttention's counterpart for contextual
// position encoding (CoPE, Golovneva et al. 2024): the gates, their suffix
// sums, the interpolated term, the softmax and the value product in one op
// that visits the keys in tiles, so that no [Tq, Tk] matrix exists.

// CoPEOpts are CoPE's options of StreamCoPE.
type CoPEOpts struct {
	// GateScale multiplies q·kᵀ inside the gates σ(GateScale·q·kᵀ); 0
	// means 1/sqrt(dh) (posenc.CoPE's gates, whatever the attention's
	// scale).
	GateScale float64
	// TermScale multiplies the interpolated term o before the attention's
	// scale, scores = (q·kᵀ + TermScale·o)·Scale; 0 means sqrt(dh) (the
	// paper's appendix: o added after the division by sqrt(dh)); 1 is
	// posenc.CoPE's Divide.
	TermScale float64
}

// StreamCoPE is causal attention with CoPE's content-position term,
// computed in tiles:
//
//	a_ij  = q_i·k_j                                 (unscaled logits)
//	g_ij  = σ(GateScale·a_ij) if KStart+j <= QStart+i, else 0
//	p_ij  = Σ_{t=j..Tk-1} g_it                      (suffix sum of the gates)
//	o_ij  = z_i[⌈p⌉]·w + z_i[⌊p⌋]·(1-w),  p = clamp(p_ij, 0, P-1), w = p-⌊p⌋,  z_i = q_i·emb
//	s_ij  = (a_ij + TermScale·o_ij)·Scale, -Inf where the mask blocks
//	out_i = Σ_j softmax(s_i)_j v_j
//
// with q [B, Tq, H*dh], k [B, Tk, H*dh], v [B, Tk, H*dv] (heads merged,
// o.Heads = H) or all split [B, H, T, d], emb [dh, P] (shared by the heads
// and the batch) and out as q with dv columns. It equals
// AttentionProbs(q, k, {Terms: TermScale·CoPEInterp(q·emb,
// CoPEPositions(q·kᵀ, QStart, KStart, GateScale)), Scale, Mask}) followed
// by AttentionOutput, up to rounding, and so posenc.CoPE's materialised
// attention. o.Causal is required (the gates count from a key to its
// query); QStart > KStart (a memory of keys) works; o.KeyMask blocks keys in
// the softmax but, as in posenc.CoPE, not in the gates (a padding key's gate
// still counts); o.Table and o.Index must be nil.
//
// Forward, per (batch element, query block of o.TileQ), per head: z = the
// block's q·emb [ni, P] (one gemm), then the key tiles of o.TileK from the
// diagonal backwards, so that the suffix sum of the gates is carried from
// tile to tile (a running position per query row); each tile computes the
// logits (one gemm), the positions, the scores, and updates an online
// softmax (running maximum and sum) and the output, as StreamAttention.
// Once a row's carried position reaches P-1 every key further left reads
// z[P-1] (the clamp), so its gates are no longer computed: the sigmoids cost
// O(P) keys per row, not O(Tk). It keeps the output and the log-sum-exp
// [B, H, Tq]; the work space per thread is O(TileQ·TileK + TileQ·P).
//
// Backward, by recomputation. With dS = P∘(dP − D) the gradient of the
// scores (dP = dO·vᵀ, D = rowsum(dO∘O)), the terms get do_ij = Scale·
// TermScale·dS_ij; the interpolation gives dz_i[⌈p⌉] += do·w, dz_i[⌊p⌋] +=
// do·(1−w) and dp_ij = do·(z_i[⌈p⌉] − z_i[⌊p⌋]) (0 where the clamp acts, and
// at integer positions, as PyTorch's autograd of the paper's code). Since
// p_ij = Σ_{t≥j} g_it, a gate g_it enters every p_ij with j ≤ t:
//
//	dg_it = Σ_{j=0..t} dp_ij          (a prefix sum over the keys, left to right)
//	da_it = Scale·dS_it + GateScale·g_it(1−g_it)·dg_it   (second term for visible keys only)
//
// so the gradient needs the positions, which are suffix sums (right to left),
// and the prefix sums of dp (left to right). Per query block a first pass
// recomputes only the gates, right to left, and keeps the carried position
// at each tile's right edge ([Tk/TileK, TileQ] per thread; it stops where
// every row is clamped); a second pass, left to right, recomputes each
// tile's positions from those carries (bitwise the forward's), scores and
// probabilities from the log-sum-exp, and accumulates dV = Pᵀ dO, dq +=
// da·k, dk += daᵀ·q and the running prefix sum of dp per row; at the end
// of the block dq += dz·embᵀ and demb += qᵀ·dz. Keys left of a row's clamp
// have dp = 0 and so dg = 0. The backward is parallel over (batch element,
// head): each task owns its heads' dq, dk and dv, and a demb of its own,
// merged in task order. Both passes are deterministic and independent of
// Threads(); the gradient ops have no derivative.
//
// The probe (o.Probe) records what AttentionProbs' records, the position
// part being TermScale·o·Scale, with one accumulator per (task, head)
// merged in task order.
//
// Shape, dtype and option errors are returned here, naming the op; a
// position that is not finite (a NaN logit) makes the run fail with an error
// naming the batch element, head and query.
func StreamCoPE(q, k, v, emb *G.Node, o StreamOpts, co CoPEOpts) (*G.Node, error) {
	const name = "StreamCoPE"
	c, err := newStreamCfg(name, q, k, v, o)
	if err != nil {
		return nil, err
	}
	if !o.Causal {
		return nil, errors.Errorf("graph: %s: causal attention only (the gates count the keys from each key to its query)", name)
	}
	if o.Table != nil || o.Index != nil {
		return nil, errors.Errorf("graph: %s: no table bias (Table, Index) with CoPE", name)
	}
	if o.KeyPad != nil {
		return nil, errors.Errorf("graph: %s: a KeyPad %v: StreamCoPE takes a KeyMask known when the graph is built only", name, o.KeyPad.Shape())
	}
	if err := checkFloatNode(name, "emb", emb); err != nil {
		return nil, err
	}
	es := emb.Shape()
	if es.Dims() != 2 || es[0] != c.q.cols || es[1] < 1 {
		return nil, errors.Errorf("graph: %s: emb %v must be [dh, P] = [%d, P >= 1]", name, es, c.q.cols)
	}
	if emb.Dtype() != q.Dtype() {
		return nil, errors.Errorf("graph: %s: emb dtype %v differs from q's %v", name, emb.Dtype(), q.Dtype())
	}
	cc := copeCfg{streamCfg: c, npos: es[1], gate: co.GateScale, term: co.TermScale}
	if cc.gate == 0 {
		cc.gate = 1 / math.Sqrt(float64(c.q.cols))
	}
	if cc.term == 0 {
		cc.term = math.Sqrt(float64(c.q.cols))
	}
	for _, x := range []float64{cc.gate, cc.term} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.Errorf("graph: %s: gate scale %v and term scale %v must be finite", name, co.GateScale, co.TermScale)
		}
	}
	return G.ApplyOp(&copeAttnOp{copeCfg: cc, probe: o.Probe}, q, k, v, emb)
}

// copeCfg is what StreamCoPE's forward and gradient ops share.
type copeCfg struct {
	streamCfg
	npos       int     // P, emb's columns
	gate, term float64 // GateScale, TermScale (defaults applied)
}

func (c *copeCfg) String() string {
	return fmt.Sprintf("%s, npos=%d, gate=%v, term=%v", c.streamCfg.String(), c.npos, c.gate, c.term)
}

// inTypes are the hm types of q, k, v and emb.
func (c *copeCfg) inTypes() []hm.Type {
	return []hm.Type{floatT(len(c.q.shape())), floatT(len(c.k.shape())), floatT(len(c.v.shape())), floatT(2)}
}

// tiles is the number of key tiles that the queries [i0, i1) visit.
func (c *copeCfg) tiles(i1 int) int { return (c.keyEnd(i1) + c.tk - 1) / c.tk }

// copeAttnOp: q, k, v, emb -> out.
type copeAttnOp struct {
	opBase
	copeCfg
	res buf
	// lse is the log-sum-exp [B, H, Tq] of the last run (+Inf for a row
	// with no allowed key), read by the gradient.
	lse any
	// probe is not part of the op's identity: it observes.
	probe *AttentionProbe
}

func (op *copeAttnOp) Arity() int { return 4 }
func (op *copeAttnOp) Type() hm.Type {
	return hm.NewFnType(append(op.inTypes(), floatT(len(op.out.shape())))...)
}
func (op *copeAttnOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out.shape(), nil }
func (op *copeAttnOp) String() string                                 { return "StreamCoPE{" + op.copeCfg.String() + "}" }
func (op *copeAttnOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *copeAttnOp) Hashcode() uint32                               { return hashOf(op) }
func (op *copeAttnOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

// SymDiff: one gradient op computes dq and keeps dk, dv and demb, handed
// out by streamGradPartOp.
func (op *copeAttnOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	fwd, ok := out.Op().(*copeAttnOp)
	if !ok {
		return nil, errors.Errorf("graph: StreamCoPE: output node has op %v", out.Op())
	}
	dq, err := G.ApplyOp(&copeGradOp{copeCfg: op.copeCfg, fwd: fwd}, append(append(G.Nodes{}, in...), out, grad)...)
	if err != nil {
		return nil, err
	}
	src, ok := dq.Op().(*copeGradOp)
	if !ok {
		return nil, errors.Errorf("graph: StreamCoPE: gradient node has op %v", dq.Op())
	}
	return gradPartNodes(dq, src, []streamPart{partK, partV, partEmb}, []int{0, 0, 0})
}

func (op *copeAttnOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copeFwdDo[float32](op, vs) },
		func() (G.Value, error) { return copeFwdDo[float64](op, vs) })
}

// copeInputs returns the float data of q, k, v and emb, checked against
// the configuration.
func copeInputs[T float](op any, c *copeCfg, vs []G.Value) (streamIn[T], []T, error) {
	in, err := streamInputs[T](op, &c.streamCfg, vs)
	if err != nil {
		return in, nil, err
	}
	if err := checkShape(op, "emb", vs[3], tensor.Shape{c.q.cols, c.npos}); err != nil {
		return in, nil, err
	}
	emb, err := floats[T](op, vs[3])
	return in, emb, err
}

// copeWork is one thread's state of StreamCoPE for one (batch element,
// head, query block) at a time: z, the running positions, and one tile's
// logits, gates and positions.
type copeWork[T float] struct {
	c      *copeCfg
	in     *streamIn[T]
	emb    []T
	b, h   int
	i0, i1 int
	j0, j1 int
	lg     []T    // logits, then scores, probabilities, dS and da [ni, nj]
	gt, ps []T    // gates and positions of the tile [ni, nj]
	z      []T    // q·emb of the block [ni, P]
	carry  []T    // per row: the sum of the gates right of the tile
	cl     []bool // per row: clamped over the whole tile (carry >= P-1)
	maxP   T
}

func newCopeWork[T float](c *copeCfg, in *streamIn[T], emb []T) *copeWork[T] {
	n := c.tq * c.tk
	f := make([]T, 3*n+c.tq*c.npos+c.tq)
	return &copeWork[T]{c: c, in: in, emb: emb, lg: f[:n], gt: f[n : 2*n], ps: f[2*n : 3*n], z: f[3*n : 3*n+c.tq*c.npos],
		carry: f[3*n+c.tq*c.npos:], cl: make([]bool, c.tq), maxP: T(c.npos - 1)}
}

// block starts query block [i0, i1) of batch element b and head h: z =
// q·emb and no gates carried yet.
func (w *copeWork[T]) block(b, h, i0, i1 int) {
	c := w.c
	w.b, w.h, w.i0, w.i1 = b, h, i0, i1
	qo := c.q.off(b, h) + i0*c.q.ld()
	gemmSerial(false, false, i1-i0, c.npos, c.q.cols, 1, w.in.q[qo:], c.q.ld(), w.emb, c.npos, 0, w.z, c.npos)
	clear(w.carry)
}

// tile computes the logits of keys [j0, j1) and, for the rows not yet
// clamped, their gates (into gt if gates) and positions, carrying the sum
// of the gates leftwards. It sets cl.
func (w *copeWork[T]) tile(j0, j1 int, gates bool) error {
	c := w.c
	w.j0, w.j1 = j0, j1
	ni, nj := w.i1-w.i0, j1-j0
	qo := c.q.off(w.b, w.h) + w.i0*c.q.ld()
	ko := c.k.off(w.b, w.h) + j0*c.k.ld()
	gemmSerial(false, true, ni, nj, c.q.cols, 1, w.in.q[qo:], c.q.ld(), w.in.k[ko:], c.k.ld(), 0, w.lg, nj)
	gs := c.gate
	for a := 0; a < ni; a++ {
		acc := w.carry[a]
		w.cl[a] = acc >= w.maxP
		if w.cl[a] {
			continue
		}
		row, pr, gr := w.lg[a*nj:(a+1)*nj], w.ps[a*nj:(a+1)*nj], w.gt[a*nj:(a+1)*nj]
		for j := w.visible(a) - 1; j >= 0; j-- {
			g := T(1 / (1 + math.Exp(-gs*float64(row[j])))) // as CoPEPositions
			if gates {
				gr[j] = g
			}
			acc += g
			pr[j] = acc
		}
		if acc != acc {
			return errors.Errorf("graph: StreamCoPE: the position of batch element %d, head %d, query %d is not finite (a NaN logit)", w.b, w.h, w.i0+a)
		}
		w.carry[a] = acc
	}
	return nil
}

// allClamped reports whether every row of the block is clamped from here
// leftwards.
func (w *copeWork[T]) allClamped() bool {
	for _, x := range w.carry[:w.i1-w.i0] {
		if !(x >= w.maxP) {
			return false
		}
	}
	return true
}

// visible is the number of keys of the tile that row a sees by position.
func (w *copeWork[T]) visible(a int) int {
	c := w.c
	return min(w.j1-w.j0, max(0, c.qStart+w.i0+a-c.kStart-w.j0+1))
}

// scores overwrites the logits with the final scores (a + TermScale·o)·Scale,
// -Inf where the causal or the key mask blocks; with pa it records them
// (AttentionProbe) and counts each row's allowed keys into allowed; with
// rowMax it sets each row's maximum.
func (w *copeWork[T]) scores(pa *headAcc, allowed []int, rowMax []T) {
	c := w.c
	ni, nj := w.i1-w.i0, w.j1-w.j0
	var km []bool
	if c.keyMask != nil {
		km = c.keyMask[w.b*c.k.rows+w.j0 : w.b*c.k.rows+w.j1]
	}
	scl, tm, ninf := T(c.scale), T(c.term), T(math.Inf(-1))
	if pa != nil {
		pa.hasPos = true
	}
	for a := 0; a < ni; a++ {
		row, zr := w.lg[a*nj:(a+1)*nj], w.z[a*c.npos:(a+1)*c.npos]
		nv := w.visible(a)
		mx := ninf
		last := zr[c.npos-1] * tm * scl // the term of a clamped row
		for j := range row {
			if j >= nv || km != nil && !km[j] {
				row[j] = ninf
				continue
			}
			pos := last
			if !w.cl[a] {
				lo, hi, wt, _ := copeLookup(w.ps[a*nj+j], float64(w.maxP))
				pos = (zr[hi]*wt + zr[lo]*(1-wt)) * tm * scl // CoPEInterp
			}
			x := scl*row[j] + pos
			row[j] = x
			if x > mx || x != x {
				mx = x
			}
			if pa != nil {
				allowed[a]++
				xf := float64(x)
				if xf != xf {
					pa.nanScore = true
				}
				pa.scoreMax, pa.scoreMin = math.Max(pa.scoreMax, xf), math.Min(pa.scoreMin, xf)
				pa.posSq += float64(pos) * float64(pos)
				pa.posN++
			}
		}
		if rowMax != nil {
			rowMax[a] = mx
		}
	}
}

func copeFwdDo[T float](op *copeAttnOp, vs []G.Value) (G.Value, error) {
	c := &op.copeCfg
	in, emb, err := copeInputs[T](op, c, vs)
	if err != nil {
		return nil, err
	}
	res, out := bufFor[T](&op.res, c.out.shape())
	nlse := c.q.b * c.q.h * c.q.rows
	lse, ok := op.lse.([]T)
	if !ok || len(lse) != nlse {
		lse = make([]T, nlse)
		op.lse = lse
	}
	h, tq, nqb := c.q.h, c.q.rows, c.qBlocks()
	var acc []headAcc // per (task, head), merged in task order
	if op.probe.Armed() {
		acc = make([]headAcc, c.q.b*nqb*h)
		for i := range acc {
			acc[i] = newHeadAcc()
		}
	}
	fe := firstErr{op: "StreamCoPE"}
	parallelFor(c.q.b*nqb, c.tq*c.k.rows*h*(c.q.cols+c.v.cols), func(lo, hi int) {
		defer fe.recover()
		w := newCopeWork(c, &in, emb)
		sm := &newOnlineSoftmaxes[T](1, c.tq)[0]
		var allowed []int
		if acc != nil {
			allowed = make([]int, c.tq)
		}
		for task := lo; task < hi && !fe.bad.Load(); task++ {
			b, qb := task/nqb, zigzag(task%nqb, nqb)
			i0, i1 := qb*c.tq, min((qb+1)*c.tq, tq)
			ni := i1 - i0
			for hh := 0; hh < h; hh++ {
				var pa *headAcc
				if acc != nil {
					pa = &acc[task*h+hh]
					clear(allowed)
				}
				oo := c.out.off(b, hh) + i0*c.out.ld()
				sm.start(out[oo:], c.out.ld(), c.out.cols, ni, pa != nil)
				w.block(b, hh, i0, i1)
				for ti := c.tiles(i1) - 1; ti >= 0; ti-- {
					j0, j1 := ti*c.tk, min((ti+1)*c.tk, c.keyEnd(i1))
					present := c.keysPresent(b, j0, j1)
					if !present && w.allClamped() {
						continue
					}
					if err := w.tile(j0, j1, false); err != nil {
						fe.set(err)
						return
					}
					if !present { // only the gates count here
						continue
					}
					w.scores(pa, allowed, sm.rmax)
					vo := c.v.off(b, hh) + j0*c.v.ld()
					sm.add(w.lg[:ni*(j1-j0)], j1-j0, in.v[vo:], c.v.ld())
				}
				sm.finish(lse[(b*h+hh)*tq+i0:], pa, allowed)
			}
		}
	})
	if fe.err != nil {
		return nil, fe.err
	}
	if acc != nil {
		op.probe.merge(acc, h)
	}
	return res, nil
}

// copeGradOp: q, k, v, emb, out, dout -> dq; it also computes dk, dv and
// demb, handed out by streamGradPartOp.
type copeGradOp struct {
	opBase
	copeCfg
	fwd             *copeAttnOp
	res, dk, dv, de buf
}

func (op *copeGradOp) Arity() int { return 6 }
func (op *copeGradOp) Type() hm.Type {
	o := floatT(len(op.out.shape()))
	return hm.NewFnType(append(op.inTypes(), o, o, floatT(len(op.q.shape())))...)
}
func (op *copeGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.q.shape(), nil }
func (op *copeGradOp) String() string                                 { return "streamCoPEGrad{" + op.copeCfg.String() + "}" }
func (op *copeGradOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *copeGradOp) Hashcode() uint32                               { return hashOf(op) }
func (op *copeGradOp) DiffWRT(n int) []bool                           { return make([]bool, n) }
func (op *copeGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *copeGradOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return copeBwdDo[float32](op, vs) },
		func() (G.Value, error) { return copeBwdDo[float64](op, vs) })
}

func copeBwdDo[T float](op *copeGradOp, vs []G.Value) (G.Value, error) {
	c := &op.copeCfg
	in, emb, err := copeInputs[T](op, c, vs)
	if err != nil {
		return nil, err
	}
	if err := checkShape(op, "out", vs[4], c.out.shape()); err != nil {
		return nil, err
	}
	if err := checkShape(op, "dout", vs[5], c.out.shape()); err != nil {
		return nil, err
	}
	o, err := floats[T](op, vs[4])
	if err != nil {
		return nil, err
	}
	do, err := floats[T](op, vs[5])
	if err != nil {
		return nil, err
	}
	h, tq, nqb, np, dh := c.q.h, c.q.rows, c.qBlocks(), c.npos, c.q.cols
	lse, ok := op.fwd.lse.([]T)
	if !ok || len(lse) != c.q.b*h*tq {
		return nil, errors.Errorf("graph: %v: the forward op has not run", op)
	}
	res, dq := zeroed[T](&op.res, c.q.shape())
	_, dk := zeroed[T](&op.dk, c.k.shape())
	_, dv := zeroed[T](&op.dv, c.v.shape())
	demb := make([]T, c.q.b*h*dh*np) // per task, merged in task order
	fe := firstErr{op: "StreamCoPE"}
	parallelFor(c.q.b*h, tq*c.k.rows*(2*c.q.cols+2*c.v.cols), func(lo, hi int) {
		defer fe.recover()
		w := newCopeWork(c, &in, emb)
		nt := c.tiles(tq)
		f := make([]T, c.tq*c.tk+c.tq*np+3*c.tq+nt*c.tq)
		dpm, dz, f := f[:c.tq*c.tk], f[c.tq*c.tk:c.tq*c.tk+c.tq*np], f[c.tq*c.tk+c.tq*np:]
		d, ls, dpc, carries := f[:c.tq], f[c.tq:2*c.tq], f[2*c.tq:3*c.tq], f[3*c.tq:]
		qld, kld, vld, old := c.q.ld(), c.k.ld(), c.v.ld(), c.out.ld()
		scl, tm, gs := T(c.scale), T(c.term), c.gate
		for task := lo; task < hi && !fe.bad.Load(); task++ {
			b, hh := task/h, task%h
			qo, ko, vo, oo := c.q.off(b, hh), c.k.off(b, hh), c.v.off(b, hh), c.out.off(b, hh)
			de := demb[task*dh*np : (task+1)*dh*np]
			for qb := 0; qb < nqb; qb++ {
				i0, i1 := qb*c.tq, min((qb+1)*c.tq, tq)
				ni, jend, nti := i1-i0, c.keyEnd(i1), c.tiles(i1)
				if jend == 0 {
					continue
				}
				w.block(b, hh, i0, i1)
				// pass 1, right to left: the carried position at each tile's right edge
				for ti := nti - 1; ti >= 0; ti-- {
					copy(carries[ti*c.tq:ti*c.tq+ni], w.carry[:ni])
					if w.allClamped() {
						continue
					}
					if err := w.tile(ti*c.tk, min((ti+1)*c.tk, jend), false); err != nil {
						fe.set(err)
						return
					}
				}
				// D = rowsum(dO ∘ O) and the rows' log-sum-exp
				for a := 0; a < ni; a++ {
					r := oo + (i0+a)*old
					var s T
					for y, g := range do[r : r+c.out.cols] {
						s += g * o[r+y]
					}
					d[a], ls[a] = s, lse[(b*h+hh)*tq+i0+a]
				}
				clear(dz[:ni*np])
				clear(dpc[:ni])
				// pass 2, left to right
				for ti := 0; ti < nti; ti++ {
					j0, j1 := ti*c.tk, min((ti+1)*c.tk, jend)
					nj := j1 - j0
					copy(w.carry[:ni], carries[ti*c.tq:ti*c.tq+ni])
					if err := w.tile(j0, j1, true); err != nil {
						fe.set(err)
						return
					}
					w.scores(nil, nil, nil)
					p := w.lg[:ni*nj]
					expRows(p, nj, ls[:ni])
					// dV += Pᵀ dO, dP = dO Vᵀ
					gemmSerial(true, false, nj, c.v.cols, ni, 1, p, nj, do[oo+i0*old:], old, 1, dv[vo+j0*vld:], vld)
					gemmSerial(false, true, ni, nj, c.v.cols, 1, do[oo+i0*old:], old, in.v[vo+j0*vld:], vld, 0, dpm, nj)
					for a := 0; a < ni; a++ {
						pr, dr := p[a*nj:(a+1)*nj], dpm[a*nj:(a+1)*nj]
						zr, dzr := w.z[a*np:(a+1)*np], dz[a*np:(a+1)*np]
						gr := w.gt[a*nj : (a+1)*nj]
						nv, acc := w.visible(a), dpc[a]
						var dlast T // a clamped row's terms all read z[P-1]
						for j, x := range pr {
							var ds T
							if x != 0 {
								ds = x * (dr[j] - d[a])
							}
							da := scl * ds // dS·Scale: the gradient of a_ij and of the term
							switch {
							case j >= nv:
							case w.cl[a]:
								dlast += da * tm
							default:
								dt := da * tm
								lo, hi, wt, clamped := copeLookup(w.ps[a*nj+j], float64(w.maxP))
								dzr[hi] += dt * wt
								dzr[lo] += dt * (1 - wt)
								if !clamped {
									acc += dt * (zr[hi] - zr[lo])
								}
								g := float64(gr[j])
								da += T(gs*g*(1-g)) * acc
							}
							pr[j] = da
						}
						dzr[np-1] += dlast
						dpc[a] = acc
					}
					// dq += da·k, dk += daᵀ·q
					gemmSerial(false, false, ni, dh, nj, 1, p, nj, in.k[ko+j0*kld:], kld, 1, dq[qo+i0*qld:], qld)
					gemmSerial(true, false, nj, dh, ni, 1, p, nj, in.q[qo+i0*qld:], qld, 1, dk[ko+j0*kld:], kld)
				}
				// dq += dz·embᵀ, demb += qᵀ·dz
				gemmSerial(false, true, ni, dh, np, 1, dz, np, emb, np, 1, dq[qo+i0*qld:], qld)
				gemmSerial(true, false, dh, np, ni, 1, in.q[qo+i0*qld:], qld, dz, np, 1, de, np)
			}
		}
	})
	if fe.err != nil {
		return nil, fe.err
	}
	_, de := zeroed[T](&op.de, tensor.Shape{dh, np})
	acc := make([]float64, dh*np)
	for task := 0; task < c.q.b*h; task++ {
		for x, y := range demb[task*dh*np : (task+1)*dh*np] {
			acc[x] += float64(y)
		}
	}
	for x, y := range acc {
		de[x] = T(y)
	}
	return res, nil
}

func (op *copeGradOp) partShape(p streamPart, _ int) tensor.Shape {
	switch p {
	case partK:
		return op.k.shape()
	case partV:
		return op.v.shape()
	}
	return tensor.Shape{op.q.cols, op.npos}
}

func (op *copeGradOp) partBuf(p streamPart, _ int) *buf {
	switch p {
	case partK:
		return &op.dk
	case partV:
		return &op.dv
	case partEmb:
		return &op.de
	}
	return nil
}

func (op *copeGradOp) partName() string { return "streamCoPEGrad" }
func (op *copeGradOp) dqRank() int      { return len(op.q.shape()) }
