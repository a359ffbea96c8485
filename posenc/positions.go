package posenc

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/graph"
)

// PosKind is the kind of positions the tokens of an attention call have.
type PosKind string

// The kinds of positions. A Site without Positions has line positions (its
// Span); the other kinds come in a Positions value.
const (
	// PosLine: 1-D integer positions, query i at QStart+i, key j at
	// KStart+j (text; the Span).
	PosLine PosKind = "line"
	// PosGrid: N-D integer coordinates shared by the batch (image patches:
	// (row, col)).
	PosGrid PosKind = "grid"
	// PosReal: real-valued 1-D positions, per example or shared (times).
	PosReal PosKind = "real"
	// PosPairwise: an integer relation for every (query, key) pair, per
	// example or shared (a graph's shortest-path distances, a syntax tree's
	// relations).
	PosPairwise PosKind = "pairwise"
)

// PosKinds lists every kind, in the order above.
var PosKinds = []PosKind{PosLine, PosGrid, PosReal, PosPairwise}

// Positions say where the queries and keys of one attention call are when
// that is more than a line. Exactly the fields of its Kind are set; build
// it with NewGrid, NewGridCoords, NewReal or NewPairwise, which check it.
// Positions are host data: encodings turn them into constants (indices,
// tables) once per value (Key identifies the contents for caches) and they
// must not be modified after construction.
//
// Batch is 1 when the positions are shared by every example of the batch,
// or B when each example has its own (biases are then [B, H|1, Tq, Tk]).
type Positions struct {
	Kind PosKind
	// Batch is 1 (shared) or the batch size B (per example).
	Batch int
	// TQ and TK are the numbers of queries and keys.
	TQ, TK int

	// Extent is the size of each grid axis, e.g. [rows, cols] (PosGrid).
	Extent []int
	// QCoords [TQ*len(Extent)] and KCoords [TK*len(Extent)] hold the
	// coordinates of each query and key, token-major: query i is at
	// QCoords[i*n : (i+1)*n], each 0 <= c < Extent[axis] (PosGrid).
	QCoords, KCoords []int

	// QTimes [Batch*TQ] and KTimes [Batch*TK] are real positions (PosReal).
	QTimes, KTimes []float64

	// Rel [Batch*TQ*TK] is the relation of each pair, row-major
	// [Batch, TQ, TK], each in [0, NumRel) (PosPairwise).
	Rel    []int
	NumRel int

	// Feed, if not nil, makes the positions rebindable: encodings read
	// their per-example data (relations, degrees) from input nodes
	// registered in it, so one graph serves every batch of positions of
	// this shape (see Feed). It is the one field set after construction,
	// before the model is built; Key ignores it.
	Feed *Feed

	key string
}

// NewGrid returns the positions of a rows×cols grid of tokens attending to
// themselves, in raster order: token t = r*cols + c is at (r, c).
func NewGrid(rows, cols int) (*Positions, error) {
	if rows <= 0 || cols <= 0 {
		return nil, errors.Errorf("posenc: grid %dx%d: both sides must be positive", rows, cols)
	}
	if rows > math.MaxInt32/cols {
		return nil, errors.Errorf("posenc: grid %dx%d is too large", rows, cols)
	}
	c := make([]int, 0, 2*rows*cols)
	for r := 0; r < rows; r++ {
		for k := 0; k < cols; k++ {
			c = append(c, r, k)
		}
	}
	return NewGridCoords([]int{rows, cols}, c, c)
}

