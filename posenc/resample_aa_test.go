package posenc_test

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGoldenResampleAA matches learned-2d with the antialiased modes
// against timm's resample_abs_pos_embed (F.interpolate(antialias=True),
// torch 1.13, float64; testdata/golden/gen_golden.py, generate_timm_vit):
// the whole resampled table (ResampleMatrix) at 1e-12, and through the
// input hook the output x + PE and the gradients of a random linear
// functional w.r.t. x and the table at 1e-9. The cases resize 4×4 up to
// 7×7 and down to 3×3 (where antialiasing widens the taps), a 7×6 table
// down to 3×2, a non-square table to a non-square grid on shuffled cells,
// and bilinear down and up.
func TestGoldenResampleAA(t *testing.T) {
	for _, name := range []string{
		"2d-learned-bicubic-aa-up", "2d-learned-bicubic-aa-down", "2d-learned-bicubic-aa-down2",
		"2d-learned-bicubic-aa-mixed", "2d-learned-bilinear-aa-down", "2d-learned-bilinear-aa-up",
	} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, tt, d, rows, cols := atoi("B"), atoi("T"), atoi("d"), atoi("rows"), atoi("cols")
			r, c, mode := atoi("table_rows"), atoi("table_cols"), gc.meta["resample"]
			if !strings.HasSuffix(mode, "-aa") {
				t.Fatalf("resample %q is not an antialiased mode", mode)
			}
			closeTo(t, "aux/pe", resampledTable(t, mode, r, c, rows, cols, d, gc.floats["pos_emb_2d"]), gc.floats["aux/pe"], 1e-12)

			pos, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["coords"], gc.ints["coords"])
			if err != nil {
				t.Fatal(err)
			}
			enc, err := posenc.New("learned-2d", posenc.Options{GridRows: r, GridCols: c, GridResample: mode})
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("x"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["x"])))
			w := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("w"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["w"])))
			s := &posenc.Site{G: g, Params: p, Layer: -1, B: b, H: 1, DHead: d, DModel: d, Span: posenc.Span{TQ: tt, TK: tt}, Pos: pos}
			out, err := enc.(posenc.InputAdder).AddToInput(s, x)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Set("pos_emb_2d", gc.floats["pos_emb_2d"]); err != nil {
				t.Fatal(err)
			}
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
			grads, err := G.Grad(loss, append(G.Nodes{x}, p.Nodes(g)...)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := runGraph(g); err != nil {
				t.Fatal(err)
			}
			const tol = 1e-9
			closeTo(t, "out", graph.ToFloat64s(out.Value()), gc.floats["out"], tol)
			closeTo(t, "grad/x", graph.ToFloat64s(grads[0].Value()), gc.floats["grad/x"], tol)
			closeTo(t, "grad/pos_emb_2d", graph.ToFloat64s(grads[1].Value()), gc.floats["grad/pos_emb_2d"], tol)
		})
	}
}

