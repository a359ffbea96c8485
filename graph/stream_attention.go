package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds StreamAttention, the fused attention of long sequences:
// scores, softmax and the value product in one op that visits the keys in
// tiles with an online softmax (FlashAttention-2), so that no [Tq, Tk]
// matrix exists, in the forward or the backward pass.

// Default tile sizes of StreamAttention (queries × keys per tile).
const (
	DefaultStreamTileQ = 128
	DefaultStreamTileK = 128
)

// StreamOpts are the optional inputs of StreamAttention.
type StreamOpts struct {
	// Heads is the number of heads of the merged layout [B, T, Heads*dh];
	// it is ignored for split [B, H, T, dh] inputs.
	Heads int
	// Scale multiplies q·kᵀ; 0 means 1/sqrt(dh).
	Scale float64
	// Causal lets query i (at position QStart+i) attend to key j (at
	// KStart+j) only if KStart+j <= QStart+i. QStart and KStart are the
	// absolute positions of the first query and key (a query block after a
	// cache or a memory segment of keys has QStart > KStart); they matter
	// only with Causal.
	Causal         bool
	QStart, KStart int
	// KeyMask is nil or [B*Tk] (batch-major): false marks a padding key,
	// never attended. It is copied when the node is built.
	KeyMask []bool
	// KeyPad is nil or a node [B, Tk] or [1, Tk] (shared by the batch) of
	// q's dtype, read each time the graph runs, as a padding mask bound
	// anew for every batch: 0 marks a padding key, never attended, any
	// other value a real one. It gets no gradient. Give KeyMask or KeyPad,
	// not both; StreamCoPE takes KeyMask only.
	KeyPad *G.Node
	// Table is nil or a node [R, H] or [R, 1] (one column shared by the
	// heads) of q's dtype: the score bias, added after scaling, is
	//
	//	bias(b, h, i, j) = Table[Index.TileIndex(b, ...)[i, j], h or 0]
	//
	// T5's buckets, ALiBi over the distinct distances, Shaw's scalars and
	// the 2-D and structural biases of posenc.TableBiaser are of this form.
	Table *G.Node
	// Index is required with Table: it gives the table rows of one tile at
	// a time, on the host.
	Index TileIndexer
	// Terms are relative content-position terms (Shaw's key and value
	// embeddings, Transformer-XL's position terms, DeBERTa's c2p and p2c):
	// query and key terms are added to q·kᵀ before the scale, value terms
	// to the output (see StreamTerm).
	Terms []StreamTerm
	// FIRE, if not nil, adds FIRE's score bias (see FIREBias), computed
	// per tile from its parameter nodes, after scaling; QStart and KStart
	// are then the positions of its formula (>= 0).
	FIRE *FIREBias
	// TileQ and TileK are the tile sizes (0: DefaultStreamTileQ and
	// DefaultStreamTileK). They change the order of the floating-point
	// sums, not the result otherwise.
	TileQ, TileK int
	// Probe, if not nil, records the attention's statistics per head while
	// it is armed, the same HeadStats as AttentionProbs' (see
	// AttentionProbe); it never changes the result.
	Probe *AttentionProbe
}

// TileIndexer gives the table rows of the score bias of StreamAttention one
// tile at a time.
//
// The op calls TileIndex from several goroutines at once (never on the
// same dst), so it must be safe for concurrent use; its result must depend
// only on its arguments. Indexers are identified in the op's hash (Gorgonia
// merges equal nodes) by their address when they are pointers, maps or
// channels, by their type and value when they are plain values (structs,
// arrays and scalars of numbers, booleans and strings), and otherwise (a
// func, a value holding a slice, ...) every call of StreamAttention counts
// as distinct.
type TileIndexer interface {
	// TileIndex writes the table row of every pair (query q0+a, key k0+c)
	// of batch element b into dst[a*(k1-k0)+c], for 0 <= q0 < q1 <= Tq and
	// 0 <= k0 < k1 <= Tk (indices into the call's queries and keys, not
	// absolute positions). perExample reports whether the rows depend on b
	// (the op asks for every batch element either way, for now). An error
	// makes the run fail with it, and so does a panic.
	TileIndex(b, q0, q1, k0, k1 int, dst []int) (perExample bool, err error)
}

