package graph

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// sameBits reports whether a and b hold the same floats bit for bit (any
// NaN equals any NaN).
func sameBits[T float](a, b []T) (int, bool) {
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if x != x && y != y {
			continue
		}
		if x != y || math.Signbit(x) != math.Signbit(y) {
			return i, false
		}
	}
	return -1, len(a) == len(b)
}

// TestStreamKernels checks the streaming attention's tile kernels of k32
// (C/AVX2 in the default build) against the Go loops bit for bit, and the
// Go loops against their definitions, on tiles with NaN, ±Inf, rows that
// the causal mask blocks entirely or not at all, and every addressing of
// tileAddr.
func TestStreamKernels(t *testing.T) {
	t.Logf("float32 kernels: %s", Kernels())
	rng := rand.New(rand.NewSource(3))
	ninf := float32(math.Inf(-1))
	for _, n := range []int{1, 5, 8, 13, 64} {
		const rows, span = 6, 40
		idx := make([]int, rows*n)
		for i := range idx {
			idx[i] = rng.Intn(span)
		}
		for _, d := range []tileAddr{{stride: 3, off: 2}, {ldRow: span, stride: 1}, {ldCol: span + 1, stride: 1, off: 1}} {
			src := randSpecial(rng, (rows+n)*(span+1)+3*span+3, 1, false)
			dst := randSpecial(rng, rows*n, 1, false)
			a, b, want := append([]float32(nil), dst...), append([]float32(nil), dst...), append([]float32(nil), dst...)
			k32.gatherAddRows(a, n, idx, src, d)
			goKernels32.gatherAddRows(b, n, idx, src, d)
			for e, r := range idx {
				want[e] += src[d.at(e/n, e%n, r)]
			}
			if i, ok := sameBits(a, b); !ok {
				t.Fatalf("gatherAddRows n=%d %+v: element %d: %s %v, Go %v", n, d, i, Kernels(), a[i], b[i])
			}
			if i, ok := sameBits(b, want); !ok {
				t.Fatalf("gatherAddRows n=%d %+v: element %d = %v, want %v", n, d, i, b[i], want[i])
			}

			a, b = make([]float32, len(src)), make([]float32, len(src))
			want = make([]float32, len(src))
			k32.scatterAddRows(a, n, idx, dst, d)
			goKernels32.scatterAddRows(b, n, idx, dst, d)
			for e, r := range idx {
				want[d.at(e/n, e%n, r)] += dst[e]
			}
			if i, ok := sameBits(a, b); !ok {
				t.Fatalf("scatterAddRows n=%d %+v: element %d: %s %v, Go %v", n, d, i, Kernels(), a[i], b[i])
			}
			if i, ok := sameBits(b, want); !ok {
				t.Fatalf("scatterAddRows n=%d %+v: element %d = %v, want %v", n, d, i, b[i], want[i])
			}
		}

		// runs of addresses: up, down, constant rows with a column step
		// (the vector paths), and an up run broken once (entry by entry)
		runs := map[string]struct {
			row func(a, j int) int
			d   tileAddr
		}{
			"up":     {func(a, j int) int { return 2 + a + j }, tileAddr{ldRow: span, stride: 1, off: -1}},
			"down":   {func(a, j int) int { return n + 5 - j + a }, tileAddr{ldRow: span, stride: 1}},
			"column": {func(a, j int) int { return 0 }, tileAddr{ldCol: 1, stride: 1, off: 3}},
			"broken": {func(a, j int) int { return 2 + j + a*(j/5) }, tileAddr{ldRow: span, stride: 1}},
		}
		for name, r := range runs {
			ids := make([]int, rows*n)
			for e := range ids {
				ids[e] = r.row(e/n, e%n)
			}
			src := randSpecial(rng, rows*span+2*n+8, 1, false)
			dst := randSpecial(rng, rows*n, 1, false)
			a, b := append([]float32(nil), dst...), append([]float32(nil), dst...)
			k32.gatherAddRows(a, n, ids, src, r.d)
			goKernels32.gatherAddRows(b, n, ids, src, r.d)
			if i, ok := sameBits(a, b); !ok {
				t.Fatalf("gatherAddRows %s n=%d: element %d: %s %v, Go %v", name, n, i, Kernels(), a[i], b[i])
			}
		}

		src := randSpecial(rng, rows*n, 1, false)
		fa, fb := make([]float64, span), make([]float64, span)
		k32.scatterAddF64(fa, idx, src)
		goKernels32.scatterAddF64(fb, idx, src)
		if i, ok := sameBits(fa, fb); !ok {
			t.Fatalf("scatterAddF64 n=%d: element %d: %s %v, Go %v", n, i, Kernels(), fa[i], fb[i])
		}

		for _, causal := range []bool{false, true} {
			for _, first := range []int{-2, 0, 1, n - 3, n + 4} {
				what := fmt.Sprintf("maskMaxRows n=%d causal=%v first=%d", n, causal, first)
				s := randSpecial(rng, rows*n, 2, n > 6)
				s[n*(rows-1)] = ninf // the last row may hold only -Inf
				if n > 8 {
					s[2*n+8] = float32(math.NaN()) // in an 8-wide block of row 2
				}
				a, b := append([]float32(nil), s...), append([]float32(nil), s...)
				ma, mb := make([]float32, rows), make([]float32, rows)
				k32.maskMaxRows(a, n, causal, first, ma)
				goKernels32.maskMaxRows(b, n, causal, first, mb)
				if i, ok := sameBits(a, b); !ok {
					t.Fatalf("%s: element %d: %s %v, Go %v", what, i, Kernels(), a[i], b[i])
				}
				if i, ok := sameBits(ma, mb); !ok {
					t.Fatalf("%s: row max %d: %s %v, Go %v", what, i, Kernels(), ma[i], mb[i])
				}
				for r := 0; r < rows; r++ {
					end := n
					if causal {
						end = min(n, max(0, first+r))
					}
					want, nan := float64(ninf), false
					for j, x := range s[r*n : (r+1)*n] {
						if j >= end {
							if b[r*n+j] != ninf {
								t.Fatalf("%s: row %d, entry %d = %v, want -Inf", what, r, j, b[r*n+j])
							}
							continue
						}
						nan = nan || x != x
						want = math.Max(want, float64(x))
					}
					got := float64(mb[r])
					if nan != (got != got) || (!nan && got != want) {
						t.Fatalf("%s: row %d max %v, want %v (NaN %v)", what, r, got, want, nan)
					}
				}
				c := append([]float32(nil), s...)
				k32.maskMaxRows(c, n, causal, first, nil)
				if i, ok := sameBits(c, a); !ok {
					t.Fatalf("%s without maxima: element %d = %v, want %v", what, i, c[i], a[i])
				}
			}
		}

		p := randSpecial(rng, rows*n, 1, n > 6)
		for i := 0; i < len(p); i += 3 {
			p[i] = 0
		}
		dp := randSpecial(rng, rows*n, 1, false)
		dp[0] = float32(math.NaN()) // where p = 0: ignored
		d := randSpecial(rng, rows, 1, false)
		a, b := append([]float32(nil), dp...), append([]float32(nil), dp...)
		k32.dsRows(a, p, n, d)
		goKernels32.dsRows(b, p, n, d)
		if i, ok := sameBits(a, b); !ok {
			t.Fatalf("dsRows n=%d: element %d: %s %v, Go %v", n, i, Kernels(), a[i], b[i])
		}
		for e, x := range p {
			want := float32(0)
			if x != 0 {
				want = x * (dp[e] - d[e/n])
			}
			if i, ok := sameBits(b[e:e+1], []float32{want}); !ok {
				t.Fatalf("dsRows n=%d: element %d = %v, want %v", n, e+i, b[e], want)
			}
		}
	}
}
