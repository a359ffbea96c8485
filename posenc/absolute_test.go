package posenc_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestSinusoidTable checks PE against the formula written out for d = 4:
// PE[p] = [sin(p), cos(p), sin(p/100), cos(p/100)].
func TestSinusoidTable(t *testing.T) {
	tab := posenc.SinusoidTable(3, 2, 4) // positions 3, 4
	for i, p := range []float64{3, 4} {
		want := []float64{math.Sin(p), math.Cos(p), math.Sin(p / 100), math.Cos(p / 100)}
		for j, w := range want {
			if got := tab[i*4+j]; math.Abs(got-w) > 1e-15 {
				t.Fatalf("PE[%v][%d] = %v, want %v", p, j, got, w)
			}
		}
	}
}

// addInput runs an InputAdder on a zero input [1, T, d] at start and returns
// the result.
func addInput(t *testing.T, enc posenc.Encoding, p *graph.Params, start, tt, d int) ([]float64, error) {
	t.Helper()
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, tt, d), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(1, tt, d), tensor.Of(tensor.Float64))))
	site := &posenc.Site{G: g, Params: p, Layer: -1, B: 1, H: 1, DHead: d, DModel: d, Span: posenc.Span{QStart: start, TQ: tt, KStart: start, TK: tt}}
	y, err := enc.(posenc.InputAdder).AddToInput(site, x)
	if err != nil {
		return nil, err
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	return graph.ToFloat64s(y.Value()), nil
}

func TestSinusoidalAddsTable(t *testing.T) {
	for _, tc := range []struct {
		scale, want float64 // option, expected multiplier
	}{
		{0, 1 / math.Sqrt(6)}, // default 1/√d
		{1, 1},                // the paper's unscaled table
		{0.5, 0.5},
	} {
		enc, err := posenc.New("sinusoidal", posenc.Options{SinusoidalScale: tc.scale})
		if err != nil {
			t.Fatal(err)
		}
		got, err := addInput(t, enc, graph.NewParams(tensor.Float64, 1), 5, 3, 6)
		if err != nil {
			t.Fatal(err)
		}
		want := posenc.SinusoidTable(5, 3, 6)
		for i := range want {
			if math.Abs(got[i]-tc.want*want[i]) > 1e-15 {
				t.Fatalf("scale %v, element %d: %v, want %v", tc.scale, i, got[i], tc.want*want[i])
			}
		}
	}
	if _, err := posenc.New("sinusoidal", posenc.Options{SinusoidalScale: -1}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("negative scale: %v", err)
	}
	enc, _ := posenc.New("sinusoidal", posenc.Options{})
	// far beyond any training length: still defined
	if _, err := addInput(t, enc, graph.NewParams(tensor.Float64, 1), 10000, 4, 6); err != nil {
		t.Fatal(err)
	}
}

// TestLearnedTable: rows start..start+T-1 of pos_emb are added; asking for
// a position at or beyond MaxLen is an error wrapping ErrBeyondTable, never a
// silent clamp.
func TestLearnedTable(t *testing.T) {
	enc, err := posenc.New("learned", posenc.Options{MaxLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	p := graph.NewParams(tensor.Float64, 1)
	got, err := addInput(t, enc, p, 2, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	table := p.Float64s("pos_emb") // [8, 4]
	for i := range got {
		if want := table[2*4+i]; got[i] != want {
			t.Fatalf("element %d: %v, want row %d of the table %v", i, got[i], 2+i/4, want)
		}
	}
	if info, _ := p.Info("pos_emb"); info.Decay || !info.Shape.Eq(tensor.Shape{8, 4}) {
		t.Fatalf("pos_emb info %+v", info)
	}
	for _, c := range []struct{ start, n int }{{0, 9}, {5, 4}, {8, 1}} {
		_, err := addInput(t, enc, p, c.start, c.n, 4)
		if !errors.Is(err, posenc.ErrBeyondTable) || !strings.Contains(err.Error(), "8") {
			t.Fatalf("positions %d..%d: err %v, want ErrBeyondTable naming the table size", c.start, c.start+c.n-1, err)
		}
	}
	if _, err := posenc.New("learned", posenc.Options{MaxLen: -1}); err == nil {
		t.Fatal("negative MaxLen accepted")
	}
}

// TestLearnedLMBeyondTable: an LM with a learned table refuses to build a
// graph longer than the table, with the encoding's error.
func TestLearnedLMBeyondTable(t *testing.T) {
	g := G.NewGraph()
	lm, err := layers.NewLM(g, graph.NewParams(tensor.Float64, 1), tinyLM("learned", posenc.Options{MaxLen: 8}, true))
	if err != nil {
		t.Fatal(err)
	}
	_, err = lm.Fwd(intNode(g, "ids", []int{1, 9}, make([]int, 9)))
	if !errors.Is(err, posenc.ErrBeyondTable) {
		t.Fatalf("T=9 with an 8-row table: %v", err)
	}
}

func TestAbsoluteGrad(t *testing.T) {
	checkLMGrad(t, "learned", posenc.Options{MaxLen: 16}, true, 3, "pos_emb")
	checkLMGrad(t, "sinusoidal", posenc.Options{}, true, 3)
}

func TestAbsoluteShapeErrors(t *testing.T) {
	for _, name := range []string{"sinusoidal", "learned"} {
		enc, _ := posenc.New(name, posenc.Options{})
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 4), G.WithName("x"))
		site := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), DModel: 4, Span: posenc.Span{TQ: 3, TK: 3}}
		_, err := enc.(posenc.InputAdder).AddToInput(site, x)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "(3, 4)") {
			t.Fatalf("%s: 2-D input: %v", name, err)
		}
	}
}
