package posenc_test

import (
	"reflect"
	"slices"
	"sort"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestRegistered checks the registry metadata: every name of Names() (the
// names TestEveryEncoding runs the shared checks on) has exactly one Info,
// in the documented table order, with a valid kind; EvalOnly variants name
// a registered, trainable base; Trainable is the non-EvalOnly names in
// order; and Learnable agrees with whether the encoding creates parameters.
func TestRegistered(t *testing.T) {
	reg := posenc.Registered()
	var names []string
	for _, i := range reg {
		names = append(names, i.Name)
	}
	wantOrder := []string{"none", "sinusoidal", "learned", "shaw", "shaw-scalar", "t5", "xl", "deberta", "rope", "alibi"}
	// The later encodings follow, in posenc's table order, as they are registered.
	for _, n := range []string{"kerple-log", "kerple-power", "sandwich", "fire", "dpb", "xpos", "cope",
		"rope-pi", "rope-ntk", "rope-dynamic", "rope-yarn", "rope-llama3",
		"learned-2d", "sinusoidal-2d", "swin", "swin-log", "alibi-2d", "rope-2d", "rope-mixed", "cpe",
		"graphormer-spatial", "graphormer-centrality", "tree"} {
		if _, ok := posenc.InfoOf(n); ok {
			wantOrder = append(wantOrder, n)
		}
	}
	if !reflect.DeepEqual(names, wantOrder) {
		t.Fatalf("Registered order %v, want %v", names, wantOrder)
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	if !reflect.DeepEqual(sorted, posenc.Names()) {
		t.Fatalf("Registered names %v differ from Names() %v (the harness's list)", sorted, posenc.Names())
	}
	kinds := map[string]bool{posenc.KindNone: true, posenc.KindAbsolute: true, posenc.KindRelative: true, posenc.KindRotary: true, posenc.KindConditional: true, posenc.KindStructural: true}
	var trainable []string
	for _, i := range reg {
		if !kinds[i.Kind] {
			t.Errorf("%s: kind %q", i.Name, i.Kind)
		}
		if got, ok := posenc.InfoOf(i.Name); !ok || !reflect.DeepEqual(got, i) {
			t.Errorf("InfoOf(%s) = %+v, %v", i.Name, got, ok)
		}
		if i.EvalOnly {
			b, ok := posenc.InfoOf(i.Base)
			if !ok || b.EvalOnly || b.Kind != i.Kind {
				t.Errorf("%s: EvalOnly with base %q (%+v)", i.Name, i.Base, b)
			}
		} else {
			trainable = append(trainable, i.Name)
			if i.Base != "" {
				t.Errorf("%s: base %q without EvalOnly", i.Name, i.Base)
			}
		}
		// Learnable <=> the tiny LM (or ViT, for an encoding of grid
		// positions only) has parameters beyond the 2-layer model's
		if slices.Equal(i.Positions, []posenc.PosKind{posenc.PosPairwise}) {
			n, base := len(pairwiseWeights(t, i.Name)), len(pairwiseWeights(t, "none"))
			if got := n > base; got != i.Learnable {
				t.Errorf("%s: Learnable %v, but the block has %d parameters (%d without position encoding)", i.Name, i.Learnable, n, base)
			}
			continue
		}
		if !slices.Contains(i.Positions, posenc.PosLine) {
			n, base := len(vitWeights(t, i.Name)), len(vitWeights(t, "none"))
			if got := n > base; got != i.Learnable {
				t.Errorf("%s: Learnable %v, but the ViT has %d parameters (%d without position encoding)", i.Name, i.Learnable, n, base)
			}
			continue
		}
		w := weightsFor(t, i.Name, posenc.Options{}, true, 4, 1)
		if got := len(w) > 4+2*(2+8+2+4); got != i.Learnable {
			t.Errorf("%s: Learnable %v, but the model has %d parameters", i.Name, i.Learnable, len(w))
		}
	}
	if got := posenc.Trainable(); !reflect.DeepEqual(got, trainable) {
		t.Fatalf("Trainable() = %v, want %v", got, trainable)
	}
	if _, ok := posenc.InfoOf("rotary"); ok {
		t.Fatal("InfoOf of an unknown name")
	}
	c, ok := posenc.InfoOf("tree+rope")
	if want := (posenc.Info{Name: "tree+rope", Kind: posenc.KindCombined, Learnable: true,
		Positions: []posenc.PosKind{posenc.PosPairwise, posenc.PosLine, posenc.PosReal},
		NoDecode:  "tree: not a line encoding: a causal language model decodes only over a line"}); !ok || !reflect.DeepEqual(c, want) {
		t.Errorf("InfoOf(tree+rope) = %+v, %v; want %+v", c, ok, want)
	}
	for _, bad := range []string{"tree+rotary", "tree+", "tree+tree"} {
		if _, ok := posenc.InfoOf(bad); ok {
			t.Errorf("InfoOf(%s) is ok", bad)
		}
	}
}

// pairwiseWeights returns the parameter names of one block with the
// encoding after a forward pass on pairwise positions.
func pairwiseWeights(t *testing.T, name string) []string {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	pos, err := posenc.NewPairwise(1, 3, 3, 4, []int{0, 1, 2, 3, 0, 1, 2, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	pairwiseBlock(t, g, p, name, posenc.Options{TreeMaxUp: 1, TreeMaxDown: 1}, pos, make([]float64, 3*8), false)
	return p.Names()
}

// vitWeights returns the parameter names of the tiny ViT with the encoding
// after one forward pass on a 3×4 grid (tables created lazily included).
func vitWeights(t *testing.T, name string) []string {
	t.Helper()
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewViT(g, p, tinyViT(name, harnessOptions()))
	if err != nil {
		t.Fatal(err)
	}
	in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 12, m.Cfg.PatchDim()), G.WithName("patches"), G.WithInit(G.Zeroes()))
	if _, err := m.Fwd(in, 3, 4); err != nil {
		t.Fatal(err)
	}
	return p.Names()
}
