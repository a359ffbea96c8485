//go:build cgo && !purego && amd64

package graph

/*
#cgo CFLAGS: -O2
#include <immintrin.h>
#include <string.h>

// AVX2 + FMA kernels: the formulas of exp32, tanh32, gelu32 and geluDeriv32
// in fastmath.go and gelu.go, eight floats at a time; tails go through a
// zero-padded vector.

int rpe_have_avx2(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define TGT __attribute__((target("avx2,fma")))

// exp, Cephes expf: x = n ln2 + r, degree-6 polynomial, times 2**n (as two
// factors, so that n = 128 and n = -126 stay exact). 0 below -87.3365,
// +Inf above 88.7228, NaN for NaN.
TGT static inline __m256 exp8(__m256 x) {
	const __m256 hi = _mm256_set1_ps(88.7228391f), lo = _mm256_set1_ps(-87.3365448f);
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
	__m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	__m256 xin = x;
	x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
	__m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
	x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
	x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
	__m256 z = _mm256_mul_ps(x, x);
	__m256 y = _mm256_set1_ps(1.9875691500e-4f);
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
	y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
	y = _mm256_fmadd_ps(y, z, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
	__m256i n = _mm256_cvttps_epi32(fx);
	__m256i n1 = _mm256_srai_epi32(n, 1);
	__m256i n2 = _mm256_sub_epi32(n, n1);
	__m256i b = _mm256_set1_epi32(127);
	__m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, b), 23));
	__m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, b), 23));
	y = _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
	y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
	y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), over);
	return _mm256_blendv_ps(y, xin, nan);
}

// tanh, Eigen's rational approximation, clamped at ±7.9053 (exactly ±1).
TGT static inline __m256 tanh8(__m256 x) {
	const __m256 c = _mm256_set1_ps(7.90531110763549805f);
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m256 xin = x;
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), c)), c);
	__m256 x2 = _mm256_mul_ps(x, x);
	__m256 p = _mm256_fmadd_ps(x2, _mm256_set1_ps(-2.76076847742355e-16f), _mm256_set1_ps(2.00018790482477e-13f));
	p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(-8.60467152213735e-11f));
	p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(5.12229709037114e-08f));
	p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(1.48572235717979e-05f));
	p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(6.37261928875436e-04f));
	p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(4.89352455891786e-03f));
	p = _mm256_mul_ps(x, p);
	__m256 q = _mm256_fmadd_ps(x2, _mm256_set1_ps(1.19825839466702e-06f), _mm256_set1_ps(1.18534705686654e-04f));
	q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(2.26843463243900e-03f));
	q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(4.89352518554385e-03f));
	__m256 t = _mm256_div_ps(p, q);
	// |x| < 0.0004: x itself; |x| > 7.9053: exactly ±1 (as tanh32)
	__m256 sign = _mm256_set1_ps(-0.0f);
	__m256 ax = _mm256_andnot_ps(sign, xin);
	t = _mm256_blendv_ps(t, xin, _mm256_cmp_ps(ax, _mm256_set1_ps(0.0004f), _CMP_LT_OQ));
	__m256 one = _mm256_or_ps(_mm256_and_ps(xin, sign), _mm256_set1_ps(1.0f));
	t = _mm256_blendv_ps(t, one, _mm256_cmp_ps(ax, c, _CMP_GT_OQ));
	return _mm256_blendv_ps(t, xin, nan);
}

#define GC 0.7978845608028654f
#define GA 0.044715f

TGT static inline __m256 gelu_u(__m256 x) {
	__m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
	return _mm256_mul_ps(_mm256_set1_ps(GC), _mm256_fmadd_ps(_mm256_set1_ps(GA), x3, x));
}

TGT static inline __m256 gelu8(__m256 x) {
	__m256 t = tanh8(gelu_u(x));
	return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

TGT static inline __m256 gelu_deriv8(__m256 x) {
	__m256 t = tanh8(gelu_u(x));
	__m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	__m256 a = _mm256_mul_ps(half, _mm256_add_ps(one, t));
	__m256 omt2 = _mm256_fnmadd_ps(t, t, one);
	__m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(3 * GA), _mm256_mul_ps(x, x), one);
	__m256 b = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, x), omt2), _mm256_mul_ps(_mm256_set1_ps(GC), inner));
	return _mm256_add_ps(a, b);
}

TGT static inline __m256 load_tail(const float *x, long k) {
	float b[8] = {0};
	memcpy(b, x, k * sizeof(float));
	return _mm256_loadu_ps(b);
}

TGT static inline void store_tail(float *y, __m256 v, long k) {
	float b[8];
	_mm256_storeu_ps(b, v);
	memcpy(y, b, k * sizeof(float));
}

TGT void rpe_gelu_fwd(float *y, const float *x, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
	if (i < n) store_tail(y + i, gelu8(load_tail(x + i, n - i)), n - i);
}

TGT void rpe_gelu_bwd(float *dx, const float *x, const float *dy, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), gelu_deriv8(_mm256_loadu_ps(x + i))));
	if (i < n)
		store_tail(dx + i, _mm256_mul_ps(load_tail(dy + i, n - i), gelu_deriv8(load_tail(x + i, n - i))), n - i);
}

TGT static inline float hsum(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
	return _mm_cvtss_f32(s);
}

// exp of a row minus m, in place; returns the sum (tail lanes masked out).
TGT static inline float exp_row(float *x, long n, float m) {
	__m256 mv = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
		_mm256_storeu_ps(x + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	float s = hsum(acc);
	if (i < n) {
		float b[8];
		_mm256_storeu_ps(b, exp8(_mm256_sub_ps(load_tail(x + i, n - i), mv)));
		for (long j = 0; j < n - i; j++) {
			x[i + j] = b[j];
			s += b[j];
		}
	}
	return s;
}

TGT void rpe_softmax_rows(float *x, long rows, long n, const float *rowmax) {
	for (long r = 0; r < rows; r++) {
		float *row = x + r * n;
		float s = exp_row(row, n, rowmax[r]);
		if (s != 0) {
			__m256 inv = _mm256_set1_ps(1.0f / s);
			long i = 0;
			for (; i + 8 <= n; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), inv));
			for (; i < n; i++) row[i] *= 1.0f / s;
		}
	}
}

TGT void rpe_exp_sum_rows(const float *x, long rows, long n, const float *shift, float *sums) {
	for (long r = 0; r < rows; r++) {
		const float *row = x + r * n;
		__m256 mv = _mm256_set1_ps(shift[r]), acc = _mm256_setzero_ps();
		long i = 0;
		for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, exp8(_mm256_sub_ps(_mm256_loadu_ps(row + i), mv)));
		float s = hsum(acc);
		if (i < n) {
			float b[8];
			_mm256_storeu_ps(b, exp8(_mm256_sub_ps(load_tail(row + i, n - i), mv)));
			for (long j = 0; j < n - i; j++) s += b[j];
		}
		sums[r] = s;
	}
}

TGT void rpe_exp_scale_rows(float *y, const float *x, long rows, long n, const float *shift, float scale) {
	__m256 sc = _mm256_set1_ps(scale);
	for (long r = 0; r < rows; r++) {
		const float *row = x + r * n;
		float *yr = y + r * n;
		__m256 mv = _mm256_set1_ps(shift[r]);
		long i = 0;
		for (; i + 8 <= n; i += 8) _mm256_storeu_ps(yr + i, _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(row + i), mv)), sc));
		if (i < n) store_tail(yr + i, _mm256_mul_ps(exp8(_mm256_sub_ps(load_tail(row + i, n - i), mv)), sc), n - i);
	}
}

TGT void rpe_softmax_grad(float *dx, const float *y, const float *dy, long rows, long n) {
	const __m256 zero = _mm256_setzero_ps();
	for (long r = 0; r < rows; r++) {
		const float *yr = y + r * n, *dyr = dy + r * n;
		float *dxr = dx + r * n;
		__m256 acc = zero;
		long i = 0;
		for (; i + 8 <= n; i += 8) {
			__m256 p = _mm256_loadu_ps(yr + i);
			__m256 t = _mm256_mul_ps(p, _mm256_loadu_ps(dyr + i));
			acc = _mm256_add_ps(acc, _mm256_blendv_ps(t, zero, _mm256_cmp_ps(p, zero, _CMP_EQ_OQ)));
		}
		float s = hsum(acc);
		for (long j = i; j < n; j++) if (yr[j] != 0) s += yr[j] * dyr[j];
		__m256 sv = _mm256_set1_ps(s);
		for (i = 0; i + 8 <= n; i += 8) {
			__m256 p = _mm256_loadu_ps(yr + i);
			__m256 t = _mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(dyr + i), sv));
			_mm256_storeu_ps(dxr + i, _mm256_blendv_ps(t, zero, _mm256_cmp_ps(p, zero, _CMP_EQ_OQ)));
		}
		for (long j = i; j < n; j++) dxr[j] = yr[j] != 0 ? yr[j] * (dyr[j] - s) : 0;
	}
}

// mean and 1/sqrt(var + eps) of a row (two passes, float32).
TGT static inline void row_stats(const float *x, long d, float eps, float *mean, float *rstd) {
	__m256 acc = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= d; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
	float s = hsum(acc);
	for (long j = i; j < d; j++) s += x[j];
	float m = s / (float)d;
	__m256 mv = _mm256_set1_ps(m);
	acc = _mm256_setzero_ps();
	for (i = 0; i + 8 <= d; i += 8) {
		__m256 c = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
		acc = _mm256_fmadd_ps(c, c, acc);
	}
	float v = hsum(acc);
	for (long j = i; j < d; j++) v += (x[j] - m) * (x[j] - m);
	*mean = m;
	*rstd = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(v / (float)d + eps)));
}

TGT void rpe_layer_norm(float *y, const float *x, const float *g, const float *b, long rows, long d, float eps) {
	for (long r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *yr = y + r * d;
		float m, rs;
		row_stats(xr, d, eps, &m, &rs);
		__m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(rs);
		long i = 0;
		for (; i + 8 <= d; i += 8) {
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), mv), rv);
			_mm256_storeu_ps(yr + i, _mm256_fmadd_ps(xh, _mm256_loadu_ps(g + i), _mm256_loadu_ps(b + i)));
		}
		for (; i < d; i++) yr[i] = (xr[i] - m) * rs * g[i] + b[i];
	}
}

TGT void rpe_layer_norm_grad(float *dx, const float *x, const float *g, const float *dy, long rows, long d, float eps, float *dg, float *db) {
	for (long r = 0; r < rows; r++) {
		const float *xr = x + r * d, *dyr = dy + r * d;
		float *dxr = dx + r * d;
		float m, rs;
		row_stats(xr, d, eps, &m, &rs);
		__m256 mv = _mm256_set1_ps(m), rv = _mm256_set1_ps(rs);
		__m256 amg = _mm256_setzero_ps(), amgx = _mm256_setzero_ps();
		long i = 0;
		for (; i + 8 <= d; i += 8) {
			__m256 dyv = _mm256_loadu_ps(dyr + i);
			__m256 gg = _mm256_mul_ps(dyv, _mm256_loadu_ps(g + i));
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), mv), rv);
			amg = _mm256_add_ps(amg, gg);
			amgx = _mm256_fmadd_ps(gg, xh, amgx);
			_mm256_storeu_ps(dg + i, _mm256_fmadd_ps(dyv, xh, _mm256_loadu_ps(dg + i)));
			_mm256_storeu_ps(db + i, _mm256_add_ps(dyv, _mm256_loadu_ps(db + i)));
		}
		float mg = hsum(amg), mgx = hsum(amgx);
		for (long j = i; j < d; j++) {
			float gg = dyr[j] * g[j], xh = (xr[j] - m) * rs;
			mg += gg;
			mgx += gg * xh;
			dg[j] += dyr[j] * xh;
			db[j] += dyr[j];
		}
		mg /= (float)d;
		mgx /= (float)d;
		__m256 mgv = _mm256_set1_ps(mg), mgxv = _mm256_set1_ps(mgx);
		for (i = 0; i + 8 <= d; i += 8) {
			__m256 gg = _mm256_mul_ps(_mm256_loadu_ps(dyr + i), _mm256_loadu_ps(g + i));
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), mv), rv);
			__m256 t = _mm256_sub_ps(_mm256_sub_ps(gg, mgv), _mm256_mul_ps(xh, mgxv));
			_mm256_storeu_ps(dxr + i, _mm256_mul_ps(rv, t));
		}
		for (; i < d; i++) {
			float gg = dyr[i] * g[i], xh = (xr[i] - m) * rs;
			dxr[i] = rs * (gg - mg - xh * mgx);
		}
	}
}

TGT void rpe_col_sums(float *acc, const float *x, long rows, long n) {
	for (long r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		long i = 0;
		for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(xr + i)));
		for (; i < n; i++) acc[i] += xr[i];
	}
}

// The streaming attention's tile loops (stream_kernels.go), the same
// arithmetic in the same order as the Go loops. Entry (a, j) with table
// row r = idx[a*n+j] addresses src (gather) or dst (scatter) at
// a*ldrow + j*ldcol + r*stride + off.
// A row whose addresses run on by +1 or -1 (a distance index read along
// its span: Transformer-XL's and DeBERTa's query terms, a table of one
// column) is added as a vector, reversed for -1; others entry by entry.
TGT void rpe_gather_add_rows(float *restrict dst, long rows, long n, const long *restrict idx, const float *restrict src, long ldrow, long ldcol, long stride, long off) {
	static const int rev[8] = {7, 6, 5, 4, 3, 2, 1, 0};
	const __m256i rv = _mm256_loadu_si256((const __m256i *)rev);
	for (long a = 0; a < rows; a++) {
		float *restrict row = dst + a * n;
		const long *restrict ir = idx + a * n;
		const float *restrict base = src + a * ldrow + off;
		long a0 = ir[0] * stride, step = 0;
		if (n >= 8) {
			step = ldcol + ir[1] * stride - a0;
			if (step == 1 || step == -1) {
				for (long j = 2; j < n; j++) {
					if (j * ldcol + ir[j] * stride != a0 + j * step) {
						step = 0;
						break;
					}
				}
			} else {
				step = 0;
			}
		}
		if (step == 1) {
			const float *s = base + a0;
			long j = 0;
			for (; j + 8 <= n; j += 8) _mm256_storeu_ps(row + j, _mm256_add_ps(_mm256_loadu_ps(row + j), _mm256_loadu_ps(s + j)));
			for (; j < n; j++) row[j] += s[j];
		} else if (step == -1) {
			const float *s = base + a0; // entry j reads s[-j]
			long j = 0;
			for (; j + 8 <= n; j += 8) {
				__m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s - j - 7), rv);
				_mm256_storeu_ps(row + j, _mm256_add_ps(_mm256_loadu_ps(row + j), v));
			}
			for (; j < n; j++) row[j] += s[-j];
		} else if (ldcol == 0) {
			for (long j = 0; j < n; j++) row[j] += base[ir[j] * stride];
		} else {
			for (long j = 0; j < n; j++) row[j] += base[j * ldcol + ir[j] * stride];
		}
	}
}

// The scatters add up a run of consecutive entries with the same address
// in a register (a clipped or bucketed distance maps whole rows of a tile
// to one table row): acc = dst + the first entry, then acc += each next
// one, the additions of the plain loop in its order.
void rpe_scatter_add_rows(float *restrict dst, long rows, long n, const long *restrict idx, const float *restrict src, long ldrow, long ldcol, long stride, long off) {
	for (long a = 0; a < rows; a++) {
		const float *sr = src + a * n;
		const long *ir = idx + a * n;
		float *base = dst + a * ldrow + off;
		long at = ir[0] * stride;
		float acc = base[at] + sr[0];
		for (long j = 1; j < n; j++) {
			long x = j * ldcol + ir[j] * stride;
			if (x == at) {
				acc += sr[j];
				continue;
			}
			base[at] = acc;
			at = x;
			acc = base[at] + sr[j];
		}
		base[at] = acc;
	}
}

void rpe_scatter_add_f64(double *restrict acc, const long *restrict idx, const float *restrict src, long n) {
	long at = idx[0];
	double s = acc[at] + (double)src[0];
	for (long x = 1; x < n; x++) {
		if (idx[x] == at) {
			s += (double)src[x];
			continue;
		}
		acc[at] = s;
		at = idx[x];
		s = acc[at] + (double)src[x];
	}
	acc[at] = s;
}

TGT static inline float hmax(__m256 v) {
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 0x55));
	return _mm_cvtss_f32(m);
}

// The causal mask from first+a on, and the maxima of the kept entries
// (NaN if one is NaN) if rowmax is not NULL.
TGT void rpe_mask_max_rows(float *s, long rows, long n, int causal, long first, float *rowmax) {
	const float ninf = -__builtin_inff();
	for (long a = 0; a < rows; a++) {
		float *row = s + a * n;
		long end = n;
		if (causal) {
			end = first + a;
			end = end < 0 ? 0 : (end > n ? n : end);
			for (long j = end; j < n; j++) row[j] = ninf;
		}
		if (!rowmax) continue;
		__m256 m = _mm256_set1_ps(ninf), bad = _mm256_setzero_ps();
		long j = 0;
		for (; j + 8 <= end; j += 8) {
			__m256 x = _mm256_loadu_ps(row + j);
			bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
			m = _mm256_max_ps(m, x);
		}
		float mx = hmax(m);
		int nan = _mm256_movemask_ps(bad) != 0;
		for (; j < end; j++) {
			float x = row[j];
			if (x != x) nan = 1;
			else if (x > mx) mx = x;
		}
		rowmax[a] = nan ? __builtin_nanf("") : mx;
	}
}

// dS = P ∘ (dP − D) where P is not 0, else 0.
TGT void rpe_ds_rows(float *dp, const float *p, long rows, long n, const float *d) {
	const __m256 zero = _mm256_setzero_ps();
	for (long a = 0; a < rows; a++) {
		float *dr = dp + a * n;
		const float *pr = p + a * n;
		__m256 dv = _mm256_set1_ps(d[a]);
		long j = 0;
		for (; j + 8 <= n; j += 8) {
			__m256 x = _mm256_loadu_ps(pr + j);
			__m256 r = _mm256_mul_ps(x, _mm256_sub_ps(_mm256_loadu_ps(dr + j), dv));
			_mm256_storeu_ps(dr + j, _mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_NEQ_UQ), r));
		}
		for (; j < n; j++) dr[j] = pr[j] != 0 ? pr[j] * (dr[j] - d[a]) : 0;
	}
}

// Rotary embedding, half pairing (dimension p with p + half), rows lo..hi-1:
// plain multiplies and adds, never fused, so that the result is bit for bit
// that of the Go kernel (rotaryHalfGo).
#pragma STDC FP_CONTRACT OFF
TGT __attribute__((optimize("fp-contract=off")))
void rpe_rotary_half(float *y, const float *x, long d, long half, long tt, long lo, long hi,
                     const float *cs, const float *sn) {
	for (long r = lo; r < hi; r++) {
		long t = r % tt;
		const float *xa = x + r * d, *xb = xa + half, *c = cs + t * half, *s = sn + t * half;
		float *ya = y + r * d, *yb = ya + half;
		if (d > 2 * half) memcpy(ya + 2 * half, xa + 2 * half, (d - 2 * half) * sizeof(float));
		long p = 0;
		for (; p + 8 <= half; p += 8) {
			__m256 a = _mm256_loadu_ps(xa + p), b = _mm256_loadu_ps(xb + p);
			__m256 cv = _mm256_loadu_ps(c + p), sv = _mm256_loadu_ps(s + p);
			_mm256_storeu_ps(ya + p, _mm256_sub_ps(_mm256_mul_ps(a, cv), _mm256_mul_ps(b, sv)));
			_mm256_storeu_ps(yb + p, _mm256_add_ps(_mm256_mul_ps(b, cv), _mm256_mul_ps(a, sv)));
		}
		for (; p < half; p++) {
			float ac = xa[p] * c[p], bs = xb[p] * s[p], bc = xb[p] * c[p], as = xa[p] * s[p];
			ya[p] = ac - bs;
			yb[p] = bc + as;
		}
	}
}
*/
import "C"

