package graph

import "math"

// The per-tile loops of the streaming attention (StreamAttention,
// StreamCoPE) that are not matrix products: the gather of a tile's bias or
// relative terms by table row, the scatter back in the backward pass, the
// causal mask with the row maxima, and dS = P ∘ (dP − D). In float32 they
// run the kernels of k32 (C with AVX2 in the default build, these Go loops
// otherwise); both do the same arithmetic in the same order, so their
// results are equal bit for bit (TestStreamKernels).

// tileAddr addresses a source (gather) or destination (scatter) per entry of
// a tile [rows, n] with table rows idx [rows*n]: entry (a, j) with row r =
// idx[a*n+j] is at
//
//	a*ldRow + j*ldCol + r*stride + off
//
// A bias table [R, hc] read at column col is {0, 0, hc, col}; the products
// g [ni, span] of the queries with a term's rows lo... are {span, 0, 1,
// -lo}, those of the keys {0, span, 1, -lo}.
type tileAddr struct{ ldRow, ldCol, stride, off int }

// at is the address of entry (a, j) with table row r.
func (d tileAddr) at(a, j, r int) int { return a*d.ldRow + j*d.ldCol + r*d.stride + d.off }

// gatherAddRows sets dst[a*n+j] += src[d.at(a, j, idx[a*n+j])] for the
// len(idx)/n rows of a tile. Every address must lie in src: the callers
// have checked the rows (loadIndex, loadTermIndex).
func gatherAddRows[T float](dst []T, n int, idx []int, src []T, d tileAddr) {
	if isF32[T]() {
		k32.gatherAddRows(any(dst).([]float32), n, idx, any(src).([]float32), d)
		return
	}
	gatherAddRowsGo(dst, n, idx, src, d)
}

func gatherAddRowsGo[T float](dst []T, n int, idx []int, src []T, d tileAddr) {
	for a := 0; a*n < len(idx); a++ {
		row, ir := dst[a*n:(a+1)*n], idx[a*n:(a+1)*n]
		base := a*d.ldRow + d.off
		if d.ldCol == 0 {
			for j, r := range ir {
				row[j] += src[base+r*d.stride]
			}
			continue
		}
		for j, r := range ir {
			row[j] += src[base+j*d.ldCol+r*d.stride]
		}
	}
}

// scatterAddRows sets dst[d.at(a, j, idx[a*n+j])] += src[a*n+j] for the
// len(idx)/n rows of a tile, in row-major order. A run of consecutive
// entries of a row with the same address (a clipped or bucketed distance
// maps whole rows to one table row) is added up in a register, which does
// the same additions in the same order without a store and a load per
// entry. Every address must lie in dst.
func scatterAddRows[T float](dst []T, n int, idx []int, src []T, d tileAddr) {
	if isF32[T]() {
		k32.scatterAddRows(any(dst).([]float32), n, idx, any(src).([]float32), d)
		return
	}
	scatterAddRowsGo(dst, n, idx, src, d)
}

func scatterAddRowsGo[T float](dst []T, n int, idx []int, src []T, d tileAddr) {
	for a := 0; a*n < len(idx); a++ {
		sr, ir := src[a*n:(a+1)*n], idx[a*n:(a+1)*n]
		base := a*d.ldRow + d.off
		at := base + ir[0]*d.stride
		acc := dst[at] + sr[0]
		for j := 1; j < n; j++ {
			x := base + j*d.ldCol + ir[j]*d.stride
			if x == at {
				acc += sr[j]
				continue
			}
			dst[at] = acc
			at, acc = x, dst[x]+sr[j]
		}
		dst[at] = acc
	}
}

// scatterAddF64 sets acc[idx[x]] += float64(src[x]) for every x, in order
// (the float64 accumulator of a bias table's gradient, one head's column),
// adding up a run of equal rows in a register as scatterAddRows does.
func scatterAddF64[T float](acc []float64, idx []int, src []T) {
	if isF32[T]() {
		k32.scatterAddF64(acc, idx, any(src).([]float32))
		return
	}
	scatterAddF64Go(acc, idx, src)
}

func scatterAddF64Go[T float](acc []float64, idx []int, src []T) {
	if len(idx) == 0 {
		return
	}
	src = src[:len(idx)]
	at := idx[0]
	s := acc[at] + float64(src[0])
	for x := 1; x < len(idx); x++ {
		if idx[x] == at {
			s += float64(src[x])
			continue
		}
		acc[at] = s
		at, s = idx[x], acc[idx[x]]+float64(src[x])
	}
	acc[at] = s
}

// maskMaxRows applies the causal mask to the rows of s [rows, n]: row a
// keeps its entries [0, end(a)) with end(a) = clamp(first+a, 0, n) and
// the rest become -Inf; end(a) = n for every row if !causal. If rowMax is
// not nil ([rows]) it also sets rowMax[a] to the maximum of the kept
// entries: -Inf if there are none or all are -Inf, NaN if one is NaN.
func maskMaxRows[T float](s []T, n int, causal bool, first int, rowMax []T) {
	if isF32[T]() {
		var rm []float32
		if rowMax != nil {
			rm = any(rowMax).([]float32)
		}
		k32.maskMaxRows(any(s).([]float32), n, causal, first, rm)
		return
	}
	maskMaxRowsGo(s, n, causal, first, rowMax)
}

func maskMaxRowsGo[T float](s []T, n int, causal bool, first int, rowMax []T) {
	ninf := T(math.Inf(-1))
	for a := 0; a*n < len(s); a++ {
		row := s[a*n : (a+1)*n]
		end := n
		if causal {
			end = min(n, max(0, first+a))
			for j := end; j < n; j++ {
				row[j] = ninf
			}
		}
		if rowMax != nil {
			mx := ninf
			for _, x := range row[:end] {
				if x > mx || x != x {
					mx = x
				}
				if mx != mx {
					break
				}
			}
			rowMax[a] = mx
		}
	}
}

// dsRows sets dp[a*n+j] = p[a*n+j] * (dp[a*n+j] − d[a]) where p is not 0,
// and 0 where it is (whatever dp holds there: a blocked entry), for the
// len(p)/n rows of a tile: dS of the softmax's backward pass.
func dsRows[T float](dp, p []T, n int, d []T) {
	if isF32[T]() {
		k32.dsRows(any(dp).([]float32), any(p).([]float32), n, any(d).([]float32))
		return
	}
	dsRowsGo(dp, p, n, d)
}

func dsRowsGo[T float](dp, p []T, n int, d []T) {
	for a := 0; a*n < len(p); a++ {
		pr, dr := p[a*n:(a+1)*n], dp[a*n:(a+1)*n]
		da := d[a]
		for j, x := range pr {
			if x != 0 {
				dr[j] = x * (dr[j] - da)
			} else {
				dr[j] = 0
			}
		}
	}
}
