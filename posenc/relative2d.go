package posenc

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "swin", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		return NewSwin(o.GridRows, o.GridCols, o.InitStd, o.Alpha)
	})
	register(Info{Name: "swin-log", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		return NewSwinLog(o.Rel2DBuckets, o.Rel2DMaxDistance, o.InitStd, o.Alpha)
	})
}

// SwinIndex is the row of Swin's relative position bias table (Liu et al.
// 2021, the relative_position_index of WindowAttention in
// microsoft/Swin-Transformer) for a query at (qr, qc) and a key at (kr, kc),
// with a table sized for a rows×cols window:
//
//	SwinIndex = (qr - kr + rows - 1) * (2*cols - 1) + (qc - kc + cols - 1)
//
// Offsets are query minus key (Swin's coords_flatten[:, :, None] -
// coords_flatten[:, None, :]), the row offset is the major index. The result
// is a row of the (2rows-1)(2cols-1)-row table when |qr-kr| < rows and
// |qc-kc| < cols; the caller checks that.
func SwinIndex(qr, qc, kr, kc, rows, cols int) int {
	return (qr-kr+rows-1)*(2*cols-1) + (qc - kc + cols - 1)
}

// SwinLogIndex is the row of swin-log's table [(2*buckets)², H] for a query
// at (qr, qc) and a key at (kr, kc): each axis offset, key minus query as in
// T5, is bucketed by T5's bidirectional rule with 2*buckets buckets (buckets
// per sign) and log buckets up to maxDistance, and the row bucket is the
// major index:
//
//	SwinLogIndex = T5Bucket(kr-qr, true, 2b, maxDistance) * 2b + T5Bucket(kc-qc, true, 2b, maxDistance)
//
// Offsets |Δ| < buckets/2 on an axis have their own bucket. It panics where
// T5Bucket does (buckets < 2 or maxDistance <= buckets/2).
func SwinLogIndex(qr, qc, kr, kc, buckets, maxDistance int) int {
	nb := 2 * buckets
	return T5Bucket(kr-qr, true, nb, maxDistance)*nb + T5Bucket(kc-qc, true, nb, maxDistance)
}

// Swin is the relative position bias of the Swin Transformer (Liu et al.
// 2021, "Swin Transformer: Hierarchical Vision Transformer using Shifted
// Windows", ICCV): a learned scalar per head for every 2-D offset between a
// query and a key of a GridRows×GridCols window, added to the scaled scores:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + swin_bias[SwinIndex(r_i, c_i, r_j, c_j, GridRows, GridCols), h]
//
// (r, c) = (row, col) from the site's grid positions, row first as Swin's
// meshgrid([coords_h, coords_w]); offsets are query minus key, exactly
// Swin's relative_position_index. Here the window is the whole patch grid
// (a ViT with one window). Positions whose offsets exceed the table (|Δrow|
// > GridRows-1 or |Δcol| > GridCols-1, e.g. a larger evaluation grid) are an
// error that names the table and the positions' span; swin-log serves any
// grid.
//
// Parameters, per layer: "<prefix>/swin_bias" [(2*GridRows-1)*(2*GridCols-1),
// H], init N(0, InitStd²), not weight-decayed. Swin initialises its table
// with timm's trunc_normal_(std=.02), which truncates at ±2 absolute, i.e.
// ±100 std: the same distribution as N(0, .02²) up to a 1e-2000 tail. With
// Alpha, "<prefix>/swin_alpha" [1] (init AlphaInit) multiplies the table (see
// AlphaInit).
//
// Swin is a TableBiaser: BiasTable is the (alpha-scaled) table and BiasIndex
// the SwinIndex of every pair, shared by the batch. Causal attention is
// served with the same bias (the mask hides the future keys); the encoding is
// meant for bidirectional ViT attention. It accepts 2-D grid positions only.
// The indices of a Positions value (Positions.Key) are computed once and
// cached; one value may build graphs from several goroutines at once.
type Swin struct {
	GridRows, GridCols int
	InitStd            float64
	Alpha              bool

	idx tableCache[gridIdxKey, gridIdx]
}

// NewSwin returns the Swin bias with a table for a rows×cols grid. It returns
// an error if a side is not positive or initStd is negative.
func NewSwin(rows, cols int, initStd float64, alpha bool) (*Swin, error) {
	if rows <= 0 || cols <= 0 {
		return nil, errors.Errorf("posenc swin: grid %dx%d: both sides must be positive", rows, cols)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc swin: init std %g is negative", initStd)
	}
	return &Swin{GridRows: rows, GridCols: cols, InitStd: initStd, Alpha: alpha}, nil
}

