package graph

import "math"

// Vectorisable float32 kernels of the hot elementwise ops. These are the
// pure-Go versions; the default cgo build replaces them, on CPUs with AVX2
// and FMA, by C versions compiled with AVX2 intrinsics (kernels_cgo.go), as
// PyTorch's own kernels are vectorised. Both follow the same formulas
// (exp32, tanh32) and agree to a few ulps.

// kernels32 is the set of float32 kernels in use.
type kernels32 struct {
	name string
	// geluFwd sets y[i] = gelu(x[i]) (tanh form).
	geluFwd func(y, x []float32)
	// geluBwd sets dx[i] = dy[i] * gelu'(x[i]).
	geluBwd func(dx, x, dy []float32)
	// softmaxRows replaces each row r of x ([rows, n]) by
	// exp(x - rowMax[r]) / sum(exp(x - rowMax[r])); a row whose sum is 0
	// is left all zeros. Blocked entries must hold -Inf.
	softmaxRows func(x []float32, n int, rowMax []float32)
	// expSumRows sets sums[r] = sum_j exp(x[r*n+j] - shift[r]).
	expSumRows func(x []float32, n int, shift, sums []float32)
	// expScaleRows sets y[r*n+j] = exp(x[r*n+j] - shift[r]) * scale.
	expScaleRows func(y, x []float32, n int, shift []float32, scale float32)
	// softmaxGrad sets dx = y * (dy - sum_j y_j dy_j) per row of n, 0
	// where y = 0 (whatever dy holds there).
	softmaxGrad func(dx, y, dy []float32, n int)
	// layerNorm sets y = (x - mean) / sqrt(var + eps) * gamma + beta per
	// row of len(gamma).
	layerNorm func(y, x, gamma, beta []float32, eps float32)
	// layerNormGrad sets dx per row (the LayerNorm gradient) and adds
	// dy * xhat to dgamma and dy to dbeta.
	layerNormGrad func(dx, x, gamma, dy []float32, eps float32, dgamma, dbeta []float32)
	// colSums adds the rows of x ([., len(acc)]) to acc.
	colSums func(acc, x []float32)
	// The streaming attention's tile loops (stream_kernels.go):
	// gatherAddRows, scatterAddRows, scatterAddF64, maskMaxRows and
	// dsRows, bit for bit the same in both sets.
	gatherAddRows  func(dst []float32, n int, idx []int, src []float32, d tileAddr)
	scatterAddRows func(dst []float32, n int, idx []int, src []float32, d tileAddr)
	scatterAddF64  func(acc []float64, idx []int, src []float32)
	maskMaxRows    func(s []float32, n int, causal bool, first int, rowMax []float32)
	dsRows         func(dp, p []float32, n int, d []float32)
	// rotaryHalf rotates rows lo..hi-1 of x ([rows, d]) into y, pairing
	// dimension p with p+half (RotaryHalf): row r uses row r%tt of the
	// tables cs and sn ([tt, half]), dimensions from 2*half on are
	// copied. Bit for bit the same in both sets (no fused multiply-add),
	// so that a run does not depend on the CPU.
	rotaryHalf func(y, x []float32, d, half, tt, lo, hi int, cs, sn []float32)
}

// k32 is the kernel set of this build and CPU.
var k32 = &goKernels32

var goKernels32 = kernels32{
	name: "Go",
	geluFwd: func(y, x []float32) {
		y = y[:len(x)]
		for i, v := range x {
			y[i] = gelu32(v)
		}
	},
	geluBwd: func(dx, x, dy []float32) {
		dx, dy = dx[:len(x)], dy[:len(x)]
		for i, v := range x {
			dx[i] = dy[i] * geluDeriv32(v)
		}
	},
	softmaxRows: func(x []float32, n int, rowMax []float32) {
		for r, m := range rowMax {
			row := x[r*n : (r+1)*n]
			var s float32
			for j, v := range row {
				e := exp32(v - m)
				row[j] = e
				s += e
			}
			if s != 0 {
				inv := 1 / s
				for j := range row {
					row[j] *= inv
				}
			}
		}
	},
	expSumRows: func(x []float32, n int, shift, sums []float32) {
		for r, m := range shift {
			var s float32
			for _, v := range x[r*n : (r+1)*n] {
				s += exp32(v - m)
			}
			sums[r] = s
		}
	},
	expScaleRows: func(y, x []float32, n int, shift []float32, scale float32) {
		for r, m := range shift {
			yr := y[r*n : (r+1)*n]
			for j, v := range x[r*n : (r+1)*n] {
				yr[j] = exp32(v-m) * scale
			}
		}
	},
}