// StreamAttention is scaled dot-product attention computed in tiles:
//
//	out = softmax((q·kᵀ + terms) * Scale + bias | mask) · v + value terms    per batch element and head
//
// with q [B, Tq, H*dh], k [B, Tk, H*dh] and v [B, Tk, H*dv] (heads merged,
// o.Heads = H, as layers.Attention lays them out) and out [B, Tq, H*dv]; or
// all of them split, [B, H, T, d], and out [B, H, Tq, dv]. The mask
// combines o.Causal (with o.QStart, o.KStart) and o.KeyMask or o.KeyPad, the bias is
// looked up in o.Table through o.Index (see StreamOpts), the terms are
// those of o.Terms (see StreamTerm). The result equals AttentionProbs
// followed by AttentionOutput with Bias = TableBias(table, ids), Terms the
// gathered products of RelScores and the value terms ScatterRel(probs)·
// Table, and the same mask, up to rounding, but the op never holds a
// [B, H, Tq, Tk] tensor or a [Tq, Tk] buffer: it visits the keys in tiles
// of o.TileK for blocks of o.TileQ queries with an online softmax (running
// maximum and sum per query row, FlashAttention-2, Dao 2023), computing the
// tile's table rows on the host and skipping tiles that the causal mask
// blocks entirely (tiles larger than Tq or Tk are clipped to them). It
// keeps the output and the per-row log-sum-exp [B, H, Tq]; the work space
// is O(TileQ*TileK + H*TileQ) per thread, plus with terms the products of
// a tile with its span of table rows (at most TileQ+TileK-1 rows for a
// distance index).
// A query with no allowed key gets a zero output and zero gradients (never
// NaN), as in AttentionProbs.
//
// It is differentiable with respect to q, k, v, the table and every term's
// table and QBias (not the KeyPad). The backward
// pass recomputes each tile's scores and probabilities from the log-sum-exp
// (dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − D) with D = rowsum(dO ∘ O),
// dQ = Scale dS K, dK = Scale dSᵀ Q, dTable = scatter-add of dS into the
// rows of the tile), holds dQ, dK, dV, dTable (and a copy of each but dQ,
// handed out by one small op each), O(tile) work space per thread and a
// float64 [H, R] accumulator of dTable (and [H, R, w] per term table: the
// terms' gradients are gathered products with the tile's rows of the table
// and scatter-adds into them, see StreamTerm), and is parallel over heads, the
// threads computing each tile's table rows once for their heads; its
// gradient ops have no derivative. The forward
// pass is parallel over (batch element, query block); both are
// deterministic and independent of Threads().
//
// Shape, dtype and option errors (head counts, a table without an indexer,
// a key mask of the wrong length, negative tiles, a non-finite scale) are
// returned here; an indexer error or a table row outside [0, R) makes the
// run fail with an error naming the row, the batch element, query and key.
func StreamAttention(q, k, v *G.Node, o StreamOpts) (*G.Node, error) {
	const name = "StreamAttention"
	c, err := newStreamCfg(name, q, k, v, o)
	if err != nil {
		return nil, err
	}
	ql, vl := c.q, c.v
	inputs := G.Nodes{q, k, v}
	switch {
	case o.Table != nil:
		if err := checkFloatNode(name, "table", o.Table); err != nil {
			return nil, err
		}
		ts := o.Table.Shape()
		if ts.Dims() != 2 || ts[0] < 1 || (ts[1] != ql.h && ts[1] != 1) {
			return nil, errors.Errorf("graph: %s: table %v must be [R, %d] or [R, 1]", name, ts, ql.h)
		}
		if o.Table.Dtype() != q.Dtype() {
			return nil, errors.Errorf("graph: %s: table dtype %v differs from q's %v", name, o.Table.Dtype(), q.Dtype())
		}
		if o.Index == nil {
			return nil, errors.Errorf("graph: %s: table %v needs an Index (TileIndexer)", name, ts)
		}
		c.rows, c.hc = ts[0], ts[1]
		c.index, c.indexID = o.Index, indexerID(o.Index)
		inputs = append(inputs, o.Table)
	case o.Index != nil:
		return nil, errors.Errorf("graph: %s: an Index (%T) without a Table", name, o.Index)
	}
	terms, tnodes, err := checkStreamTerms(name, o.Terms, q, ql, vl)
	if err != nil {
		return nil, err
	}
	c.terms = terms
	inputs = append(inputs, tnodes...)
	if o.FIRE != nil {
		if o.QStart < 0 || o.KStart < 0 {
			return nil, errors.Errorf("graph: %s: FIRE needs positions >= 0, QStart %d and KStart %d", name, o.QStart, o.KStart)
		}
		f, fnodes, err := checkFIRE(name, o.FIRE, q, ql.h)
		if err != nil {
			return nil, err
		}
		c.fire = f
		inputs = append(inputs, fnodes...)
	}
	if o.KeyPad != nil {
		inputs = append(inputs, o.KeyPad)
	}
	return G.ApplyOp(&streamAttnOp{streamCfg: c, probe: o.Probe}, inputs...)
}

