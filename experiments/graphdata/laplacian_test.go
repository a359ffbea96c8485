package graphdata

import (
	"math"
	"math/rand/v2"
	"testing"
)

const eigTol = 1e-9

// lapApply returns L v for the normalised Laplacian of g (isolated nodes:
// row e_i).
func lapApply(g *Graph, v []float64) []float64 {
	out := make([]float64, g.N)
	for i, a := range g.Adj {
		out[i] = v[i]
		for _, j := range a {
			out[i] -= v[j] / math.Sqrt(float64(len(a)*len(g.Adj[j])))
		}
	}
	return out
}

func column(pe []float64, n, k, j int) []float64 {
	c := make([]float64, n)
	for i := range c {
		c[i] = pe[i*k+j]
	}
	return c
}

// checkEigen checks that the columns of pe are orthonormal eigenvectors of
// L with eigenvalues want, signed by the convention.
func checkEigen(t *testing.T, g *Graph, pe []float64, k int, want []float64) {
	t.Helper()
	n := g.N
	for j := 0; j < k; j++ {
		v := column(pe, n, k, j)
		lv := lapApply(g, v)
		for i := range v {
			if math.Abs(lv[i]-want[j]*v[i]) > eigTol {
				t.Fatalf("column %d is not an eigenvector with eigenvalue %v: Lv %v, v %v", j, want[j], lv, v)
			}
		}
		for j2 := 0; j2 <= j; j2++ {
			dot := 0.0
			for i, x := range column(pe, n, k, j2) {
				dot += x * v[i]
			}
			if w := map[bool]float64{true: 1, false: 0}[j2 == j]; math.Abs(dot-w) > eigTol {
				t.Fatalf("columns %d and %d: dot product %v, want %v", j2, j, dot, w)
			}
		}
		for _, x := range v {
			if math.Abs(x) > signTol {
				if x < 0 {
					t.Fatalf("column %d: first non-zero entry %v is negative", j, x)
				}
				break
			}
		}
	}
}

func TestLaplacianPEPath(t *testing.T) {
	// Path P_n: eigenvalues 1 - cos(πm/(n-1)), eigenvectors
	// u_m(i) ∝ sqrt(deg i) cos(πm i/(n-1)) (D^1/2 times the random walk's
	// eigenvectors), all distinct; u_m(0) > 0 fixes the sign.
	const n, k = 6, 4
	g := pathGraph(t, n)
	pe, vals, err := laplacianEigen(g, k)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < k; j++ {
		m := float64(j + 1)
		if w := 1 - math.Cos(math.Pi*m/(n-1)); math.Abs(vals[j]-w) > eigTol {
			t.Errorf("eigenvalue %d: %v, want %v", j, vals[j], w)
		}
		u := make([]float64, n)
		norm := 0.0
		for i := range u {
			u[i] = math.Sqrt(float64(len(g.Adj[i]))) * math.Cos(math.Pi*m*float64(i)/(n-1))
			norm += u[i] * u[i]
		}
		for i := range u {
			if got, w := pe[i*k+j], u[i]/math.Sqrt(norm); math.Abs(got-w) > eigTol {
				t.Fatalf("eigenvector %d node %d: %v, want %v", j, i, got, w)
			}
		}
	}
}

func TestLaplacianPECycle(t *testing.T) {
	// Cycle C_6: L = I - A/2, eigenvalues 1 - cos(2πm/6): 0, 0.5, 0.5, 1.5, 1.5, 2.
	g := cycleGraph(t, 6)
	pe, vals, err := laplacianEigen(g, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.5, 1.5, 1.5, 2}
	for j := range want {
		if math.Abs(vals[j]-want[j]) > eigTol {
			t.Fatalf("eigenvalues %v, want %v", vals, want)
		}
	}
	checkEigen(t, g, pe, 5, want)
}