func init() {
	goKernels32.softmaxGrad = func(dx, y, dy []float32, n int) {
		for r := 0; r+n <= len(y); r += n {
			yr, dyr, dxr := y[r:r+n], dy[r:r+n], dx[r:r+n]
			var s float32
			for j, p := range yr {
				if p != 0 {
					s += p * dyr[j]
				}
			}
			for j, p := range yr {
				if p != 0 {
					dxr[j] = p * (dyr[j] - s)
				} else {
					dxr[j] = 0
				}
			}
		}
	}
	goKernels32.layerNorm = func(y, x, gamma, beta []float32, eps float32) {
		d := len(gamma)
		for r := 0; r+d <= len(x); r += d {
			mean, rstd := rowStats32(x[r:r+d], eps)
			for j, v := range x[r : r+d] {
				y[r+j] = (v-mean)*rstd*gamma[j] + beta[j]
			}
		}
	}
	goKernels32.layerNormGrad = func(dx, x, gamma, dy []float32, eps float32, dgamma, dbeta []float32) {
		d := len(gamma)
		for r := 0; r+d <= len(x); r += d {
			mean, rstd := rowStats32(x[r:r+d], eps)
			var mg, mgx float32
			for j := 0; j < d; j++ {
				g := dy[r+j] * gamma[j]
				xh := (x[r+j] - mean) * rstd
				mg += g
				mgx += g * xh
				dgamma[j] += dy[r+j] * xh
				dbeta[j] += dy[r+j]
			}
			mg /= float32(d)
			mgx /= float32(d)
			for j := 0; j < d; j++ {
				g := dy[r+j] * gamma[j]
				xh := (x[r+j] - mean) * rstd
				dx[r+j] = rstd * (g - mg - xh*mgx)
			}
		}
	}
	goKernels32.gatherAddRows = gatherAddRowsGo[float32]
	goKernels32.scatterAddRows = scatterAddRowsGo[float32]
	goKernels32.scatterAddF64 = scatterAddF64Go[float32]
	goKernels32.maskMaxRows = maskMaxRowsGo[float32]
	goKernels32.dsRows = dsRowsGo[float32]
	goKernels32.rotaryHalf = rotaryHalfGo[float32]
	goKernels32.colSums = func(acc, x []float32) {
		n := len(acc)
		for r := 0; r+n <= len(x); r += n {
			for j, v := range x[r : r+n] {
				acc[j] += v
			}
		}
	}
}

// rowStats32 is rowStats in float32.
func rowStats32(row []float32, eps float32) (mean, rstd float32) {
	n := float32(len(row))
	for _, v := range row {
		mean += v
	}
	mean /= n
	var v2 float32
	for _, v := range row {
		c := v - mean
		v2 += c * c
	}
	return mean, float32(1 / math.Sqrt(float64(v2/n+eps)))
}

// Kernels names the float32 elementwise kernels in use: "Go", or "C/AVX2"
// in the default cgo build on a CPU with AVX2 and FMA.
func Kernels() string { return k32.name }

// rotaryHalfGo is the rotaryHalf kernel for either float type.
func rotaryHalfGo[T float](y, x []T, d, half, tt, lo, hi int, cs, sn []T) {
	for r := lo; r < hi; r++ {
		t := r % tt
		xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
		copy(yr[2*half:], xr[2*half:]) // dims beyond the rotary ones
		c, si := cs[t*half:(t+1)*half], sn[t*half:(t+1)*half]
		xa, xb := xr[:half], xr[half:2*half]
		ya, yb := yr[:half], yr[half:2*half]
		for p := range c {
			ya[p] = xa[p]*c[p] - xb[p]*si[p]
			yb[p] = xb[p]*c[p] + xa[p]*si[p]
		}
	}
}