// newStreamCfg checks q, k, v and the options that StreamAttention and
// StreamCoPE share (layouts, scale, tiles, key mask) and returns the
// configuration without a table or terms; name is the op's, for the errors.
func newStreamCfg(name string, q, k, v *G.Node, o StreamOpts) (streamCfg, error) {
	var ls [3]headLayout // of q, k, v
	for i, n := range []*G.Node{q, k, v} {
		what := [...]string{"q", "k", "v"}[i]
		if err := checkFloatNode(name, what, n); err != nil {
			return streamCfg{}, err
		}
		if n.Dims() != q.Dims() || n.Dtype() != q.Dtype() {
			return streamCfg{}, errors.Errorf("graph: %s: q %v (%v) and %s %v (%v) differ in rank or dtype", name, q.Shape(), q.Dtype(), what, n.Shape(), n.Dtype())
		}
		var err error
		if ls[i], err = layoutOf(name, what, n.Shape(), o.Heads); err != nil {
			return streamCfg{}, err
		}
	}
	ql, kl, vl := ls[0], ls[1], ls[2]
	if ql.b != kl.b || ql.h != kl.h || ql.cols != kl.cols {
		return streamCfg{}, errors.Errorf("graph: %s: q %v and k %v: batch, heads and head width must agree", name, q.Shape(), k.Shape())
	}
	if vl.b != kl.b || vl.h != kl.h || vl.rows != kl.rows {
		return streamCfg{}, errors.Errorf("graph: %s: k %v and v %v: batch, heads and keys must agree", name, k.Shape(), v.Shape())
	}
	if ql.b < 1 || ql.h < 1 || ql.rows < 1 || kl.rows < 1 || ql.cols < 1 || vl.cols < 1 {
		return streamCfg{}, errors.Errorf("graph: %s: q %v, k %v, v %v: every dimension must be >= 1", name, q.Shape(), k.Shape(), v.Shape())
	}
	c := streamCfg{q: ql, k: kl, v: vl, scale: o.Scale, causal: o.Causal, qStart: o.QStart, kStart: o.KStart, tq: o.TileQ, tk: o.TileK}
	c.out = headLayout{merged: ql.merged, b: ql.b, h: ql.h, rows: ql.rows, cols: vl.cols}
	if c.scale == 0 {
		c.scale = 1 / math.Sqrt(float64(ql.cols))
	}
	if math.IsNaN(c.scale) || math.IsInf(c.scale, 0) {
		return streamCfg{}, errors.Errorf("graph: %s: scale %v is not finite", name, o.Scale)
	}
	if c.tq < 0 || c.tk < 0 {
		return streamCfg{}, errors.Errorf("graph: %s: tiles %d×%d must be >= 0 (0: default)", name, o.TileQ, o.TileK)
	}
	if c.tq == 0 {
		c.tq = DefaultStreamTileQ
	}
	if c.tk == 0 {
		c.tk = DefaultStreamTileK
	}
	c.tq, c.tk = min(c.tq, ql.rows), min(c.tk, kl.rows)
	if o.KeyPad != nil {
		if o.KeyMask != nil {
			return streamCfg{}, errors.Errorf("graph: %s: a KeyMask and a KeyPad: give one", name)
		}
		if err := checkFloatNode(name, "key pad", o.KeyPad); err != nil {
			return streamCfg{}, err
		}
		ps := o.KeyPad.Shape()
		if ps.Dims() != 2 || (ps[0] != kl.b && ps[0] != 1) || ps[1] != kl.rows || o.KeyPad.Dtype() != q.Dtype() {
			return streamCfg{}, errors.Errorf("graph: %s: key pad %v (%v) must be [B, Tk] = [%d, %d] or [1, %d] of q's dtype %v",
				name, ps, o.KeyPad.Dtype(), kl.b, kl.rows, kl.rows, q.Dtype())
		}
		c.padRows = ps[0]
	}
	if o.KeyMask != nil {
		if len(o.KeyMask) != kl.b*kl.rows {
			return streamCfg{}, errors.Errorf("graph: %s: key mask has %d entries, want B*Tk = %d*%d", name, len(o.KeyMask), kl.b, kl.rows)
		}
		c.keyMask = append([]bool(nil), o.KeyMask...)
		c.maskID = maskDigest(c.keyMask)
	}
	return c, nil
}

