package posenc_test

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// Two conventions of reference libraries that are options (issue #34):
// rope2d-axis-order (rope-2d: x-first, rope-vit's; y-first, timm's) and
// xpos-centre (xpos: ceil, torchscale's; floor, x-transformers').

// TestConventionOptions: each option is in the registry of options with
// its default, is read by its encoding only, and a bad value is refused by
// Validate and by the constructor with an error naming the option and the
// valid values; a value given is used.
func TestConventionOptions(t *testing.T) {
	d := posenc.Options{}.Defaults()
	if d.Rope2DAxisOrder != posenc.Rope2DXFirst || d.XPosCentre != posenc.XPosCentreCeil {
		t.Fatalf("defaults %q, %q; want x-first, ceil (the committed results' conventions)", d.Rope2DAxisOrder, d.XPosCentre)
	}
	for _, c := range []struct {
		option, enc, bad string
		valid            []string
		readers, not     []string
	}{
		{"rope2d-axis-order", posenc.Rope2DName, "z-first", []string{"x-first", "y-first"},
			[]string{posenc.Rope2DName}, []string{posenc.RopeMixedName, "rope", "xpos"}},
		{"xpos-centre", posenc.XPosName, "round", []string{"ceil", "floor"},
			[]string{posenc.XPosName}, []string{"rope", posenc.Rope2DName}},
	} {
		doc, ok := posenc.OptionDocOf(c.option)
		if !ok {
			t.Fatalf("%s: no OptionDoc", c.option)
		}
		for _, v := range c.valid {
			if !strings.Contains(doc.Range, v) || !strings.Contains(doc.Help, v) {
				t.Errorf("%s: range %q / help %q does not name %s", c.option, doc.Range, doc.Help, v)
			}
		}
		for _, r := range c.readers {
			if !slices.Contains(posenc.OptionsOf(r), c.option) {
				t.Errorf("OptionsOf(%s) = %v lacks %s", r, posenc.OptionsOf(r), c.option)
			}
		}
		for _, r := range c.not {
			if slices.Contains(posenc.OptionsOf(r), c.option) {
				t.Errorf("OptionsOf(%s) holds %s", r, c.option)
			}
		}
		o := posenc.Options{}.Resolve(128)
		if err := fields.Set(&o, c.option, c.bad); err != nil {
			t.Fatal(err)
		}
		wantErr := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), c.option) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%s %s=%s: error %v, want one naming the option and the value", what, c.option, c.bad, err)
				return
			}
			for _, v := range c.valid {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("%s %s=%s: error %q does not name the valid value %s", what, c.option, c.bad, err, v)
				}
			}
		}
		wantErr("Validate", o.Validate())
		_, err := posenc.New(c.enc, o)
		wantErr("New("+c.enc+")", err)
		if err := (posenc.Options{}).CheckGiven(128, []string{c.option}); err == nil || !strings.Contains(err.Error(), c.option) {
			t.Errorf("an explicit empty %s: CheckGiven = %v, want it refused", c.option, err)
		}
		for _, v := range c.valid {
			o := posenc.Options{}
			if err := fields.Set(&o, c.option, v); err != nil {
				t.Fatal(err)
			}
			if err := o.Resolve(128).Validate(); err != nil {
				t.Errorf("%s=%s: %v", c.option, v, err)
			}
			if err := o.CheckGiven(128, []string{c.option}); err != nil {
				t.Errorf("%s=%s given: %v", c.option, v, err)
			}
			if _, err := posenc.New(c.enc, o); err != nil {
				t.Errorf("%s=%s: %v", c.option, v, err)
			}
		}
	}
	r, err := posenc.NewRope2D(posenc.Options{Rope2DAxisOrder: posenc.Rope2DYFirst})
	if err != nil || !r.YFirst {
		t.Fatalf("rope-2d y-first: %+v, %v", r, err)
	}
	x, err := posenc.NewXPos(posenc.Options{XPosCentre: posenc.XPosCentreFloor})
	if err != nil || !x.FloorCentre {
		t.Fatalf("xpos floor: %+v, %v", x, err)
	}
}