import "unsafe"

func fp(x []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(x))) }

// cKernels32 are the AVX2 kernels; every slice passed is non-empty or the
// call is skipped.
var cKernels32 = kernels32{
	name: "C/AVX2",
	geluFwd: func(y, x []float32) {
		if len(x) > 0 {
			_ = y[len(x)-1]
			C.rpe_gelu_fwd(fp(y), fp(x), C.long(len(x)))
		}
	},
	geluBwd: func(dx, x, dy []float32) {
		if len(x) > 0 {
			_, _ = dx[len(x)-1], dy[len(x)-1]
			C.rpe_gelu_bwd(fp(dx), fp(x), fp(dy), C.long(len(x)))
		}
	},
	softmaxRows: func(x []float32, n int, rowMax []float32) {
		if len(rowMax) > 0 && n > 0 {
			_ = x[len(rowMax)*n-1]
			C.rpe_softmax_rows(fp(x), C.long(len(rowMax)), C.long(n), fp(rowMax))
		}
	},
	expSumRows: func(x []float32, n int, shift, sums []float32) {
		if len(shift) > 0 && n > 0 {
			_, _ = x[len(shift)*n-1], sums[len(shift)-1]
			C.rpe_exp_sum_rows(fp(x), C.long(len(shift)), C.long(n), fp(shift), fp(sums))
		}
	},
	expScaleRows: func(y, x []float32, n int, shift []float32, scale float32) {
		if len(shift) > 0 && n > 0 {
			_, _ = x[len(shift)*n-1], y[len(shift)*n-1]
			C.rpe_exp_scale_rows(fp(y), fp(x), C.long(len(shift)), C.long(n), fp(shift), C.float(scale))
		}
	},
}

