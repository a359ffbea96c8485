package layers_test

import (
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// tinyViT is a 2-block, 2-head, d=8 classifier of 2×2 patches.
func tinyViT(pos string) layers.ViTConfig {
	c := layers.DefaultViTConfig()
	c.Encoder.DModel, c.Encoder.Heads, c.Encoder.Layers, c.Encoder.FFN, c.Encoder.InitStd = 8, 2, 2, 12, 0.5
	c.Encoder.Pos = pos
	c.Patch, c.Classes = 2, 3
	return c
}

// TestViTGrad gradient-checks the classifier (float64, central differences)
// with 1-D encodings on the raster order.
func TestViTGrad(t *testing.T) {
	for _, pos := range []string{"none", "learned", "rope", "t5"} {
		t.Run(pos, func(t *testing.T) {
			rng := rand.New(rand.NewSource(3))
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			m, err := layers.NewViT(g, p, tinyViT(pos))
			if err != nil {
				t.Fatal(err)
			}
			const b, rows, cols = 2, 2, 3
			x := make([]float64, b*rows*cols*m.Cfg.PatchDim())
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, rows*cols, m.Cfg.PatchDim()), G.WithName("patches"),
				G.WithValue(tensor.New(tensor.WithShape(b, rows*cols, m.Cfg.PatchDim()), tensor.WithBacking(x))))
			logits, err := m.Fwd(in, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			if got := logits.Shape(); got[0] != b || got[1] != 3 {
				t.Fatalf("logits %v, want [%d, 3]", got, b)
			}
			tg := G.NewVector(g, tensor.Int, G.WithShape(b), G.WithName("targets"),
				G.WithValue(tensor.New(tensor.WithShape(b), tensor.WithBacking([]int{0, 2}))))
			loss, err := graph.CrossEntropy(logits, tg)
			if err != nil {
				t.Fatal(err)
			}
			p.Randomize(rng, 0.5)
			if err := graph.GradCheck(g, loss, m.Learnables(), graph.GradCheckOpts{MaxPerNode: 12, Seed: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestViTErrors checks the errors of bad inputs.
func TestViTErrors(t *testing.T) {
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	m, err := layers.NewViT(g, p, tinyViT("none"))
	if err != nil {
		t.Fatal(err)
	}
	in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 6, 4), G.WithName("x"), G.WithInit(G.Zeroes()))
	if _, err := m.Fwd(in, 2, 2); err == nil || !strings.Contains(err.Error(), "2x2 patch grid has 4 patches, the input has 6") {
		t.Fatalf("wrong grid: %v", err)
	}
	bad := tinyViT("none")
	bad.Encoder.Causal = true
	if _, err := layers.NewViT(G.NewGraph(), graph.NewParams(tensor.Float64, 1), bad); err == nil {
		t.Fatal("a causal encoder was accepted")
	}
}
