package visionstudy

import (
	"context"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// TestClassTokenVariants: the class token and timm's antialiased
// resampling reach the study as variants and the plan's resampling (the
// command's -resample): a tiny study of learned-2d with a class token with
// and without its row, evaluated on the larger grid with bicubic-aa, and a
// combination without a rule for the class token refused before anything
// runs.
func TestClassTokenVariants(t *testing.T) {
	data := t.TempDir()
	writeSynthMNIST(t, data, 32, 16)
	p := tinyPlan("learned-2d@vit-pool=cls", "learned-2d@vit-pool=cls@vit-cls-pos=without")
	p.MNIST, p.Resample = data, "bicubic-aa"
	p.Base.Steps, p.TestImages = 2, 16
	o, err := Run(context.Background(), p, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ enc, eval, status string }{
		{"learned-2d@vit-pool=cls", "", StatusOK},
		{"learned-2d@vit-pool=cls", "", StatusNA},
		{"learned-2d@vit-pool=cls", "resample=bicubic-aa", StatusOK},
		{"learned-2d@vit-pool=cls@vit-cls-pos=without", "", StatusOK},
		{"learned-2d@vit-pool=cls@vit-cls-pos=without", "", StatusNA},
		{"learned-2d@vit-pool=cls@vit-cls-pos=without", "resample=bicubic-aa", StatusOK},
	}
	if len(o.Rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(o.Rows), len(want), o.Rows)
	}
	for i, w := range want {
		r := o.Rows[i]
		if r.Encoding != w.enc || r.Eval != w.eval || r.Status != w.status {
			t.Errorf("row %d = %s [%s] %s, want %s [%s] %s", i, r.Encoding, r.Eval, r.Status, w.enc, w.eval, w.status)
		}
	}
	for _, c := range []struct{ enc, want string }{
		{"swin@vit-pool=cls", "vit-pool cls with swin (vit-cls-pos with)"},
		{"rope@vit-pool=cls@vit-cls-pos=without", "vit-cls-pos without and rope"},
		{"learned-2d@vit-cls-pos=without", "vit-cls-pos without needs vit-pool cls"},
		{"learned-2d@vit-pool=max", `vit-pool "max"`},
	} {
		q := tinyPlan(c.enc)
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.enc, err, c.want)
		}
	}
}

// TestSpecClassTokenCompatible: rows saved before vit-pool and vit-cls-pos
// existed (empty in their JSON) match a run at their defaults, so the
// committed results are reused; a class token does not match them.
func TestSpecClassTokenCompatible(t *testing.T) {
	p := tinyPlan("learned-2d")
	jobs, _ := p.Jobs()
	cfg, err := p.Config(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	now := spec{Config: cfg.Resolved(), Patch: 2}
	if now.Config.Model.ViTPool != "mean" || now.Config.Model.ViTClassPos != "with" {
		t.Fatalf("resolved vit-pool %q, vit-cls-pos %q", now.Config.Model.ViTPool, now.Config.Model.ViTClassPos)
	}
	old := now
	old.Config.Model.ViTPool, old.Config.Model.ViTClassPos = "", ""
	if !sameSpec(old, now) {
		t.Fatal("rows saved before the options existed do not match")
	}
	cls := now
	cls.Config.Model.ViTPool = "cls"
	if sameSpec(cls, now) {
		t.Fatal("a class token was not noticed")
	}
}

// TestAttentionMapsClassToken: with a class token (token 0), the map of a
// query patch is its row of the probabilities over the patches' columns,
// the class token's left out; without, the rows sum to 1.
func TestAttentionMapsClassToken(t *testing.T) {
	data := t.TempDir()
	writeSynthMNIST(t, data, 4, 4)
	_, ds, err := images.LoadMNIST(data)
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan("learned-2d")
	for _, pool := range []string{"mean", "cls"} {
		vit := layers.ViTConfig{Encoder: p.Base.Model, Channels: 1, Patch: 2, Classes: 10}
		vit.Encoder.Pos, vit.Encoder.ViTPool = "learned-2d", pool
		params := graph.NewParams(tensor.Float64, 1)
		const layer, qr, qc = 0, 1, 2
		maps, err := AttentionMaps(params, vit, ds, 1, layer, qr, qc)
		if err != nil {
			t.Fatal(err)
		}
		// the same model, its probabilities read directly
		g := G.NewGraph()
		m, err := layers.NewViT(g, params, vit)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 16*4)
		if _, _, err := images.PatchBatch(ds, []int{1}, 2, x); err != nil {
			t.Fatal(err)
		}
		images.MNISTNorm.Apply(x)
		xT := tensor.New(tensor.WithShape(1, 16, 4), tensor.Of(tensor.Float64))
		graph.CopyFloat32s(xT, x)
		if _, err := m.Fwd(G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 16, 4), G.WithName("x"), G.WithValue(xT)), 4, 4); err != nil {
			t.Fatal(err)
		}
		probs, err := run(g, m.Blocks[layer].Attn.Probs())
		if err != nil {
			t.Fatal(err)
		}
		off := map[string]int{"mean": 0, "cls": 1}[pool]
		n, q := 16+off, off+qr*4+qc
		for h, mp := range maps {
			sum := 0.0
			for j, v := range mp.Data {
				sum += v
				if want := probs[(h*n+q)*n+off+j]; v != want {
					t.Fatalf("%s head %d key %d: %v, want %v", pool, h, j, v, want)
				}
			}
			if pool == "mean" && math.Abs(sum-1) > 1e-12 || pool == "cls" && !(sum < 1) {
				t.Errorf("%s head %d: the map sums to %v", pool, h, sum)
			}
		}
	}
}
