package graph

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// relErr is |got-want| / max(|want|, tiny), 0 when both are equal (also for
// infinities) and +Inf when exactly one is NaN.
func relErr(got, want float64) float64 {
	if got == want || (math.IsNaN(got) && math.IsNaN(want)) {
		return 0
	}
	if math.IsNaN(got) || math.IsNaN(want) || math.IsInf(got, 0) || math.IsInf(want, 0) {
		return math.Inf(1)
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-30)
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for x := -87.0; x <= 88.5; x += 0.0137 {
		if e := relErr(float64(exp32(float32(x))), math.Exp(float64(float32(x)))); e > worst {
			worst = e
		}
	}
	if worst > 3e-7 { // about 2.5 float32 ulps
		t.Errorf("exp32: worst relative error %g", worst)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {-100, 0}, {100, float32(math.Inf(1))}, {float32(math.Inf(-1)), 0}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if v := exp32(float32(math.NaN())); v == v {
		t.Errorf("exp32(NaN) = %v", v)
	}
}

func TestTanh32(t *testing.T) {
	worst := 0.0
	for x := -10.0; x <= 10; x += 0.00731 {
		xf := float32(x)
		if e := math.Abs(float64(tanh32(xf)) - math.Tanh(float64(xf))); e > worst {
			worst = e
		}
	}
	if worst > 3e-7 {
		t.Errorf("tanh32: worst absolute error %g", worst)
	}
	if tanh32(20) != 1 || tanh32(-20) != -1 || tanh32(0) != 0 {
		t.Error("tanh32 limits")
	}
}

// randSpecial returns n float32 values N(0, std²) with, if special, NaN,
// ±Inf and large values at a few positions.
func randSpecial(rng *rand.Rand, n int, std float64, special bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * std)
	}
	if special && n > 6 {
		x[1], x[3], x[5] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	}
	return x
}

func checkKernel(t *testing.T, what string, got, want []float32, tol float64, atols ...float64) {
	t.Helper()
	// FMA (C) and separate multiply-adds (Go) round differently: results
	// that cancel (gelu' for large |x|, centred LayerNorm sums) differ by
	// some float32 ulps of their terms, hence the absolute tolerance.
	atol := 4e-6
	if len(atols) > 0 {
		atol = atols[0]
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if relErr(g, w) > tol && math.Abs(g-w) > atol {
			t.Fatalf("%s: element %d = %v, want %v (kernels %s)", what, i, g, w, k32.name)
		}
	}
}

