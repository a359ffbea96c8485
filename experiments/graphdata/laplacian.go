package graphdata

import (
	"math"
	"math/rand/v2"

	"github.com/pkg/errors"
	"gonum.org/v1/gonum/mat"
)

// signTol is the magnitude below which an eigenvector entry counts as
// zero for the sign convention.
const signTol = 1e-6

// LaplacianPE returns the Laplacian positional encoding of g [N*k],
// row-major [N, k]: column j is the eigenvector of the symmetric
// normalised Laplacian
//
//	L = I - D^-1/2 A D^-1/2     (D^-1/2 = 0 for an isolated node: its row of L is e_i)
//
// with the (j+2)-th smallest eigenvalue, i.e. the k eigenvectors after the
// first, as Dwivedi & Bresson 2020 ("A Generalization of Transformer
// Networks to Graphs") and Dwivedi et al. 2020 ("Benchmarking Graph Neural
// Networks", laplacian_positional_encoding: EigVec[:, 1:k+1]). Only the
// single smallest eigenvector is dropped, as in that code: a graph with c
// components of two or more nodes has c zero eigenvalues, and the other
// c-1 are kept. Columns j >= N-1 (a graph with fewer than k+1 nodes) are
// zero.
//
// Eigenvectors are unit-norm and mutually orthogonal. Their sign is fixed:
// the first entry (lowest node) whose magnitude exceeds 1e-6 is positive.
// For a repeated eigenvalue (a cycle's, for example) the basis of the
// eigenspace is whatever gonum's mat.EigenSym returns: deterministic for a
// given build, but not unique. FlipSigns randomises the signs for training.
//
// It returns an error if k < 1, g is not well formed, or the
// eigendecomposition fails.
func LaplacianPE(g *Graph, k int) ([]float64, error) {
	vecs, _, err := laplacianEigen(g, k)
	return vecs, err
}

// laplacianEigen is LaplacianPE that also returns the k eigenvalues (0
// for padded columns).
func laplacianEigen(g *Graph, k int) (vecs, vals []float64, err error) {
	if k < 1 {
		return nil, nil, errors.Errorf("graphdata: Laplacian encoding size %d must be at least 1", k)
	}
	if err := g.Check(0); err != nil {
		return nil, nil, err
	}
	n := g.N
	isq := make([]float64, n)
	for i, a := range g.Adj {
		if len(a) > 0 {
			isq[i] = 1 / math.Sqrt(float64(len(a)))
		}
	}
	lap := mat.NewSymDense(n, nil)
	for i, a := range g.Adj {
		lap.SetSym(i, i, 1)
		for _, j := range a {
			if j > i {
				lap.SetSym(i, j, -isq[i]*isq[j])
			}
		}
	}
	var es mat.EigenSym
	if !es.Factorize(lap, true) {
		return nil, nil, errors.Errorf("graphdata: eigendecomposition of the %d-node Laplacian failed", n)
	}
	ev := es.Values(nil)
	var q mat.Dense
	es.VectorsTo(&q)
	vecs = make([]float64, n*k)
	vals = make([]float64, k)
	for j := 0; j < k && j+1 < n; j++ {
		c := j + 1
		vals[j] = ev[c]
		sign := 1.0
		for i := 0; i < n; i++ {
			if v := q.At(i, c); math.Abs(v) > signTol {
				if v < 0 {
					sign = -1
				}
				break
			}
		}
		for i := 0; i < n; i++ {
			vecs[i*k+j] = sign * q.At(i, c)
		}
	}
	return vecs, vals, nil
}

// FlipSigns multiplies each of the k columns of pe [n*k] (row-major
// [n, k], as LaplacianPE returns) by an independent random sign, +1 or -1
// with probability 1/2, drawn from rng in column order (one draw per
// column). Dwivedi & Bresson flip the signs of the eigenvectors randomly
// at every training step, since an eigenvector's sign is arbitrary. It
// returns an error if pe has not n*k entries or rng is nil.
func FlipSigns(pe []float64, n, k int, rng *rand.Rand) error {
	if n <= 0 || k <= 0 || len(pe) != n*k {
		return errors.Errorf("graphdata: Laplacian encoding has %d values, want %d nodes * %d = %d", len(pe), n, k, n*k)
	}
	if rng == nil {
		return errors.New("graphdata: FlipSigns needs a random generator")
	}
	for j := 0; j < k; j++ {
		if rng.IntN(2) == 0 {
			continue
		}
		for i := 0; i < n; i++ {
			pe[i*k+j] = -pe[i*k+j]
		}
	}
	return nil
}