// TestRope2DAxisOrder: with y-first, pair p < dh/4 turns by row·θ_p and
// pair dh/4+k by col·θ_k (timm's order): the x-first angles of the
// transposed coordinates, never those of the same ones off the diagonal;
// a grid of x-first and one of y-first rotate q and k differently.
func TestRope2DAxisOrder(t *testing.T) {
	cases := []struct {
		row, col, dh int
		base         float64
		want         []float64
	}{
		{2, 3, 8, 100, []float64{2, 0.2, 3, 0.3}},
		{1, 5, 4, 10, []float64{1, 5}},
		{4, 1, 12, 1000, []float64{4, 0.4, 0.04, 1, 0.1, 0.01}},
	}
	for _, c := range cases {
		cos, sin := posenc.Rope2DAxisAngles([]int{c.row, c.col}, c.dh, c.base, true)
		for p, a := range c.want {
			if math.Abs(cos[p]-math.Cos(a)) > 1e-14 || math.Abs(sin[p]-math.Sin(a)) > 1e-14 {
				t.Errorf("y-first (%d, %d) dh %d base %g: pair %d turns by atan2 = %v, want %v", c.row, c.col, c.dh, c.base, p, math.Atan2(sin[p], cos[p]), a)
			}
		}
		tc, ts := posenc.Rope2DAngles([]int{c.col, c.row}, c.dh, c.base)
		checkFloats(t, "y-first cos = x-first cos of (col, row)", cos, tc, 0)
		checkFloats(t, "y-first sin = x-first sin of (col, row)", sin, ts, 0)
		xc, _ := posenc.Rope2DAxisAngles([]int{c.row, c.col}, c.dh, c.base, false)
		if slices.Equal(xc, cos) {
			t.Errorf("(%d, %d): y-first and x-first give the same angles", c.row, c.col)
		}
	}
	pos, err := posenc.NewGrid(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	out := func(order string) []float64 {
		q2, _, _ := buildRope2D(t, newEnc(t, posenc.Rope2DName, posenc.Options{Rope2DAxisOrder: order}), pos, 1, 2, 8, tensor.Float64, randomValues(6), nil).run(t)
		return q2
	}
	if x, y := out(posenc.Rope2DXFirst), out(posenc.Rope2DYFirst); slices.Equal(x, y) {
		t.Fatal("rope-2d rotates q the same with either axis order")
	}
}

// TestRope2DYFirstGrad gradient-checks (float64, central differences)
// rope-2d y-first: TransformQK w.r.t. q and k at distinct query and key
// coordinates, the tiny ViT w.r.t. every parameter and the patches, and one
// attention layer on grid positions (with the shuffled-order check).
func TestRope2DYFirstGrad(t *testing.T) {
	o := harnessOptions()
	o.Rope2DAxisOrder = posenc.Rope2DYFirst
	rng := rand.New(rand.NewSource(12))
	pos, err := posenc.NewGridCoords([]int{4, 5}, randomCells(rng, 4, 5, 3), randomCells(rng, 4, 5, 6))
	if err != nil {
		t.Fatal(err)
	}
	r := buildRope2D(t, newEnc(t, posenc.Rope2DName, o), pos, 2, 2, 8, tensor.Float64, randomValues(13), nil)
	if err := graph.GradCheck(r.g, r.loss, r.wrt, graph.GradCheckOpts{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	checkGridGrad(t, posenc.Rope2DName, o, 3, 4)
	checkGridAttention(t, posenc.Rope2DName, o, 3, 4)
}

// TestXPosCentreFloor: with floor, the centre is floor(N/2)
// (x-transformers' max_pos // 2), one below ceil's for odd N; the scores
// are those of ceil (c cancels in q·k) while the rotated q and k are not.
func TestXPosCentreFloor(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 5: 2, 8: 4, 9: 4} {
		if got := posenc.XPosFloorCentre(n); got != want {
			t.Errorf("XPosFloorCentre(%d) = %d, want %d", n, got, want)
		}
	}
	const dh = 8
	for _, c := range []struct{ qStart, tq, kStart, tk int }{{0, 7, 0, 7}, {10, 1, 0, 11}, {9, 3, 4, 8}} {
		rng := rand.New(rand.NewSource(int64(c.tk)))
		qs, ks := make([][]float64, c.tq), make([][]float64, c.tk)
		for i := range qs {
			qs[i] = randVec(rng, dh)
		}
		for j := range ks {
			ks[j] = randVec(rng, dh)
		}
		o := posenc.Options{XPosScaleBase: 4, RopePairing: "interleaved"}
		ceil := newEnc(t, posenc.XPosName, o)
		o.XPosCentre = posenc.XPosCentreFloor
		floor := newEnc(t, posenc.XPosName, o)
		cq, ck := ropeRotate(t, ceil, qs, ks, c.qStart, c.kStart)
		fq, fk := ropeRotate(t, floor, qs, ks, c.qStart, c.kStart)
		// N = 7, 11, 12: the centres differ by one for the odd ones.
		n := max(c.qStart+c.tq, c.kStart+c.tk)
		zeta := posenc.XPosZeta(dh)
		pr := graph.RotaryInterleaved
		for i := range qs {
			for p := 0; p < dh/2; p++ {
				a, _ := pr.Pair(p, dh)
				// floor's query is ceil's times ζ_p^((ceil - floor)/γ).
				f := math.Pow(zeta[p], float64(posenc.XPosCentre(n)-posenc.XPosFloorCentre(n))/4)
				if want := cq[i][a] * f; math.Abs(fq[i][a]-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("span %+v query %d pair %d: floor %v, want ceil·ζ^(Δc/γ) = %v", c, i, p, fq[i][a], want)
				}
			}
			for j := range ks {
				if got, want := dot(fq[i], fk[j]), dot(cq[i], ck[j]); math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("span %+v score (%d, %d): floor %v, ceil %v", c, i, j, got, want)
				}
			}
		}
		if odd := n%2 == 1; odd == slices.EqualFunc(cq, fq, func(a, b []float64) bool { return slices.Equal(a, b) }) {
			t.Fatalf("span %+v (N = %d): floor and ceil rotate q the same: %v", c, n, !odd)
		}
	}
}

// TestXPosFloorGrad gradient-checks (float64, central differences) the
// tiny LM with xpos floor w.r.t. every parameter (causal, at offsets 0 and
// 3) and one attention layer in every causal shape, and checks its
// incremental decoding against the full computation.
func TestXPosFloorGrad(t *testing.T) {
	o := harnessOptions()
	o.XPosCentre = posenc.XPosCentreFloor
	o.XPosScaleBase = 8 // scales far enough from 1 that a wrong centre shows
	checkLMGrad(t, posenc.XPosName, o, true, 0)
	checkLMGrad(t, posenc.XPosName, o, true, 3)
	checkAttentionShapes(t, posenc.XPosName, o)
	checkDecode(t, posenc.XPosName, o)
}
