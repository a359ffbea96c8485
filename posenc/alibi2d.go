package posenc

import (
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "alibi-2d", Kind: KindRelative}, func(Options) (Encoding, error) { return NewAlibi2D(), nil })
}

// Alibi2D is ALiBi on a 2-D grid: a fixed, content-free score bias that falls
// linearly with the Euclidean distance between the grid cells of query and
// key, one slope per head:
//
//	bias[h, i, j] = -m_h · sqrt((r_i - r_j)² + (c_i - c_j)²)
//
// with (r, c) = (row, col) from the site's grid positions and m_h =
// AlibiSlopes(H), the slopes of Press et al. 2022 ("Train Short, Test Long:
// Attention with Linear Biases Enables Input Length Extrapolation", ICLR).
// The Euclidean 2-D form is the 2D-ALiBi of Fuller et al. 2023 ("CROMA:
// Remote Sensing Representations with Contrastive Radar-Optical Masked
// Autoencoders", NeurIPS; get_2dalibi in antofuller/CROMA, which computes it
// for a square grid with the paper's get_slopes): the same formula, here for
// any rows×cols grid and any query and key cells. The bias is symmetric, so
// causal attention gets the same bias (the mask hides the future keys); the
// encoding is meant for bidirectional ViT attention. It accepts 2-D grid
// positions only and has no parameters.
//
// Alibi2D is a TableBiaser: its table is a constant [Rows*Cols, H] (Rows×Cols
// the positions' Extent) over the distinct (|Δr|, |Δc|) pairs, row |Δr|*Cols
// + |Δc| (Alibi2DTable), and BiasIndex maps every pair to its row.
// ScoreBias returns a constant [H, TQ, TK] node holding the same values
// gathered on the host. Tables, indices and biases are computed once per
// Positions value (Positions.Key), head count and dtype, and cached; the zero
// value is ready to use, and one value may build graphs from several
// goroutines at once.
type Alibi2D struct {
	tables tableCache[alibi2DKey, *tensor.Dense] // BiasTable values
	biases tableCache[alibi2DKey, *tensor.Dense] // ScoreBias values
	idx    tableCache[gridIdxKey, gridIdx]
}

type alibi2DKey struct {
	pos        string // Positions.Key for biases, "" for tables
	rows, cols int
	h          int
	dt         tensor.Dtype
}

// NewAlibi2D returns the 2-D ALiBi encoding.
func NewAlibi2D() *Alibi2D { return &Alibi2D{} }

// Name implements Encoding.
func (*Alibi2D) Name() string { return "alibi-2d" }

// Accepts implements PositionAccepter: 2-D grid positions.
func (*Alibi2D) Accepts() []PosKind { return []PosKind{PosGrid} }

// Alibi2DTable returns the table [rows*cols, len(slopes)] (row-major) of
// 2-D ALiBi on a rows×cols grid: row dr*cols + dc holds -m_h·sqrt(dr² + dc²)
// for every |Δrow| = dr < rows and |Δcol| = dc < cols.
func Alibi2DTable(slopes []float64, rows, cols int) []float64 {
	h := len(slopes)
	out := make([]float64, rows*cols*h)
	for dr := 0; dr < rows; dr++ {
		for dc := 0; dc < cols; dc++ {
			if dr == 0 && dc == 0 {
				continue // (no -0 on the diagonal)
			}
			d := math.Sqrt(float64(dr*dr + dc*dc))
			for hh, m := range slopes {
				out[(dr*cols+dc)*h+hh] = -m * d
			}
		}
	}
	return out
}

func (e *Alibi2D) index(s *Site) (gridIdx, error) {
	p, err := grid2D("alibi-2d", s)
	if err != nil {
		return gridIdx{}, err
	}
	cols := p.Extent[1]
	return gridIndex(&e.idx, "alibi-2d", s, p.Extent[0], cols, nil, func(qr, qc, kr, kc int) int {
		return int(absInt(qr-kr))*cols + int(absInt(qc-kc))
	})
}

// BiasTable implements TableBiaser: the constant [Rows*Cols, H] of
// Alibi2DTable(AlibiSlopes(H), Rows, Cols) for the site's grid extent, a
// fresh input node of s.G holding the cached values.
func (e *Alibi2D) BiasTable(s *Site) (*G.Node, error) {
	p, err := grid2D("alibi-2d", s)
	if err != nil {
		return nil, err
	}
	key := alibi2DKey{rows: p.Extent[0], cols: p.Extent[1], h: s.H, dt: s.Dtype()}
	v, _ := e.tables.get(key, func() (*tensor.Dense, error) {
		return graph.FromFloat64s(key.dt, tensor.Shape{key.rows * key.cols, key.h},
			Alibi2DTable(AlibiSlopes(key.h), key.rows, key.cols)), nil
	})
	return G.NewTensor(s.G, key.dt, 2, G.WithShape(key.rows*key.cols, key.h), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "alibi2d_table"))), nil
}

// BiasIndex implements TableBiaser: the table row |Δr|*Cols + |Δc| of every
// pair of tile t, shared by the batch.
func (e *Alibi2D) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	return gridBiasIndex(e, s, t, dst)
}

// ScoreBias implements ScoreBiaser: a constant [H, TQ, TK] input node,
// bias[h, i, j] = -m_h·sqrt((r_i - r_j)² + (c_i - c_j)²), the values of
// TileBias over Site.Full (gathered on the host from the same table). It
// returns an error naming the encoding if the site has no heads or
// positions other than a 2-D grid.
func (e *Alibi2D) ScoreBias(s *Site) (*G.Node, error) {
	ix, err := e.index(s)
	if err != nil {
		return nil, err
	}
	p := s.Pos
	key := alibi2DKey{pos: p.Key(), rows: p.Extent[0], cols: p.Extent[1], h: s.H, dt: s.Dtype()}
	v, _ := e.biases.get(key, func() (*tensor.Dense, error) {
		table := Alibi2DTable(AlibiSlopes(s.H), key.rows, key.cols)
		out := make([]float64, len(ix.flat))
		for k, f := range ix.flat {
			out[k] = table[f]
		}
		return graph.FromFloat64s(key.dt, tensor.Shape{s.H, ix.tq, ix.tk}, out), nil
	})
	return G.NewTensor(s.G, key.dt, 3, G.WithShape(s.H, ix.tq, ix.tk), G.WithValue(v),
		G.WithName(graph.UniqueName(s.G, "alibi2d_bias"))), nil
}
