package graph

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GatherRel gathers, for every query i and key j, the column idx[i*tk+j] of
// row i of m:
//
//	out[..., i, j] = m[..., i, idx[i*tk+j]]
//
// m is a float32 or float64 node [..., Tq, R] of rank >= 2 (Tq = tq); idx is
// a host slice of length tq*tk (row-major [Tq, Tk]) whose entries are in
// [0, R); out is [..., Tq, Tk]. idx is copied, so the caller may reuse its
// slice. This is the relative-position lookup of Shaw et al. (2018),
// Transformer-XL (Dai et al. 2019) and DeBERTa (He et al. 2021): compute
// M = q·Tableᵀ [..., Tq, R] with one matmul over the R distinct relative
// positions, then gather the entry of each (i, j) pair.
//
// The gradient of m is ScatterRel of the output gradient (a scatter-add:
// entries gathered several times accumulate). Shape, dtype and index errors
// are returned here.
//
// Two GatherRel nodes with the same input and index contents are the same
// node (Gorgonia merges them); different index contents give different nodes.
func GatherRel(m *G.Node, idx []int, tq, tk int) (*G.Node, error) {
	if err := checkFloatNode("GatherRel", "m", m); err != nil {
		return nil, err
	}
	s := m.Shape()
	if len(s) < 2 {
		return nil, errors.Errorf("graph: GatherRel: m must be [..., Tq, R] of rank >= 2, got %v", s)
	}
	if tq <= 0 || tk <= 0 {
		return nil, errors.Errorf("graph: GatherRel: tq = %d and tk = %d must be positive (m %v)", tq, tk, s)
	}
	if s[len(s)-2] != tq {
		return nil, errors.Errorf("graph: GatherRel: m %v must be [..., Tq, R] with Tq = %d", s, tq)
	}
	r := s[len(s)-1]
	op, err := newRelOp("GatherRel", false, idx, tq, tk, r, len(s))
	if err != nil {
		return nil, errors.Wrapf(err, "m %v", s)
	}
	return G.ApplyOp(op, m)
}

// ScatterRel sums, for every query i, the entries of row i of p whose keys
// share an index:
//
//	out[..., i, r] = sum over j with idx[i*tk+j] == r of p[..., i, j]
//
// p is a float32 or float64 node [..., Tq, Tk] of rank >= 2; idx is a host
// slice of length tq*tk (row-major [Tq, Tk]) whose entries are in [0, r); out
// is [..., Tq, r], zero where no key maps to r. idx is copied. ScatterRel is
// the adjoint of GatherRel: with p the attention probabilities, out·Table
// ([..., Tq, r]·[r, d]) is sum_j p_ij Table[idx_ij], the value term of Shaw
// et al. (2018).
//
// The gradient of p is GatherRel of the output gradient. Shape, dtype and
// index errors are returned here.
func ScatterRel(p *G.Node, idx []int, tq, tk, r int) (*G.Node, error) {
	if err := checkFloatNode("ScatterRel", "p", p); err != nil {
		return nil, err
	}
	s := p.Shape()
	if len(s) < 2 {
		return nil, errors.Errorf("graph: ScatterRel: p must be [..., Tq, Tk] of rank >= 2, got %v", s)
	}
	if tq <= 0 || tk <= 0 || r <= 0 {
		return nil, errors.Errorf("graph: ScatterRel: tq = %d, tk = %d and r = %d must be positive (p %v)", tq, tk, r, s)
	}
	if s[len(s)-2] != tq || s[len(s)-1] != tk {
		return nil, errors.Errorf("graph: ScatterRel: p %v must be [..., Tq, Tk] with Tq = %d, Tk = %d", s, tq, tk)
	}
	op, err := newRelOp("ScatterRel", true, idx, tq, tk, r, len(s))
	if err != nil {
		return nil, errors.Wrapf(err, "p %v", s)
	}
	return G.ApplyOp(op, p)
}

// relOp is GatherRel ([..., Tq, R] -> [..., Tq, Tk]) or, with scatter set,
// ScatterRel ([..., Tq, Tk] -> [..., Tq, R]). Its String names the index
// contents by a 64-bit FNV-1a hash (together with the sizes), so nodes
// applying different indices to the same input are never merged.
type relOp struct {
	opBase
	scatter   bool
	idx       []int // own copy, never modified
	tq, tk, r int
	dims      int    // rank of input and output
	idxHash   uint64 // FNV-1a of idx
	res       buf
}

