package graph

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds the inputs and the tiles of StreamAttention's forward and
// backward passes: the checked inputs of a run, one tile of queries ×
// keys with its scores, and the error a worker hands back.

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
