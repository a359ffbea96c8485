package graph

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// threadCase builds a graph from ops with a multi-threaded path, on inputs
// large enough to take it; runThreads runs it forward and backward.
type threadCase struct {
	name string
	// exact: the threads split independent rows, matrices or elements, so
	// the results must be bitwise equal at any thread count; otherwise
	// (per-thread partial sums merged afterwards: LayerNorm's dgamma and
	// dbeta, the bias reduction, products split over OpenBLAS calls) equal
	// to float tolerance.
	exact bool
	// minRuns is the number of threaded kernel runs of one forward and
	// backward pass at several threads (one per threaded kernel call, the
	// weighted-sum loss's BroadcastMul included) counted on these inputs: a
	// smaller count means an input no longer takes the threaded path.
	minRuns int64
	build   func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (out *G.Node, wrt G.Nodes)
}

var threadCases = []threadCase{
	{"Linear with bias", false, 6, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		// bias path: row blocks of 512 rows for Out = 128, so 2048 rows
		// give 4 blocks; the gradients go through gemm and the row sums
		x := input(g, "x", randDense(rng, dt, 1, 4, 512, 64))
		w := input(g, "w", randDense(rng, dt, 0.1, 64, 128))
		b := input(g, "b", randDense(rng, dt, 0.1, 128))
		return must(t)(Linear(x, w, b)), G.Nodes{x, w, b}
	}},
	{"Linear without bias", false, 5, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		x := input(g, "x", randDense(rng, dt, 1, 2, 128, 96))
		w := input(g, "w", randDense(rng, dt, 0.1, 96, 128))
		return must(t)(Linear(x, w, nil)), G.Nodes{x, w}
	}},
	{"LayerNorm", false, 4, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		// backward: rows*d = 32768 >= 2^14 takes the threaded path whose
		// per-thread dgamma, dbeta sums are merged
		x := input(g, "x", randDense(rng, dt, 1, 512, 64))
		gm := input(g, "gamma", randDense(rng, dt, 1, 64))
		bt := input(g, "beta", randDense(rng, dt, 1, 64))
		return must(t)(LayerNorm(x, gm, bt, 1e-5)), G.Nodes{x, gm, bt}
	}},
	{"GELU", true, 4, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		x := input(g, "x", randDense(rng, dt, 2, 64, 512))
		return must(t)(GELU(x)), G.Nodes{x}
	}},
	{"MaskedSoftmax", true, 4, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		x := input(g, "x", randDense(rng, dt, 2, 8, 4, 32, 32))
		m := MaskNode(g, CausalMask(dt, 32, 32, 0, 0), "mask")
		return must(t)(MaskedSoftmax(x, m)), G.Nodes{x}
	}},
	{"CrossEntropy", true, 3, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		x := input(g, "logits", randDense(rng, dt, 2, 256, 128))
		tg := make([]int, 256)
		for i := range tg {
			tg[i] = rng.Intn(128)
		}
		tg[3] = -1 // ignored
		return must(t)(CrossEntropy(x, intInput(g, "targets", tg, 256))), G.Nodes{x}
	}},
	{"BroadcastAdd and BroadcastMul", false, 6, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		a := input(g, "a", randDense(rng, dt, 1, 256, 256))
		b := input(g, "b", randDense(rng, dt, 1, 256))
		c := input(g, "c", randDense(rng, dt, 1, 256, 256))
		s := must(t)(BroadcastAdd(a, b))                     // row broadcast; db is a row sum
		return must(t)(BroadcastMul(s, c)), G.Nodes{a, b, c} // same size: elementwise
	}},
	{"AttentionProbs and AttentionOutput", true, 8, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		const b, h, tt, dh = 2, 4, 64, 16
		q := input(g, "q", randDense(rng, dt, 1, b, tt, h*dh))
		k := input(g, "k", randDense(rng, dt, 1, b, tt, h*dh))
		v := input(g, "v", randDense(rng, dt, 1, b, tt, h*dh))
		terms := input(g, "terms", randDense(rng, dt, 1, b, h, tt, tt))
		bias := input(g, "bias", randDense(rng, dt, 1, h, tt, tt))
		m := MaskNode(g, CausalMask(dt, tt, tt, 0, 0), "mask")
		p := must(t)(AttentionProbs(q, k, AttentionOpts{Heads: h, Terms: terms, Bias: bias, Mask: m}))
		return must(t)(AttentionOutput(p, v, true)), G.Nodes{q, k, v, terms, bias}
	}},
	{"SplitHeads, RelScores, TransposeLast2, MergeHeads", true, 11, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		x := input(g, "x", randDense(rng, dt, 1, 2, 128, 256))
		tab := input(g, "tab", randDense(rng, dt, 1, 4, 64, 64))
		s := must(t)(SplitHeads(x, 4))                  // [2, 4, 128, 64]
		r := must(t)(RelScores(s, tab))                 // [2, 4, 128, 64]; dtab sums the batch per head
		tr := must(t)(TransposeLast2(r))                // [2, 4, 64, 128]
		return must(t)(MergeHeads(tr)), G.Nodes{x, tab} // [2, 64, 512]
	}},
	{"Rotary", true, 4, func(t *testing.T, g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype) (*G.Node, G.Nodes) {
		const tt, half = 128, 16
		cos, sin := make([]float64, tt*half), make([]float64, tt*half)
		for i := range cos {
			a := rng.Float64() * 2 * math.Pi
			cos[i], sin[i] = math.Cos(a), math.Sin(a)
		}
		tab, err := NewRotaryTable(tt, half, cos, sin)
		if err != nil {
			t.Fatal(err)
		}
		x := input(g, "x", randDense(rng, dt, 1, 2, 4, tt, 2*half))
		return must(t)(Rotary(x, tab, RotaryHalf)), G.Nodes{x}
	}},
}

