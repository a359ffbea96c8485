package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// gridSite is a site of self- or cross-attention with grid positions pos,
// H heads, batch 2, in a fresh graph and float64 store.
func gridSite(pos *posenc.Positions, h int) *posenc.Site {
	return &posenc.Site{G: G.NewGraph(), Params: graph.NewParams(tensor.Float64, 5), Prefix: "block0/attn",
		B: 2, H: h, DHead: 2, DModel: 2 * h, Span: posenc.Span{TQ: pos.TQ, TK: pos.TK}, Pos: pos}
}

// runValue runs the site's graph and returns n's value.
func runValue(t *testing.T, s *posenc.Site, n *G.Node) []float64 {
	t.Helper()
	m := G.NewTapeMachine(s.G)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(n.Value())
}

// randomCoords returns n random (row, col) cells of a rows×cols grid.
func randomCoords(rng *rand.Rand, n, rows, cols int) []int {
	c := make([]int, 0, 2*n)
	for i := 0; i < n; i++ {
		c = append(c, rng.Intn(rows), rng.Intn(cols))
	}
	return c
}

func TestSwinIndex(t *testing.T) {
	for _, c := range []struct {
		qr, qc, kr, kc, rows, cols, want int
	}{
		{0, 0, 0, 0, 7, 7, 84},  // zero offset: the centre of the 13×13 table
		{6, 6, 0, 0, 7, 7, 168}, // query below right of the key: the last row
		{0, 0, 6, 6, 7, 7, 0},
		{1, 0, 0, 0, 7, 7, 97}, // one row down: +13
		{0, 1, 0, 0, 7, 7, 85}, // one col right: +1
		{2, 3, 0, 0, 3, 4, 34}, // 3×4: (2+2)*7 + (3+3), the last of 5*7 rows
		{0, 0, 2, 3, 3, 4, 0},
		{0, 3, 2, 0, 3, 4, 6}, // Δ = (-2, +3): first row block, last col
	} {
		if got := posenc.SwinIndex(c.qr, c.qc, c.kr, c.kc, c.rows, c.cols); got != c.want {
			t.Errorf("SwinIndex(%d,%d, %d,%d; %dx%d) = %d, want %d", c.qr, c.qc, c.kr, c.kc, c.rows, c.cols, got, c.want)
		}
	}
	// On its own grid, every offset has its own row and every row is used.
	for _, sz := range [][2]int{{3, 4}, {4, 3}, {1, 5}, {7, 7}} {
		rows, cols := sz[0], sz[1]
		byOffset := map[[2]int]int{}
		used := map[int]bool{}
		for q := 0; q < rows*cols; q++ {
			for k := 0; k < rows*cols; k++ {
				qr, qc, kr, kc := q/cols, q%cols, k/cols, k%cols
				r := posenc.SwinIndex(qr, qc, kr, kc, rows, cols)
				off := [2]int{qr - kr, qc - kc}
				if prev, ok := byOffset[off]; ok && prev != r {
					t.Fatalf("%dx%d: offset %v has rows %d and %d", rows, cols, off, prev, r)
				}
				byOffset[off] = r
				used[r] = true
			}
		}
		if n := (2*rows - 1) * (2*cols - 1); len(used) != n || len(byOffset) != n {
			t.Errorf("%dx%d: %d offsets use %d rows, want %d", rows, cols, len(byOffset), len(used), n)
		}
	}
}