// Name implements Encoding.
func (*Swin) Name() string { return "swin" }

// Accepts implements PositionAccepter: 2-D grid positions.
func (*Swin) Accepts() []PosKind { return []PosKind{PosGrid} }

// TableRows is the number of rows of the table, (2GridRows-1)(2GridCols-1).
func (e *Swin) TableRows() int { return (2*e.GridRows - 1) * (2*e.GridCols - 1) }

// BiasTable implements TableBiaser: "<prefix>/swin_bias" [TableRows, H]
// (times "<prefix>/swin_alpha" with Alpha).
func (e *Swin) BiasTable(s *Site) (*G.Node, error) {
	if s.H <= 0 {
		return nil, errors.Errorf("posenc swin: %d heads", s.H)
	}
	return learnedTable(s, "swin", "swin_bias", "swin_alpha", e.TableRows(), e.InitStd, e.Alpha)
}

func (e *Swin) index(s *Site) (gridIdx, error) {
	if e.GridRows <= 0 || e.GridCols <= 0 {
		return gridIdx{}, errors.Errorf("posenc swin: grid %dx%d: both sides must be positive", e.GridRows, e.GridCols)
	}
	return gridIndex(&e.idx, "swin", s, e.GridRows, e.GridCols, func(p *Positions) error {
		dr, dc := gridSpan(p)
		if dr > e.GridRows-1 || dc > e.GridCols-1 {
			return errBeyondTable("posenc swin: table covers offsets up to ±%d rows and ±%d cols (%dx%d grid), the positions span %dx%d; use swin-log",
				e.GridRows-1, e.GridCols-1, e.GridRows, e.GridCols, dr+1, dc+1)
		}
		return nil
	}, func(qr, qc, kr, kc int) int { return SwinIndex(qr, qc, kr, kc, e.GridRows, e.GridCols) })
}

// BiasIndex implements TableBiaser: SwinIndex of every pair of tile t,
// shared by the batch. It returns an error naming the encoding unless the
// site has 2-D grid positions within the table's offsets.
func (e *Swin) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	return gridBiasIndex(e, s, t, dst)
}

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK], bias[h, i, j] =
// swin_bias[SwinIndex(...), h], the gather of TileBias over Site.Full. It
// returns an error naming the encoding if the site has no heads, positions
// other than a 2-D grid, or offsets beyond the table.
func (e *Swin) ScoreBias(s *Site) (*G.Node, error) { return gridScoreBias(e, s) }

// SwinLog is Swin's relative bias (see Swin) with each axis offset bucketed
// logarithmically, so that one table serves a grid of any size: the row and
// column offsets each go through T5's bidirectional bucket function (Raffel
// et al. 2020; T5Bucket, key minus query) with 2*Buckets buckets (Buckets per
// sign, the |Δ| < Buckets/2 nearest offsets exact, log-spaced up to
// MaxDistance, then clipped), and the pair of buckets indexes a 2-D table:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + swin_log_bias[SwinLogIndex(r_i, c_i, r_j, c_j, Buckets, MaxDistance), h]
//
// This is the "product" form of Wu et al. 2021 ("Rethinking and Improving
// Relative Position Encoding for Vision Transformer", iRPE: one bucket per
// axis, exact near 0 and log-spaced beyond) with T5's bucket rule per axis;
// Swin V2 (Liu et al. 2022) instead feeds log-spaced offsets to an MLP. Near
// the diagonal it is as fine as swin: every offset with |Δrow| and |Δcol| <
// Buckets/2 has a row of its own; far offsets share rows, and no grid is too
// large. Defaults (Options): 8 buckets per sign (exact |Δ| <= 3), log
// buckets to 32, a 256-row table (swin's for 7×7 has 169).
//
// Parameters, per layer: "<prefix>/swin_log_bias" [(2*Buckets)², H], init
// N(0, InitStd²), not weight-decayed; with Alpha, "<prefix>/swin_log_alpha"
// [1] multiplies it. A TableBiaser like Swin; causal attention gets the same
// (bidirectional) buckets, the mask hiding future keys. It accepts 2-D grid
// positions only.
type SwinLog struct {
	Buckets, MaxDistance int
	InitStd              float64
	Alpha                bool

	idx tableCache[gridIdxKey, gridIdx]
}

