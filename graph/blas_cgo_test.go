//go:build cgo && !purego

package graph

import (
	"math/rand"
	"os"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestBLASChoice: with RPE_WANT_OPENBLAS=1 (scripts/test.sh sets it where
// libopenblas is installed) the default build must have loaded OpenBLAS, not
// fallen back to gonum silently.
func TestBLASChoice(t *testing.T) {
	t.Logf("BLAS: %s", BLASName())
	if os.Getenv("RPE_WANT_OPENBLAS") == "1" && os.Getenv("RPE_BLAS") == "" && !strings.HasPrefix(BLASName(), "OpenBLAS") {
		t.Fatalf("OpenBLAS is installed but the build uses %s", BLASName())
	}
	if name, ok := openCBLAS("/nonexistent/libopenblas.so"); ok || !strings.Contains(name, "nonexistent") {
		t.Fatalf("loading a missing library: ok=%v, message %q", ok, name)
	}
}

// TestCBLASGemm compares the loaded library's Sgemm/Dgemm with gonum's on
// every transpose combination, for m > 1 (GEMM) and m = 1 (GEMV), with leading dimensions wider than the
// matrices and nonzero beta, and checks that arguments that do not fit
// their slices go to gonum (which panics) instead of into C.
func TestCBLASGemm(t *testing.T) {
	if _, ok := openCBLAS("libopenblas.so.0"); !ok {
		t.Skip("libopenblas.so.0 is not installed")
	}
	var lib cblas
	ref := gonum.Implementation{}
	rng := rand.New(rand.NewSource(1))
	rnd := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	to32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	// m = 1 goes to GEMV (a decoding step's products)
	for _, m := range []int{7, 1} {
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				n, k := 5, 9
				ra, ca := m, k
				if tA == blas.Trans {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tB == blas.Trans {
					rb, cb = n, k
				}
				lda, ldb, ldc := ca+2, cb+1, n+3
				a, b, c := rnd(ra*lda), rnd(rb*ldb), rnd(m*ldc)
				want := append([]float64(nil), c...)
				ref.Dgemm(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, want, ldc)
				got := append([]float64(nil), c...)
				lib.Dgemm(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, got, ldc)
				checkClose(t, "Dgemm", got, want, 1e-12, 1e-12)

				a32, b32 := to32(a), to32(b)
				want32, got32 := to32(c), to32(c)
				ref.Sgemm(tA, tB, m, n, k, 0.7, a32, lda, b32, ldb, 0.3, want32, ldc)
				lib.Sgemm(tA, tB, m, n, k, 0.7, a32, lda, b32, ldb, 0.3, got32, ldc)
				w, g := make([]float64, len(c)), make([]float64, len(c))
				for i := range c {
					w[i], g[i] = float64(want32[i]), float64(got32[i])
				}
				checkClose(t, "Sgemm", g, w, 1e-5, 1e-5)
			}
		}
	}
	// C one element short: gonum's panic, not a write past the slice.
	defer func() {
		if recover() == nil {
			t.Fatal("Dgemm with a short C did not panic")
		}
	}()
	lib.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, make([]float64, 4), 2, make([]float64, 4), 2, 0, make([]float64, 3), 2)
}
