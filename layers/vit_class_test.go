package layers_test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// classViT is tinyViT with a class token (vit-pool cls) and clsPos.
func classViT(pos, clsPos string) layers.ViTConfig {
	c := tinyViT(pos)
	c.Encoder.ViTPool, c.Encoder.ViTClassPos = layers.PoolCls, clsPos
	c.Encoder.PosOpts.GridRows, c.Encoder.PosOpts.GridCols = 2, 3
	return c
}

// TestViTClassGrad gradient-checks (float64, central differences) the
// classifier with a class token w.r.t. every parameter, cls_token and
// pos_emb_2d_cls included, on every path: the class token on the line of
// a 1-D encoding (learned, rope, t5), outside the hooks of a grid encoding
// (learned-2d with and without its row, on its grid and resampled with
// bicubic-aa; cpe with the class token left out of the convolution; none),
// and streamed attention.
func TestViTClassGrad(t *testing.T) {
	for _, tc := range []struct {
		pos, clsPos string
		rows, cols  int
		resample    string
		stream      bool
	}{
		{"learned", "with", 2, 3, "", false},
		{"learned", "without", 2, 3, "", false},
		{"rope", "with", 2, 3, "", false},
		{"t5", "with", 2, 3, "", true},
		{"learned-2d", "with", 2, 3, "", false},
		{"learned-2d", "without", 2, 3, "", false},
		{"learned-2d", "with", 3, 2, "bicubic-aa", false},
		{"learned-2d", "without", 1, 4, "bicubic-aa", true},
		{"sinusoidal-2d", "with", 2, 3, "", false},
		{"cpe", "without", 2, 3, "", false},
		{"none", "with", 2, 3, "", false},
	} {
		label := tc.pos + "/" + tc.clsPos + "/" + tc.resample
		t.Run(label, func(t *testing.T) {
			cfg := classViT(tc.pos, tc.clsPos)
			cfg.Encoder.PosOpts.GridResample = tc.resample
			cfg.Encoder.Stream = tc.stream
			rng := rand.New(rand.NewSource(5))
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			m, err := layers.NewViT(g, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			const b = 2
			tt, pd := tc.rows*tc.cols, m.Cfg.PatchDim()
			x := make([]float64, b*tt*pd)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, tt, pd), G.WithName("patches"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, tt, pd}, x)))
			logits, err := m.Fwd(in, tc.rows, tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			tg := G.NewVector(g, tensor.Int, G.WithShape(b), G.WithName("targets"),
				G.WithValue(tensor.New(tensor.WithShape(b), tensor.WithBacking([]int{1, 2}))))
			loss, err := graph.CrossEntropy(logits, tg)
			if err != nil {
				t.Fatal(err)
			}
			names := p.Names()
			if !slices.Contains(names, "cls_token") {
				t.Fatalf("no cls_token among %v", names)
			}
			if info, _ := p.Info("cls_token"); info.Decay {
				t.Error("cls_token is weight-decayed")
			}
			if want := tc.pos == "learned-2d" && tc.clsPos == "with"; slices.Contains(names, "pos_emb_2d_cls") != want {
				t.Errorf("pos_emb_2d_cls among the parameters: %v, want %v", !want, want)
			}
			p.Randomize(rng, 0.5)
			wrt := append(m.Learnables(), in)
			if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{MaxPerNode: 12, Seed: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestViTClassToken: the class token changes the logits (the head reads
// it, not the mean of the patches); with vit-cls-pos without, learned-2d's
// table does not touch the class token, so permuting nothing but the
// class row has no effect, while with it does; mean pooling creates no
// class token (the default model is unchanged).
func TestViTClassToken(t *testing.T) {
	run := func(cfg layers.ViTConfig, set map[string][]float64) []float64 {
		t.Helper()
		g := G.NewGraph()
		p := graph.NewParams(tensor.Float64, 1)
		m, err := layers.NewViT(g, p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		const b, rows, cols = 2, 2, 3
		pd := m.Cfg.PatchDim()
		x := make([]float64, b*rows*cols*pd)
		rng := rand.New(rand.NewSource(9))
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, rows*cols, pd), G.WithName("patches"),
			G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, rows * cols, pd}, x)))
		logits, err := m.Fwd(in, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		for n, v := range set {
			if err := p.Set(n, v); err != nil {
				t.Fatal(err)
			}
		}
		if cfg.Encoder.ViTPool != layers.PoolCls && (m.Class != nil || slices.Contains(p.Names(), "cls_token")) {
			t.Fatalf("mean pooling created a class token: %v", p.Names())
		}
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return graph.ToFloat64s(logits.Value())
	}
	same := func(a, b []float64) bool { return slices.Equal(a, b) }
	d := 8
	row := func(v float64) []float64 { r := make([]float64, d); r[0], r[3] = v, -v; return r }
	def := classViT("learned-2d", "")
	def.Encoder.ViTPool = ""
	mean := def
	mean.Encoder.ViTPool = layers.PoolMean
	if !same(run(def, nil), run(mean, nil)) {
		t.Error("vit-pool mean and the default differ")
	}
	for _, clsPos := range []string{"with", "without"} {
		cfg := classViT("learned-2d", clsPos)
		a := run(cfg, map[string][]float64{"cls_token": row(0.3)})
		b := run(cfg, map[string][]float64{"cls_token": row(-0.7)})
		if same(a, b) {
			t.Errorf("%s: the class token does not change the logits", clsPos)
		}
	}
	with := classViT("learned-2d", "with")
	if a, b := run(with, map[string][]float64{"pos_emb_2d_cls": row(0.5)}), run(with, map[string][]float64{"pos_emb_2d_cls": row(-1)}); same(a, b) {
		t.Error("with: the class row does not change the logits")
	}
	// sinusoidal-2d: with and without are the same model (MAE's zero row)
	if a, b := run(classViT("sinusoidal-2d", "with"), nil), run(classViT("sinusoidal-2d", "without"), nil); !same(a, b) {
		t.Error("sinusoidal-2d: with and without differ")
	}
}

// TestViTClassErrors: the combinations without a rule for the class token
// are refused when the model is built, naming the combination; bad values
// and the class token on the other models too.
func TestViTClassErrors(t *testing.T) {
	for _, tc := range []struct {
		pos, clsPos, want string
	}{
		{"swin", "with", "vit: vit-pool cls with swin (vit-cls-pos with): its score bias acts inside attention"},
		{"swin-log", "without", "vit: vit-pool cls with swin-log (vit-cls-pos without): its score bias acts inside attention"},
		{"alibi-2d", "with", "alibi-2d (vit-cls-pos with): its score bias"},
		{"rope-2d", "without", "rope-2d (vit-cls-pos without): its rotation of q and k acts inside attention"},
		{"rope-mixed", "with", "rope-mixed (vit-cls-pos with): its rotation of q and k"},
		{"rope", "without", "vit: vit-pool cls with vit-cls-pos without and rope: its rotation of q and k acts inside attention"},
		{"t5", "without", "vit-cls-pos without and t5: its score bias"},
		{"cpe", "with", "vit: vit-pool cls with vit-cls-pos with and cpe: it has no position for the class token"},
		{"swin+learned-2d", "without", "swin+learned-2d (vit-cls-pos without): its score bias"},
	} {
		_, err := layers.NewViT(G.NewGraph(), graph.NewParams(tensor.Float64, 1), classViT(tc.pos, tc.clsPos))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want %q", tc.pos, tc.clsPos, err, tc.want)
		}
	}
	bad := []struct {
		mod  func(*layers.ViTConfig)
		want string
	}{
		{func(c *layers.ViTConfig) { c.Encoder.ViTPool = "max" }, `vit-pool "max" (valid: mean, cls)`},
		{func(c *layers.ViTConfig) { c.Encoder.ViTClassPos = "maybe" }, `vit-cls-pos "maybe" (valid: with, without)`},
		{func(c *layers.ViTConfig) { c.Encoder.ViTPool, c.Encoder.ViTClassPos = "", "without" }, "vit-cls-pos without needs vit-pool cls"},
	}
	for _, b := range bad {
		c := tinyViT("learned-2d")
		b.mod(&c)
		if _, err := layers.NewViT(G.NewGraph(), graph.NewParams(tensor.Float64, 1), c); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v, want %q", err, b.want)
		}
	}
	lm := layers.DefaultConfig()
	lm.ViTPool = layers.PoolCls
	if _, err := layers.NewLM(G.NewGraph(), graph.NewParams(tensor.Float64, 1), lm); err == nil || !strings.Contains(err.Error(), "lm: vit-pool \"cls\"") {
		t.Errorf("LM with a class token: %v", err)
	}
	gc := layers.DefaultGraphConfig(2)
	gc.Encoder.ViTClassPos = layers.ClassPosWithout
	if _, err := layers.NewGraphTransformer(G.NewGraph(), graph.NewParams(tensor.Float64, 1), gc); err == nil || !strings.Contains(err.Error(), "the graph transformer has no class token") {
		t.Errorf("graph transformer with vit-cls-pos without: %v", err)
	}
	r := layers.DefaultConfig().Resolved()
	if r.ViTPool != layers.PoolMean || r.ViTClassPos != layers.ClassPosWith {
		t.Errorf("resolved vit-pool %q, vit-cls-pos %q", r.ViTPool, r.ViTClassPos)
	}
}
