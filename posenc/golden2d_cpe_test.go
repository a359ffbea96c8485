package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DCPE runs cpe's AfterBlock on the inputs of every
// testdata/golden/2d-cpe*.safetensors case (written by gen_golden_cpe.py:
// PyTorch's conv2d(groups=d, padding=k/2) on the tokens scattered onto the
// grid, plus the input) and matches the output and the gradients of the
// golden loss sum(out * w) w.r.t. x, cpe/w and cpe/b to 1e-5. It also checks
// the documented weight layout (cpe/w[u*k+v, c] = torch weight[c, 0, u, v]).
func TestGolden2DCPE(t *testing.T) {
	for _, name := range []string{"2d-cpe", "2d-cpe-k5", "2d-cpe-perm", "2d-cpe-holes"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			meta := func(k string) int {
				v, err := strconv.Atoi(gc.meta[k])
				if err != nil {
					t.Fatalf("metadata %s: %v", k, err)
				}
				return v
			}
			b, tt, d, rows, cols, k := meta("B"), meta("T"), meta("d"), meta("rows"), meta("cols"), meta("kernel")
			tw, gw := gc.floats["conv_weight"], gc.floats["cpe/w"]
			for c := 0; c < d; c++ {
				for o := 0; o < k*k; o++ {
					if gw[o*d+c] != tw[c*k*k+o] {
						t.Fatalf("cpe/w[%d, %d] = %v, conv_weight[%d, 0, %d, %d] = %v", o, c, gw[o*d+c], c, o/k, o%k, tw[c*k*k+o])
					}
				}
			}
			pos, err := posenc.NewGridCoords([]int{rows, cols}, gc.ints["coords"], gc.ints["coords"])
			if err != nil {
				t.Fatal(err)
			}
			o := posenc.Options{CPEKernel: k}
			enc, err := posenc.New("cpe", o)
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("x"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["x"])))
			s := &posenc.Site{G: g, Params: p, Layer: 0, Prefix: "block0", B: b, H: 1, DHead: d, DModel: d,
				Span: posenc.Span{TQ: tt, TK: tt}, Pos: pos}
			out, err := enc.(posenc.AfterBlocker).AfterBlock(s, x)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"cpe/w", "cpe/b"} {
				if err := p.Set(n, gc.floats[n]); err != nil {
					t.Fatal(err)
				}
			}
			w := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("golden_w"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["w"])))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, w))))
			wrt := append(G.Nodes{x}, p.Nodes(g)...) // x, cpe/b, cpe/w
			if _, err := G.Grad(loss, wrt...); err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, name+" out", graph.ToFloat64s(out.Value()), gc.floats["out"], 1e-5)
			for _, n := range wrt {
				gv, err := n.Grad()
				if err != nil {
					t.Fatal(err)
				}
				closeTo(t, name+" grad/"+n.Name(), graph.ToFloat64s(gv), gc.floats["grad/"+n.Name()], 1e-5)
			}
		})
	}
}