// streamCfg is what the forward and the gradient ops share: layouts and
// options.
type streamCfg struct {
	q, k, v, out   headLayout
	scale          float64
	causal         bool
	qStart, kStart int
	keyMask        []bool // nil or [B*Tk]; with a KeyPad, its value of the run
	maskID         string
	padRows        int // KeyPad's rows (B or 1), 0 without a KeyPad
	rows, hc       int // table [rows, hc]; 0, 0 without a table
	index          TileIndexer
	indexID        string
	tq, tk         int // tile sizes, clipped to Tq and Tk
	terms          []streamTermCfg
	fire           *fireCfg // nil without FIRE's bias
}

func (c *streamCfg) String() string {
	s := fmt.Sprintf("q=%v, k=%v, v=%v, scale=%v, causal=%v, qstart=%d, kstart=%d, tiles=%dx%d",
		c.q, c.k, c.v, c.scale, c.causal, c.qStart, c.kStart, c.tq, c.tk)
	if c.maskID != "" {
		s += ", keymask=" + c.maskID
	}
	if c.padRows > 0 {
		s += fmt.Sprintf(", keypad=[%d %d]", c.padRows, c.k.rows)
	}
	if c.rows > 0 {
		s += fmt.Sprintf(", table=[%d %d], index=%s", c.rows, c.hc, c.indexID)
	}
	for i := range c.terms {
		s += fmt.Sprintf(", term%d=%v", i, &c.terms[i])
	}
	if c.fire != nil {
		s += ", " + c.fire.String()
	}
	return s
}

// arity is the number of inputs of the forward op.
func (c *streamCfg) arity() int {
	n := 3
	if c.rows > 0 {
		n++
	}
	for _, t := range c.terms {
		n++
		if t.bias {
			n++
		}
	}
	if c.fire != nil {
		n += c.fire.nparams()
	}
	if c.padRows > 0 {
		n++
	}
	return n
}

// inTypes are the hm types of the forward op's inputs.
func (c *streamCfg) inTypes() []hm.Type {
	ts := []hm.Type{floatT(len(c.q.shape())), floatT(len(c.k.shape())), floatT(len(c.v.shape()))}
	if c.rows > 0 {
		ts = append(ts, floatT(2))
	}
	for _, t := range c.terms {
		ts = append(ts, floatT(2))
		if t.bias {
			ts = append(ts, floatT(1))
		}
	}
	if c.fire != nil {
		for _, s := range c.fire.shapes() {
			ts = append(ts, floatT(len(s)))
		}
	}
	if c.padRows > 0 {
		ts = append(ts, floatT(2))
	}
	return ts
}