func TestSwinLogIndex(t *testing.T) {
	// Defaults: 8 buckets per sign (exact |Δ| <= 3), log buckets to 32.
	const b, md = 8, 32
	for _, c := range []struct {
		dr, dc, want int
	}{
		{0, 0, 0},
		{0, 1, 9},              // col +1: bucket 8+1
		{0, -1, 1},             // col -1: bucket 1
		{1, 0, 9 * 16},         // row +1: row bucket 9
		{-3, 3, 3*16 + 11},     // exact up to 3
		{-5, 0, 4 * 16},        // 5 is in the first log bucket (4)
		{100, -100, 15*16 + 7}, // far offsets clip to the last bucket of each sign
	} {
		if got := posenc.SwinLogIndex(0, 0, c.dr, c.dc, b, md); got != c.want {
			t.Errorf("SwinLogIndex Δ=(%d, %d) = %d, want %d", c.dr, c.dc, got, c.want)
		}
	}
	// Near the diagonal swin-log is as fine as swin: on a 7×7 grid the offsets
	// with |Δ| <= 3 on both axes have rows of their own.
	seen := map[int][2]int{}
	for dr := -3; dr <= 3; dr++ {
		for dc := -3; dc <= 3; dc++ {
			r := posenc.SwinLogIndex(3, 3, 3+dr, 3+dc, b, md)
			if prev, ok := seen[r]; ok {
				t.Fatalf("offsets %v and %v share row %d", prev, [2]int{dr, dc}, r)
			}
			if r < 0 || r >= 4*b*b {
				t.Fatalf("row %d outside the %d-row table", r, 4*b*b)
			}
			seen[r] = [2]int{dr, dc}
		}
	}
	// Any offset lands in the table; the index is the product of per-axis T5 buckets.
	rng := rand.New(rand.NewSource(3))
	for n := 0; n < 2000; n++ {
		qr, qc, kr, kc := rng.Intn(500), rng.Intn(500), rng.Intn(500), rng.Intn(500)
		bb, m := 2+rng.Intn(10), 0
		m = bb/2 + 1 + rng.Intn(50)
		r := posenc.SwinLogIndex(qr, qc, kr, kc, bb, m)
		want := posenc.T5Bucket(kr-qr, true, 2*bb, m)*2*bb + posenc.T5Bucket(kc-qc, true, 2*bb, m)
		if r != want || r < 0 || r >= 4*bb*bb {
			t.Fatalf("SwinLogIndex(%d,%d,%d,%d; %d, %d) = %d, want %d in [0, %d)", qr, qc, kr, kc, bb, m, r, want, 4*bb*bb)
		}
	}
}

