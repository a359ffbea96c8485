package graph

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
)

// This file holds the matrix kernels shared by the fused ops: a BLAS chosen at
// start-up (OpenBLAS loaded with dlopen when it is installed, see
// blas_cgo.go; gonum's pure-Go BLAS otherwise and in builds without cgo, see
// blas_purego.go) and the number of threads the ops use.

// blas32 and blas64 are the BLAS of the package's kernels; Gorgonia's own
// ops use the same implementation (set with G.Use in the build-specific
// init).
var (
	blas32   blas.Float32
	blas64   blas.Float64
	blasName string
)

// threads is the number of goroutines the kernels split their work into;
// 0 means runtime.GOMAXPROCS(0).
var threads atomic.Int32

// threadedRuns counts the kernel calls that split their work over more than
// one goroutine (parallelFor and LayerNorm's backward), so that tests can
// check that an input is large enough to take the threaded path.
var threadedRuns atomic.Int64

// BLASName describes the BLAS in use, e.g.
// "OpenBLAS (Haswell, libopenblas.so.0)" or "gonum (pure Go)" (with the
// reason when OpenBLAS was asked for and did not load).
func BLASName() string { return blasName }

// SetThreads sets the number of threads the package's kernels use (n <= 0:
// runtime.GOMAXPROCS(0), the default). OpenBLAS itself always runs
// single-threaded: the kernels split large products into row or column
// blocks themselves, so that no BLAS thread pool spins against them.
func SetThreads(n int) {
	if n < 0 {
		n = 0
	}
	threads.Store(int32(n))
}

// Threads returns the number of threads the package's kernels use.
func Threads() int {
	if n := int(threads.Load()); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// parallelMinWork is the total work (multiply-adds) below which
// parallelFor runs on the calling goroutine. Tests of the threaded paths
// lower it (lowParallelMin) so that small inputs take them.
var parallelMinWork = 1 << 17

// parallelFor calls fn on contiguous chunks [lo, hi) covering [0, n), on up
// to Threads() goroutines, and returns when all are done. work is the
// approximate cost of one item (in multiply-adds); below 128k (2^17) of
// total work everything runs on the calling goroutine. Waking a second
// thread costs about as much as that work: with 2^15, a one-token decoding
// step at a 512-token cache spent a fifth of its time in futex wake-ups,
// and 2^17 made it 8-10% faster (BenchmarkDecoderStep, W=512), the
// reference training step and the batch-1 T = 128 and 512 cost cells
// unchanged within their noise (docs/generation.md).
func parallelFor(n int, work int, fn func(lo, hi int)) {
	p := Threads()
	if p > n {
		p = n
	}
	if p <= 1 || n*work < parallelMinWork {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	threadedRuns.Add(1)
	var wg sync.WaitGroup
	wg.Add(p - 1)
	for i := 1; i < p; i++ {
		lo, hi := i*n/p, (i+1)*n/p
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, n/p)
	wg.Wait()
}

// gemm computes C = alpha op(A) op(B) + beta C for row-major matrices, op(A)
// [m, k] and op(B) [k, n], with the package's BLAS. Large products are split
// into blocks of rows of C (or of columns when C has few rows) computed in
// parallel.
func gemm[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	p := Threads()
	if p > 1 && m*n*k >= 1<<18 {
		if m >= n || m >= 4*p {
			parallelFor(m, n*k, func(lo, hi int) {
				ao := lo * lda
				if tA {
					ao = lo
				}
				gemmSerial(tA, tB, hi-lo, n, k, alpha, a[ao:], lda, b, ldb, beta, c[lo*ldc:], ldc)
			})
			return
		}
		parallelFor(n, m*k, func(lo, hi int) {
			bo := lo
			if tB {
				bo = lo * ldb
			}
			gemmSerial(tA, tB, m, hi-lo, k, alpha, a, lda, b[bo:], ldb, beta, c[lo:], ldc)
		})
		return
	}
	gemmSerial(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemmSerial is one BLAS call. Slices may extend beyond the matrices they
// hold (BLAS checks the minimal lengths).
func gemmSerial[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if k == 0 {
		if beta != 1 {
			for i := 0; i < m; i++ {
				row := c[i*ldc : i*ldc+n]
				for j := range row {
					row[j] *= beta
				}
			}
		}
		return
	}
	switch a := any(a).(type) {
	case []float32:
		blas32.Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		blas64.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}
