package graph

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gridNeighbours is the neighbour table of a k×k zero-padded convolution
// on a rows×cols grid in raster order, with cell hole (if >= 0) left out of
// the tokens: T = rows*cols (or one less), tap o = u*k+v of the token at
// (r, c) is the token at (r+u-k/2, c+v-k/2), -1 outside or at the hole.
func gridNeighbours(rows, cols, k, hole int) (nbr []int, cells []int) {
	tok := make([]int, rows*cols)
	for cell := range tok {
		if cell == hole {
			tok[cell] = -1
			continue
		}
		tok[cell] = len(cells)
		cells = append(cells, cell)
	}
	p := k / 2
	for _, cell := range cells {
		r, c := cell/cols, cell%cols
		for u := 0; u < k; u++ {
			for v := 0; v < k; v++ {
				rr, cc := r+u-p, c+v-p
				j := -1
				if rr >= 0 && rr < rows && cc >= 0 && cc < cols {
					j = tok[rr*cols+cc]
				}
				nbr = append(nbr, j)
			}
		}
	}
	return nbr, cells
}

// refConv2D is the zero-padded depthwise cross-correlation of PyTorch's
// conv2d(groups=d, padding=k/2) written on the grid: x [B, rows, cols, d],
// w [k, k, d] -> [B, rows, cols, d].
func refConv2D(x []float64, bsz, rows, cols, d int, w, bias []float64, k int) []float64 {
	y := make([]float64, len(x))
	p := k / 2
	for b := 0; b < bsz; b++ {
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				for ch := 0; ch < d; ch++ {
					s := bias[ch]
					for u := 0; u < k; u++ {
						for v := 0; v < k; v++ {
							rr, cc := r+u-p, c+v-p
							if rr < 0 || rr >= rows || cc < 0 || cc >= cols {
								continue
							}
							s += w[(u*k+v)*d+ch] * x[((b*rows+rr)*cols+cc)*d+ch]
						}
					}
					y[((b*rows+r)*cols+c)*d+ch] = s
				}
			}
		}
	}
	return y
}

func TestDepthwiseConvValues(t *testing.T) {
	cases := []struct{ b, rows, cols, k, d int }{
		{2, 3, 5, 3, 4}, {1, 4, 2, 5, 3}, {3, 1, 6, 3, 2}, {1, 2, 2, 1, 5}, {2, 6, 7, 7, 2},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%dx%d k%d", c.rows, c.cols, c.k), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(ci + 1)))
			tt := c.rows * c.cols
			nbr, _ := gridNeighbours(c.rows, c.cols, c.k, -1)
			for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				g := G.NewGraph()
				xv := randDense(rng, tensor.Float64, 1, c.b, tt, c.d)
				wv := randDense(rng, tensor.Float64, 1, c.k*c.k, c.d)
				bv := randDense(rng, tensor.Float64, 1, c.d)
				conv := func(v *tensor.Dense) *tensor.Dense { return fromFloat64(dt, v.Shape(), ToFloat64s(v)) }
				y := must(t)(DepthwiseConv(input(g, "x", conv(xv)), input(g, "w", conv(wv)), input(g, "b", conv(bv)), nbr))
				run(t, g)
				want := refConv2D(ToFloat64s(xv), c.b, c.rows, c.cols, c.d, ToFloat64s(wv), ToFloat64s(bv), c.k)
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				if i, ok := closeTo(ToFloat64s(y.Value()), want, tol, tol); !ok {
					t.Fatalf("%v: element %d = %v, reference conv %v", dt, i, ToFloat64s(y.Value())[i], want[i])
				}
			}
		})
	}
}

