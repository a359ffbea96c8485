package graph

import (
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"sync/atomic"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// This file holds StreamAttention, the fused attention of long sequences:
// scores, softmax and the value product in one op that visits the keys in
// tiles with an online softmax (FlashAttention-2), so that no [Tq, Tk]
// matrix exists, in the forward or the backward pass. Here: the options,
// the tile indexer of the terms and the op's configuration; the forward is
// in stream_forward.go, the tiles in stream_tiles.go, the backward in
// stream_backward.go.

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
