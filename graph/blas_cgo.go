//go:build cgo && openblas

package graph

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
char *openblas_get_corename(void);
*/
import "C"

import (
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// With -tags openblas (and cgo) the build links OpenBLAS (Debian: libopenblas-dev) through
// gonum's netlib binding, for this package's kernels and for Gorgonia's own
// ops and tensor engine. Without the tag the build uses gonum's
// pure-Go BLAS, so it needs no C library.
func init() {
	impl := netlib.Implementation{}
	G.Use(impl) // Gorgonia's ops and, through tensor.Use, the tensor engine
	blas32, blas64 = impl, impl
	// One BLAS thread: the kernels parallelise themselves (see gemm).
	C.openblas_set_num_threads(1)
	blasName = "OpenBLAS (" + C.GoString(C.openblas_get_corename()) + ")"
}