// NewSwinLog returns swin-log with buckets buckets per axis and sign and log
// buckets up to maxDistance. It returns an error unless buckets >= 2 and
// maxDistance > buckets/2 (T5Bucket's conditions), or if initStd < 0.
func NewSwinLog(buckets, maxDistance int, initStd float64, alpha bool) (*SwinLog, error) {
	if err := swinLogCheck(buckets, maxDistance); err != nil {
		return nil, err
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc swin-log: init std %g is negative", initStd)
	}
	return &SwinLog{Buckets: buckets, MaxDistance: maxDistance, InitStd: initStd, Alpha: alpha}, nil
}

func swinLogCheck(buckets, maxDistance int) error {
	if buckets < 2 || maxDistance <= buckets/2 {
		return errors.Errorf("posenc swin-log: %d buckets per sign and max distance %d: need at least 2 buckets and max distance > buckets/2 = %d",
			buckets, maxDistance, buckets/2)
	}
	return nil
}

// Name implements Encoding.
func (*SwinLog) Name() string { return "swin-log" }

// Accepts implements PositionAccepter: 2-D grid positions.
func (*SwinLog) Accepts() []PosKind { return []PosKind{PosGrid} }

// TableRows is the number of rows of the table, (2*Buckets)².
func (e *SwinLog) TableRows() int { return 4 * e.Buckets * e.Buckets }

// BiasTable implements TableBiaser: "<prefix>/swin_log_bias" [TableRows, H]
// (times "<prefix>/swin_log_alpha" with Alpha).
func (e *SwinLog) BiasTable(s *Site) (*G.Node, error) {
	if s.H <= 0 {
		return nil, errors.Errorf("posenc swin-log: %d heads", s.H)
	}
	if err := swinLogCheck(e.Buckets, e.MaxDistance); err != nil {
		return nil, err
	}
	return learnedTable(s, "swin-log", "swin_log_bias", "swin_log_alpha", e.TableRows(), e.InitStd, e.Alpha)
}

func (e *SwinLog) index(s *Site) (gridIdx, error) {
	if err := swinLogCheck(e.Buckets, e.MaxDistance); err != nil {
		return gridIdx{}, err
	}
	return gridIndex(&e.idx, "swin-log", s, e.Buckets, e.MaxDistance, nil,
		func(qr, qc, kr, kc int) int { return SwinLogIndex(qr, qc, kr, kc, e.Buckets, e.MaxDistance) })
}

// BiasIndex implements TableBiaser: SwinLogIndex of every pair of tile t,
// shared by the batch.
func (e *SwinLog) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	return gridBiasIndex(e, s, t, dst)
}

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK], bias[h, i, j] =
// swin_log_bias[SwinLogIndex(...), h], the gather of TileBias over
// Site.Full. It returns an error naming the encoding if the site has no
// heads or positions other than a 2-D grid.
func (e *SwinLog) ScoreBias(s *Site) (*G.Node, error) { return gridScoreBias(e, s) }

// Helpers shared by the 2-D table biases (swin, swin-log, alibi-2d).

// learnedTable returns the per-layer table "<prefix>/<name>" [rows, H],
// N(0, std²), times the learnable "<prefix>/<alphaName>" if alpha.
func learnedTable(s *Site, enc, name, alphaName string, rows int, std float64, alpha bool) (*G.Node, error) {
	table, err := s.Params.Node(s.G, s.Prefix+"/"+name, tensor.Shape{rows, s.H}, graph.Normal(std), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc "+enc)
	}
	if alpha {
		if table, err = alphaScaled(s, table, s.Prefix+"/"+alphaName); err != nil {
			return nil, errors.Wrap(err, "posenc "+enc)
		}
	}
	return table, nil
}

// gridIdxKey identifies the indices of one Positions value (by Key), head
// count and the encoding's two settings.
type gridIdxKey struct {
	pos  string
	h    int
	a, b int
}

// gridIdx holds the table row of every (query, key) pair of a site, rows
// [TQ*TK] row-major, and the flat gather indices of the [H, TQ, TK] bias
// (headTableIndex).
type gridIdx struct {
	tq, tk int
	rows   []int
	flat   []int
}

