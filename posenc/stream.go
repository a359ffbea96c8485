package posenc

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/graph"
)

// StreamBias returns what graph.StreamAttention needs to apply e's score
// bias at site s: the bias table [R, H] or [R, 1] and a graph.TileIndexer
// giving the table rows of each tile (from e's BiasIndex).
//
// It returns nil, nil, nil for an encoding that adds no score bias (nil,
// none, the absolute encodings, rope and its scalings, xpos: their work is
// done by InputAdder or QKTransformer, which still apply before the
// attention; the StreamTermers shaw, xl and deberta, whose terms
// StreamTermsOf gives; and the StreamAttender cope, which streams the
// attention itself). For fire, a StreamAttender too, it returns the table
// [R, H] over the span's (distance, query position) pairs, R ~ T²; layers
// asks fire's StreamAttend instead. It returns an error naming the encoding for an
// encoding with score or value terms that is neither (ScoreTermer,
// ValueTermer: "<enc> adds content-position terms; the streaming attention
// serves ..."), for a ScoreBiaser that is not a TableBiaser, and when e's
// BiasTable or BiasIndex refuses the site (e.g. alibi or kerple on real
// positions). A combination (NewCombined) whose only biasing part is a
// TableBiaser streams that part's table (tree+rope); one with several
// biasing parts is refused (tree+t5). The indexer reads the site's
// positions, or, when they carry a Feed that has been bound, the bound
// ones (Feed.Bound), so a graph built once serves every batch. The
// indexer's rows are checked against the table by the op when it runs.
func StreamBias(e Encoding, s *Site) (table *G.Node, idx graph.TileIndexer, err error) {
	if e == nil {
		return nil, nil, nil
	}
	if err := streamTermsServed(e); err != nil {
		return nil, nil, err
	}
	if _, ok := e.(ScoreBiaser); !ok {
		return nil, nil, nil
	}
	if part, ps, ok, err := combinedTableBiaser(e, s); err != nil {
		return nil, nil, err
	} else if ok {
		table, idx, err := StreamBias(part, ps)
		return table, idx, errors.WithMessagef(err, "posenc: %s", e.Name())
	}
	tb, ok := e.(TableBiaser)
	if !ok {
		return nil, nil, errors.Errorf("posenc: %s's score bias is not a table lookup (TableBiaser); the streaming attention serves table biases only", e.Name())
	}
	if table, err = tb.BiasTable(s); err != nil {
		return nil, nil, errors.WithMessagef(err, "posenc: %s cannot stream at this site", e.Name())
	}
	if ts := table.Shape(); ts.Dims() != 2 || (ts[1] != s.H && ts[1] != 1) {
		return nil, nil, errors.Errorf("posenc: %s's bias table has shape %v, want [R, %d] or [R, 1]", e.Name(), ts, s.H)
	}
	// Ask for one row now, so that a site the indexer refuses (real
	// positions) fails here, at build time, not when the graph runs.
	one := make([]int, 1)
	if _, err := tb.BiasIndex(s, 0, Tile{0, 1, 0, 1}, one); err != nil {
		return nil, nil, errors.WithMessagef(err, "posenc: %s cannot stream at this site", e.Name())
	}
	return table, &streamIndexer{e: tb, s: s}, nil
}

// combinedTableBiaser returns, for a combination (NewCombined) whose only
// part with a score bias is a TableBiaser, that part and the site it sees
// (Combined.siteFor): the combination's bias is then that part's bias
// alone (tree+rope, graphormer-spatial+graphormer-centrality). ok is false
// for any other encoding, and for a combination with several biasing parts
// (their sum is not one table lookup: StreamBias refuses it).
func combinedTableBiaser(e Encoding, s *Site) (part TableBiaser, ps *Site, ok bool, err error) {
	c, isC := AsCombined(e)
	if !isC {
		return nil, nil, false, nil
	}
	var biasers []Encoding
	for _, p := range c.parts {
		if _, b := p.(ScoreBiaser); b {
			biasers = append(biasers, p)
		}
	}
	if len(biasers) != 1 {
		return nil, nil, false, nil
	}
	if part, ok = biasers[0].(TableBiaser); !ok {
		return nil, nil, false, nil
	}
	if ps, err = c.siteFor(part, s); err != nil {
		return nil, nil, false, err
	}
	return part, ps, true, nil
}

// StreamTermer is an encoding with content-position terms (ScoreTermer,
// ValueTermer) that graph.StreamAttention computes per tile: shaw, xl and
// deberta.
type StreamTermer interface {
	Encoding
	// StreamTerms returns the terms of site s as tables looked up by
	// host indexers (graph.StreamTerm). Their query and key terms sum to
	// ScoreTerms(s, q, k) for every q and k, and their value terms to
	// ValueTerms(s, probs), up to rounding; tables may carry the
	// encoding's alpha.
	StreamTerms(s *Site) ([]graph.StreamTerm, error)
}

// streamTermsServed returns the refusal of an encoding with score or value
// terms that is not a StreamTermer, nil otherwise.
func streamTermsServed(e Encoding) error {
	_, terms := e.(ScoreTermer)
	_, values := e.(ValueTermer)
	_, termer := e.(StreamTermer)
	_, attender := e.(StreamAttender)
	if (terms || values) && !termer && !attender {
		return errors.Errorf("posenc: %s adds content-position terms; the streaming attention serves score biases, the terms of StreamTermers (shaw, xl, deberta) and the StreamAttenders (cope, fire) only", e.Name())
	}
	return nil
}

