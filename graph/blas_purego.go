//go:build !cgo || purego

package graph

import (
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

// Without cgo (CGO_ENABLED=0, or no C compiler) or with -tags purego the
// build uses gonum's native BLAS (also Gorgonia's default) and no C at all:
// neither OpenBLAS nor the AVX2 kernels of kernels_cgo.go.
func init() {
	impl := gonum.Implementation{}
	G.Use(impl)
	blas32, blas64 = impl, impl
	blasName = "gonum (pure Go)"
}
