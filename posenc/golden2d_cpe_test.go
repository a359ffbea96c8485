package posenc_test

import (
	"strconv"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestGolden2DCPE matches cpe's AfterBlock hook (output and the gradients
// w.r.t. x, cpe/w and cpe/b of sum(out * R)) with the PyTorch reference of
// testdata/golden/gen_golden_cpe.py (F.conv2d with groups = d), to 1e-5,
// on tokens given in a shuffled order and on a grid with empty cells.
func TestGolden2DCPE(t *testing.T) {
	for _, name := range []string{"2d-cpe", "2d-cpe-k5", "2d-cpe-partial"} {
		t.Run(name, func(t *testing.T) {
			gc := readGoldenCase(t, name)
			k, err := strconv.Atoi(gc.meta["kernel"])
			if err != nil {
				t.Fatal(err)
			}
			xs := gc.shapes["x"]
			b, tt, d := xs[0], xs[1], xs[2]
			pos, err := posenc.NewGridCoords(gc.ints["extent"], gc.ints["coords"], gc.ints["coords"])
			if err != nil {
				t.Fatal(err)
			}
			enc, err := posenc.NewCPE(k, 1)
			if err != nil {
				t.Fatal(err)
			}
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("x"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["x"])))
			s := &posenc.Site{G: g, Params: p, Layer: 0, Prefix: "block0", B: b, H: 1, DHead: d, DModel: d,
				Span: posenc.Span{TQ: tt, TK: tt}, Pos: pos}
			out, err := enc.AfterBlock(s, x)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"w", "b"} {
				if err := p.Set("cpe/"+n, gc.floats[n]); err != nil {
					t.Fatal(err)
				}
			}
			r := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, d), G.WithName("R"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, d}, gc.floats["R"])))
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, r))))
			wrt := append(G.Nodes{x}, p.Nodes(g)...)
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
				key := map[string]string{"x": "grad_x", "cpe/w": "grad_w", "cpe/b": "grad_b"}[n.Name()]
				closeTo(t, name+" "+key, graph.ToFloat64s(gv), gc.floats[key], 1e-5)
			}
		})
	}
}

// TestCPEErrors: an even kernel, block 0, a 1-D grid and two tokens at one
// cell are errors naming the problem; other blocks pass x through.
func TestCPEErrors(t *testing.T) {
	if _, err := posenc.NewCPE(4, 1); err == nil {
		t.Error("even kernel accepted")
	}
	if _, err := posenc.NewCPE(3, 0); err == nil {
		t.Error("block 0 accepted")
	}
	enc, _ := posenc.NewCPE(3, 2)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 4, 2), G.WithName("x"), G.WithInit(G.Zeroes()))
	grid, _ := posenc.NewGrid(2, 2)
	s := &posenc.Site{G: g, Params: p, Layer: 0, B: 1, H: 1, DHead: 2, DModel: 2, Span: posenc.Span{TQ: 4, TK: 4}, Pos: grid}
	if y, err := enc.AfterBlock(s, x); err != nil || y != x {
		t.Errorf("block 1 of an after-block-2 cpe: %v, %v", y, err)
	}
	s.Layer = 1
	dup, _ := posenc.NewGridCoords([]int{2, 2}, []int{0, 0, 0, 1, 1, 0, 0, 0}, []int{0, 0, 0, 1, 1, 0, 0, 0})
	s.Pos = dup
	if _, err := enc.AfterBlock(s, x); err == nil {
		t.Error("two tokens at one cell accepted")
	}
	line := *s
	line.Pos = nil
	if _, err := enc.AfterBlock(&line, x); err == nil {
		t.Error("line positions accepted")
	}
}