// StreamTermsOf returns the terms graph.StreamAttention adds for e at site
// s: nil for an encoding without score or value terms, e's StreamTerms for
// a StreamTermer, and StreamBias's error for an encoding with terms that
// is not one.
func StreamTermsOf(e Encoding, s *Site) ([]graph.StreamTerm, error) {
	if e == nil {
		return nil, nil
	}
	if err := streamTermsServed(e); err != nil {
		return nil, err
	}
	st, ok := e.(StreamTermer)
	if !ok {
		return nil, nil
	}
	terms, err := st.StreamTerms(s)
	return terms, errors.WithMessagef(err, "posenc: %s cannot stream at this site", e.Name())
}

// distIndexer is the graph.TileIndexer of a table indexed by the distance
// rel = kpos - qpos of each pair of a span (Shaw, XL, DeBERTa): the row of
// a pair is row(rel). It is a pointer, so the op identifies it by address;
// row must be safe for concurrent use.
type distIndexer struct {
	span Span
	row  func(rel int) int
}

// TileIndex implements graph.TileIndexer: it evaluates row once per
// distance of the tile.
func (x *distIndexer) TileIndex(_, q0, q1, k0, k1 int, dst []int) (bool, error) {
	sp := x.span
	if q0 < 0 || q0 >= q1 || q1 > sp.TQ || k0 < 0 || k0 >= k1 || k1 > sp.TK {
		return false, errors.Errorf("posenc: tile queries [%d, %d) keys [%d, %d) is empty or outside the %d×%d scores", q0, q1, k0, k1, sp.TQ, sp.TK)
	}
	nk := k1 - k0
	if len(dst) != (q1-q0)*nk {
		return false, errors.Errorf("posenc: distance index: dst has %d entries, the tile %d", len(dst), (q1-q0)*nk)
	}
	lo := sp.Rel(q1-1, k0) // the smallest distance of the tile
	lut := make([]int, sp.Rel(q0, k1-1)-lo+1)
	for d := range lut {
		lut[d] = x.row(lo + d)
	}
	for i := q0; i < q1; i++ {
		off := sp.Rel(i, k0) - lo
		copy(dst[(i-q0)*nk:(i-q0+1)*nk], lut[off:off+nk])
	}
	return false, nil
}

// streamIndexer adapts a TableBiaser's BiasIndex to graph.TileIndexer. It
// is a pointer, so the op identifies it by address.
type streamIndexer struct {
	e TableBiaser
	s *Site
}

// TileIndex implements graph.TileIndexer. When the site's positions carry
// a Feed that has been bound, it reads the bound positions (Feed.Bound),
// as the materialised path reads the fed index nodes.
func (x *streamIndexer) TileIndex(b, q0, q1, k0, k1 int, dst []int) (bool, error) {
	s := x.s
	if s.Pos != nil && s.Pos.Feed != nil {
		if p := s.Pos.Feed.Bound(); p != nil && p != s.Pos {
			fed := *s
			fed.Pos = p
			s = &fed
		}
	}
	return x.e.BiasIndex(s, b, Tile{Q0: q0, Q1: q1, K0: k0, K1: k1}, dst)
}

// DistanceIndex writes the row j - i + TQ - 1 of every pair (query i, key
// j) of tile t into dst [(Q1-Q0)*(K1-K0)], row-major: the row of the pair's
// distance in a table over the span's TQ+TK-1 distinct distances, ordered
// from the largest query-minus-key distance QStart - KStart + TQ - 1 (row 0)
// to the smallest (row TQ+TK-2). It returns an error if t is not a tile of
// s or dst has the wrong length.
func DistanceIndex(s *Site, t Tile, dst []int) error {
	if err := CheckTile(s, t); err != nil {
		return err
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return errors.Errorf("posenc: distance index: dst has %d entries, the tile %d", len(dst), (t.Q1-t.Q0)*tk)
	}
	for i := t.Q0; i < t.Q1; i++ {
		row := dst[(i-t.Q0)*tk : (i-t.Q0+1)*tk]
		for j := range row {
			row[j] = t.K0 + j - i + s.TQ - 1
		}
	}
	return nil
}

// distanceRows returns, for every row r of a DistanceIndex table of span,
// the key position whose query-minus-key distance from a query at position
// 0 is that of the row: r - TQ + 1 - (QStart - KStart), so that
// 0 - distanceRows[r] = QStart - KStart - (r - TQ + 1).
func distanceRows(sp Span) []int {
	out := make([]int, sp.TQ+sp.TK-1)
	for r := range out {
		out[r] = r - sp.TQ + 1 - (sp.QStart - sp.KStart)
	}
	return out
}

// transposeHR turns x [H, R] (row-major) into [R, H].
func transposeHR(x []float64, h, r int) []float64 {
	out := make([]float64, len(x))
	for hh := 0; hh < h; hh++ {
		for k := 0; k < r; k++ {
			out[k*h+hh] = x[hh*r+k]
		}
	}
	return out
}