func newRelOp(name string, scatter bool, idx []int, tq, tk, r, dims int) (*relOp, error) {
	if len(idx) != tq*tk {
		return nil, errors.Errorf("graph: %s: idx has %d entries, want tq*tk = %d*%d = %d", name, len(idx), tq, tk, tq*tk)
	}
	h := fnv.New64a()
	var b [8]byte
	for k, v := range idx {
		if v < 0 || v >= r {
			return nil, errors.Errorf("graph: %s: idx[%d] = %d (query %d, key %d) is out of range [0, %d)", name, k, v, k/tk, k%tk, r)
		}
		u := uint64(v)
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	return &relOp{
		scatter: scatter,
		idx:     append([]int(nil), idx...),
		tq:      tq, tk: tk, r: r,
		dims:    dims,
		idxHash: h.Sum64(),
	}, nil
}

// inCols and outCols are the sizes of the last axis of input and output.
func (op *relOp) inCols() int {
	if op.scatter {
		return op.tk
	}
	return op.r
}

func (op *relOp) outCols() int {
	if op.scatter {
		return op.r
	}
	return op.tk
}

func (op *relOp) Arity() int { return 1 }
func (op *relOp) Type() hm.Type {
	t := floatT(op.dims)
	return hm.NewFnType(t, t)
}
func (op *relOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(in))
	}
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, errors.Errorf("graph: %v: cannot infer the shape from %T", op, in[0])
	}
	if len(s) != op.dims || s[len(s)-2] != op.tq || s[len(s)-1] != op.inCols() {
		return nil, errors.Errorf("graph: %v: input %v does not match", op, s)
	}
	out := s.Clone()
	out[len(out)-1] = op.outCols()
	return out, nil
}
func (op *relOp) String() string {
	name := "GatherRel"
	if op.scatter {
		name = "ScatterRel"
	}
	return fmt.Sprintf("%s{Tq=%d, Tk=%d, R=%d, rank=%d, idx=%016x}", name, op.tq, op.tk, op.r, op.dims, op.idxHash)
}
func (op *relOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *relOp) Hashcode() uint32      { return hashOf(op) }
func (op *relOp) DiffWRT(int) []bool    { return []bool{true} }

// SymDiff: the adjoint of a gather is the scatter-add with the same indices,
// and vice versa.
func (op *relOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	var d *G.Node
	var err error
	if op.scatter {
		d, err = GatherRel(grad, op.idx, op.tq, op.tk)
	} else {
		d, err = ScatterRel(grad, op.idx, op.tq, op.tk, op.r)
	}
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

func (op *relOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return relDo[float32](op, vs[0]) },
		func() (G.Value, error) { return relDo[float64](op, vs[0]) })
}

func relDo[T float](op *relOp, v G.Value) (G.Value, error) {
	var name any = op
	s := v.Shape()
	if len(s) != op.dims || s[len(s)-2] != op.tq || s[len(s)-1] != op.inCols() {
		return nil, errors.Errorf("graph: %s: input has shape %v at run time", name, s)
	}
	x, err := floats[T](name, v)
	if err != nil {
		return nil, err
	}
	os := s.Clone()
	os[len(os)-1] = op.outCols()
	var out *tensor.Dense
	var y []T
	if op.scatter {
		out, y = zeroed[T](&op.res, os)
	} else {
		out, y = bufFor[T](&op.res, os)
	}
	tq, tk, r := op.tq, op.tk, op.r
	mats := len(x) / (tq * op.inCols())
	for b := 0; b < mats; b++ {
		for i := 0; i < tq; i++ {
			ix := op.idx[i*tk : (i+1)*tk]
			if op.scatter {
				xr := x[(b*tq+i)*tk : (b*tq+i+1)*tk]
				yr := y[(b*tq+i)*r : (b*tq+i+1)*r]
				for j, k := range ix {
					yr[k] += xr[j]
				}
			} else {
				xr := x[(b*tq+i)*r : (b*tq+i+1)*r]
				yr := y[(b*tq+i)*tk : (b*tq+i+1)*tk]
				for j, k := range ix {
					yr[j] = xr[k]
				}
			}
		}
	}
	return out, nil
}
