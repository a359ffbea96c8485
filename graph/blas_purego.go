//go:build !cgo || !openblas

package graph

import (
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

// Without -tags openblas the build uses gonum's native BLAS (also
// Gorgonia's default); -tags purego or CGO_ENABLED=0 also drops the AVX2 C
// kernels of kernels_cgo.go.
func init() {
	impl := gonum.Implementation{}
	G.Use(impl)
	blas32, blas64 = impl, impl
	blasName = "gonum (pure Go)"
}
