package optim

import (
	"math"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// Two AdamW steps on p = [1, -2] with lr = 0.01, β1 = 0.9, β2 = 0.999,
// ε = 1e-8, gradients g1 = [0.5, -1] then g2 = [-0.25, 2]. Reference values
// were computed by hand, the divisions and square roots with a 40-digit
// decimal calculator.
//
// Step 1 (t = 1), bias corrections 1-β1 = 0.1, 1-β2 = 0.001:
//
//	m1 = 0.1·g1 = [0.05, -0.1]            v1 = 0.001·g1² = [0.00025, 0.001]
//	m̂ = m1/0.1 = [0.5, -1]                v̂ = v1/0.001 = [0.25, 1], √v̂ = [0.5, 1]
//	update u1 = lr·m̂/(√v̂+ε) = [0.01·0.5/0.50000001, -0.01/1.00000001]
//	          = [0.0099999998000000040, -0.0099999999000000010]
//
// Step 2 (t = 2), bias corrections 1-β1² = 0.19, 1-β2² = 0.001999:
//
//	m2 = 0.9·m1 + 0.1·g2 = [0.045-0.025, -0.09+0.2] = [0.02, 0.11]
//	v2 = 0.999·v1 + 0.001·g2² = [0.00024975+0.0000625, 0.000999+0.004]
//	   = [0.00031225, 0.004999]
//	m̂ = [0.02/0.19, 0.11/0.19] = [0.10526315789473684, 0.57894736842105263]
//	v̂ = [0.00031225/0.001999, 0.004999/0.001999]
//	   = [0.15620310155077539, 2.5007503751875938]
//	√v̂ = [0.39522538070166418, 1.5813761017504956]
//	u2 = lr·m̂/(√v̂+ε) = [0.0026633703292153797, 0.0036610352472075098]
var adamwCases = []struct {
	name    string
	wd      float64
	noDecay bool
	p1, p2  []float64
}{
	{
		// No decay: p1 = p0 - u1, p2 = p1 - u2.
		//	p1 = [1-0.0099999998000000040, -2+0.0099999999000000010]
		//	p2 = [0.9900000002 - 0.0026633703292153797, -1.9900000001 - 0.0036610352472075098]
		name: "wd=0",
		wd:   0,
		p1:   []float64{0.990000000199999996, -1.990000000099999999},
		p2:   []float64{0.987336629870784616, -1.993661035347207509},
	},
	{
		// Decoupled decay λ = 0.1: p ← (1 - lr·λ)·p = 0.999·p before each update.
		//	p1 = [0.999 - 0.0099999998000000040, -1.998 + 0.0099999999000000010]
		//	   = [0.9890000002, -1.9880000001]
		//	0.999·p1 = [0.98801100019979999600, -1.98601200009989999900]
		//	p2 = [0.98801100019979999600 - 0.0026633703292153797,
		//	      -1.98601200009989999900 - 0.0036610352472075098]
		name: "wd=0.1",
		wd:   0.1,
		p1:   []float64{0.989000000199999996, -1.988000000099999999},
		p2:   []float64{0.985347629870584616, -1.989673035347107509},
	},
	{
		// NoDecay: same as wd=0 although WeightDecay = 0.1.
		name:    "wd=0.1,NoDecay",
		wd:      0.1,
		noDecay: true,
		p1:      []float64{0.990000000199999996, -1.990000000099999999},
		p2:      []float64{0.987336629870784616, -1.993661035347207509},
	},
}

func TestAdamWTwoSteps(t *testing.T) {
	for _, c := range adamwCases {
		t.Run(c.name, func(t *testing.T) {
			opt := NewAdamW(0.01, 0.9, 0.999, 1e-8, c.wd)
			p, g := vec64(1, -2), vec64(0.5, -1)
			ps := []Param{{Name: "w", Value: p, Grad: g, NoDecay: c.noDecay}}

			if err := opt.Step(ps); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "p1", p.Data().([]float64), c.p1, 1e-15)
			if !allZero(g) {
				t.Errorf("grad not zeroed after Step: %v", g.Data())
			}
			st := opt.State()
			checkClose(t, "exp_avg", st["exp_avg/w"], []float64{0.05, -0.1}, 1e-16)
			checkClose(t, "exp_avg_sq", st["exp_avg_sq/w"], []float64{0.00025, 0.001}, 4e-18)
			checkClose(t, "step", st["step/w"], []float64{1}, 0)

			set64(g, -0.25, 2)
			if err := opt.Step(ps); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "p2", p.Data().([]float64), c.p2, 1e-15)
			st = opt.State()
			checkClose(t, "exp_avg", st["exp_avg/w"], []float64{0.02, 0.11}, 1e-16)
			checkClose(t, "exp_avg_sq", st["exp_avg_sq/w"], []float64{0.00031225, 0.004999}, 1e-17)
			checkClose(t, "step", st["step/w"], []float64{2}, 0)
		})
	}
}