// NewGridCoords returns grid positions with explicit coordinates (see
// Positions): extent gives the size of each axis, q and k the coordinates of
// each query and key, token-major. It returns an error if an extent is not
// positive, a coordinate list is not a whole number of tokens, or a
// coordinate is outside its axis.
func NewGridCoords(extent, q, k []int) (*Positions, error) {
	n := len(extent)
	if n == 0 {
		return nil, errors.New("posenc: grid positions need at least one axis")
	}
	for a, e := range extent {
		if e <= 0 {
			return nil, errors.Errorf("posenc: grid extent %v: axis %d is %d, must be positive", extent, a, e)
		}
	}
	check := func(what string, c []int) error {
		if len(c) == 0 || len(c)%n != 0 {
			return errors.Errorf("posenc: %s coordinates: %d values are not a positive number of %d-D positions", what, len(c), n)
		}
		for i, v := range c {
			if v < 0 || v >= extent[i%n] {
				return errors.Errorf("posenc: %s %d: coordinate %d on axis %d is outside the grid %v", what, i/n, v, i%n, extent)
			}
		}
		return nil
	}
	if err := check("query", q); err != nil {
		return nil, err
	}
	if err := check("key", k); err != nil {
		return nil, err
	}
	p := &Positions{Kind: PosGrid, Batch: 1, TQ: len(q) / n, TK: len(k) / n,
		Extent: slices.Clone(extent), QCoords: slices.Clone(q), KCoords: slices.Clone(k)}
	p.key = p.fingerprint()
	return p, nil
}

// NewReal returns real-valued positions: q [batch*TQ] and k [batch*TK]
// (batch 1: shared by the batch), example-major: query i of example b is at
// time q[b*TQ+i] (Times(b) returns an example's times). Queries and keys
// may sit at different times for the same tokens (a next-event model's
// query i at the time of the event it predicts, its key at the time of its
// own event). Non-finite times and a length that is not a positive
// multiple of batch are errors. alibi, rope (rope-pi, rope-ntk,
// rope-llama3), kerple-log, kerple-power, fire and dpb serve them (see
// each type); set Feed before building the model to rebind the times of
// every batch with Feed.Bind.
func NewReal(batch int, q, k []float64) (*Positions, error) {
	if batch <= 0 || len(q) == 0 || len(k) == 0 || len(q)%batch != 0 || len(k)%batch != 0 {
		return nil, errors.Errorf("posenc: real positions: %d query and %d key times are not a positive multiple of batch %d", len(q), len(k), batch)
	}
	for _, c := range [][]float64{q, k} {
		for i, v := range c {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, errors.Errorf("posenc: real positions: time %d is %v", i, v)
			}
		}
	}
	p := &Positions{Kind: PosReal, Batch: batch, TQ: len(q) / batch, TK: len(k) / batch,
		QTimes: slices.Clone(q), KTimes: slices.Clone(k)}
	p.key = p.fingerprint()
	return p, nil
}

// NewPairwise returns pairwise relations rel [batch, tq, tk] (row-major),
// each in [0, numRel). batch 1 shares them across the batch.
func NewPairwise(batch, tq, tk, numRel int, rel []int) (*Positions, error) {
	if batch <= 0 || tq <= 0 || tk <= 0 || numRel <= 0 {
		return nil, errors.Errorf("posenc: pairwise positions: batch %d, tq %d, tk %d and %d relations must be positive", batch, tq, tk, numRel)
	}
	if len(rel) != batch*tq*tk {
		return nil, errors.Errorf("posenc: pairwise positions: %d relations, want batch*tq*tk = %d*%d*%d = %d", len(rel), batch, tq, tk, batch*tq*tk)
	}
	for i, r := range rel {
		if r < 0 || r >= numRel {
			return nil, errors.Errorf("posenc: pairwise positions: relation %d of pair %d is outside [0, %d)", r, i, numRel)
		}
	}
	p := &Positions{Kind: PosPairwise, Batch: batch, TQ: tq, TK: tk, NumRel: numRel, Rel: slices.Clone(rel)}
	p.key = p.fingerprint()
	return p, nil
}

// Key identifies the contents of p (a hash of every field), for caches
// keyed by positions. Positions built by the constructors have it; "" for a
// nil p.
func (p *Positions) Key() string {
	if p == nil {
		return ""
	}
	if p.key == "" {
		return p.fingerprint()
	}
	return p.key
}

