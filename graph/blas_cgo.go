//go:build cgo && !purego

package graph

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// CBLAS row-major GEMM, as OpenBLAS exports it (enums: RowMajor 101,
// NoTrans 111, Trans 112).
typedef void (*rpe_sgemm_t)(int, int, int, int, int, int, float, const float *, int,
                            const float *, int, float, float *, int);
typedef void (*rpe_dgemm_t)(int, int, int, int, int, int, double, const double *, int,
                            const double *, int, double, double *, int);
// CBLAS GEMV: (order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy).
typedef void (*rpe_sgemv_t)(int, int, int, int, float, const float *, int, const float *, int, float,
                            float *, int);
typedef void (*rpe_dgemv_t)(int, int, int, int, double, const double *, int, const double *, int,
                            double, double *, int);
typedef void (*rpe_set_threads_t)(int);
typedef char *(*rpe_corename_t)(void);

static rpe_sgemm_t rpe_sgemm;
static rpe_dgemm_t rpe_dgemm;
static rpe_sgemv_t rpe_sgemv;
static rpe_dgemv_t rpe_dgemv;

// rpe_open loads the library at path and resolves the symbols this package
// uses; it returns NULL on success and dlerror's message otherwise. It sets
// OpenBLAS to one thread (the Go kernels parallelise themselves) and writes
// the core name, if the library reports one, to *core.
static const char *rpe_open(const char *path, const char **core) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return dlerror();
	rpe_sgemm_t s = (rpe_sgemm_t)dlsym(h, "cblas_sgemm");
	rpe_dgemm_t d = (rpe_dgemm_t)dlsym(h, "cblas_dgemm");
	rpe_sgemv_t sv = (rpe_sgemv_t)dlsym(h, "cblas_sgemv");
	rpe_dgemv_t dv = (rpe_dgemv_t)dlsym(h, "cblas_dgemv");
	if (!s || !d || !sv || !dv) {
		dlclose(h);
		return "no cblas_sgemm/cblas_dgemm/cblas_sgemv/cblas_dgemv symbol";
	}
	rpe_set_threads_t st = (rpe_set_threads_t)dlsym(h, "openblas_set_num_threads");
	if (st) st(1);
	rpe_corename_t cn = (rpe_corename_t)dlsym(h, "openblas_get_corename");
	*core = cn ? cn() : NULL;
	rpe_sgemm = s;
	rpe_dgemm = d;
	rpe_sgemv = sv;
	rpe_dgemv = dv;
	return NULL;
}