// TestKernels32 compares the kernels in use (C/AVX2 in the default build on
// an AVX2 CPU) with the Go ones, on lengths with and without vector tails.
func TestKernels32(t *testing.T) {
	t.Logf("float32 kernels: %s", Kernels())
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1, 7, 8, 13, 64, 67} {
		x := randSpecial(rng, n, 3, true)
		dy := randSpecial(rng, n, 1, false)
		a, b := make([]float32, n), make([]float32, n)
		k32.geluFwd(a, x)
		goKernels32.geluFwd(b, x)
		checkKernel(t, fmt.Sprintf("gelu n=%d", n), a, b, 2e-6)
		k32.geluBwd(a, x, dy)
		goKernels32.geluBwd(b, x, dy)
		// 1 - tanh² cancels for large |x|: one ulp of tanh is amplified
		checkKernel(t, fmt.Sprintf("gelu' n=%d", n), a, b, 2e-6, 3e-5)

		const rows = 3
		m := randSpecial(rng, rows*n, 2, false)
		shift := []float32{0.5, -1, 2}
		a, b = make([]float32, rows*n), make([]float32, rows*n)
		k32.expScaleRows(a, m, n, shift, 0.25)
		goKernels32.expScaleRows(b, m, n, shift, 0.25)
		checkKernel(t, fmt.Sprintf("expScaleRows n=%d", n), a, b, 2e-6)
		sa, sb := make([]float32, rows), make([]float32, rows)
		k32.expSumRows(m, n, shift, sa)
		goKernels32.expSumRows(m, n, shift, sb)
		checkKernel(t, fmt.Sprintf("expSumRows n=%d", n), sa, sb, 1e-5)

		// softmax: row 1 has a blocked (-Inf) entry, row 2 is fully blocked
		sm := append([]float32(nil), m...)
		sm[n] = float32(math.Inf(-1))
		mx := make([]float32, rows)
		for r := 0; r < rows; r++ {
			mx[r] = float32(math.Inf(-1))
			for _, v := range sm[r*n : (r+1)*n] {
				mx[r] = max(mx[r], v)
			}
			if math.IsInf(float64(mx[r]), -1) {
				mx[r] = 0 // fully blocked, as maskRow returns
			}
		}
		for j := 2 * n; j < 3*n; j++ {
			sm[j] = float32(math.Inf(-1))
		}
		mx[2] = 0
		a, b = append([]float32(nil), sm...), append([]float32(nil), sm...)
		k32.softmaxRows(a, n, mx)
		goKernels32.softmaxRows(b, n, mx)
		checkKernel(t, fmt.Sprintf("softmaxRows n=%d", n), a, b, 1e-5)
		if a[n] != 0 || a[2*n] != 0 {
			t.Fatalf("softmaxRows n=%d: blocked entries %v, %v", n, a[n], a[2*n])
		}

		p := append([]float32(nil), a...)
		d := randSpecial(rng, rows*n, 1, false)
		d[n] = float32(math.NaN()) // where p = 0: ignored
		ga, gb := make([]float32, rows*n), make([]float32, rows*n)
		k32.softmaxGrad(ga, p, d, n)
		goKernels32.softmaxGrad(gb, p, d, n)
		checkKernel(t, fmt.Sprintf("softmaxGrad n=%d", n), ga, gb, 1e-4)

		gm, bt := randSpecial(rng, n, 1, false), randSpecial(rng, n, 1, false)
		xs := randSpecial(rng, rows*n, 2, false)
		a, b = make([]float32, rows*n), make([]float32, rows*n)
		k32.layerNorm(a, xs, gm, bt, 1e-5)
		goKernels32.layerNorm(b, xs, gm, bt, 1e-5)
		checkKernel(t, fmt.Sprintf("layerNorm n=%d", n), a, b, 1e-4)
		dga, dba, dgb, dbb := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		k32.layerNormGrad(a, xs, gm, d, 1e-5, dga, dba)
		goKernels32.layerNormGrad(b, xs, gm, d, 1e-5, dgb, dbb)
		if n > 1 {
			checkKernel(t, fmt.Sprintf("layerNormGrad n=%d", n), a, b, 1e-3)
		}
		checkKernel(t, fmt.Sprintf("layerNorm dgamma n=%d", n), dga, dgb, 1e-4)
		checkKernel(t, fmt.Sprintf("layerNorm dbeta n=%d", n), dba, dbb, 1e-5)

		ca, cb := make([]float32, n), make([]float32, n)
		k32.colSums(ca, xs)
		goKernels32.colSums(cb, xs)
		checkKernel(t, fmt.Sprintf("colSums n=%d", n), ca, cb, 1e-6)

		// rotary: rows of n with half = n/2 (and one dimension left over
		// when n is odd), tables of 2 rows, rows 1..2 of 3; bit for bit
		if half := n / 2; half > 0 {
			cs, sn := randSpecial(rng, 2*half, 1, false), randSpecial(rng, 2*half, 1, false)
			a, b = make([]float32, rows*n), make([]float32, rows*n)
			k32.rotaryHalf(a, xs, n, half, 2, 1, rows, cs, sn)
			goKernels32.rotaryHalf(b, xs, n, half, 2, 1, rows, cs, sn)
			checkKernel(t, fmt.Sprintf("rotaryHalf n=%d", n), a, b, 0, 0)
		}
	}
}

// TestFloat32MatchesFloat64 runs the ops with float32 kernels (LayerNorm,
// GELU, MaskedSoftmax, CrossEntropy, the bias reduction) in float32 and
// float64 on the same data and compares values and gradients.
func TestFloat32MatchesFloat64(t *testing.T) {
	build := func(dt tensor.Dtype) ([][]float64, [][]float64) {
		rng := rand.New(rand.NewSource(17))
		g := G.NewGraph()
		x := input(g, "x", randDense(rng, dt, 1, 3, 5, 12))
		gm := input(g, "gamma", randDense(rng, dt, 1, 12))
		bt := input(g, "beta", randDense(rng, dt, 1, 12))
		w := input(g, "w", randDense(rng, dt, 0.5, 12, 20))
		bb := input(g, "b", randDense(rng, dt, 1, 20))
		h := must(t)(LayerNorm(x, gm, bt, 1e-5))
		h = must(t)(GELU(must(t)(Linear(h, w, bb)))) // [3, 5, 20]
		s := must(t)(MaskedSoftmax(must(t)(Reshape(h, 3, 1, 5, 20)), input(g, "mask", fromFloat64(dt, tensor.Shape{1, 1, 5, 20}, causalish(5, 20)))))
		logits := must(t)(Reshape(must(t)(BroadcastAdd(h, must(t)(Reshape(s, 3, 5, 20)))), 15, 20))
		tg := make([]int, 15)
		for i := range tg {
			tg[i] = (i * 7) % 20
		}
		tg[4] = -1
		loss := must(t)(CrossEntropy(logits, intInput(g, "targets", tg, 15)))
		return gradsOf(t, g, loss, G.Nodes{loss, h, s}, G.Nodes{x, gm, bt, w, bb})
	}
	v64, g64 := build(tensor.Float64)
	v32, g32 := build(tensor.Float32)
	compareAll(t, "float32 vs float64 values", v32, v64, 2e-6, 2e-5)
	compareAll(t, "float32 vs float64 grads", g32, g64, 2e-6, 2e-4)
}

// causalish is a [tq, tk] mask allowing keys j <= 3i (row 0 sees one key).
func causalish(tq, tk int) []float64 {
	m := make([]float64, tq*tk)
	for i := 0; i < tq; i++ {
		for j := 0; j <= 3*i && j < tk; j++ {
			m[i*tk+j] = 1
		}
	}
	return m
}
