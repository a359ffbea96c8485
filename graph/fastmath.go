package graph

import (
	"math"
	"unsafe"
)

// Element functions of the kernels. In float64 they are the math package's
// (the gradient checks and the golden tests run in float64); in float32 they
// are branch-light polynomial approximations accurate to a few ulps, as
// PyTorch's vectorised kernels are, since math.Exp and math.Tanh in float64
// would otherwise dominate the softmax, cross-entropy and GELU kernels.

// isF32 reports whether T is float32 (a constant per instantiation).
func isF32[T float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// expT is e**x.
func expT[T float](x T) T {
	if isF32[T]() {
		return T(exp32(float32(x)))
	}
	return T(math.Exp(float64(x)))
}

// tanhT is tanh(x).
func tanhT[T float](x T) T {
	if isF32[T]() {
		return T(tanh32(float32(x)))
	}
	return T(math.Tanh(float64(x)))
}

// exp32 is e**x in float32 (Cephes expf: x = n ln2 + r, |r| <= ln2/2, a
// degree-6 polynomial for e**r, then scaling by 2**n), within 2 ulps of the
// correctly rounded result for normal results. It returns 0 below
// -87.33 (no subnormals), +Inf above 88.72 and NaN for NaN.
func exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	switch {
	case x != x:
		return x
	case x > 88.7228391:
		return float32(math.Inf(1))
	case x < -87.3365448:
		return 0
	}
	fx := x*log2e + 0.5
	n := int32(fx)
	if float32(n) > fx { // floor
		n--
	}
	fn := float32(n)
	x = x - fn*c1 - fn*c2
	z := x * x
	y := ((((1.9875691500e-4*x+1.3981999507e-3)*x+8.3334519073e-3)*x+4.1665795894e-2)*x+1.6666665459e-1)*x + 5.0000001201e-1
	y = y*z + x + 1
	// n is in [-126, 128]: 2**n in two steps when n = 128.
	if n > 127 {
		return y * 2 * math.Float32frombits(uint32(n-1+127)<<23)
	}
	return y * math.Float32frombits(uint32(n+127)<<23)
}

// tanh32 is tanh(x) in float32: Eigen's rational approximation (degree 13
// over degree 6), within a few ulps, exactly ±1 beyond |x| = 7.9053, x
// itself below |x| = 0.0004, NaN for NaN.
func tanh32(x float32) float32 {
	const (
		a1    = 4.89352455891786e-03
		a3    = 6.37261928875436e-04
		a5    = 1.48572235717979e-05
		a7    = 5.12229709037114e-08
		a9    = -8.60467152213735e-11
		a11   = 2.00018790482477e-13
		a13   = -2.76076847742355e-16
		b0    = 4.89352518554385e-03
		b2    = 2.26843463243900e-03
		b4    = 1.18534705686654e-04
		b6    = 1.19825839466702e-06
		clamp = 7.90531110763549805
	)
	if x > clamp {
		return 1
	}
	if x < -clamp {
		return -1
	}
	if x < 0.0004 && x > -0.0004 {
		return x
	}
	x2 := x * x
	p := x2*a13 + a11
	p = x2*p + a9
	p = x2*p + a7
	p = x2*p + a5
	p = x2*p + a3
	p = x2*p + a1
	p = x * p
	q := x2*b6 + b4
	q = x2*q + b2
	q = x2*q + b0
	return p / q
}