// qBlocks is the number of query blocks; keyEnd the end of the keys that the
// queries [i0, i1) may see (all of them without the causal mask).
func (c *streamCfg) qBlocks() int { return (c.q.rows + c.tq - 1) / c.tq }
func (c *streamCfg) keyEnd(i1 int) int {
	if !c.causal {
		return c.k.rows
	}
	return max(0, min(c.k.rows, c.qStart+i1-c.kStart))
}

// streamSeq numbers the indexers that cannot be identified otherwise.
var streamSeq atomic.Int64

// indexerID identifies an indexer in the op's String (see TileIndexer).
func indexerID(ix TileIndexer) string {
	v := reflect.ValueOf(ix)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return fmt.Sprintf("%T@%#x", ix, v.Pointer())
	}
	if plainType(v.Type()) {
		return fmt.Sprintf("%T%+v", ix, ix)
	}
	return fmt.Sprintf("%T#%d", ix, streamSeq.Add(1))
}

// plainType reports whether values of t are fully described by their
// printed form: numbers, booleans, strings, and arrays and structs of them.
func plainType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return plainType(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !plainType(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// maskDigest names a key mask in the op's String: its valid count and a
// 64-bit FNV hash.
func maskDigest(m []bool) string {
	h := fnv.New64a()
	b := make([]byte, len(m))
	n := 0
	for i, ok := range m {
		if ok {
			b[i], n = 1, n+1
		}
	}
	h.Write(b)
	return fmt.Sprintf("%d/%d:%016x", n, len(m), h.Sum64())
}

// streamScratch is the work space of one thread of StreamAttention's
// kernels, in elements: Floats of the graph's dtype, Ints (table rows)
// and F64 (float64 accumulators). It depends on the tile sizes and the
// number of heads, never on the sequence lengths; with relative terms the
// ops also report the products with the tables (termScratch), which grow
// to the largest span of table rows in a tile.
type streamScratch struct{ Floats, Ints, F64 int }

// termScratch is the fixed work space of the relative terms per thread:
// their sum [tq, tk], the queries plus a QBias [tq, dh], and each term's
// rows [tq, tk].
func (c *streamCfg) termScratch() streamScratch {
	if len(c.terms) == 0 {
		return streamScratch{}
	}
	return streamScratch{Floats: c.tq*c.tk + c.tq*c.q.cols, Ints: len(c.terms) * c.tq * c.tk}
}

// add returns s + o.
func (s streamScratch) add(o streamScratch) streamScratch {
	return streamScratch{s.Floats + o.Floats, s.Ints + o.Ints, s.F64 + o.F64}
}

// termBuffers is the work space of the terms that t holds: the fixed part
// (termScratch) and the products grown so far.
func (t *streamTile[T]) termBuffers() streamScratch {
	s := streamScratch{Floats: len(t.tp) + len(t.qc) + cap(t.g) + cap(t.w)}
	for _, p := range t.qprod {
		s.Floats += cap(p.g) + cap(p.next)
	}
	for _, tt := range t.terms {
		s.Ints += len(tt.idx)
	}
	return s
}

// fwdScratch is the forward's work space per thread: the tile's scores
// [tq, tk] and table rows [tq, tk], and per head and query of the block
// the running maximum and sum (and the probe's running score sum), and
// per query the tile's row maxima and exp shifts (plus H*tq Ints of key
// counts while a probe records).
func (c *streamCfg) fwdScratch() streamScratch {
	s := streamScratch{Floats: c.tq*c.tk + 2*c.tq, F64: 3*c.q.h*c.tq + c.fireScratch()}
	if c.rows > 0 {
		s.Ints = c.tq * c.tk
	}
	return s.add(c.termScratch())
}

// bwdScratch is the backward's work space of a thread that handles nh
// heads: the tile's probabilities and dP [tq, tk], table rows [tq, tk],
// and per head D and the log-sum-exp of the query block.
func (c *streamCfg) bwdScratch(nh int) streamScratch {
	s := streamScratch{Floats: 2*c.tq*c.tk + 2*nh*c.tq, F64: c.fireScratch()}
	if c.rows > 0 {
		s.Ints = c.tq * c.tk
	}
	return s.add(c.termScratch())
}

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

// streamIn are the float inputs of a run, checked against the layouts:
// tt and tb hold each term's table and QBias (nil without one).
type streamIn[T float] struct {
	q, k, v, tab []T
	tt, tb       [][]T
	fire         [][]T // FIRE's parameters (fireCfg.shapes)
}

func streamInputs[T float](op any, c *streamCfg, vs []G.Value) (streamIn[T], error) {
	var in streamIn[T]
	shapes := []tensor.Shape{c.q.shape(), c.k.shape(), c.v.shape(), {c.rows, c.hc}}
	what := []string{"q", "k", "v", "table"}
	dst := []*[]T{&in.q, &in.k, &in.v, &in.tab}
	if c.rows == 0 {
		shapes, what, dst = shapes[:3], what[:3], dst[:3]
	}
	in.tt, in.tb = make([][]T, len(c.terms)), make([][]T, len(c.terms))
	for x, t := range c.terms {
		shapes = append(shapes, tensor.Shape{t.rows, t.cols})
		what = append(what, fmt.Sprintf("term %d table", x))
		dst = append(dst, &in.tt[x])
		if t.bias {
			shapes = append(shapes, tensor.Shape{c.q.h * c.q.cols})
			what = append(what, fmt.Sprintf("term %d qbias", x))
			dst = append(dst, &in.tb[x])
		}
	}
	if c.fire != nil {
		in.fire = make([][]T, c.fire.nparams())
		for x, s := range c.fire.shapes() {
			shapes = append(shapes, s)
			what = append(what, "FIRE's "+fireParamNames[x])
			dst = append(dst, &in.fire[x])
		}
	}
	for i := range shapes {
		if err := checkShape(op, what[i], vs[i], shapes[i]); err != nil {
			return in, err
		}
		x, err := floats[T](op, vs[i])
		if err != nil {
			return in, err
		}
		*dst[i] = x
	}
	if c.padRows > 0 {
		return in, loadKeyPad[T](op, c, vs[len(shapes)])
	}
	return in, nil
}

// loadKeyPad sets c.keyMask to the key mask of the KeyPad value v
// [padRows, Tk] of this run: true where v is not 0.
func loadKeyPad[T float](op any, c *streamCfg, v G.Value) error {
	tk := c.k.rows
	if err := checkShape(op, "key pad", v, tensor.Shape{c.padRows, tk}); err != nil {
		return err
	}
	x, err := floats[T](op, v)
	if err != nil {
		return err
	}
	if cap(c.keyMask) < c.k.b*tk {
		c.keyMask = make([]bool, c.k.b*tk)
	}
	km := c.keyMask[:c.k.b*tk]
	for b := 0; b < c.k.b; b++ {
		row := x[b%c.padRows*tk : (b%c.padRows+1)*tk]
		for j, p := range row {
			km[b*tk+j] = p != 0
		}
	}
	c.keyMask = km
	return nil
}

// firstErr keeps the first error of the tasks of a parallel run.
type firstErr struct {
	// op names the op in the error of a panic, hint (if not empty) its
	// likely source, as "the indexer's?".
	op, hint string
	mu       sync.Mutex
	err      error
	bad      atomic.Bool
}

// recover, deferred by each task, turns a panic of the task (an indexer's,
// say) into the run's error, naming the op: a panic in a goroutine of
// parallelFor would end the process.
func (e *firstErr) recover() {
	if r := recover(); r != nil {
		hint := ""
		if e.hint != "" {
			hint = " (" + e.hint + ")"
		}
		e.set(errors.Errorf("graph: %s: panic in a task%s: %v", e.op, hint, r))
	}
}

func (e *firstErr) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
		e.bad.Store(true)
	}
}