// grid2D returns the site's positions if they are a 2-D grid fitting the
// site, else an error naming enc.
func grid2D(enc string, s *Site) (*Positions, error) {
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc %s: H = %d, TQ = %d and TK = %d must be positive", enc, s.H, s.TQ, s.TK)
	}
	p := s.Pos
	if p == nil || p.Kind != PosGrid {
		return nil, errors.Errorf("posenc %s: needs 2-D grid positions, the site has %s positions", enc, p.Describe())
	}
	if len(p.Extent) != 2 || len(p.QCoords) != 2*p.TQ || len(p.KCoords) != 2*p.TK {
		return nil, errors.Errorf("posenc %s: needs 2-D grid positions (row, col), the site has %d-D %s positions", enc, len(p.Extent), p.Describe())
	}
	if err := p.Check(max(s.B, 1), s.TQ, s.TK); err != nil {
		return nil, errors.Wrap(err, "posenc "+enc)
	}
	return p, nil
}

// gridSpan returns the largest |Δrow| and |Δcol| between a query and a key
// of 2-D grid positions p.
func gridSpan(p *Positions) (dr, dc int) {
	ext := func(c []int, axis int) (lo, hi int) {
		lo, hi = c[axis], c[axis]
		for i := axis; i < len(c); i += 2 {
			lo, hi = min(lo, c[i]), max(hi, c[i])
		}
		return lo, hi
	}
	span := func(axis int) int {
		qlo, qhi := ext(p.QCoords, axis)
		klo, khi := ext(p.KCoords, axis)
		return max(qhi-klo, khi-qlo)
	}
	return span(0), span(1)
}

// gridIndex returns the cached indices of the site's 2-D grid positions,
// computing them with row(qr, qc, kr, kc) after check(p) (if not nil) on
// first use. a and b are the encoding's settings that row depends on.
func gridIndex(c *tableCache[gridIdxKey, gridIdx], enc string, s *Site, a, b int,
	check func(p *Positions) error, row func(qr, qc, kr, kc int) int) (gridIdx, error) {
	p, err := grid2D(enc, s)
	if err != nil {
		return gridIdx{}, err
	}
	return c.get(gridIdxKey{pos: p.Key(), h: s.H, a: a, b: b}, func() (gridIdx, error) {
		if check != nil {
			if err := check(p); err != nil {
				return gridIdx{}, err
			}
		}
		rows := make([]int, p.TQ*p.TK)
		for i := 0; i < p.TQ; i++ {
			for j := 0; j < p.TK; j++ {
				rows[i*p.TK+j] = row(p.Grid2(i, j))
			}
		}
		return gridIdx{tq: p.TQ, tk: p.TK, rows: rows, flat: headTableIndex(rows, s.H, p.TQ, p.TK)}, nil
	})
}

// gridTabler is a 2-D table bias: its table and the cached indices of a
// site.
type gridTabler interface {
	Name() string
	BiasTable(s *Site) (*G.Node, error)
	index(s *Site) (gridIdx, error)
}

// gridBiasIndex is BiasIndex of a gridTabler: the rows of tile t, shared by
// the batch.
func gridBiasIndex(e gridTabler, s *Site, t Tile, dst []int) (bool, error) {
	ix, err := e.index(s)
	if err != nil {
		return false, err
	}
	return false, ix.tile(e.Name(), s, t, dst)
}

// gridScoreBias is ScoreBias of a gridTabler: the bias [H, TQ, TK] gathered
// from its table.
func gridScoreBias(e gridTabler, s *Site) (*G.Node, error) {
	ix, err := e.index(s)
	if err != nil {
		return nil, err
	}
	table, err := e.BiasTable(s)
	if err != nil {
		return nil, err
	}
	out, err := headTableBias(table, ix.flat, s.H, ix.tq, ix.tk)
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s: bias [%d, %d, %d] from table %v", e.Name(), s.H, ix.tq, ix.tk, table.Shape())
	}
	return out, nil
}

// tile writes the rows of tile t into dst.
func (ix gridIdx) tile(enc string, s *Site, t Tile, dst []int) error {
	if err := CheckTile(s, t); err != nil {
		return err
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return errors.Errorf("posenc %s: BiasIndex: dst has %d entries, the tile %d", enc, len(dst), (t.Q1-t.Q0)*tk)
	}
	for i := t.Q0; i < t.Q1; i++ {
		copy(dst[(i-t.Q0)*tk:(i-t.Q0+1)*tk], ix.rows[i*ix.tk+t.K0:i*ix.tk+t.K1])
	}
	return nil
}
