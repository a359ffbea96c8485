package posenc

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

func init() {
	register(Info{Name: "tree", Kind: KindStructural, Learnable: true}, func(o Options) (Encoding, error) {
		return NewTreeRel(o.TreeMaxUp, o.TreeMaxDown, o.InitStd, o.Alpha)
	})
}

// TreeRelations is the number of tree relation ids for the clipping bounds
// maxUp and maxDown, (maxUp+1)(maxDown+1): the rows of TreeRel's table and
// the NumRel of the pairwise positions it serves (experiments/gocode's
// NumTreeRelations). It returns 0 if a bound is negative.
func TreeRelations(maxUp, maxDown int) int {
	if maxUp < 0 || maxDown < 0 {
		return 0
	}
	return (maxUp + 1) * (maxDown + 1)
}

// TreeRel is a learnable bias per head for every relation between two
// tokens of a syntax tree, added to the scaled attention scores:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + tree_bias[rel_b(i, j), h]
//
// rel_b(i, j) is the pairwise position of the site (Positions of kind
// PosPairwise, per example or shared): the id of the clipped pair (up,
// down) of steps from the query's innermost syntax node up to the lowest
// common ancestor of the two nodes and from there down to the key's,
//
//	rel = min(up, MaxUp)*(MaxDown+1) + min(down, MaxDown)    in [0, (MaxUp+1)(MaxDown+1))
//
// as experiments/gocode's RelationID and Relations compute it (row =
// query, column = key; tokens of the same node have relation 0). The
// encoding does not compute relations itself: it reads them from the
// positions, so it serves any pairwise relation with that many ids.
//
// The relation is the tree-path form of the structural distances of Zügner
// et al. 2021 ("Language-Agnostic Representation Learning of Source Code
// from Structure and Context", ICLR; their Code Transformer biases
// attention by ancestor, sibling and shortest-path distances in the AST)
// and of the up/down tree paths of Shiv & Quirk 2019 ("Novel positional
// encodings to enable tree-based transformers", NeurIPS), which encode a
// node's position as its path of up and down steps from the root; here the
// path between two nodes is reduced to its number of up and down steps,
// clipped, and each pair has a learned scalar per head (a T5-style table,
// Raffel et al. 2020, indexed by tree relation instead of distance bucket;
// Graphormer's spatial encoding, Ying et al. 2021, is the same construction
// for graph distances).
//
// Parameters, per layer: "<prefix>/tree_bias" [(MaxUp+1)(MaxDown+1), H],
// init N(0, InitStd²), not weight-decayed; with Alpha,
// "<prefix>/tree_alpha" [1] (init AlphaInit) multiplies it. Per layer, not
// one table shared as T5's: the table is tiny (25 rows for the default
// 4×4 bounds), the per-example bias [B, H, Tq, Tk] has to be gathered in
// every layer anyway (a shared table would save no compute, unlike T5's
// shared [H, Tq, Tk] node), and the syntactic relations a layer attends
// along are expected to change with depth (nearby nodes low, long-range
// structure high), which a shared table cannot express; the Code
// Transformer likewise shares the encoded distance bins but gives every
// layer's attention its own projection of them (r_proj_weight of
// RelativeMultiheadAttention in danielzuegner/code-transformer), and Swin
// has a relative table per block. Graphormer and T5
// share one table; that is the cheaper choice in parameters, not in
// compute here.
//
// TreeRel is a TableBiaser: BiasTable is the (alpha-scaled) table,
// BiasIndex copies the relation ids of a tile (per example when the
// positions have Batch > 1) and ScoreBias is TileBias over Site.Full,
// [1, H, Tq, Tk] for shared relations and [B, H, Tq, Tk] per example.
//
// Causal attention (a language model over source bytes) is served with the
// same relations, future keys included: the bias of a masked pair (key
// after the query) is added before the mask, which then blocks the pair,
// so it changes neither the outputs nor any gradient (a table row that
// only masked pairs use gets a zero gradient; TestTreeRelGrad checks it).
// Such pairs cost their share of the gather and nothing else; the
// relations need no causal variant.
//
// It accepts pairwise positions only; combine it with a 1-D encoding (see
// NewCombined: "tree+rope") to keep token order. ScoreBias and BiasIndex
// return an error naming the encoding for other kinds, positions not
// fitting the site, or positions whose NumRel differs from the table's
// rows (relation ids beyond the table, or built with other clipping
// bounds).
type TreeRel struct {
	// MaxUp and MaxDown clip the up and down steps of a relation.
	MaxUp, MaxDown int
	InitStd        float64
	Alpha          bool
}

