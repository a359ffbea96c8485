package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DAbsolute matches learned-2d and sinusoidal-2d with the
// PyTorch reference of testdata/golden/gen_golden_abs.py (timm's
// resample_abs_pos_embed, i.e. F.interpolate, for the resampled tables;
// MAE's get_2d_sincos_pos_embed for the sine-cosine table): the hook's
// output x + PE, the whole table on the input grid, and the gradients of a
// random linear functional of the output w.r.t. x and the table.
func TestGolden2DAbsolute(t *testing.T) {
	for _, name := range []string{
		"2d-learned", "2d-learned-perm",
		"2d-learned-bilinear-up", "2d-learned-bilinear-down", "2d-learned-bilinear-mixed",
		"2d-learned-bicubic-up", "2d-learned-bicubic-down", "2d-learned-bicubic-mixed",
		"2d-sinusoidal", "2d-sinusoidal-scaled", "2d-sinusoidal-large",
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
			pos, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["coords"], gc.ints["coords"])
			if err != nil {
				t.Fatal(err)
			}
			var o posenc.Options
			learned := gc.meta["pos"] == "learned-2d"
			if learned {
				o.GridRows, o.GridCols, o.GridResample = atoi("table_rows"), atoi("table_cols"), gc.meta["resample"]
			} else if o.SinusoidalScale, err = strconv.ParseFloat(gc.meta["scale"], 64); err != nil {
				t.Fatal(err)
			}
			enc, err := posenc.New(gc.meta["pos"], o)
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
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
			wrt := G.Nodes{x}
			if learned {
				if err := p.Set("pos_emb_2d", gc.floats["pos_emb_2d"]); err != nil {
					t.Fatal(err)
				}
				wrt = append(wrt, p.Nodes(g)...)
			}
			grads, err := G.Grad(loss, wrt...)
			if err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			const tol = 1e-5
			closeTo(t, "out", graph.ToFloat64s(out.Value()), gc.floats["out"], tol)
			closeTo(t, "grad/x", graph.ToFloat64s(grads[0].Value()), gc.floats["grad/x"], tol)
			if learned {
				closeTo(t, "grad/pos_emb_2d", graph.ToFloat64s(grads[1].Value()), gc.floats["grad/pos_emb_2d"], tol)
			}
			// The whole table on the input grid, from the exported host functions.
			var pe []float64
			if learned {
				pe = resampledTable(t, gc.meta["resample"], o.GridRows, o.GridCols, rows, cols, d, gc.floats["pos_emb_2d"])
			} else {
				full, _ := posenc.NewGrid(rows, cols)
				if pe, err = posenc.Sinusoid2DTable(full.QCoords, d); err != nil {
					t.Fatal(err)
				}
				for i := range pe {
					pe[i] *= o.SinusoidalScale
				}
			}
			closeTo(t, "aux/pe", pe, gc.floats["aux/pe"], tol)
		})
	}
}

// resampledTable returns ResampleMatrix · table [rows*cols, d] (the table
// itself for an unchanged grid).
func resampledTable(t *testing.T, mode string, r, c, rows, cols, d int, table []float64) []float64 {
	t.Helper()
	if r == rows && c == cols {
		return table
	}
	m, err := posenc.ResampleMatrix(mode, r, c, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	n := r * c
	out := make([]float64, rows*cols*d)
	for i := 0; i < rows*cols; i++ {
		for k := 0; k < n; k++ {
			for j := 0; j < d; j++ {
				out[i*d+j] += m[i*n+k] * table[k*d+j]
			}
		}
	}
	return out
}