static void rpe_call_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc) {
	rpe_sgemm(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void rpe_call_dgemm(int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                           const double *b, int ldb, double beta, double *c, int ldc) {
	rpe_dgemm(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// rpe_call_sgemv and rpe_call_dgemv compute the GEMM row C[1, n] =
// alpha op(A)[1, k] op(B)[k, n] + beta C as one row-major GEMV: with B
// stored [k, n] (tb NoTrans) y = B^T x, with B stored [n, k] y = B x; x
// is A's row (stride 1) or, A being stored [k, 1], its column (stride lda).
static void rpe_call_sgemv(int ta, int tb, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c) {
	int incx = ta == 111 ? 1 : lda;
	if (tb == 111) rpe_sgemv(101, 112, k, n, alpha, b, ldb, a, incx, beta, c, 1);
	else rpe_sgemv(101, 111, n, k, alpha, b, ldb, a, incx, beta, c, 1);
}

static void rpe_call_dgemv(int ta, int tb, int n, int k, double alpha, const double *a, int lda,
                           const double *b, int ldb, double beta, double *c) {
	int incx = ta == 111 ? 1 : lda;
	if (tb == 111) rpe_dgemv(101, 112, k, n, alpha, b, ldb, a, incx, beta, c, 1);
	else rpe_dgemv(101, 111, n, k, alpha, b, ldb, a, incx, beta, c, 1);
}
*/
import "C"

import (
	"os"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

// With cgo (the default wherever a C compiler is installed) the package
// loads OpenBLAS at start-up with dlopen, so the same binary runs with
// OpenBLAS where the shared library is installed (Debian: libopenblas0,
// pulled in by libopenblas-dev) and with gonum's pure-Go BLAS where it is
// not. The environment variable RPE_BLAS chooses:
//
//	unset or ""  the first of libopenblas.so.0, libopenblas.so,
//	             libopenblas.dylib that loads; gonum if none does
//	gonum        gonum's pure-Go BLAS
//	a file path  that library (any CBLAS exporting cblas_sgemm and
//	             cblas_dgemm); gonum, with the reason in BLASName, if it
//	             does not load
//
// Only the matrix products (GEMM) go to the library, a product of one row
// (m = 1, as in a decoding step) as a GEMV, which reads op(B) once instead
// of packing it; the other BLAS routines Gorgonia uses stay in gonum.
func init() {
	var impl G.BLAS = gonum.Implementation{}
	blasName = "gonum (pure Go)"
	switch env := os.Getenv("RPE_BLAS"); env {
	case "gonum":
		blasName = "gonum (pure Go; RPE_BLAS=gonum)"
	case "":
		for _, lib := range []string{"libopenblas.so.0", "libopenblas.so", "libopenblas.dylib"} {
			if name, ok := openCBLAS(lib); ok {
				impl, blasName = cblas{}, name
				break
			}
		}
	default:
		if name, ok := openCBLAS(env); ok {
			impl, blasName = cblas{}, name
		} else {
			blasName = "gonum (pure Go; RPE_BLAS=" + env + ": " + name + ")"
		}
	}
	G.Use(impl) // Gorgonia's ops and, through tensor.Use, the tensor engine
	blas32, blas64 = impl, impl
}

// openCBLAS loads path; it returns the library's description and true, or
// the loader's error and false.
func openCBLAS(path string) (string, bool) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var core *C.char
	if msg := C.rpe_open(cpath, &core); msg != nil {
		return C.GoString(msg), false
	}
	if core != nil {
		return "OpenBLAS (" + C.GoString(core) + ", " + path + ")", true
	}
	return "CBLAS (" + path + ")", true
}

// cblas is gonum's BLAS with Sgemm and Dgemm sent to the loaded library.
type cblas struct{ gonum.Implementation }

func ctrans(t blas.Transpose) C.int {
	if t == blas.NoTrans {
		return 111
	}
	return 112
}

// gemmFits reports whether the arguments (m, n, k > 0) describe matrices that lie
// inside the slices, so that the C call cannot read or write out of
// bounds. When they do not, the caller hands the call to gonum, which
// panics with its own message.
func gemmFits(tA, tB blas.Transpose, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) bool {
	if (tA != blas.NoTrans && tA != blas.Trans && tA != blas.ConjTrans) ||
		(tB != blas.NoTrans && tB != blas.Trans && tB != blas.ConjTrans) {
		return false
	}
	rowsA, colsA := m, k
	if tA != blas.NoTrans {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB != blas.NoTrans {
		rowsB, colsB = n, k
	}
	fits := func(rows, cols, ld, l int) bool { // rows, cols > 0
		return ld >= cols && l >= (rows-1)*ld+cols
	}
	return fits(rowsA, colsA, lda, lenA) && fits(rowsB, colsB, ldb, lenB) && fits(m, n, ldc, lenC)
}

// Sgemm implements blas.Float32Level3 with the library's cblas_sgemm.
func (c cblas) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	if m == 0 || n == 0 || k == 0 || !gemmFits(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(cc), ldc) {
		c.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
		return
	}
	if m == 1 {
		C.rpe_call_sgemv(ctrans(tA), ctrans(tB), C.int(n), C.int(k), C.float(alpha),
			(*C.float)(&a[0]), C.int(lda), (*C.float)(&b[0]), C.int(ldb), C.float(beta), (*C.float)(&cc[0]))
		return
	}
	C.rpe_call_sgemm(ctrans(tA), ctrans(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(&a[0]), C.int(lda), (*C.float)(&b[0]), C.int(ldb), C.float(beta), (*C.float)(&cc[0]), C.int(ldc))
}

// Dgemm implements blas.Float64Level3 with the library's cblas_dgemm.
func (c cblas) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, cc []float64, ldc int) {
	if m == 0 || n == 0 || k == 0 || !gemmFits(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(cc), ldc) {
		c.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
		return
	}
	if m == 1 {
		C.rpe_call_dgemv(ctrans(tA), ctrans(tB), C.int(n), C.int(k), C.double(alpha),
			(*C.double)(&a[0]), C.int(lda), (*C.double)(&b[0]), C.int(ldb), C.double(beta), (*C.double)(&cc[0]))
		return
	}
	C.rpe_call_dgemm(ctrans(tA), ctrans(tB), C.int(m), C.int(n), C.int(k), C.double(alpha),
		(*C.double)(&a[0]), C.int(lda), (*C.double)(&b[0]), C.int(ldb), C.double(beta), (*C.double)(&cc[0]), C.int(ldc))
}