func init() {
	cKernels32.softmaxGrad = func(dx, y, dy []float32, n int) {
		if rows := len(y) / n; rows > 0 {
			_, _ = dx[rows*n-1], dy[rows*n-1]
			C.rpe_softmax_grad(fp(dx), fp(y), fp(dy), C.long(rows), C.long(n))
		}
	}
	cKernels32.layerNorm = func(y, x, gamma, beta []float32, eps float32) {
		d := len(gamma)
		if rows := len(x) / d; rows > 0 {
			_, _ = y[rows*d-1], beta[d-1]
			C.rpe_layer_norm(fp(y), fp(x), fp(gamma), fp(beta), C.long(rows), C.long(d), C.float(eps))
		}
	}
	cKernels32.layerNormGrad = func(dx, x, gamma, dy []float32, eps float32, dgamma, dbeta []float32) {
		d := len(gamma)
		if rows := len(x) / d; rows > 0 {
			_, _, _, _ = dx[rows*d-1], dy[rows*d-1], dgamma[d-1], dbeta[d-1]
			C.rpe_layer_norm_grad(fp(dx), fp(x), fp(gamma), fp(dy), C.long(rows), C.long(d), C.float(eps), fp(dgamma), fp(dbeta))
		}
	}
	cKernels32.rotaryHalf = func(y, x []float32, d, half, tt, lo, hi int, cs, sn []float32) {
		if hi > lo && half > 0 {
			_, _ = x[hi*d-1], y[hi*d-1]
			_, _ = cs[tt*half-1], sn[tt*half-1]
			C.rpe_rotary_half(fp(y), fp(x), C.long(d), C.long(half), C.long(tt), C.long(lo), C.long(hi), fp(cs), fp(sn))
		} else if hi > lo {
			copy(y[lo*d:hi*d], x[lo*d:hi*d])
		}
	}
	cKernels32.colSums = func(acc, x []float32) {
		n := len(acc)
		if rows := len(x) / n; rows > 0 {
			C.rpe_col_sums(fp(acc), fp(x), C.long(rows), C.long(n))
		}
	}
	ip := func(x []int) *C.long { return (*C.long)(unsafe.Pointer(unsafe.SliceData(x))) }
	cKernels32.gatherAddRows = func(dst []float32, n int, idx []int, src []float32, d tileAddr) {
		if rows := len(idx) / n; rows > 0 {
			_ = dst[rows*n-1]
			C.rpe_gather_add_rows(fp(dst), C.long(rows), C.long(n), ip(idx), fp(src),
				C.long(d.ldRow), C.long(d.ldCol), C.long(d.stride), C.long(d.off))
		}
	}
	cKernels32.scatterAddRows = func(dst []float32, n int, idx []int, src []float32, d tileAddr) {
		if rows := len(idx) / n; rows > 0 {
			_ = src[rows*n-1]
			C.rpe_scatter_add_rows(fp(dst), C.long(rows), C.long(n), ip(idx), fp(src),
				C.long(d.ldRow), C.long(d.ldCol), C.long(d.stride), C.long(d.off))
		}
	}
	cKernels32.scatterAddF64 = func(acc []float64, idx []int, src []float32) {
		if len(idx) > 0 {
			_ = src[len(idx)-1]
			C.rpe_scatter_add_f64((*C.double)(unsafe.Pointer(unsafe.SliceData(acc))), ip(idx), fp(src), C.long(len(idx)))
		}
	}
	cKernels32.maskMaxRows = func(s []float32, n int, causal bool, first int, rowMax []float32) {
		rows := len(s) / n
		if rows == 0 {
			return
		}
		var rm *C.float
		if rowMax != nil {
			_ = rowMax[rows-1]
			rm = fp(rowMax)
		}
		cz := C.int(0)
		if causal {
			cz = 1
		}
		C.rpe_mask_max_rows(fp(s), C.long(rows), C.long(n), cz, C.long(first), rm)
	}
	cKernels32.dsRows = func(dp, p []float32, n int, d []float32) {
		if rows := len(p) / n; rows > 0 {
			_, _ = dp[rows*n-1], d[rows-1]
			C.rpe_ds_rows(fp(dp), fp(p), C.long(rows), C.long(n), fp(d))
		}
	}
	if C.rpe_have_avx2() != 0 {
		k32 = &cKernels32
	}
}