// TestResampleWeightsAA checks the antialiased weights by hand and by
// their properties: rows sum to 1, the identity at in == out, the taps of
// a downsizing spread over in/out·n samples each side, and upsizing
// differs from the plain kernels (A = -0.5, borders renormalised).
func TestResampleWeightsAA(t *testing.T) {
	// bilinear-aa 4 -> 2: s = 2, support 2, centres 1 and 3, taps j = 0..2
	// and 1..3 (the rest fall outside the input): the triangle
	// 1-|j-centre+0.5|/2 = (0.75, 0.75, 0.25) and (0.25, 0.75, 0.75),
	// renormalised over those taps.
	w, err := posenc.ResampleWeights("bilinear-aa", 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.75 / 1.75, 0.75 / 1.75, 0.25 / 1.75, 0, 0, 0.25 / 1.75, 0.75 / 1.75, 0.75 / 1.75}
	for i := range want {
		if math.Abs(w[i]-want[i]) > 1e-15 {
			t.Fatalf("bilinear-aa 4->2: %v, want %v", w, want)
		}
	}
	// bicubic-aa 4 -> 3 (s = 4/3): output 1, centre 2, taps 0..3 at distances
	// (j - 1.5)·3/4 = -1.125, -0.375, 0.375, 1.125 of Keys' cubic with a = -0.5.
	w, err = posenc.ResampleWeights("bicubic-aa", 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(x float64) float64 {
		const a = -0.5
		x = math.Abs(x)
		if x < 1 {
			return ((a+2)*x-(a+3))*x*x + 1
		}
		return ((a*x-5*a)*x+8*a)*x - 4*a
	}
	mid := []float64{keys(1.125), keys(0.375), keys(0.375), keys(1.125)}
	sum := mid[0] + mid[1] + mid[2] + mid[3]
	for j, v := range mid {
		if got := w[4+j]; math.Abs(got-v/sum) > 1e-15 {
			t.Fatalf("bicubic-aa 4->3 row 1 tap %d: %v, want %v", j, got, v/sum)
		}
	}
	for _, mode := range []string{"bilinear-aa", "bicubic-aa"} {
		half := map[string]float64{"bilinear-aa": 1, "bicubic-aa": 2}[mode]
		for _, sz := range [][2]int{{1, 1}, {5, 5}, {4, 7}, {4, 3}, {14, 5}, {7, 14}, {9, 2}, {3, 1}} {
			in, out := sz[0], sz[1]
			w, err := posenc.ResampleWeights(mode, in, out)
			if err != nil {
				t.Fatal(err)
			}
			s := float64(in) / float64(out)
			for i := 0; i < out; i++ {
				row, sum := w[i*in:(i+1)*in], 0.0
				for j, v := range row {
					sum += v
					if in == out && math.Abs(v-b2f(i == j)) > 1e-15 {
						t.Fatalf("%s %d->%d: not the identity: %v", mode, in, out, w)
					}
					// a tap beyond the support is zero
					if centre := s * (float64(i) + 0.5); v != 0 && math.Abs(float64(j)+0.5-centre) >= half*max(s, 1)+0.5 {
						t.Fatalf("%s %d->%d: row %d has weight %v at %d, outside the support", mode, in, out, i, v, j)
					}
				}
				if math.Abs(sum-1) > 1e-12 {
					t.Fatalf("%s %d->%d: row %d sums to %v", mode, in, out, i, sum)
				}
			}
		}
	}
	plain, _ := posenc.ResampleWeights("bicubic", 4, 7)
	aa, _ := posenc.ResampleWeights("bicubic-aa", 4, 7)
	diff := 0.0
	for i := range plain {
		diff = max(diff, math.Abs(plain[i]-aa[i]))
	}
	if diff < 1e-3 {
		t.Errorf("bicubic and bicubic-aa 4->7 agree to %g: antialias must change upsizing too", diff)
	}
	if _, err := posenc.New("learned-2d", posenc.Options{GridResample: "bicubic-antialias"}); err == nil ||
		!strings.Contains(err.Error(), "bilinear-aa, bicubic-aa") {
		t.Errorf("an unknown mode: %v", err)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestLearned2DResampleAAGrad gradient-checks (float64, central
// differences) a ViT whose 3x4 table is resampled with the antialiased
// modes to a larger and a smaller grid, w.r.t. every parameter (the table
// included) and the input.
func TestLearned2DResampleAAGrad(t *testing.T) {
	for mode, grids := range map[string][][2]int{"bicubic-aa": {{5, 6}, {2, 3}}, "bilinear-aa": {{2, 5}}} {
		o := harnessOptions()
		o.GridResample = mode
		for _, g := range grids {
			checkGridGrad(t, "learned-2d", o, g[0], g[1])
		}
	}
}

// TestLearned2DClassRow: AddToClass adds the row pos_emb_2d_cls (not
// decayed, the same whatever the grid), sinusoidal-2d adds nothing (MAE's
// zero row); both refuse a class token of the wrong shape; the gradient
// reaches the row.
func TestLearned2DClassRow(t *testing.T) {
	for _, name := range []string{"learned-2d", "sinusoidal-2d"} {
		enc, err := posenc.New(name, posenc.Options{GridRows: 2, GridCols: 3, GridResample: "bicubic-aa"})
		if err != nil {
			t.Fatal(err)
		}
		ca, ok := enc.(posenc.ClassTokenAdder)
		if !ok {
			t.Fatalf("%s is not a ClassTokenAdder", name)
		}
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		rng := rand.New(rand.NewSource(2))
		cv := make([]float64, 2*4)
		for i := range cv {
			cv[i] = rng.NormFloat64()
		}
		cls := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 1, 4), G.WithName("cls"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, 1, 4}, cv)))
		s := &posenc.Site{G: g, Params: p, Layer: -1, B: 2, H: 1, DHead: 4, DModel: 4, Span: posenc.Span{TQ: 6, TK: 6}}
		y, err := ca.AddToClass(s, cls)
		if err != nil {
			t.Fatal(err)
		}
		bad := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 2, 4), G.WithName("bad"), G.WithInit(G.Zeroes()))
		if _, err := ca.AddToClass(s, bad); err == nil || !strings.Contains(err.Error(), "class token has shape (2, 2, 4)") {
			t.Errorf("%s: a [2, 2, 4] class token: %v", name, err)
		}
		if name == "sinusoidal-2d" {
			if y != cls || len(p.Names()) != 0 {
				t.Errorf("sinusoidal-2d: AddToClass is not the identity (params %v)", p.Names())
			}
			continue
		}
		row := []float64{1, -2, 3, 0.5}
		if err := p.Set("pos_emb_2d_cls", row); err != nil {
			t.Fatal(err)
		}
		if info, _ := p.Info("pos_emb_2d_cls"); info.Decay {
			t.Error("pos_emb_2d_cls is weight-decayed")
		}
		wv := []float64{0.5, -1, 2, 3, -0.25, 1.5, 1, -2}
		w := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 1, 4), G.WithName("w"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, 1, 4}, wv)))
		loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, w))))
		grads, err := G.Grad(loss, p.Nodes(g)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := runGraph(g); err != nil {
			t.Fatal(err)
		}
		got, gr := graph.ToFloat64s(y.Value()), graph.ToFloat64s(grads[0].Value())
		for b := 0; b < 2; b++ {
			for j := 0; j < 4; j++ {
				if want := cv[b*4+j] + row[j]; math.Abs(got[b*4+j]-want) > 1e-15 {
					t.Fatalf("token %d channel %d: %v, want %v", b, j, got[b*4+j], want)
				}
			}
		}
		for j := 0; j < 4; j++ {
			if want := wv[j] + wv[4+j]; math.Abs(gr[j]-want) > 1e-15 {
				t.Fatalf("grad/pos_emb_2d_cls[%d] = %v, want %v", j, gr[j], want)
			}
		}
	}
}