// streamTile is one thread's view of a tile: the table rows of the tile
// and the work space of the scores.
type streamTile[T float] struct {
	c    *streamCfg
	in   *streamIn[T]
	s    []T   // scores / probabilities [ni, nj]
	idx  []int // table rows [ni, nj]
	b    int
	i0   int
	i1   int
	j0   int
	j1   int
	hasI bool // idx holds the rows of this tile
	// the relative terms: rows per term, their sum [ni, nj], the queries
	// plus a QBias [ni, dh], and work space of products with the tables
	terms  []termTile
	tp, qc []T
	g, w   []T
	fire   *fireTile // FIRE's bias of the tile, nil without
	// per (term, head): the query terms' products of the last tile
	qprod []queryProducts[T]
}

// newStreamTile returns a thread's tile with the work space of c's tiles.
func newStreamTile[T float](c *streamCfg, in *streamIn[T]) streamTile[T] {
	t := streamTile[T]{c: c, in: in, s: make([]T, c.tq*c.tk)}
	if c.rows > 0 {
		t.idx = make([]int, c.tq*c.tk)
	}
	if len(c.terms) > 0 {
		t.terms = make([]termTile, len(c.terms))
		for x := range t.terms {
			t.terms[x].idx = make([]int, c.tq*c.tk)
		}
		t.tp, t.qc = make([]T, c.tq*c.tk), make([]T, c.tq*c.q.cols)
		t.qprod = make([]queryProducts[T], len(c.terms)*c.q.h)
	}
	if c.fire != nil {
		t.fire = newFireTile(c.fire, c.tq*c.tk)
	}
	return t
}