// The same two steps on float32 tensors. Arithmetic is float64 and values are
// rounded to float32 once per step, so after step 1 p equals float32 of the
// exact value; step 2 starts from that rounded value, hence a tolerance of a
// few float32 ulps (1.2e-7 near 1). The moments stay float64: m2 = [0.02, 0.11]
// to float64 precision (float32 moments would be off by ~1e-9).
func TestAdamWFloat32(t *testing.T) {
	for _, c := range adamwCases {
		t.Run(c.name, func(t *testing.T) {
			opt := NewAdamW(0.01, 0.9, 0.999, 1e-8, c.wd)
			p, g := vec32(1, -2), vec32(0.5, -1)
			ps := []Param{{Name: "w", Value: p, Grad: g, NoDecay: c.noDecay}}
			if err := opt.Step(ps); err != nil {
				t.Fatal(err)
			}
			got := p.Data().([]float32)
			for i := range got {
				if want := float32(c.p1[i]); got[i] != want {
					t.Errorf("p1[%d] = %.9g, want float32(%.17g) = %.9g", i, got[i], c.p1[i], want)
				}
			}
			if !allZero(g) {
				t.Errorf("grad not zeroed after Step: %v", g.Data())
			}
			set32(g, -0.25, 2)
			if err := opt.Step(ps); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "p2", as64(p.Data().([]float32)), c.p2, 3e-7)
			checkClose(t, "exp_avg", opt.State()["exp_avg/w"], []float64{0.02, 0.11}, 1e-16)
		})
	}
}

// Each parameter has its own step count (as in PyTorch): a parameter first
// updated at the second Step gets the bias correction of t = 1, so its first
// update is lr·g/(|g|+ε) = 0.01·1/(1+1e-8) = 0.0099999999, not the tiny
// update that t = 2 would give.
func TestAdamWPerParamStep(t *testing.T) {
	opt := NewAdamW(0.01, 0.9, 0.999, 1e-8, 0)
	a, ga := vec64(0), vec64(1)
	if err := opt.Step([]Param{{Name: "a", Value: a, Grad: ga}}); err != nil {
		t.Fatal(err)
	}
	b, gb := vec64(0), vec64(1)
	set64(ga, 1)
	if err := opt.Step([]Param{{Name: "a", Value: a, Grad: ga}, {Name: "b", Value: b, Grad: gb}}); err != nil {
		t.Fatal(err)
	}
	// b: 0 - 0.01/(1+1e-8)
	checkClose(t, "b", b.Data().([]float64), []float64{-0.0099999999000000010}, 1e-17)
	// a: two identical gradients 1: m̂ = v̂ = 1 at both steps, so a = -2·0.0099999999.
	checkClose(t, "a", a.Data().([]float64), []float64{-0.019999999800000002}, 1e-16)
	st := opt.State()
	if st["step/a"][0] != 2 || st["step/b"][0] != 1 {
		t.Errorf("steps = %v, %v; want 2, 1", st["step/a"], st["step/b"])
	}
}

// A 0-d (scalar) Dense, whose Data() is not a slice, is updated in place.
func TestAdamWScalarParam(t *testing.T) {
	p := tensor.New(tensor.FromScalar(1.0))
	g := tensor.New(tensor.FromScalar(0.5))
	opt := NewAdamW(0.01, 0.9, 0.999, 1e-8, 0)
	if err := opt.Step([]Param{{Name: "s", Value: p, Grad: g}}); err != nil {
		t.Fatal(err)
	}
	// 1 - 0.01·0.5/(0.5+1e-8)
	if got, want := p.ScalarValue().(float64), 0.990000000199999996; math.Abs(got-want) > 1e-15 {
		t.Errorf("p = %.17g, want %.17g", got, want)
	}
	if g.ScalarValue().(float64) != 0 {
		t.Errorf("grad not zeroed: %v", g.ScalarValue())
	}
}