// DefaultTreeMaxUp and DefaultTreeMaxDown are the default clipping bounds
// of TreeRel (until Options has them; see the package report): 4 steps up
// and 4 down, 25 relations, which keeps every pair of tokens within a
// statement apart and lumps distant subtrees together.
const (
	DefaultTreeMaxUp   = 4
	DefaultTreeMaxDown = 4
)

// NewTreeRel returns the tree relation bias with bounds maxUp and maxDown,
// a table initialised N(0, initStd²) and, if alpha, a learnable scale. It
// returns an error if a bound is negative or initStd < 0.
func NewTreeRel(maxUp, maxDown int, initStd float64, alpha bool) (*TreeRel, error) {
	if maxUp < 0 || maxDown < 0 {
		return nil, errors.Errorf("posenc tree: clipping bounds up %d and down %d must not be negative", maxUp, maxDown)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc tree: init std %g is negative", initStd)
	}
	return &TreeRel{MaxUp: maxUp, MaxDown: maxDown, InitStd: initStd, Alpha: alpha}, nil
}

// Name implements Encoding.
func (*TreeRel) Name() string { return "tree" }

// Accepts implements PositionAccepter: pairwise positions.
func (*TreeRel) Accepts() []PosKind { return []PosKind{PosPairwise} }

// TableRows is the number of rows of the table, TreeRelations(MaxUp,
// MaxDown).
func (e *TreeRel) TableRows() int { return TreeRelations(e.MaxUp, e.MaxDown) }

// BiasTable implements TableBiaser: "<prefix>/tree_bias" [TableRows, H]
// (times "<prefix>/tree_alpha" with Alpha).
func (e *TreeRel) BiasTable(s *Site) (*G.Node, error) {
	if s.H <= 0 {
		return nil, errors.Errorf("posenc tree: %d heads", s.H)
	}
	if e.TableRows() == 0 {
		return nil, errors.Errorf("posenc tree: clipping bounds up %d and down %d must not be negative", e.MaxUp, e.MaxDown)
	}
	return learnedTable(s, "tree", "tree_bias", "tree_alpha", e.TableRows(), e.InitStd, e.Alpha)
}

// pairwise returns the site's positions if they are pairwise relations
// fitting the site and the table, else an error naming the encoding.
func (e *TreeRel) pairwise(s *Site) (*Positions, error) {
	p := s.Pos
	if p == nil || p.Kind != PosPairwise {
		return nil, errors.Errorf("posenc tree: needs pairwise positions (tree relations), the site has %s positions", p.Describe())
	}
	if err := p.Check(max(s.B, 1), s.TQ, s.TK); err != nil {
		return nil, errors.Wrap(err, "posenc tree")
	}
	if rows := e.TableRows(); p.NumRel != rows || len(p.Rel) != p.Batch*p.TQ*p.TK {
		return nil, errors.Errorf("posenc tree: positions have %d relation ids, the table has (max up %d + 1)*(max down %d + 1) = %d rows: build the relations with the same bounds",
			p.NumRel, e.MaxUp, e.MaxDown, rows)
	}
	return p, nil
}

// BiasIndex implements TableBiaser: the relation id of every pair of tile
// t for example b (ignored when the relations are shared), from the site's
// pairwise positions. perExample is true when the positions have Batch > 1.
func (e *TreeRel) BiasIndex(s *Site, b int, t Tile, dst []int) (bool, error) {
	p, err := e.pairwise(s)
	if err != nil {
		return false, err
	}
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return false, errors.Errorf("posenc tree: BiasIndex: dst has %d entries, the tile %d", len(dst), (t.Q1-t.Q0)*tk)
	}
	if p.Batch == 1 {
		b = 0
	} else if b < 0 || b >= p.Batch {
		return false, errors.Errorf("posenc tree: BiasIndex: example %d of a batch of %d", b, p.Batch)
	}
	for i := t.Q0; i < t.Q1; i++ {
		o := (b*p.TQ + i) * p.TK
		copy(dst[(i-t.Q0)*tk:(i-t.Q0+1)*tk], p.Rel[o+t.K0:o+t.K1])
	}
	return p.Batch > 1, nil
}

// ScoreBias implements ScoreBiaser: TileBias over Site.Full, bias
// [1, H, TQ, TK] (relations shared by the batch) or [B, H, TQ, TK] (per
// example), bias[b, h, i, j] = tree_bias[rel_b(i, j), h]. It returns an
// error naming the encoding if the site has no heads, positions other than
// pairwise relations, relations not fitting the site, or a number of
// relation ids other than the table's rows.
func (e *TreeRel) ScoreBias(s *Site) (*G.Node, error) {
	if _, err := e.pairwise(s); err != nil {
		return nil, err
	}
	return TileBias(e, s, s.Full())
}
