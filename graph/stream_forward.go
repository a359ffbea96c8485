package graph

import (
	"hash"
	"math"
	"sync"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds StreamAttention's forward: the op, the online softmax of
// FlashAttention-2 and the loop over query blocks and key tiles.

// streamAttnOp: q, k, v, [table] -> out.
type streamAttnOp struct {
	opBase
	streamCfg
	res buf
	// lse is the log-sum-exp [B, H, Tq] ([]float32 or []float64) of the
	// last run (+Inf for a row with no allowed key), read by the gradient.
	lse any
	// scratch counts the work space the last run allocated (all threads).
	scratch streamScratch
	// probe is not part of the op's identity (String, hash): it observes.
	probe *AttentionProbe
}

func (op *streamAttnOp) Arity() int { return op.arity() }
func (op *streamAttnOp) Type() hm.Type {
	return hm.NewFnType(append(op.inTypes(), floatT(len(op.out.shape())))...)
}
func (op *streamAttnOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.out.shape(), nil }
func (op *streamAttnOp) String() string                                 { return "StreamAttention{" + op.streamCfg.String() + "}" }
func (op *streamAttnOp) WriteHash(h hash.Hash)                          { writeHash(h, op) }
func (op *streamAttnOp) Hashcode() uint32                               { return hashOf(op) }
func (op *streamAttnOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	if op.padRows > 0 && n > 0 {
		r[n-1] = false // the KeyPad
	}
	return r
}

// SymDiff: one gradient op computes dQ and accumulates dK, dV and dTable,
// which small ops hand out after it has run (as LayerNorm's dgamma). They
// refer to the op of the nodes in the graph, which may be earlier, equal
// nodes that Gorgonia merged these into.
func (op *streamAttnOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	fwd, ok := out.Op().(*streamAttnOp)
	if !ok {
		return nil, errors.Errorf("graph: StreamAttention: output node has op %v", out.Op())
	}
	ins := append(append(G.Nodes{}, in...), out, grad)
	dq, err := G.ApplyOp(&streamGradOp{streamCfg: op.streamCfg, fwd: fwd}, ins...)
	if err != nil {
		return nil, err
	}
	src, ok := dq.Op().(*streamGradOp)
	if !ok {
		return nil, errors.Errorf("graph: StreamAttention: gradient node has op %v", dq.Op())
	}
	parts, terms := op.streamParts()
	pad := min(op.padRows, 1)
	if len(parts) != len(in)-1-pad {
		return nil, errors.Errorf("graph: StreamAttention: %d inputs, want %d", len(in), len(parts)+1+pad)
	}
	res, err := gradPartNodes(dq, src, parts, terms)
	if pad > 0 {
		res = append(res, nil) // the KeyPad has no gradient
	}
	return res, err
}

func (op *streamAttnOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return streamFwdDo[float32](op, vs) },
		func() (G.Value, error) { return streamFwdDo[float64](op, vs) })
}

// onlineSoftmax is the running softmax of one head over the rows of a query
// block (FlashAttention-2) in the forward of StreamAttention and
// StreamCoPE: per row the running maximum m, sum l and, for the probe's
// entropy, Σ exp(s−m)·s, each [rows] float64; shift and rmax [rows] are
// work space of add (the tile's exp shifts and row maxima), shared by the
// heads of one thread.
type onlineSoftmax[T float] struct {
	m, l, ws    []float64
	shift, rmax []T
	out         []T // the block's output rows, ld apart
	ld, cols    int
	ni          int
	probe       bool
}

// newOnlineSoftmaxes returns the softmaxes of heads heads over blocks of at
// most rows rows, sharing shift and rmax: 3·heads·rows float64 and 2·rows
// T in all.
func newOnlineSoftmaxes[T float](heads, rows int) []onlineSoftmax[T] {
	f, t := make([]float64, 3*heads*rows), make([]T, 2*rows)
	s := make([]onlineSoftmax[T], heads)
	for h := range s {
		g := f[3*h*rows : 3*(h+1)*rows]
		s[h] = onlineSoftmax[T]{m: g[:rows], l: g[rows : 2*rows], ws: g[2*rows:], shift: t[:rows], rmax: t[rows:]}
	}
	return s
}

// start begins ni rows whose output rows are out[a*ld : a*ld+cols].
func (s *onlineSoftmax[T]) start(out []T, ld, cols, ni int, probe bool) {
	s.out, s.ld, s.cols, s.ni, s.probe = out, ld, cols, ni, probe
	for a := 0; a < ni; a++ {
		s.m[a], s.l[a], s.ws[a] = math.Inf(-1), 0, 0
		clear(out[a*ld : a*ld+cols])
	}
}