// Step validates everything before modifying anything, and names the param.
func TestStepErrors(t *testing.T) {
	transposed := func() tensor.Tensor {
		d := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
		if err := d.T(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	mat := func(r, c int) tensor.Tensor {
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(make([]float64, r*c)))
	}
	ints := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))
	cases := []struct {
		name string
		bad  Param
		want []string // substrings of the error
	}{
		{"shape", Param{Name: "bad", Value: vec64(1, 2), Grad: vec64(1, 2, 3)}, []string{`"bad"`, "shape"}},
		{"same size, other shape", Param{Name: "bad", Value: mat(2, 3), Grad: mat(3, 2)}, []string{`"bad"`, "(2, 3)", "(3, 2)"}},
		{"dtype", Param{Name: "bad", Value: vec64(1, 2), Grad: vec32(1, 2)}, []string{`"bad"`, "dtype"}},
		{"int dtype", Param{Name: "bad", Value: ints, Grad: ints.Clone().(*tensor.Dense)}, []string{`"bad"`, "int"}},
		{"nil value", Param{Name: "bad", Grad: vec64(1)}, []string{`"bad"`, "nil Value"}},
		{"nil grad", Param{Name: "bad", Value: vec64(1)}, []string{`"bad"`, "nil Grad"}},
		{"transposed", Param{Name: "bad", Value: transposed(), Grad: mat(3, 2)}, []string{`"bad"`, "non-contiguous"}},
		{"duplicate", Param{Name: "ok", Value: vec64(1), Grad: vec64(1)}, []string{`"ok"`, "duplicated"}},
		{"empty name", Param{Value: vec64(1), Grad: vec64(1)}, []string{"param 1", "empty name"}},
	}
	for _, c := range cases {
		for _, opt := range []Optimizer{NewAdamW(0.1, 0.9, 0.999, 1e-8, 0.1), NewSGD(0.1, 0.9, 0.1)} {
			p, g := vec64(1, 2), vec64(3, 4)
			ps := []Param{{Name: "ok", Value: p, Grad: g}, c.bad}
			err := opt.Step(ps)
			if err == nil {
				t.Errorf("%s, %T: no error", c.name, opt)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s, %T: error %q does not contain %q", c.name, opt, err, w)
				}
			}
			checkClose(t, c.name+": value modified", p.Data().([]float64), []float64{1, 2}, 0)
			checkClose(t, c.name+": grad modified", g.Data().([]float64), []float64{3, 4}, 0)
			if st := opt.State(); len(st) != 1 {
				t.Errorf("%s, %T: state created despite the error: %v", c.name, opt, st)
			}
		}
	}
}

func TestHyperparameterErrors(t *testing.T) {
	cases := []struct {
		opt  Optimizer
		want string
	}{
		{NewAdamW(-1, 0.9, 0.999, 1e-8, 0), "lr"},
		{NewAdamW(math.NaN(), 0.9, 0.999, 1e-8, 0), "lr"},
		{NewAdamW(0.1, 1, 0.999, 1e-8, 0), "Beta1"},
		{NewAdamW(0.1, 0.9, -0.1, 1e-8, 0), "Beta2"},
		{NewAdamW(0.1, 0.9, 0.999, math.Inf(1), 0), "Eps"},
		{NewAdamW(0.1, 0.9, 0.999, 1e-8, -0.01), "WeightDecay"},
		{NewSGD(-0.1, 0.9, 0), "lr"},
		{NewSGD(0.1, -0.9, 0), "Momentum"},
		{NewSGD(0.1, 0.9, math.NaN()), "WeightDecay"},
	}
	for _, c := range cases {
		p, g := vec64(1), vec64(1)
		err := c.opt.Step([]Param{{Name: "w", Value: p, Grad: g}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: error %v, want one naming %s", c.opt, err, c.want)
		}
		if p.Data().([]float64)[0] != 1 || g.Data().([]float64)[0] != 1 {
			t.Errorf("%T: modified despite the error", c.opt)
		}
	}
	// The zero values do not panic (their all-zero hyperparameters are valid).
	var z AdamW
	if err := z.Step([]Param{{Name: "w", Value: vec64(1), Grad: vec64(1)}}); err != nil {
		t.Errorf("zero AdamW: %v", err)
	}
	var zs SGD
	if err := zs.Step([]Param{{Name: "w", Value: vec64(1), Grad: vec64(1)}}); err != nil {
		t.Errorf("zero SGD: %v", err)
	}
}
