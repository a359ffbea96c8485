package graph

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestTableBiasForwardGradRebind checks out[b, h, i, j] = table[ids[b, i,
// j], h] element by element, the table's gradient against central
// differences (float64, repeated ids included), and that rebinding ids
// with G.Let changes the output on the next run of the same machine.
func TestTableBiasForwardGradRebind(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const r, h, b, tq, tk = 5, 3, 2, 3, 4
	g := G.NewGraph()
	tab := input(g, "table", randDense(rng, tensor.Float64, 1, r, h))
	idv := make([]int, b*tq*tk)
	for i := range idv {
		idv[i] = rng.Intn(r)
	}
	ids := G.NewTensor(g, tensor.Int, 3, G.WithShape(b, tq, tk), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(b, tq, tk), tensor.WithBacking(append([]int(nil), idv...)))))
	y := must(t)(TableBias(tab, ids))
	if !y.Shape().Eq(tensor.Shape{b, h, tq, tk}) {
		t.Fatalf("shape %v", y.Shape())
	}
	loss := projLoss(t, rng, y, "w")
	check := func(idv []int) {
		t.Helper()
		tv := ToFloat64s(tab.Value())
		want := make([]float64, b*h*tq*tk)
		for bb := 0; bb < b; bb++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < tq*tk; i++ {
					want[(bb*h+hh)*tq*tk+i] = tv[idv[bb*tq*tk+i]*h+hh]
				}
			}
		}
		checkClose(t, "TableBias", ToFloat64s(y.Value()), want, 0, 0)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	check(idv)
	vm.Reset()
	for i := range idv {
		idv[i] = (idv[i] + 1 + i) % r
	}
	if err := G.Let(ids, tensor.New(tensor.WithShape(b, tq, tk), tensor.WithBacking(append([]int(nil), idv...)))); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	check(idv)
	gradCheck(t, g, loss, tab)
}

// TestTableBiasErrors: bad shapes and dtypes are errors at build time, an
// id outside the table an error of the run naming it.
func TestTableBiasErrors(t *testing.T) {
	g := G.NewGraph()
	tab := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("table"), G.WithInit(G.Zeroes()))
	ids := G.NewTensor(g, tensor.Int, 3, G.WithShape(1, 2, 2), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2, 2), tensor.WithBacking([]int{0, 1, 4, 2}))))
	fids := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 2, 2), G.WithName("fids"), G.WithInit(G.Zeroes()))
	ids2 := G.NewMatrix(g, tensor.Int, G.WithShape(2, 2), G.WithName("ids2"),
		G.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int{0, 1, 2, 3}))))
	for _, c := range []struct {
		name string
		tab  *G.Node
		ids  *G.Node
		want string
	}{
		{"float ids", tab, fids, "want tensor.Int"},
		{"rank-2 ids", tab, ids2, "ids must be [B, Tq, Tk]"},
		{"vector table", G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("v"), G.WithInit(G.Zeroes())), ids, "table must be [R, H]"},
	} {
		if _, err := TableBias(c.tab, c.ids); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	must(t)(TableBias(tab, ids))
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	err := vm.RunAll()
	if err == nil || !strings.Contains(err.Error(), "relation id 4 at position 2 (example 0, query 1, key 0) is outside the table's 4 rows") {
		t.Fatalf("run error %v", err)
	}
}