func TestSwinTooLarge(t *testing.T) {
	enc, err := posenc.New("swin", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big, _ := posenc.NewGrid(14, 14)
	_, err = enc.(posenc.ScoreBiaser).ScoreBias(gridSite(big, 2))
	want := "posenc swin: table covers offsets up to ±6 rows and ±6 cols (7x7 grid), the positions span 14x14; use swin-log"
	if err == nil || err.Error() != want {
		t.Fatalf("14x14 grid with a 7x7 table: error %v, want %q", err, want)
	}
	_, err = enc.(posenc.TableBiaser).BiasIndex(gridSite(big, 2), 0, posenc.Tile{Q0: 0, Q1: 1, K0: 0, K1: 1}, make([]int, 1))
	if err == nil || !strings.Contains(err.Error(), "use swin-log") {
		t.Fatalf("BiasIndex on a 14x14 grid: %v", err)
	}
	// Only the offsets matter: a 7×8 window (8 cols) is too wide, a 7×7 window
	// inside a 14×14 grid is fine, and so is swin-log on the whole grid.
	var wide, win []int
	for r := 3; r < 10; r++ {
		for c := 5; c < 13; c++ {
			wide = append(wide, r, c)
			if c < 12 {
				win = append(win, r, c)
			}
		}
	}
	wp, err := posenc.NewGridCoords([]int{14, 14}, wide, wide)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(gridSite(wp, 2)); err == nil || !strings.Contains(err.Error(), "span 7x8") {
		t.Fatalf("7x8 window: %v", err)
	}
	pp, err := posenc.NewGridCoords([]int{14, 14}, win, win)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.(posenc.ScoreBiaser).ScoreBias(gridSite(pp, 2)); err != nil {
		t.Fatalf("7x7 window of a 14x14 grid: %v", err)
	}
	lg, _ := posenc.New("swin-log", posenc.Options{})
	if _, err := lg.(posenc.ScoreBiaser).ScoreBias(gridSite(big, 2)); err != nil {
		t.Fatalf("swin-log on a 14x14 grid: %v", err)
	}
}

// TestGrid2DErrors: bad settings and positions other than a 2-D grid are
// errors naming the encoding.
func TestGrid2DErrors(t *testing.T) {
	for _, c := range []struct {
		label string
		f     func() error
		want  string
	}{
		{"swin 0 rows", func() error { _, err := posenc.NewSwin(0, 7, 0.02, false); return err }, "posenc swin: grid 0x7"},
		{"swin std", func() error { _, err := posenc.NewSwin(7, 7, -1, false); return err }, "posenc swin: init std"},
		{"swin-log 1 bucket", func() error { _, err := posenc.NewSwinLog(1, 32, 0.02, false); return err }, "posenc swin-log: 1 buckets"},
		{"swin-log max distance", func() error { _, err := posenc.NewSwinLog(8, 4, 0.02, false); return err }, "max distance > buckets/2 = 4"},
		{"swin-log std", func() error { _, err := posenc.NewSwinLog(8, 32, -1, false); return err }, "posenc swin-log: init std"},
		{"options", func() error { _, err := posenc.New("swin-log", posenc.Options{Rel2DBuckets: 1}); return err }, "posenc swin-log"},
	} {
		if err := c.f(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.label, err, c.want)
		}
	}
	grid3, err := posenc.NewGridCoords([]int{2, 2, 2}, []int{0, 0, 0, 1, 1, 1}, []int{0, 0, 0, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	grid, _ := posenc.NewGrid(2, 3)
	real, _ := posenc.NewReal(1, []float64{0, 1}, []float64{0, 1})
	for _, name := range []string{"swin", "swin-log", "alibi-2d"} {
		enc, err := posenc.New(name, posenc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tb := enc.(posenc.TableBiaser)
		line := gridSite(grid, 2)
		line.Pos, line.Span = nil, posenc.Span{TQ: 4, TK: 4}
		noHeads := gridSite(grid, 2)
		noHeads.H = 0
		wrongSize := gridSite(grid, 2)
		wrongSize.Span.TK = 5
		realSite := gridSite(grid, 2)
		realSite.Pos = real
		realSite.Span = posenc.Span{TQ: 2, TK: 2}
		for _, c := range []struct {
			label string
			s     *posenc.Site
			want  string
		}{
			{"line", line, "needs 2-D grid positions, the site has line positions"},
			{"real", realSite, "the site has real positions"},
			{"3-D grid", gridSite(grid3, 2), "3-D grid 2x2x2"},
			{"no heads", noHeads, "H = 0"},
			{"size", wrongSize, "6 query and 6 key positions, the attention has 6 queries and 5 keys"},
		} {
			_, err := tb.ScoreBias(c.s)
			if err == nil || !strings.Contains(err.Error(), "posenc "+name) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: ScoreBias error %v, want %q", name, c.label, err, c.want)
			}
			_, err = tb.BiasIndex(c.s, 0, posenc.Tile{Q0: 0, Q1: 1, K0: 0, K1: 1}, make([]int, 1))
			if err == nil || !strings.Contains(err.Error(), "posenc "+name) {
				t.Errorf("%s, %s: BiasIndex error %v", name, c.label, err)
			}
		}
		if _, err := tb.BiasIndex(gridSite(grid, 2), 0, posenc.Tile{Q0: 0, Q1: 2, K0: 0, K1: 2}, make([]int, 3)); err == nil {
			t.Errorf("%s: BiasIndex accepted a dst of the wrong size", name)
		}
	}
}

// TestSwinParams: one table per layer, named after the layer, N(0, InitStd²),
// not weight-decayed; with Alpha, the bias is alpha (0.1) times the table.
func TestSwinParams(t *testing.T) {
	grid, _ := posenc.NewGrid(3, 4)
	for _, c := range []struct {
		name, table, alpha string
		rows               int
		o                  posenc.Options
	}{
		{"swin", "swin_bias", "swin_alpha", 5 * 7, posenc.Options{GridRows: 3, GridCols: 4, InitStd: 0.5}},
		{"swin-log", "swin_log_bias", "swin_log_alpha", 36, posenc.Options{Rel2DBuckets: 3, Rel2DMaxDistance: 5, InitStd: 0.5}},
	} {
		for _, alpha := range []bool{false, true} {
			o := c.o
			o.Alpha = alpha
			enc, err := posenc.New(c.name, o)
			if err != nil {
				t.Fatal(err)
			}
			s := gridSite(grid, 3)
			b0, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			s1 := *s
			s1.Prefix = "block1/attn"
			if _, err := enc.(posenc.ScoreBiaser).ScoreBias(&s1); err != nil {
				t.Fatal(err)
			}
			want := []string{"block0/attn/" + c.table, "block1/attn/" + c.table}
			if alpha {
				want = []string{"block0/attn/" + c.table, "block0/attn/" + c.alpha, "block1/attn/" + c.table, "block1/attn/" + c.alpha}
			}
			if got := s.Params.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s alpha %v: parameters %v, want %v", c.name, alpha, got, want)
			}
			for _, n := range want {
				info, _ := s.Params.Info(n)
				if info.Decay {
					t.Errorf("%s: %s is weight-decayed", c.name, n)
				}
			}
			info, _ := s.Params.Info(want[0])
			if got := info.Shape; len(got) != 2 || got[0] != c.rows || got[1] != 3 {
				t.Errorf("%s: table shape %v, want [%d 3]", c.name, got, c.rows)
			}
			tab := s.Params.Float64s(want[0])
			var ss float64
			for _, v := range tab {
				ss += v * v
			}
			if std := math.Sqrt(ss / float64(len(tab))); std < 0.35 || std > 0.65 {
				t.Errorf("%s: table std %.3f, want about 0.5", c.name, std)
			}
			// bias[h, i, j] = (0.1 *) table[row(i, j), h]
			bias := runValue(t, s, b0)
			rows := make([]int, 144)
			if _, err := enc.(posenc.TableBiaser).BiasIndex(s, 0, s.Full(), rows); err != nil {
				t.Fatal(err)
			}
			scale := 1.0
			if alpha {
				scale = posenc.AlphaInit
			}
			for h := 0; h < 3; h++ {
				for k, r := range rows {
					if got, want := bias[h*144+k], scale*tab[r*3+h]; math.Abs(got-want) > 1e-15 {
						t.Fatalf("%s alpha %v: bias[%d, %d, %d] = %v, want %v", c.name, alpha, h, k/12, k%12, got, want)
					}
				}
			}
		}
	}
}

// TestGrid2DPositionsCache: one encoding value serving two different
// positions of the same sizes (a cache keyed by anything but the positions
// would mix them up) gives what fresh values give.
func TestGrid2DPositionsCache(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	var ps []*posenc.Positions
	for n := 0; n < 3; n++ {
		c := randomCoords(rng, 6, 4, 5)
		p, err := posenc.NewGridCoords([]int{4, 5}, c, c)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, name := range []string{"swin", "swin-log", "alibi-2d"} {
		o := posenc.Options{GridRows: 4, GridCols: 5, Rel2DBuckets: 2, Rel2DMaxDistance: 3}
		shared, _ := posenc.New(name, o)
		for pass := 0; pass < 2; pass++ {
			for i, p := range ps {
				fresh, _ := posenc.New(name, o)
				var got, want []float64
				for k, enc := range []posenc.Encoding{shared, fresh} {
					s := gridSite(p, 2)
					b, err := enc.(posenc.ScoreBiaser).ScoreBias(s)
					if err != nil {
						t.Fatal(err)
					}
					if k == 0 {
						got = runValue(t, s, b)
					} else {
						want = runValue(t, s, b)
					}
				}
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("%s pass %d positions %d: bias[%d] = %v from the shared encoding, %v from a fresh one", name, pass, i, j, got[j], want[j])
					}
				}
			}
		}
	}
}

// TestGrid2DConcurrent builds biases from one encoding value in several
// goroutines at once, over grids that miss the caches (run with -race).
func TestGrid2DConcurrent(t *testing.T) {
	o := posenc.Options{GridRows: 4, GridCols: 5, Rel2DBuckets: 2, Rel2DMaxDistance: 3}
	for _, name := range []string{"swin", "swin-log", "alibi-2d"} {
		enc, err := posenc.New(name, o)
		if err != nil {
			t.Fatal(err)
		}
		tb := enc.(posenc.TableBiaser)
		var wg sync.WaitGroup
		errs := make(chan error, 12)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for r := 0; r < 3; r++ {
					grid, _ := posenc.NewGrid(1+(w+r)%4, 2+w%4)
					s := gridSite(grid, 1+w)
					if _, err := tb.ScoreBias(s); err != nil {
						errs <- err
						continue
					}
					if _, err := posenc.TileBias(tb, s, s.Full()); err != nil {
						errs <- err
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", name, err)
		}
	}
}