// add folds in a tile of scores sc [ni, nj] (row maxima in rmax, -Inf for
// blocked entries; overwritten by exp(sc − m)) with values v [nj, cols]
// (ld ldv).
func (s *onlineSoftmax[T]) add(sc []T, nj int, v []T, ldv int) {
	for a := 0; a < s.ni; a++ {
		mx := s.rmax[a]
		mOld, mNew := s.m[a], math.Max(s.m[a], float64(mx))
		if mx != mx {
			mNew = math.NaN()
		}
		if math.IsInf(mNew, -1) { // nothing allowed yet
			s.shift[a] = 0
			continue
		}
		s.shift[a] = T(mNew)
		if mNew != mOld {
			alpha := math.Exp(mOld - mNew)
			s.l[a] *= alpha
			s.ws[a] *= alpha
			orow := s.out[a*s.ld : a*s.ld+s.cols]
			for x := range orow {
				orow[x] *= T(alpha)
			}
			s.m[a] = mNew
		}
	}
	if s.probe { // Σ exp(s - m)·s, for the entropy
		for a := 0; a < s.ni; a++ {
			for _, x := range sc[a*nj : (a+1)*nj] {
				if !math.IsInf(float64(x), -1) {
					s.ws[a] += math.Exp(float64(x)-s.m[a]) * float64(x)
				}
			}
		}
	}
	expRows(sc, nj, s.shift[:s.ni])
	for a := 0; a < s.ni; a++ {
		s.l[a] += float64(sumT(sc[a*nj : (a+1)*nj]))
	}
	gemmSerial(false, false, s.ni, s.cols, nj, 1, sc, nj, v, ldv, 1, s.out, s.ld)
}

// finish normalises the rows, writes their log-sum-exp into lse[:ni] (+Inf
// for a row with no allowed key, whose output is 0) and, with pa, records
// the entropy and one-hot figures of the rows with at least two allowed
// keys.
func (s *onlineSoftmax[T]) finish(lse []T, pa *headAcc, allowed []int) {
	for a := 0; a < s.ni; a++ {
		orow := s.out[a*s.ld : a*s.ld+s.cols]
		if s.l[a] == 0 {
			clear(orow)
			lse[a] = T(math.Inf(1))
			continue
		}
		inv := 1 / s.l[a]
		for y := range orow {
			orow[y] = T(float64(orow[y]) * inv)
		}
		lse[a] = T(s.m[a] + math.Log(s.l[a]))
		if pa != nil && allowed[a] >= 2 {
			ent := s.m[a] + math.Log(s.l[a]) - s.ws[a]*inv
			pa.entSum += ent
			pa.entMin = math.Min(pa.entMin, ent)
			if inv >= OneHotThreshold {
				pa.oneHot++
			}
			pa.rows++
		}
	}
}

func streamFwdDo[T float](op *streamAttnOp, vs []G.Value) (G.Value, error) {
	c := &op.streamCfg
	in, err := streamInputs[T](op, c, vs)
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
	// One accumulator per (task, head) when the probe records: tasks of the
	// same batch element run at once, and merging them in task order keeps
	// the statistics independent of the threads.
	var acc []headAcc
	if op.probe.Armed() {
		acc = make([]headAcc, c.q.b*nqb*h)
		for i := range acc {
			acc[i] = newHeadAcc()
		}
	}
	fe := firstErr{op: "StreamAttention", hint: "the indexer's?"}
	var mu sync.Mutex
	var used streamScratch
	parallelFor(c.q.b*nqb, c.tq*c.k.rows*h*(c.q.cols+c.v.cols), func(lo, hi int) {
		defer fe.recover()
		t := newStreamTile(c, &in)
		defer func() { // the terms' buffers, grown by then
			mu.Lock()
			used = used.add(t.termBuffers())
			mu.Unlock()
		}()
		sms := newOnlineSoftmaxes[T](h, c.tq)
		var allowed []int
		if acc != nil {
			allowed = make([]int, h*c.tq)
		}
		mu.Lock()
		used.Floats += len(t.s) + len(sms[0].shift) + len(sms[0].rmax)
		used.Ints += len(t.idx) + len(allowed)
		used.F64 += h * (len(sms[0].m) + len(sms[0].l) + len(sms[0].ws))
		if t.fire != nil {
			used.F64 += t.fire.floats()
		}
		mu.Unlock()
		for task := lo; task < hi && !fe.bad.Load(); task++ {
			b, qb := task/nqb, zigzag(task%nqb, nqb)
			i0, i1 := qb*c.tq, min((qb+1)*c.tq, tq)
			ni := i1 - i0
			clear(allowed)
			for hh := range sms {
				sms[hh].start(out[c.out.off(b, hh)+i0*c.out.ld():], c.out.ld(), c.out.cols, ni, acc != nil)
			}
			jend := c.keyEnd(i1)
			for j0 := 0; j0 < jend; j0 += c.tk {
				j1 := min(j0+c.tk, jend)
				if !c.keysPresent(b, j0, j1) {
					continue
				}
				t.at(b, i0, i1, j0, j1)
				if err := t.loadIndex(); err != nil {
					fe.set(err)
					return
				}
				nj := j1 - j0
				for hh := range sms {
					var pa *headAcc
					var al []int
					if acc != nil {
						pa, al = &acc[task*h+hh], allowed[hh*c.tq:]
					}
					sm := &sms[hh]
					t.scores(hh, pa, al, sm.rmax)
					s := t.s[:ni*nj]
					sm.add(s, nj, in.v[c.v.off(b, hh)+j0*c.v.ld():], c.v.ld())
					t.valueTermsFwd(hh, s, sm.out, c.out.ld())
				}
			}
			for hh := range sms {
				var pa *headAcc
				var al []int
				if acc != nil {
					pa, al = &acc[task*h+hh], allowed[hh*c.tq:]
				}
				sms[hh].finish(lse[(b*h+hh)*tq+i0:], pa, al)
			}
		}
	})
	if fe.err != nil {
		return nil, fe.err
	}
	op.scratch = used
	if acc != nil {
		op.probe.merge(acc, h)
	}
	return res, nil
}
