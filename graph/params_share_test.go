package graph

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestParamsShared checks that two graphs built from one store see one tensor,
// through a TapeMachine with dual values, and that in-place updates are seen.
func TestParamsShared(t *testing.T) {
	p := NewParams(tensor.Float64, 1)
	var outs []float64
	for run := 0; run < 2; run++ {
		g := G.NewGraph()
		w, err := p.Node(g, "w", tensor.Shape{2}, Ones, true)
		if err != nil {
			t.Fatal(err)
		}
		s := G.Must(G.Sum(G.Must(G.Square(w))))
		if _, err := G.Grad(s, w); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g, G.BindDualValues(w))
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, s.Value().Data().(float64))
		gv, _ := w.Grad()
		if got := gv.Data().([]float64)[0]; got != 2*p.Value("w").Data().([]float64)[0] {
			t.Fatalf("grad %v", got)
		}
		p.Value("w").Data().([]float64)[0] = 3
		m.Reset()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, s.Value().Data().(float64))
		p.Value("w").Data().([]float64)[0] = 1
		m.Close()
	}
	want := []float64{2, 10, 2, 10}
	for i := range want {
		if outs[i] != want[i] {
			t.Fatalf("outs %v want %v", outs, want)
		}
	}
}
