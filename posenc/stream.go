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
// It returns nil, nil, nil for an encoding that adds no score bias and no
// terms (nil, none, the absolute encodings, rope and its scalings, xpos:
// their work is done by InputAdder or QKTransformer, which still apply
// before the attention). It returns an error naming the encoding for an
// encoding with score or value terms (ScoreTermer, ValueTermer: "<enc> adds
// content-position terms; the streaming attention serves score biases
// only"), for a ScoreBiaser that is not a TableBiaser, and when e's
// BiasTable or BiasIndex refuses the site (e.g. alibi or kerple on real
// positions). The indexer's rows are checked against the table by the op
// when it runs.
func StreamBias(e Encoding, s *Site) (table *G.Node, idx graph.TileIndexer, err error) {
	if e == nil {
		return nil, nil, nil
	}
	_, terms := e.(ScoreTermer)
	_, values := e.(ValueTermer)
	if terms || values {
		return nil, nil, errors.Errorf("posenc: %s adds content-position terms; the streaming attention serves score biases only", e.Name())
	}
	if _, ok := e.(ScoreBiaser); !ok {
		return nil, nil, nil
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

// streamIndexer adapts a TableBiaser's BiasIndex to graph.TileIndexer. It
// is a pointer, so the op identifies it by address.
type streamIndexer struct {
	e TableBiaser
	s *Site
}

// TileIndex implements graph.TileIndexer.
func (x *streamIndexer) TileIndex(b, q0, q1, k0, k1 int, dst []int) (bool, error) {
	return x.e.BiasIndex(x.s, b, Tile{Q0: q0, Q1: q1, K0: k0, K1: k1}, dst)
}