// at sets the tile to batch element b, queries [i0, i1), keys [j0, j1).
func (t *streamTile[T]) at(b, i0, i1, j0, j1 int) {
	t.b, t.i0, t.i1, t.j0, t.j1, t.hasI = b, i0, i1, j0, j1, false
}

// loadIndex fills idx with the tile's table rows and checks them.
func (t *streamTile[T]) loadIndex() error {
	c := t.c
	if t.hasI {
		return nil
	}
	for x := range c.terms {
		if err := t.loadTermIndex(x); err != nil {
			return err
		}
	}
	if c.fire != nil {
		t.loadFire()
	}
	if c.rows == 0 {
		t.hasI = true
		return nil
	}
	ni, nj := t.i1-t.i0, t.j1-t.j0
	idx := t.idx[:ni*nj]
	if _, err := c.index.TileIndex(t.b, t.i0, t.i1, t.j0, t.j1, idx); err != nil {
		return errors.Wrapf(err, "graph: StreamAttention: index of batch element %d, queries [%d, %d), keys [%d, %d)", t.b, t.i0, t.i1, t.j0, t.j1)
	}
	for p, r := range idx {
		if uint(r) >= uint(c.rows) {
			return errors.Errorf("graph: StreamAttention: table row %d (batch element %d, query %d, key %d) is outside the table's %d rows",
				r, t.b, t.i0+p/nj, t.j0+p%nj, c.rows)
		}
	}
	t.hasI = true
	return nil
}

// scores fills s [ni, nj] with head h's final scores q·kᵀ*scale + bias,
// -Inf where the mask blocks, and, if rowMax is not nil, sets rowMax[a] to
// the maximum of row a (-Inf if nothing is allowed, NaN if an entry is
// NaN). If pa is not nil it also records the allowed entries' extremes
// and bias (AttentionProbe), and counts the allowed keys of each row into
// allowed.
func (t *streamTile[T]) scores(h int, pa *headAcc, allowed []int, rowMax []T) {
	c, in := t.c, t.in
	ni, nj := t.i1-t.i0, t.j1-t.j0
	s := t.s[:ni*nj]
	qo := c.q.off(t.b, h) + t.i0*c.q.ld()
	ko := c.k.off(t.b, h) + t.j0*c.k.ld()
	gemmSerial(false, true, ni, nj, c.q.cols, T(c.scale), in.q[qo:], c.q.ld(), in.k[ko:], c.k.ld(), 0, s, nj)
	var tp []T
	switch {
	case c.hasScoreTerms() && pa != nil: // the probe records the terms apart
		tp = t.tp[:ni*nj]
		clear(tp)
		t.scoreTerms(h, tp, 1)
		scale := T(c.scale)
		for x, v := range tp {
			s[x] += scale * v
		}
	case c.hasScoreTerms():
		t.scoreTerms(h, s, T(c.scale))
	}
	col := 0
	if c.hc > 1 {
		col = h
	}
	if c.rows > 0 {
		gatherAddRows(s, nj, t.idx[:ni*nj], in.tab, tileAddr{stride: c.hc, off: col})
	}
	var km []bool
	if c.keyMask != nil {
		km = c.keyMask[t.b*c.k.rows+t.j0 : t.b*c.k.rows+t.j1]
	}
	if c.fire != nil || pa != nil || km != nil {
		ninf := T(math.Inf(-1))
		for a := 0; a < ni; a++ {
			row := s[a*nj : (a+1)*nj]
			if c.fire != nil {
				t.addFire(h, a, row)
			}
			if pa != nil {
				var terms []T
				if tp != nil {
					terms = tp[a*nj : (a+1)*nj]
				}
				t.probeRow(pa, h, a, row, terms, km, col, allowed)
			}
			for j, ok := range km {
				if !ok {
					row[j] = ninf
				}
			}
		}
	}
	// key j is visible iff kStart+j0+j <= qStart+i0+a
	maskMaxRows(s, nj, c.causal, c.qStart+t.i0-c.kStart-t.j0+1, rowMax)
}