// fingerprint hashes every field in binary (each slice with its length
// first, so that no two contents share a byte stream): a few milliseconds
// for the [16, 128, 128] relations of a code batch.
func (p *Positions) fingerprint() string {
	h := fnv.New128a()
	buf := make([]byte, 0, 1<<16)
	put := func(v uint64) {
		buf = binary.LittleEndian.AppendUint64(buf, v)
		if len(buf) >= 1<<16-8 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	ints := func(vs []int) {
		put(uint64(len(vs)))
		for _, v := range vs {
			put(uint64(v))
		}
	}
	floats := func(vs []float64) {
		put(uint64(len(vs)))
		for _, v := range vs {
			put(math.Float64bits(v))
		}
	}
	h.Write([]byte(p.Kind))
	ints([]int{p.Batch, p.TQ, p.TK, p.NumRel})
	ints(p.Extent)
	ints(p.QCoords)
	ints(p.KCoords)
	floats(p.QTimes)
	floats(p.KTimes)
	ints(p.Rel)
	h.Write(buf)
	return fmt.Sprintf("%s:%x", p.Kind, h.Sum(nil))
}

// Describe is a short description for errors: "grid 7x7", "real", ...
func (p *Positions) Describe() string {
	if p == nil {
		return "line"
	}
	if p.Kind == PosGrid {
		s := make([]string, len(p.Extent))
		for i, e := range p.Extent {
			s[i] = fmt.Sprint(e)
		}
		return "grid " + strings.Join(s, "x")
	}
	return string(p.Kind)
}

// Check returns an error unless p fits an attention call with tq queries,
// tk keys and batch size b: "grid 7x7 has 49 query positions, the
// attention has 50 queries".
func (p *Positions) Check(b, tq, tk int) error {
	if p == nil {
		return nil
	}
	if p.TQ != tq || p.TK != tk {
		return errors.Errorf("posenc: %s positions have %d query and %d key positions, the attention has %d queries and %d keys",
			p.Describe(), p.TQ, p.TK, tq, tk)
	}
	if p.Batch != 1 && p.Batch != b {
		return errors.Errorf("posenc: %s positions are for a batch of %d, the attention has %d examples", p.Describe(), p.Batch, b)
	}
	return nil
}

// Grid2 returns the (row, col) of query i and key j of 2-D grid positions.
func (p *Positions) Grid2(i, j int) (qr, qc, kr, kc int) {
	return p.QCoords[2*i], p.QCoords[2*i+1], p.KCoords[2*j], p.KCoords[2*j+1]
}

// Kind returns the kind of the site's positions: PosLine without Pos.
func (s *Site) Kind() PosKind {
	if s.Pos == nil {
		return PosLine
	}
	return s.Pos.Kind
}

// PositionAccepter is implemented by an encoding that serves positions
// other than a line. An encoding that does not implement it accepts line
// positions only.
type PositionAccepter interface {
	// Accepts lists the kinds of positions the encoding serves.
	Accepts() []PosKind
}

// Accepted returns the kinds of positions e serves (PosLine only unless e
// implements PositionAccepter).
func Accepted(e Encoding) []PosKind {
	if a, ok := e.(PositionAccepter); ok {
		return a.Accepts()
	}
	return []PosKind{PosLine}
}

// CheckKind returns an error naming the encoding and both kinds unless e
// serves positions of kind k: "posenc: encoding rope accepts line
// positions; the model gives it grid 7x7 positions".
func CheckKind(e Encoding, p *Positions) error {
	k := PosLine
	if p != nil {
		k = p.Kind
	}
	acc := Accepted(e)
	if slices.Contains(acc, k) {
		return nil
	}
	names := make([]string, len(acc))
	for i, a := range acc {
		names[i] = string(a)
	}
	return errors.Errorf("posenc: encoding %s accepts %s positions; the model gives it %s positions",
		e.Name(), strings.Join(names, " or "), p.Describe())
}

// Tile is a rectangle of the score matrix of one attention call: queries
// Q0..Q1-1 and keys K0..K1-1 (indices into the call's queries and keys).
type Tile struct{ Q0, Q1, K0, K1 int }

// Full is the tile covering every query and key of s.
func (s *Site) Full() Tile { return Tile{0, s.TQ, 0, s.TK} }

// TableBiaser is a ScoreBiaser whose bias is a lookup into a small table
// with one column per head:
//
//	bias[b, h, i, j] = Table[Index(b, i, j), h]     Table [R, H] (or [R, 1]: shared by the heads)
//
// T5, Shaw's scalar variant and the 2-D relative biases are of this form. A
// caller can then build the bias of any tile of the score matrix without the
// whole [Tq, Tk] matrix: TileBias gathers it from the table, and a tiled
// attention kernel may instead read the table and the host indices directly
// (and scatter-add the gradient of a tile into the table). ScoreBias must
// equal TileBias over Site.Full; the conformance harness checks it on random
// tiles.
type TableBiaser interface {
	Encoding
	ScoreBiaser
	// BiasTable returns the table [R, H] or [R, 1] of the site.
	BiasTable(s *Site) (*G.Node, error)
	// BiasIndex writes the table row of every pair of tile t for example b
	// into dst [(Q1-Q0)*(K1-K0)], row-major. It returns perExample = true
	// if the rows depend on b (then the bias is [B, H, ...], else b is
	// ignored and the bias is shared by the batch).
	BiasIndex(s *Site, b int, t Tile, dst []int) (perExample bool, err error)
}

// CheckTile returns an error unless t is a non-empty tile inside s.
func CheckTile(s *Site, t Tile) error {
	if t.Q0 < 0 || t.Q0 >= t.Q1 || t.Q1 > s.TQ || t.K0 < 0 || t.K0 >= t.K1 || t.K1 > s.TK {
		return errors.Errorf("posenc: tile queries [%d, %d) keys [%d, %d) is empty or outside the %d×%d scores", t.Q0, t.Q1, t.K0, t.K1, s.TQ, s.TK)
	}
	return nil
}

// TileBias builds the bias of tile t of a TableBiaser: [1, H|1, Q1-Q0,
// K1-K0] when the bias is shared by the batch, [B, H|1, Q1-Q0, K1-K0] when
// it is per example. Its gradient scatter-adds into the table. With
// t = s.Full() it is the encoding's whole bias (up to the leading batch
// axis).
func TileBias(e TableBiaser, s *Site, t Tile) (*G.Node, error) {
	if err := CheckTile(s, t); err != nil {
		return nil, err
	}
	table, err := e.BiasTable(s)
	if err != nil {
		return nil, err
	}
	ts := table.Shape()
	if ts.Dims() != 2 || (ts[1] != s.H && ts[1] != 1) {
		return nil, errors.Errorf("posenc %s: bias table has shape %v, want [R, %d] or [R, 1]", e.Name(), ts, s.H)
	}
	if s.Pos != nil && s.Pos.Feed != nil && t == s.Full() {
		return fedTableBias(e, s, table)
	}
	tq, tk, h := t.Q1-t.Q0, t.K1-t.K0, ts[1]
	rows := make([]int, tq*tk)
	per, err := e.BiasIndex(s, 0, t, rows)
	if err != nil {
		return nil, err
	}
	nb := 1
	all := rows
	if per {
		nb = s.B
		all = make([]int, 0, nb*tq*tk)
		all = append(all, rows...)
		for b := 1; b < nb; b++ {
			if _, err := e.BiasIndex(s, b, t, rows); err != nil {
				return nil, err
			}
			all = append(all, rows...)
		}
	}
	for i, r := range all {
		if r < 0 || r >= ts[0] {
			return nil, errors.Errorf("posenc %s: bias index %d of pair %d is outside the table's %d rows", e.Name(), r, i, ts[0])
		}
	}
	// One gather from the table seen as [1, R*h]: flat[((b*h + hh)*tq + i)*tk + j] = row*h + hh.
	flat := make([]int, nb*h*tq*tk)
	for b := 0; b < nb; b++ {
		for hh := 0; hh < h; hh++ {
			o := (b*h + hh) * tq * tk
			for k, r := range all[b*tq*tk : (b+1)*tq*tk] {
				flat[o+k] = r*h + hh
			}
		}
	}
	m, err := graph.Reshape(table, 1, ts[0]*h)
	if err != nil {
		return nil, err
	}
	out, err := graph.GatherRel(m, flat, 1, len(flat))
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s: tile bias", e.Name())
	}
	return graph.Reshape(out, nb, h, tq, tk)
}
