package optim

import (
	"math"
	"testing"

	"gorgonia.org/tensor"
)

// Two params with grads a = [1, 2] (float64) and b = [2, 4] (float32): total
// norm sqrt(1 + 4 + 4 + 16) = sqrt(25) = 5.
func clipParams() (a, b *tensor.Dense, ps []Param) {
	a, b = vec64(1, 2), vec32(2, 4)
	ps = []Param{
		{Name: "a", Value: vec64(0, 0), Grad: a},
		{Name: "b", Value: vec32(0, 0), Grad: b},
		{Name: "frozen", Value: vec64(7)}, // nil Grad: skipped
	}
	return a, b, ps
}

func TestClipGradNorm(t *testing.T) {
	cases := []struct {
		name    string
		maxNorm float64
		a, b    []float64 // grads after clipping
		tolB    float64
	}{
		// Below the threshold: coef = 10/(5+1e-6) > 1, untouched.
		{"below", 10, []float64{1, 2}, []float64{2, 4}, 0},
		// Above: coef = 1/(5+1e-6) = 0.19999996000000800, grads scaled by it:
		//	a = [0.19999996000000800, 0.39999992000001600]
		//	b = [0.39999992000001600, 0.79999984000003200] (then rounded to float32)
		{"above", 1, []float64{0.199999960000008, 0.399999920000016}, []float64{0.399999920000016, 0.799999840000032}, 3e-8},
		// Exactly at the threshold, PyTorch still scales, by
		// coef = 5/(5+1e-6) = 0.99999980000004:
		//	a = [0.99999980000004, 1.99999960000008]
		{"equal", 5, []float64{0.99999980000004, 1.99999960000008}, []float64{1.99999960000008, 3.99999920000016}, 3e-7},
		// maxNorm = 0 zeroes the gradients (coef = 0).
		{"zero", 0, []float64{0, 0}, []float64{0, 0}, 0},
	}
	for _, c := range cases {
		a, b, ps := clipParams()
		if got := ClipGradNorm(ps, c.maxNorm); got != 5 {
			t.Errorf("%s: ClipGradNorm = %v, want the pre-clip norm 5", c.name, got)
		}
		checkClose(t, c.name+": a", a.Data().([]float64), c.a, 1e-16)
		checkClose(t, c.name+": b", as64(b.Data().([]float32)), c.b, c.tolB)
		// The clipped norm is min(5, maxNorm·5/(5+1e-6)).
		want := math.Min(5, c.maxNorm*5/(5+1e-6))
		if got := GradNorm(ps); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: GradNorm after clipping = %v, want %v", c.name, got, want)
		}
	}
}

func TestClipGradNormNonFinite(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		a, b, ps := clipParams()
		a.Data().([]float64)[1] = bad
		got := ClipGradNorm(ps, 1)
		if !(math.IsNaN(got) || math.IsInf(got, 1)) {
			t.Errorf("grad %v: ClipGradNorm = %v, want NaN or +Inf", bad, got)
		}
		if math.IsNaN(bad) != math.IsNaN(got) {
			t.Errorf("grad %v: ClipGradNorm = %v", bad, got)
		}
		// Nothing is scaled.
		if x := a.Data().([]float64)[0]; x != 1 {
			t.Errorf("grad %v: a[0] = %v, want 1 (unscaled)", bad, x)
		}
		checkClose(t, "b", as64(b.Data().([]float32)), []float64{2, 4}, 0)
	}
}

func TestGradNormZeroGrad(t *testing.T) {
	a, b, ps := clipParams()
	if got := GradNorm(ps); got != 5 {
		t.Errorf("GradNorm = %v, want 5", got)
	}
	ZeroGrad(ps)
	if !allZero(a) || !allZero(b) {
		t.Errorf("ZeroGrad left %v, %v", a.Data(), b.Data())
	}
	if got := GradNorm(ps); got != 0 {
		t.Errorf("GradNorm after ZeroGrad = %v, want 0", got)
	}
	if got := GradNorm(nil); got != 0 {
		t.Errorf("GradNorm(nil) = %v", got)
	}
}

func TestClipGradNormPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	_, _, ps := clipParams()
	mustPanic("negative maxNorm", func() { ClipGradNorm(ps, -1) })
	mustPanic("NaN maxNorm", func() { ClipGradNorm(ps, math.NaN()) })
	ints := []Param{{Name: "i", Grad: tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))}}
	mustPanic("int grad: ClipGradNorm", func() { ClipGradNorm(ints, 1) })
	mustPanic("int grad: ZeroGrad", func() { ZeroGrad(ints) })
}