// TestDepthwiseConvGrad gradient-checks x, w and bias on a raster grid, a
// grid with a hole and a shuffled token order.
func TestDepthwiseConvGrad(t *testing.T) {
	for ci, c := range []struct {
		name             string
		rows, cols, k, h int
		shuffle          bool
	}{
		{"3x4 k3", 3, 4, 3, -1, false},
		{"4x3 k5 hole", 4, 3, 5, 5, false},
		{"3x3 k3 shuffled", 3, 3, 3, -1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(40 + ci)))
			nbr, cells := gridNeighbours(c.rows, c.cols, c.k, c.h)
			tt, kk := len(cells), c.k*c.k
			if c.shuffle { // token n of the new order is old token perm[n]
				perm := rng.Perm(tt)
				inv := make([]int, tt)
				for n, o := range perm {
					inv[o] = n
				}
				sh := make([]int, len(nbr))
				for n, o := range perm {
					for q := 0; q < kk; q++ {
						if j := nbr[o*kk+q]; j >= 0 {
							sh[n*kk+q] = inv[j]
						} else {
							sh[n*kk+q] = -1
						}
					}
				}
				nbr = sh
			}
			g := G.NewGraph()
			x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, tt, 3))
			w := input(g, "w", randDense(rng, tensor.Float64, 1, kk, 3))
			b := input(g, "b", randDense(rng, tensor.Float64, 1, 3))
			y := must(t)(DepthwiseConv(x, w, b, nbr))
			loss := projLoss(t, rng, y, "proj")
			if err := GradCheck(g, loss, G.Nodes{x, w, b}, GradCheckOpts{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDepthwiseConvErrors(t *testing.T) {
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(3))
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 4, 3))
	w := input(g, "w", randDense(rng, tensor.Float64, 1, 9, 3))
	b := input(g, "b", randDense(rng, tensor.Float64, 1, 3))
	nbr := make([]int, 4*9)
	x2 := input(g, "x2", randDense(rng, tensor.Float64, 1, 8, 3))
	w4 := input(g, "w4", randDense(rng, tensor.Float64, 1, 9, 4))
	b4 := input(g, "b4", randDense(rng, tensor.Float64, 1, 4))
	x32 := input(g, "x32", randDense(rng, tensor.Float32, 1, 2, 4, 3))
	bad := append([]int(nil), nbr...)
	bad[7] = 4
	for _, c := range []struct {
		name    string
		x, w, b *G.Node
		nbr     []int
		want    string
	}{
		{"rank", x2, w, b, nbr, "must be [B, T, d]"},
		{"w width", x, w4, b, nbr, "must be [K, 3]"},
		{"bias width", x, w, b4, nbr, "must be [3]"},
		{"dtype", x32, w, b, nbr, "dtypes differ"},
		{"table length", x, w, b, nbr[1:], "35 neighbour entries"},
		{"neighbour range", x, w, b, bad, "neighbour 7 of token 0 is 4"},
		{"nil", x, nil, b, nbr, "w is nil"},
	} {
		if _, err := DepthwiseConv(c.x, c.w, c.b, c.nbr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestDepthwiseConvThreads: the output and the gradients of x and w are
// bitwise equal at 1 and at 2 and 3 threads (rows and taps are split, never
// partial sums); the bias gradient (broadcastReduce, which merges
// per-thread partial sums) to float tolerance.
func TestDepthwiseConvThreads(t *testing.T) {
	lowParallelMin(t)
	c := threadCase{"DepthwiseConv", true, 4, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		nbr, _ := gridNeighbours(14, 14, 3, -1)
		x := input(g, "x", randDense(rng, dt, 1, 4, 196, 64))
		w := input(g, "w", randDense(rng, dt, 1, 9, 64))
		b := input(g, "b", randDense(rng, dt, 1, 64))
		return must(t)(DepthwiseConv(x, w, b, nbr)), G.Nodes{x, w, b}
	}}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		serial, runs := runThreads(t, c, dt, 1)
		if runs != 0 {
			t.Fatalf("1 thread: %d threaded runs", runs)
		}
		for _, n := range []int{2, 3} {
			par, runs := runThreads(t, c, dt, n)
			if runs < c.minRuns {
				t.Fatalf("%v, %d threads: %d threaded runs, want >= %d", dt, n, runs, c.minRuns)
			}
			for i := range serial {
				if i == 3 { // dbias
					tol := 1e-12
					if dt == tensor.Float32 {
						tol = 1e-5
					}
					checkClose(t, "dbias", par[i], serial[i], tol, tol)
					continue
				}
				for j := range serial[i] {
					if math.Float64bits(serial[i][j]) != math.Float64bits(par[i][j]) {
						t.Fatalf("%v, %d threads: tensor %d element %d = %v, 1 thread %v", dt, n, i, j, par[i][j], serial[i][j])
					}
				}
			}
		}
	}
}