// visible reports whether key j0+j is visible to query i0+a.
func (t *streamTile[T]) visible(a, j int, km []bool) bool {
	c := t.c
	if km != nil && !km[j] {
		return false
	}
	return !c.causal || c.kStart+t.j0+j <= c.qStart+t.i0+a
}

// probeRow records row a of the tile's scores (before masking) in pa;
// terms is nil or the row's relative terms (unscaled); h is the head.
func (t *streamTile[T]) probeRow(pa *headAcc, h, a int, row, terms []T, km []bool, col int, allowed []int) {
	c := t.c
	pa.hasPos = pa.hasPos || c.rows > 0 || terms != nil || c.fire != nil
	nj := t.j1 - t.j0
	for j, v := range row {
		if !t.visible(a, j, km) {
			continue
		}
		allowed[a]++
		x := float64(v)
		if x != x {
			pa.nanScore = true
		}
		pa.scoreMax = math.Max(pa.scoreMax, x)
		pa.scoreMin = math.Min(pa.scoreMin, x)
		if c.rows > 0 || terms != nil || c.fire != nil {
			var pos float64
			if c.rows > 0 {
				pos = float64(t.in.tab[t.idx[a*nj+j]*c.hc+col])
			}
			if c.fire != nil {
				pos += t.fireBias(h, a*nj+j)
			}
			if terms != nil {
				pos += float64(terms[j] * T(c.scale))
			}
			pa.posSq += pos * pos
			pa.posN++
		}
	}
}

// keysPresent reports whether the key range [j0, j1) of batch element b
// holds a key that is not padding.
func (c *streamCfg) keysPresent(b, j0, j1 int) bool {
	if c.keyMask == nil {
		return true
	}
	for _, ok := range c.keyMask[b*c.k.rows+j0 : b*c.k.rows+j1] {
		if ok {
			return true
		}
	}
	return false
}

// expRows sets s[a*nj+j] = exp(s[a*nj+j] - shift[a]) (0 for -Inf entries
// when shift is finite or +Inf).
func expRows[T float](s []T, nj int, shift []T) {
	if isF32[T]() {
		k32.expScaleRows(any(s).([]float32), any(s).([]float32), nj, any(shift).([]float32), 1)
		return
	}
	for a, m := range shift {
		row := s[a*nj : (a+1)*nj]
		for j, x := range row {
			row[j] = T(math.Exp(float64(x - m)))
		}
	}
}

// zigzag maps 0, 1, 2, 3, ... to 0, n-1, 1, n-2, ...: the forward's tasks
// take the query blocks in this order, so that the contiguous chunks of
// parallelFor get as many cheap early blocks as expensive late ones under
// a causal mask.
func zigzag(x, n int) int {
	if x%2 == 0 {
		return x / 2
	}
	return n - 1 - x/2
}

// sumT is the sum of x, in four interleaved partial sums.
func sumT[T float](x []T) T {
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
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