// runThreads builds c with the kernels at n threads, runs the forward and
// backward pass of a weighted-sum loss, and returns the output and every
// gradient, and how many kernel runs were split over several goroutines.
func runThreads(t *testing.T, c threadCase, dt tensor.Dtype, n int) ([][]float64, int64) {
	t.Helper()
	old := threads.Load()
	defer threads.Store(old)
	SetThreads(n)
	rng := rand.New(rand.NewSource(5))
	g := G.NewGraph()
	out, wrt := c.build(t, g, rng, dt)
	loss := projLoss(t, rng, out, "proj")
	before := threadedRuns.Load()
	vals, grads := gradsOf(t, g, loss, G.Nodes{out}, wrt)
	return append(vals, grads...), threadedRuns.Load() - before
}

// TestThreadedKernelsMatchSerial compares every kernel that splits its
// work over goroutines at 1 thread and at 2, 3 and 4 threads, forward and
// backward, in float32 and float64: bitwise where the split is over
// independent rows or matrices, to float tolerance where per-thread partial
// sums are merged. It also checks that the inputs took the threaded path
// (and that 1 thread never does).
func TestThreadedKernelsMatchSerial(t *testing.T) {
	lowParallelMin(t)
	for _, c := range threadCases {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", c.name, dt), func(t *testing.T) {
				serial, runs := runThreads(t, c, dt, 1)
				if runs != 0 {
					t.Fatalf("1 thread: %d threaded kernel runs", runs)
				}
				rtol := 1e-12
				if dt == tensor.Float32 {
					rtol = 2e-5
				}
				for _, n := range []int{2, 3, 4} {
					par, runs := runThreads(t, c, dt, n)
					if runs < c.minRuns {
						t.Fatalf("%d threads: %d threaded kernel runs, want >= %d (input too small for the threaded path?)", n, runs, c.minRuns)
					}
					for i := range serial {
						what := "output"
						if i > 0 {
							what = fmt.Sprintf("gradient %d", i-1)
						}
						if c.exact {
							for j := range serial[i] {
								if math.Float64bits(serial[i][j]) != math.Float64bits(par[i][j]) {
									t.Fatalf("%d threads: %s element %d = %v, 1 thread %v (want bitwise equal)", n, what, j, par[i][j], serial[i][j])
								}
							}
							continue
						}
						scale := 0.0
						for _, v := range serial[i] {
							scale = math.Max(scale, math.Abs(v))
						}
						checkClose(t, fmt.Sprintf("%d threads: %s", n, what), par[i], serial[i], rtol*scale, rtol)
					}
				}
			})
		}
	}
}
