package posenc_test

import (
	"slices"
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DRel matches swin, swin-log and alibi-2d with the PyTorch
// reference of testdata/golden/gen_golden_rel.py: the table index of every
// (query, key) pair (exactly, as Swin's relative_position_index), the bias
// [H, Tq, Tk], and the gradient of sum(bias * R) w.r.t. the table, float64,
// to 1e-5.
func TestGolden2DRel(t *testing.T) {
	for _, name := range []string{"swin", "swin-cross", "swin-log", "swin-log-default", "alibi", "alibi-cross"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, "2d-"+name)
			atoi := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil && gc.meta[k] != "" {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			h := atoi("heads")
			o := posenc.Options{GridRows: atoi("grid_rows"), GridCols: atoi("grid_cols"),
				Rel2DBuckets: atoi("rel2d_buckets"), Rel2DMaxDistance: atoi("rel2d_max_distance")}
			enc, err := posenc.New(gc.meta["pos"], o)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := posenc.NewGridCoords(gc.ints["extent"], gc.ints["q_coords"], gc.ints["k_coords"])
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			s := &posenc.Site{G: g, Params: p, Prefix: "block0/attn", B: 2, H: h, DHead: 4, DModel: 4 * h,
				Span: posenc.Span{TQ: pos.TQ, TK: pos.TK}, Pos: pos}
			tb := enc.(posenc.TableBiaser)
			bias, err := tb.ScoreBias(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{h, pos.TQ, pos.TK}; !slices.Equal(bias.Shape(), want) {
				t.Fatalf("bias shape %v, want %v", bias.Shape(), want)
			}
			if want, ok := gc.ints["index"]; ok {
				got := make([]int, pos.TQ*pos.TK)
				if _, err := tb.BiasIndex(s, 0, s.Full(), got); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("index of pair (%d, %d) = %d, the reference's %d", i/pos.TK, i%pos.TK, got[i], want[i])
					}
				}
			}
			r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(h, pos.TQ, pos.TK), G.WithName("R"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{h, pos.TQ, pos.TK}, gc.floats["R"])))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(bias, r))))
			learn := p.Nodes(g)
			_, hasTable := gc.floats["table"]
			if hasTable != (len(learn) == 1) {
				t.Fatalf("%d parameters %v; the golden case has a table: %v", len(learn), p.Names(), hasTable)
			}
			var opts []G.VMOpt
			if hasTable {
				if err := p.Set(learn[0].Name(), gc.floats["table"]); err != nil {
					t.Fatal(err)
				}
				if _, err := G.Grad(loss, learn...); err != nil {
					t.Fatal(err)
				}
				opts = append(opts, G.BindDualValues(learn...))
			}
			m := G.NewTapeMachine(g, opts...)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "bias", graph.ToFloat64s(bias.Value()), gc.floats["bias"], 1e-5)
			if hasTable {
				gv, err := learn[0].Grad()
				if err != nil {
					t.Fatal(err)
				}
				closeTo(t, "grad "+learn[0].Name(), graph.ToFloat64s(gv), gc.floats["grad_table"], 1e-5)
			}
		})
	}
}
