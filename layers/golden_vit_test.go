package layers

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// TestGoldenViTClassToken matches the ViT with PyTorch references written
// from timm's VisionTransformer._pos_embed, global_pool_nlc and
// resample_abs_pos_embed (testdata/golden/gen_golden.py,
// generate_timm_vit; float64): the logits, the loss and the gradient of
// every parameter at 1e-9. Cases: a class token with learned-2d with and
// without its row (no_embed_class False and True) on the training grid
// and on other grids (timm's dynamic_img_size: the table resampled with
// bicubic antialiasing, its class row kept), mean pooling on a resampled
// grid, the 1-D learned table with the class token at position 0, MAE's
// zero row of sinusoidal-2d, CPE with the class token left out of the
// convolution (CPVT's PEG) and no encoding.
func TestGoldenViTClassToken(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(goldenDir, "vit-*.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 9 {
		t.Fatalf("%d vit-* golden cases, want 9 (regenerate with /usr/bin/python3 testdata/golden/gen_golden.py)", len(paths))
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".safetensors")
		t.Run(name, func(t *testing.T) {
			gf := readGolden(t, path)
			cfg := DefaultViTConfig()
			e := &cfg.Encoder
			e.DModel, e.Heads, e.Layers, e.FFN = gf.int(t, "d", 0), gf.int(t, "heads", 0), gf.int(t, "layers", 0), gf.int(t, "ff", 0)
			e.Pos, e.ViTPool, e.ViTClassPos = gf.meta["pos"], gf.meta["vit_pool"], gf.meta["vit_cls_pos"]
			o := &e.PosOpts
			o.GridRows, o.GridCols, o.GridResample = gf.int(t, "R", 0), gf.int(t, "C", 0), "bicubic-aa"
			o.MaxLen, o.SinusoidalScale, o.CPEKernel = gf.int(t, "max_len", 0), gf.float(t, "scale", 0), gf.int(t, "kernel", 0)
			cfg.Patch, cfg.Classes = gf.int(t, "patch", 0), gf.int(t, "classes", 0)
			b, rows, cols := gf.int(t, "B", 0), gf.int(t, "rows", 0), gf.int(t, "cols", 0)

			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			m, err := NewViT(g, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pd := cfg.PatchDim()
			in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(b, rows*cols, pd), G.WithName("patches"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{b, rows * cols, pd}, gf.floats["patches"])))
			logits, err := m.Fwd(in, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			labels := G.NewVector(g, tensor.Int, G.WithShape(b), G.WithName("labels"),
				G.WithValue(tensor.New(tensor.WithShape(b), tensor.WithBacking(gf.ints["labels"]))))
			loss, err := graph.CrossEntropy(logits, labels)
			if err != nil {
				t.Fatal(err)
			}
			// The Go model has exactly the reference's parameters.
			var want []string
			for k := range gf.floats {
				if _, ok := gf.floats["grad/"+k]; ok {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			got := p.Names()
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("parameters %v, the reference has %v", got, want)
			}
			for _, n := range want {
				if err := p.Set(n, gf.floats[n]); err != nil {
					t.Fatal(err)
				}
			}
			wrt := m.Learnables()
			grads, err := G.Grad(loss, wrt...)
			if err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			const tol = 1e-9
			near(t, "logits", graph.ToFloat64s(logits.Value()), gf.floats["logits"], tol)
			near(t, "loss", graph.ToFloat64s(loss.Value()), gf.floats["loss"], tol)
			for i, n := range wrt {
				near(t, "grad/"+n.Name(), graph.ToFloat64s(grads[i].Value()), gf.floats["grad/"+n.Name()], tol)
			}
		})
	}
}

// near fails unless got and want agree to tol·(1 + |want|) everywhere.
func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, the reference has %d", what, len(got), len(want))
	}
	for i := range got {
		d := got[i] - want[i]
		if d < 0 {
			d = -d
		}
		a := want[i]
		if a < 0 {
			a = -a
		}
		if !(d <= tol*(1+a)) {
			t.Fatalf("%s[%d] = %.15g, the reference %.15g (|diff| %.3g)", what, i, got[i], want[i], d)
		}
	}
}