func TestLaplacianPEIsolatedAndPadding(t *testing.T) {
	// Edge 0-1 and isolated node 2: L = [[1,-1,0],[-1,1,0],[0,0,1]],
	// eigenvalues 0, 1 (e_2), 2 ((1,-1,0)/√2); k = 4 pads columns 2 and 3.
	g := mustGraph(t, 3, [][2]int{{0, 1}})
	pe, vals, err := laplacianEigen(g, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{1, 2, 0, 0}; math.Abs(vals[0]-1) > eigTol || math.Abs(vals[1]-2) > eigTol || vals[2] != 0 || vals[3] != 0 {
		t.Fatalf("eigenvalues %v, want %v", vals, want)
	}
	s := 1 / math.Sqrt2
	want := []float64{
		0, s, 0, 0,
		0, -s, 0, 0,
		1, 0, 0, 0}
	for i := range want {
		if math.Abs(pe[i]-want[i]) > eigTol {
			t.Fatalf("encoding %v, want %v", pe, want)
		}
	}
	one, err := LaplacianPE(mustGraph(t, 1, nil), 3)
	if err != nil || len(one) != 3 || one[0] != 0 || one[1] != 0 || one[2] != 0 {
		t.Errorf("single node: %v, %v; want [0 0 0]", one, err)
	}
	if _, err := LaplacianPE(g, 0); err == nil {
		t.Error("k 0: no error")
	}
	if _, err := LaplacianPE(&Graph{N: 2, Adj: [][]int{{1}, {}}}, 2); err == nil {
		t.Error("malformed graph: no error")
	}
}

func TestLaplacianPERandom(t *testing.T) {
	// Random graphs (with isolated nodes and several components): every
	// column an orthonormal eigenvector with its eigenvalue, signs by the
	// convention; a renamed path has the renamed encoding.
	rng := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 10; it++ {
		g := randGraph(t, rng, 2+rng.IntN(20), 0.2)
		k := 1 + rng.IntN(g.N)
		pe, vals, err := laplacianEigen(g, k)
		if err != nil {
			t.Fatal(err)
		}
		kk := min(k, g.N-1)
		sub := make([]float64, g.N*kk)
		for i := 0; i < g.N; i++ {
			copy(sub[i*kk:], pe[i*k:i*k+kk])
		}
		checkEigen(t, g, sub, kk, vals[:kk])
	}
	g := pathGraph(t, 7)
	perm := rng.Perm(7)
	pg, err := g.Permute(perm)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := LaplacianPE(g, 3)
	b, _ := LaplacianPE(pg, 3)
	for j := 0; j < 3; j++ {
		s := 1.0 // sign between the two: fixed by the renamed node 0
		if a[j]*b[perm[0]*3+j] < 0 {
			s = -1
		}
		for i := 0; i < 7; i++ {
			if math.Abs(a[i*3+j]-s*b[perm[i]*3+j]) > eigTol {
				t.Fatalf("column %d: renamed path's encoding differs beyond a sign", j)
			}
		}
	}
}

func TestFlipSigns(t *testing.T) {
	const n, k = 3, 16
	pe := make([]float64, n*k)
	for i := range pe {
		pe[i] = float64(i + 1)
	}
	orig := append([]float64(nil), pe...)
	if err := FlipSigns(pe, n, k, rand.New(rand.NewPCG(7, 8))); err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for j := 0; j < k; j++ {
		s := pe[j] / orig[j]
		if s != 1 && s != -1 {
			t.Fatalf("column %d scaled by %v", j, s)
		}
		for i := 0; i < n; i++ {
			if pe[i*k+j] != s*orig[i*k+j] {
				t.Fatalf("column %d not flipped as a whole", j)
			}
		}
		if s < 0 {
			flipped++
		}
	}
	if flipped == 0 || flipped == k {
		t.Errorf("%d of %d columns flipped: not random", flipped, k)
	}
	again := append([]float64(nil), orig...)
	_ = FlipSigns(again, n, k, rand.New(rand.NewPCG(7, 8)))
	for i := range again {
		if again[i] != pe[i] {
			t.Fatal("same seed, different flips")
		}
	}
	errContains(t, FlipSigns(pe, 4, k, rand.New(rand.NewPCG(1, 1))), "Laplacian encoding has 48 values, want 4 nodes * 16 = 64")
	errContains(t, FlipSigns(pe, n, k, nil), "needs a random generator")
}
