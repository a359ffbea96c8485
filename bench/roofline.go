package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/errors"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// This file is the roofline mode (-roofline, issue #35): a calibrated peak
// (sgemm and dgemm through the BLAS the project registers with Gorgonia,
// split over the threads as graph's kernels split their products), a
// measured memory bandwidth (large copy and axpy), and a table of every
// kernel of a Transformer block, forward and backward, timed in isolation
// at the reference configuration and at batch 1 × -roofline-t tokens: time,
// GFLOP/s, the bytes the kernel must move at least, its arithmetic
// intensity, its fraction of the peak and of the roofline min(peak,
// bandwidth × intensity), and whether the roofline says memory- or
// compute-bound. The whole training step (StepFLOPs) is reported against
// the same peak.
//
// Counting conventions (the formulas are in the cost functions below):
//
//   - flops: 2 per multiply-add of a matrix product; elementwise work
//     counted per element as written in each formula, a transcendental
//     (exp, tanh, log, rsqrt) as 1 flop. StepFLOPs counts matrix products
//     only, so the step row is not comparable to the sum of the kernels.
//   - bytes: the least a kernel must move, each input read once and each
//     output written once: float32 values 4 bytes, the integer ids and
//     targets (tensor.Int) 8 bytes. A backward pass reads the output
//     gradient, the forward inputs it needs and the saved activations that
//     cannot be recomputed elementwise, and writes the input gradients.
//     Intermediates inside a kernel (the FFN's hidden layer, the logits of
//     the head + cross-entropy) are not counted: they are what a fused
//     kernel would not move.
//   - the backward time is the median over the timed repetitions of
//     (forward + backward graph) − (forward graph), the two run back to back
//     in each repetition, so that load on a shared machine hits both.

// rooflineOptions are the options of -roofline.
type rooflineOptions struct {
	on      bool
	longT   int   // -roofline-t: the long configuration's T (batch 1)
	reps    int   // -reps: timed repetitions per kernel, GEMM and copy
	peakN   []int // -roofline-peak-n: GEMM sizes of the calibration
	bwMiB   int   // -roofline-bw-mib: buffer size of the bandwidth timing
	peakArg string
	// progress receives a line per measurement (nil: os.Stderr).
	progress io.Writer
}

// rooflineFlagNames are the flags of -roofline, refused without it.
var rooflineFlagNames = []string{"roofline-t", "reps", "roofline-peak-n", "roofline-bw-mib"}

// bindRooflineFlags defines the flags of -roofline on fs.
func bindRooflineFlags(fs *flag.FlagSet, ro *rooflineOptions) {
	fs.BoolVar(&ro.on, "roofline", false, "calibrated sgemm/dgemm peak, memory bandwidth and a roofline table of every kernel of a Transformer block, forward and backward, at the reference configuration and at batch 1 x -roofline-t (see bench/README.md)")
	fs.IntVar(&ro.longT, "roofline-t", 4096, "-roofline: T of the long configuration (batch 1)")
	fs.IntVar(&ro.reps, "reps", 10, "-roofline: timed repetitions of each kernel, GEMM and copy (after -warmup-steps untimed ones; medians)")
	fs.StringVar(&ro.peakArg, "roofline-peak-n", "1024,2048", "-roofline: sizes n of the square GEMMs of the peak calibration, comma-separated")
	fs.IntVar(&ro.bwMiB, "roofline-bw-mib", 256, "-roofline: MiB per buffer of the memory-bandwidth timing (copy and axpy)")
}

// rooflineFlags checks the -roofline options (or that none is given
// without -roofline) and sets the mode's defaults: encoding none for the
// training-step rows unless -pos is given; no PyTorch side.
func (o *options) rooflineFlags(explicit map[string]bool, posGiven bool, pos *string) error {
	ro := &o.roof
	if !ro.on {
		for _, f := range rooflineFlagNames {
			if explicit[f] {
				return errors.Errorf("bench: -%s is an option of -roofline", f)
			}
		}
		return nil
	}
	if o.eval || o.cost || o.decode || o.evalChild {
		return errors.New("bench: -roofline is a mode of its own: not with -eval, -cost or -decode")
	}
	if ro.longT <= 0 {
		return errors.Errorf("bench: -roofline-t %d: must be positive", ro.longT)
	}
	if ro.reps <= 0 {
		return errors.Errorf("bench: -reps %d: must be positive", ro.reps)
	}
	if ro.bwMiB <= 0 {
		return errors.Errorf("bench: -roofline-bw-mib %d: must be positive", ro.bwMiB)
	}
	ro.peakN = nil
	for _, f := range strings.Split(ro.peakArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return errors.Errorf("bench: -roofline-peak-n: bad size %q", f)
		}
		ro.peakN = append(ro.peakN, n)
	}
	if !posGiven {
		*pos = "none"
	}
	o.goOnly = true
	return nil
}

// rcost is the work of one pass of a kernel: flops and the bytes it must
// move at least.
type rcost struct{ flops, bytes float64 }

// Element sizes: float32 values, tensor.Int ids and targets.
const (
	f32Bytes = 4
	intBytes = 8
)

// linearCost is graph.Linear, x [n, in] · W [in, out] + b [out] -> y [n, out].
func linearCost(n, in, out int) (fwd, bwd rcost) {
	N, I, O := float64(n), float64(in), float64(out)
	fwd.flops = 2*N*I*O + // x·W                [n, out]
		N*O // + b
	fwd.bytes = f32Bytes * (N*I + I*O + O + // read x [n, in], W [in, out], b [out]
		N*O) // write y [n, out]
	bwd.flops = 2*N*O*I + // dx = dy·Wᵀ         [n, in]
		2*N*I*O + // dW = xᵀ·dy             [in, out]
		N*O // db = Σ_n dy                  [out]
	bwd.bytes = f32Bytes * (N*O + N*I + I*O + // read dy [n, out], x [n, in], W [in, out]
		N*I + I*O + O) // write dx [n, in], dW [in, out], db [out]
	return fwd, bwd
}

// scoresCost is graph.AttentionProbs with a causal mask, q, k [B, T, H·dh]
// -> P = softmax(q·kᵀ·scale | mask) [B, H, T, T]. The materialised path
// computes every one of the T² scores, the masked ones included.
func scoresCost(b, h, t, dh int) (fwd, bwd rcost) {
	p := float64(b) * float64(h) * float64(t) * float64(t) // scores [B, H, T, T]
	x := float64(b) * float64(t) * float64(h*dh)           // q or k [B, T, H·dh]

	fwd.flops = 2*p*float64(dh) + // q·kᵀ           [B, H, T, T]
		6*p // per score: scale, row max, subtract, exp, row sum, normalise
	fwd.bytes = f32Bytes * (2*x + float64(t)*float64(t) + // read q, k, the mask [T, T]
		p) // write P [B, H, T, T]
	bwd.flops = 2*2*p*float64(dh) + // dq = dZ·k, dk = dZᵀ·q   [B, H, T, dh] each
		5*p // dZ = scale·P∘(dP − rowsum(dP∘P)): product, row sum, subtract, product, scale
	bwd.bytes = f32Bytes * (2*p + 2*x + // read dP, P [B, H, T, T], q, k
		2*x) // write dq, dk [B, T, H·dh]
	return fwd, bwd
}

// pvCost is graph.AttentionOutput, P [B, H, T, T] · v [B, T, H·dh] ->
// [B, T, H·dh] (heads merged).
func pvCost(b, h, t, dh int) (fwd, bwd rcost) {
	p := float64(b) * float64(h) * float64(t) * float64(t) // P [B, H, T, T]
	x := float64(b) * float64(t) * float64(h*dh)           // v or out [B, T, H·dh]

	fwd.flops = 2 * p * float64(dh) // P·v        [B, H, T, dh]
	fwd.bytes = f32Bytes * (p + x + // read P, v
		x) // write out
	bwd.flops = 2*p*float64(dh) + // dP = dO·vᵀ  [B, H, T, T]
		2*p*float64(dh) // dv = Pᵀ·dO           [B, H, T, dh]
	bwd.bytes = f32Bytes * (x + p + x + // read dO, P, v
		p + x) // write dP, dv
	return fwd, bwd
}

// streamPairs is the number of (query, key) pairs graph.StreamAttention
// computes per batch element and head for causal self-attention over t
// tokens with query tiles of tile rows (clipped to t): query block
// [i0, i1) visits keys [0, i1), in key tiles, so the masked part of the
// diagonal blocks is computed and the blocks above them are skipped.
func streamPairs(t, tile int) float64 {
	tq := min(tile, t)
	var n float64
	for i0 := 0; i0 < t; i0 += tq {
		i1 := min(i0+tq, t)
		n += float64(i1-i0) * float64(i1) // rows × keys [0, i1)
	}
	return n
}

// streamCost is graph.StreamAttention, causal, q, k, v [B, T, H·dh] ->
// out [B, T, H·dh] and the row log-sum-exp [B, H, T] it keeps for the
// backward, with query tiles of tile rows; the backward recomputes the
// scores and probabilities of every visited pair (FlashAttention-2).
func streamCost(b, h, t, dh, tile int) (fwd, bwd rcost) {
	bh := float64(b) * float64(h)
	pairs := bh * streamPairs(t, tile)           // visited scores, summed over [B, H]
	x := float64(b) * float64(t) * float64(h*dh) // q, k, v or out [B, T, H·dh]
	rows := bh * float64(t)                      // log-sum-exp [B, H, T]
	D := float64(dh)
	fwd.flops = pairs*(2*D+ // s = q·kᵀ over the visited tiles
		5+ // scale, mask and running max, subtract, exp, running sum
		2*D) + // acc += p·v
		rows*D // final normalisation of the output rows
	fwd.bytes = f32Bytes * (3*x + // read q, k, v
		x + rows) // write out, log-sum-exp
	bwd.flops = 2*rows*D + // D = rowsum(dO∘O)   [B, H, T]
		pairs*(2*D+ // recompute s = q·kᵀ
			5+ // scale, subtract the log-sum-exp, exp, dP − D, ∘P
			2*D+ // dV += Pᵀ·dO
			2*D+ // dP = dO·vᵀ
			2*D+ // dQ += dS·k
			2*D) // dK += dSᵀ·q
	bwd.bytes = f32Bytes * (5*x + rows + // read q, k, v, out, dO, log-sum-exp
		3*x) // write dq, dk, dv
	return fwd, bwd
}

// geluCost is graph.GELU (tanh form) over n elements,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func geluCost(n int) (fwd, bwd rcost) {
	N := float64(n)
	fwd.flops = 9 * N            // x², x³, ·a, +x, ·√(2/π), tanh, +1, ·x, ·0.5
	fwd.bytes = f32Bytes * 2 * N // read x, write y
	// 0.5·(1+t) + 0.5·x·(1−t²)·√(2/π)·(1 + 3a·x²), times dy: the inner
	// argument again (5), tanh, t², 1−t², 3a·x², +1, ·√(2/π), ·0.5·x (2),
	// ·(1−t²), 0.5·(1+t) (2), the sum, ·dy.
	bwd.flops = 18 * N
	bwd.bytes = f32Bytes * 3 * N // read x, dy; write dx
	return fwd, bwd
}

// ffnCost is the feed-forward network of a block, x [n, d] -> Linear(d, f)
// -> GELU -> Linear(f, d) -> y [n, d]. The hidden layer [n, f] is an
// intermediate (not counted in the forward bytes); the backward reads the
// saved pre-activation z [n, f] (GELU's input; its output is recomputed
// from it elementwise).
func ffnCost(n, d, f int) (fwd, bwd rcost) {
	up, upB := linearCost(n, d, f)
	g, gB := geluCost(n * f)
	down, downB := linearCost(n, f, d)
	N, D, F := float64(n), float64(d), float64(f)
	fwd.flops = up.flops + g.flops + down.flops
	fwd.bytes = f32Bytes * (N*D + D*F + F + F*D + D + // read x [n, d], W1 [d, f], b1 [f], W2 [f, d], b2 [d]
		N*D) // write y [n, d]
	bwd.flops = upB.flops + gB.flops + downB.flops
	bwd.bytes = f32Bytes * (N*D + N*D + N*F + D*F + F*D + // read dy, x [n, d], z [n, f], W1, W2
		N*D + D*F + F + F*D + D) // write dx [n, d], dW1, db1, dW2, db2
	return fwd, bwd
}

// layerNormCost is graph.LayerNorm over the last axis, x [n, d], γ, β [d].
func layerNormCost(n, d int) (fwd, bwd rcost) {
	N, D := float64(n), float64(d)
	fwd.flops = 7*N*D + // per element: Σx, x−μ, (x−μ)², Σ, ·rstd, ·γ, +β
		4*N // per row: /d (mean), /d + ε (variance), rsqrt
	fwd.bytes = f32Bytes * (N*D + 2*D + // read x, γ, β
		N*D) // write y
	bwd.flops = 13*N*D + // per element: x̂ (2), g = dy·γ, dγ += dy·x̂ (2), dβ += dy, Σg, Σg·x̂ (2), dx = rstd·(g − mean g − x̂·mean gx̂) (4)
		2*N // per row: the two means
	bwd.bytes = f32Bytes * (N*D + N*D + D + // read dy, x, γ
		N*D + 2*D) // write dx, dγ, dβ
	return fwd, bwd
}

// embeddingCost is graph.Embedding, table [v, d] looked up at ids of n
// tokens -> [n, d]: the forward reads at most min(n, v) distinct rows; the
// backward scatter-adds dy into the rows and writes the whole dtable [v, d].
func embeddingCost(n, v, d int) (fwd, bwd rcost) {
	N, V, D := float64(n), float64(v), float64(d)
	fwd.flops = 0                                       // a gather
	fwd.bytes = intBytes*N + f32Bytes*(min(N, V)*D+N*D) // read ids, the rows; write out [n, d]
	bwd.flops = N * D                                   // dtable[ids[i]] += dy[i]
	bwd.bytes = intBytes*N + f32Bytes*(N*D+V*D)         // read ids, dy [n, d]; write dtable [v, d]
	return fwd, bwd
}

// headCECost is the output projection and the loss, x [n, d] · W [d, v] +
// b -> logits [n, v] -> graph.CrossEntropy(logits, targets [n]), the mean
// over rows of logsumexp(logits) − logits[target]. The logits are an
// intermediate of the forward; the backward reads them (recomputing them
// would be a matrix product).
func headCECost(n, d, v int) (fwd, bwd rcost) {
	lin, linB := linearCost(n, d, v)
	N, D, V := float64(n), float64(d), float64(v)
	fwd.flops = lin.flops +
		4*N*V + // per logit: row max, subtract, exp, row sum
		3*N // per row: log, − the target's logit, the mean's sum
	fwd.bytes = f32Bytes*(N*D+D*V+V) + intBytes*N + // read x, W, b, targets
		f32Bytes // write the loss
	bwd.flops = linB.flops +
		3*N*V + // dlogits = (exp(l − lse) − onehot)·dy/n: subtract, exp, scale
		N // − 1 at the target
	bwd.bytes = f32Bytes*(N*V+N*D+D*V) + intBytes*N + f32Bytes + // read logits, x, W, targets, dy
		f32Bytes*(N*D+D*V+V) // write dx, dW, db
	return fwd, bwd
}

// rkernel is one kernel of the table: its name, what it is, its shapes,
// the graph that computes it (build returns the output and the nodes the
// backward differentiates with respect to) and its costs.
type rkernel struct {
	name, shape string
	build       func(g *G.ExprGraph, rng *rand.Rand) (out *G.Node, wrt G.Nodes, err error)
	fwd, bwd    rcost
	skip        string // why the kernel is not timed at this configuration
}

// rooflineMaxP is the largest materialised [B, H, T, T] tensor the mode
// builds: the materialised kernels are skipped above it (the backward
// holds several such tensors).
const rooflineMaxP = 1 << 30

// rIn is a float32 input node of the given shape, N(0, 0.5²) values.
func rIn(g *G.ExprGraph, rng *rand.Rand, name string, shape ...int) *G.Node {
	s := tensor.Shape(shape)
	data := make([]float32, s.TotalSize())
	for i := range data {
		data[i] = float32(0.5 * rng.NormFloat64())
	}
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
}

// rInts is a tensor.Int input node of the given shape, values in [0, v).
func rInts(g *G.ExprGraph, rng *rand.Rand, name string, v int, shape ...int) *G.Node {
	s := tensor.Shape(shape)
	data := make([]int, s.TotalSize())
	for i := range data {
		data[i] = rng.Intn(v)
	}
	val := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(val))
}

func dims(s ...int) string {
	p := make([]string, len(s))
	for i, v := range s {
		p[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// rooflineKernels returns the kernels of one block of sh (and the model's
// embedding and head), in table order.
func rooflineKernels(sh Shape) []rkernel {
	b, t, d, h, f, v := sh.Batch, sh.Seq, sh.DModel, sh.Heads, sh.FFN, sh.Vocab
	dh, n := d/h, b*t
	eps := sh.Base.Model.Eps
	if eps <= 0 {
		eps = 1e-5
	}
	var ks []rkernel
	add := func(k rkernel, fwd, bwd rcost) {
		k.fwd, k.bwd = fwd, bwd
		ks = append(ks, k)
	}
	pSize := float64(b) * float64(h) * float64(t) * float64(t) * f32Bytes
	matSkip := ""
	if pSize > rooflineMaxP {
		matSkip = fmt.Sprintf("P [B, H, T, T] would take %.1f GiB", pSize/(1<<30))
	}

	fw, bw := linearCost(n, d, d)
	add(rkernel{name: "attn.proj (1 of q, k, v, o)", shape: "x" + dims(b, t, d) + "·W" + dims(d, d) + "+b",
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			x, w, bb := rIn(g, rng, "x", b, t, d), rIn(g, rng, "w", d, d), rIn(g, rng, "b", d)
			y, err := graph.Linear(x, w, bb) // [B, T, d]
			return y, G.Nodes{x, w, bb}, err
		}}, fw, bw)

	fw, bw = scoresCost(b, h, t, dh)
	add(rkernel{name: "attn.scores (materialised q·kᵀ, mask, softmax)", shape: "q,k" + dims(b, t, d) + " -> P" + dims(b, h, t, t), skip: matSkip,
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			q, k := rIn(g, rng, "q", b, t, d), rIn(g, rng, "k", b, t, d)
			mask := graph.MaskNode(g, graph.CausalMask(tensor.Float32, t, t, 0, 0), "mask") // [T, T]
			p, err := graph.AttentionProbs(q, k, graph.AttentionOpts{Heads: h, Mask: mask}) // [B, H, T, T]
			return p, G.Nodes{q, k}, err
		}}, fw, bw)

	fw, bw = pvCost(b, h, t, dh)
	add(rkernel{name: "attn.pv (materialised P·v)", shape: "P" + dims(b, h, t, t) + "·v" + dims(b, t, d), skip: matSkip,
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			p, val := rIn(g, rng, "p", b, h, t, t), rIn(g, rng, "v", b, t, d)
			o, err := graph.AttentionOutput(p, val, true) // [B, T, d]
			return o, G.Nodes{p, val}, err
		}}, fw, bw)

	fw, bw = streamCost(b, h, t, dh, graph.DefaultStreamTileQ)
	add(rkernel{name: "attn.stream (StreamAttention, causal)", shape: fmt.Sprintf("q,k,v%s, tiles %d×%d", dims(b, t, d), min(graph.DefaultStreamTileQ, t), min(graph.DefaultStreamTileK, t)),
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			q, k, val := rIn(g, rng, "q", b, t, d), rIn(g, rng, "k", b, t, d), rIn(g, rng, "v", b, t, d)
			o, err := graph.StreamAttention(q, k, val, graph.StreamOpts{Heads: h, Causal: true}) // [B, T, d]
			return o, G.Nodes{q, k, val}, err
		}}, fw, bw)

	fw, bw = ffnCost(n, d, f)
	add(rkernel{name: "ffn (Linear, GELU, Linear)", shape: fmt.Sprintf("x%s -> %d -> %d", dims(b, t, d), f, d),
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			x := rIn(g, rng, "x", b, t, d)
			w1, b1, w2, b2 := rIn(g, rng, "w1", d, f), rIn(g, rng, "b1", f), rIn(g, rng, "w2", f, d), rIn(g, rng, "b2", d)
			z, err := graph.Linear(x, w1, b1) // [B, T, F]
			if err != nil {
				return nil, nil, err
			}
			if z, err = graph.GELU(z); err != nil {
				return nil, nil, err
			}
			y, err := graph.Linear(z, w2, b2) // [B, T, d]
			return y, G.Nodes{x, w1, b1, w2, b2}, err
		}}, fw, bw)

	fw, bw = geluCost(n * f)
	add(rkernel{name: "gelu (inside ffn)", shape: "x" + dims(b, t, f),
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			x := rIn(g, rng, "x", b, t, f)
			y, err := graph.GELU(x) // [B, T, F]
			return y, G.Nodes{x}, err
		}}, fw, bw)

	fw, bw = layerNormCost(n, d)
	add(rkernel{name: "layernorm", shape: "x" + dims(b, t, d),
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			x, gm, bt := rIn(g, rng, "x", b, t, d), rIn(g, rng, "gamma", d), rIn(g, rng, "beta", d)
			y, err := graph.LayerNorm(x, gm, bt, eps) // [B, T, d]
			return y, G.Nodes{x, gm, bt}, err
		}}, fw, bw)

	fw, bw = embeddingCost(n, v, d)
	add(rkernel{name: "embedding", shape: fmt.Sprintf("table%s[ids%s]", dims(v, d), dims(b, t)),
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			tab, ids := rIn(g, rng, "table", v, d), rInts(g, rng, "ids", v, b, t)
			y, err := graph.Embedding(tab, ids) // [B, T, d]
			return y, G.Nodes{tab}, err
		}}, fw, bw)

	fw, bw = headCECost(n, d, v)
	add(rkernel{name: "head + cross-entropy", shape: "x" + dims(n, d) + "·W" + dims(d, v) + "+b, CE",
		build: func(g *G.ExprGraph, rng *rand.Rand) (*G.Node, G.Nodes, error) {
			x, w, bb := rIn(g, rng, "x", n, d), rIn(g, rng, "w", d, v), rIn(g, rng, "b", v)
			tg := rInts(g, rng, "targets", v, n)
			logits, err := graph.Linear(x, w, bb) // [N, V]
			if err != nil {
				return nil, nil, err
			}
			loss, err := graph.CrossEntropy(logits, tg) // scalar
			return loss, G.Nodes{x, w, bb}, err
		}}, fw, bw)
	return ks
}

// zeroGrad zeroes the gradient accumulated in n's dual value (as graph's
// zeroDualGrad does), unless it is the value of n's derivative node.
func zeroGrad(n *G.Node) {
	gv, err := n.Grad()
	if err != nil || gv == nil {
		return
	}
	if d := n.Deriv(); d != nil && d.Value() == gv {
		return
	}
	switch t := gv.(type) {
	case *tensor.Dense:
		t.Zero()
	case *G.F32:
		*t = 0
	case *G.F64:
		*t = 0
	}
}

// timeKernel runs the forward graph of k and its forward + backward graph
// (the backward of a fixed random output gradient, the gradients bound to
// dual values as the trainer binds them), back to back, warmup untimed
// then reps timed times, and returns the median forward time and the
// median of the differences (forward + backward) − forward, in seconds.
func timeKernel(k rkernel, warmup, reps int) (fwd, bwd float64, err error) {
	gF := G.NewGraph()
	if _, _, err := k.build(gF, rand.New(rand.NewSource(1))); err != nil {
		return 0, 0, err
	}
	mF := G.NewTapeMachine(gF)
	defer mF.Close()
	gB := G.NewGraph()
	rng := rand.New(rand.NewSource(1))
	out, wrt, err := k.build(gB, rng)
	if err != nil {
		return 0, 0, err
	}
	var dy *G.Node
	if out.IsScalar() {
		dy = G.NewConstant(float32(1))
	} else {
		dy = rIn(gB, rng, "roofline_dy", out.Shape()...)
	}
	if _, err := G.Backpropagate(G.Nodes{out}, G.Nodes{dy}, wrt); err != nil {
		return 0, 0, errors.Wrapf(err, "%s: backward", k.name)
	}
	mB := G.NewTapeMachine(gB, G.BindDualValues(wrt...))
	defer mB.Close()
	run := func(m G.VM) (float64, error) {
		t0 := time.Now()
		err := m.RunAll()
		s := time.Since(t0).Seconds()
		m.Reset()
		return s, err
	}
	runtime.GC()
	var fs, ds []float64
	for i := 0; i < warmup+reps; i++ {
		f, err := run(mF)
		if err != nil {
			return 0, 0, errors.Wrapf(err, "%s: forward", k.name)
		}
		fb, err := run(mB)
		if err != nil {
			return 0, 0, errors.Wrapf(err, "%s: forward + backward", k.name)
		}
		for _, n := range wrt {
			zeroGrad(n)
		}
		if i >= warmup {
			fs, ds = append(fs, f), append(ds, fb-f)
		}
	}
	return median(fs), median(ds), nil
}

// peakRow is one GEMM calibration: op ("sgemm", "dgemm"), size, threads,
// the median and the best time of a product and their GFLOP/s (2n³ flops).
type peakRow struct {
	op                string
	n, threads        int
	median, best      float64 // seconds
	gflops, bestGflop float64
}

// gemmSplit computes C = A·B for row-major n×n matrices with the BLAS
// Gorgonia uses (graph registers it: OpenBLAS, single-threaded, when it is
// loaded), the rows of C split over p goroutines as graph's kernels split
// a large product (graph.gemm: blocks of rows, one BLAS call each).
func gemmSplit[T float32 | float64](impl G.BLAS, n, p int, a, b, c []T) {
	call := func(lo, hi int) {
		if hi <= lo {
			return
		}
		switch a := any(a).(type) {
		case []float32:
			impl.Sgemm(blas.NoTrans, blas.NoTrans, hi-lo, n, n, 1, a[lo*n:], n, any(b).([]float32), n, 0, any(c).([]float32)[lo*n:], n)
		case []float64:
			impl.Dgemm(blas.NoTrans, blas.NoTrans, hi-lo, n, n, 1, a[lo*n:], n, any(b).([]float64), n, 0, any(c).([]float64)[lo*n:], n)
		}
	}
	splitRun(n, p, call)
}

// splitRun calls fn on p contiguous chunks of [0, n), p−1 of them on new
// goroutines, and waits.
func splitRun(n, p int, fn func(lo, hi int)) {
	if p <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < p; i++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(i*n/p, (i+1)*n/p)
	}
	fn(0, n/p)
	wg.Wait()
}

func timeGEMM[T float32 | float64](n, p, warmup, reps int) (med, best float64) {
	impl := G.WhichBLAS()
	rng := rand.New(rand.NewSource(3))
	a, b, c := make([]T, n*n), make([]T, n*n), make([]T, n*n)
	for i := range a {
		a[i], b[i] = T(rng.Float64()-0.5), T(rng.Float64()-0.5)
	}
	var ts []float64
	for i := 0; i < warmup+reps; i++ {
		t0 := time.Now()
		gemmSplit(impl, n, p, a, b, c)
		if s := time.Since(t0).Seconds(); i >= warmup {
			ts = append(ts, s)
		}
	}
	return median(ts), slices.Min(ts)
}

// calibratePeak times sgemm and dgemm on n×n matrices for every n and
// thread count, warmup untimed and reps timed products each.
func calibratePeak(ns, threads []int, warmup, reps int) []peakRow {
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)
	var rows []peakRow
	for _, op := range []string{"sgemm", "dgemm"} {
		for _, n := range ns {
			for _, p := range threads {
				setGoThreads(p)
				var med, best float64
				if op == "sgemm" {
					med, best = timeGEMM[float32](n, p, warmup, reps)
				} else {
					med, best = timeGEMM[float64](n, p, warmup, reps)
				}
				fl := 2 * float64(n) * float64(n) * float64(n)
				rows = append(rows, peakRow{op: op, n: n, threads: p, median: med, best: best, gflops: fl / med / 1e9, bestGflop: fl / best / 1e9})
			}
		}
	}
	return rows
}

// peakOf returns the highest median GFLOP/s of op at p threads over the
// calibrated sizes (0 if none).
func peakOf(rows []peakRow, op string, p int) float64 {
	var g float64
	for _, r := range rows {
		if r.op == op && r.threads == p && r.gflops > g {
			g = r.gflops
		}
	}
	return g
}

// bwRow is one bandwidth timing: op (copy, axpy), threads, the bytes it
// moves per pass, the median time and GB/s.
type bwRow struct {
	op         string
	threads    int
	bytes, sec float64
	gbps       float64
}

// memBandwidth times a copy y = x (2 buffers of mib MiB: read + write) and
// an axpy y += a·x (the BLAS's Saxpy: 2 reads + 1 write) of float32
// buffers, split over each thread count, warmup untimed and reps timed
// passes each; the bytes count each buffer read or written once.
func memBandwidth(mib int, threads []int, warmup, reps int) []bwRow {
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)
	n := mib << 20 / f32Bytes
	x, y := make([]float32, n), make([]float32, n)
	for i := range x { // touch every page before timing
		x[i], y[i] = 1, 0
	}
	impl := G.WhichBLAS()
	size := float64(n) * f32Bytes
	var rows []bwRow
	for _, p := range threads {
		setGoThreads(p)
		for _, op := range []string{"copy", "axpy"} {
			var ts []float64
			for i := 0; i < warmup+reps; i++ {
				t0 := time.Now()
				splitRun(n, p, func(lo, hi int) {
					if op == "copy" {
						copy(y[lo:hi], x[lo:hi])
					} else {
						impl.Saxpy(hi-lo, 1e-7, x[lo:hi], 1, y[lo:hi], 1)
					}
				})
				if s := time.Since(t0).Seconds(); i >= warmup {
					ts = append(ts, s)
				}
			}
			bytes := 2 * size
			if op == "axpy" {
				bytes = 3 * size
			}
			med := median(ts)
			rows = append(rows, bwRow{op: op, threads: p, bytes: bytes, sec: med, gbps: bytes / med / 1e9})
		}
	}
	return rows
}

// bandwidthOf is the higher median GB/s of copy and axpy at p threads.
func bandwidthOf(rows []bwRow, p int) float64 {
	var g float64
	for _, r := range rows {
		if r.threads == p && r.gbps > g {
			g = r.gbps
		}
	}
	return g
}

// rooflineConfig is one configuration of the table: a name, the shape and
// whether the training-step rows stream the attention.
type rooflineConfig struct {
	name string
	sh   Shape
}

// rooflineConfigs returns the reference configuration sh and the long one
// (batch 1, longT tokens, the training step streamed).
func rooflineConfigs(sh Shape, longT int) []rooflineConfig {
	long := sh
	long.Batch, long.Seq = 1, longT
	long.Base.Model.Stream = true
	return []rooflineConfig{{"reference", sh}, {"long", long}}
}

// rooflineCell is one measured row: a kernel (or the step), a direction
// and a thread count.
type rooflineCell struct {
	kernel, dir, shape string
	threads            int
	sec                float64
	cost               rcost
	noBytes            bool   // the step: no byte count, no roofline
	skip               string // not measured, why
}

// rooflineResult is everything the mode measured.
type rooflineResult struct {
	peak    []peakRow
	bw      []bwRow
	configs []rooflineConfig
	cells   [][]rooflineCell // per configuration
}

// runRoofline is the -roofline mode.
func runRoofline(o options, w io.Writer) error {
	ro := o.roof
	if ro.progress == nil {
		ro.progress = os.Stderr
	}
	threads := slices.Clone(o.threads)
	slices.Sort(threads)
	threads = slices.Compact(threads)
	res, err := measureRoofline(o.shape, ro, threads, o.pos, o.warmup)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "roofline: Go %s, %s, GOMAXPROCS %d, %d CPUs; float32 kernels, %d warm-up + %d timed repetitions each, medians\n\n",
		runtime.Version(), graph.BLASName(), runtime.GOMAXPROCS(0), runtime.NumCPU(), o.warmup, ro.reps)
	renderRoofline(w, o.markdown, res, threads)
	return nil
}

// measureRoofline calibrates the peak and the bandwidth at every thread
// count, then times every kernel of each configuration, forward and
// backward, and the training step of each encoding of pos.
func measureRoofline(sh Shape, ro rooflineOptions, threads []int, pos []string, warmup int) (*rooflineResult, error) {
	if ro.progress == nil {
		ro.progress = io.Discard
	}
	res := &rooflineResult{}
	fmt.Fprintf(ro.progress, "roofline: GEMM peak, n = %v, threads %v\n", ro.peakN, threads)
	res.peak = calibratePeak(ro.peakN, threads, min(warmup, 1), ro.reps)
	fmt.Fprintf(ro.progress, "roofline: memory bandwidth, %d MiB buffers\n", ro.bwMiB)
	res.bw = memBandwidth(ro.bwMiB, threads, min(warmup, 1), ro.reps)
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)
	res.configs = rooflineConfigs(sh, ro.longT)
	for _, c := range res.configs {
		var cells []rooflineCell
		for _, k := range rooflineKernels(c.sh) {
			for _, p := range threads {
				f := rooflineCell{kernel: k.name, dir: "fwd", shape: k.shape, threads: p, cost: k.fwd, skip: k.skip}
				b := rooflineCell{kernel: k.name, dir: "bwd", shape: k.shape, threads: p, cost: k.bwd, skip: k.skip}
				if k.skip == "" {
					setGoThreads(p)
					var err error
					f.sec, b.sec, err = timeKernel(k, warmup, ro.reps)
					setGoThreads(maxProcs)
					if err != nil {
						return nil, errors.WithMessagef(err, "roofline %s", c.name)
					}
					fmt.Fprintf(ro.progress, "roofline %s: %s %dt: fwd %.3f ms, bwd %.3f ms\n", c.name, k.name, p, 1000*f.sec, 1000*b.sec)
				}
				cells = append(cells, f, b)
			}
		}
		for _, e := range pos {
			cells = append(cells, timeSteps(c.sh, e, threads, warmup, ro)...)
			setGoThreads(maxProcs)
		}
		res.cells = append(res.cells, cells)
	}
	return res, nil
}

// timeSteps times training steps of encoding pos on sh at each thread
// count: warmup untimed and reps timed steps, the median.
func timeSteps(sh Shape, pos string, threads []int, warmup int, ro rooflineOptions) []rooflineCell {
	name := "train step (" + pos + ")"
	how := "materialised"
	if sh.Base.Model.Stream {
		how = "streamed"
	}
	shape := fmt.Sprintf("batch %d × %d tokens, %s attention", sh.Batch, sh.Seq, how)
	cell := func(p int, sec float64, skip string) rooflineCell {
		return rooflineCell{kernel: name, dir: "fwd+bwd+AdamW", shape: shape, threads: p, sec: sec,
			cost: rcost{flops: StepFLOPs(sh, pos)}, noBytes: true, skip: skip}
	}
	var cells []rooflineCell
	r, err := newGoRunnerCorpus(sh, pos, max(1<<16, 16*(sh.Seq+1)))
	if err != nil {
		for _, p := range threads {
			cells = append(cells, cell(p, 0, "error: "+err.Error()))
		}
		return cells
	}
	defer r.close()
	for _, p := range threads {
		setGoThreads(p)
		runtime.GC()
		times, _, err := r.time(warmup, ro.reps)
		if err != nil {
			cells = append(cells, cell(p, 0, "error: "+err.Error()))
			continue
		}
		cells = append(cells, cell(p, median(times), ""))
		fmt.Fprintf(ro.progress, "roofline: %s, %s, %dt: %.1f ms\n", name, shape, p, 1000*median(times))
	}
	return cells
}

// fmtBytes prints a byte count in decimal units (as GB/s is).
func fmtBytes(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// renderRoofline writes the peak, the bandwidth and a roofline table per
// configuration.
func renderRoofline(w io.Writer, markdown bool, res *rooflineResult, threads []int) {
	fmt.Fprintln(w, "calibrated peak: C = A·B, n×n, through the BLAS registered with Gorgonia (OpenBLAS single-threaded when loaded), rows of C split over the threads as graph's kernels split a product; 2n³ flops")
	var rows [][]string
	for _, r := range res.peak {
		rows = append(rows, []string{r.op, strconv.Itoa(r.n), strconv.Itoa(r.threads), fmt.Sprintf("%.2f", 1000*r.median),
			fmt.Sprintf("%.1f", r.gflops), fmt.Sprintf("%.1f", r.bestGflop)})
	}
	writeTable(w, markdown, []string{"op", "n", "threads", "median ms", "GFLOP/s (median)", "GFLOP/s (best)"}, rows)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "memory bandwidth: float32 buffers, copy y = x (bytes read + written), axpy y += a·x (2 reads + 1 write)")
	rows = nil
	for _, r := range res.bw {
		rows = append(rows, []string{r.op, strconv.Itoa(r.threads), fmtBytes(r.bytes), fmt.Sprintf("%.2f", 1000*r.sec), fmt.Sprintf("%.2f", r.gbps)})
	}
	writeTable(w, markdown, []string{"op", "threads", "bytes", "median ms", "GB/s"}, rows)
	fmt.Fprintln(w)
	for _, p := range threads {
		pk, bw := peakOf(res.peak, "sgemm", p), bandwidthOf(res.bw, p)
		fmt.Fprintf(w, "roofline at %dt: peak %.1f GFLOP/s (sgemm, best size), bandwidth %.2f GB/s (best of copy, axpy), ridge point %.1f flop/byte; dgemm %.1f GFLOP/s\n",
			p, pk, bw, pk/bw, peakOf(res.peak, "dgemm", p))
	}
	head := []string{"kernel", "dir", "threads", "shape", "ms", "GFLOP", "GFLOP/s", "bytes", "flop/byte", "% peak", "% roof", "bound"}
	for i, c := range res.configs {
		sh := c.sh
		fmt.Fprintf(w, "\n%s: batch %d × %d tokens, d_model %d, %d heads (d_head %d), FFN %d, vocab %d, float32\n",
			c.name, sh.Batch, sh.Seq, sh.DModel, sh.Heads, sh.DModel/sh.Heads, sh.FFN, sh.Vocab)
		rows = nil
		for _, x := range res.cells[i] {
			rows = append(rows, rooflineRow(x, peakOf(res.peak, "sgemm", x.threads), bandwidthOf(res.bw, x.threads)))
		}
		writeTable(w, markdown, head, rows)
	}
	fmt.Fprintln(w, "\nbwd = (forward + backward) − forward of the same kernel; bytes: the least the kernel must move (inputs read, outputs written once); "+
		"% roof: of min(peak, bandwidth × flop/byte); bound: memory if flop/byte is below the ridge point. "+
		"The train step's GFLOP counts matrix products only (StepFLOPs: every T² score, streamed or not).")
}

// rooflineRow formats one cell against the peak (GFLOP/s) and the
// bandwidth (GB/s) of its thread count.
func rooflineRow(x rooflineCell, peak, bw float64) []string {
	row := []string{x.kernel, x.dir, strconv.Itoa(x.threads), x.shape}
	gf := x.cost.flops / 1e9
	if x.skip != "" {
		row = append(row, "-", fmt.Sprintf("%.4g", gf), "-", "-", "-", "-", "-", "skipped: "+x.skip)
		if !x.noBytes {
			row[7] = fmtBytes(x.cost.bytes)
		}
		return row
	}
	var rate string
	achieved := math.NaN()
	if x.sec > 0 {
		achieved = gf / x.sec
		rate = fmt.Sprintf("%.2f", achieved)
	} else {
		rate = "n/a (time ≤ 0)"
	}
	pct := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "-"
		}
		return fmt.Sprintf("%.1f", 100*v)
	}
	row = append(row, fmt.Sprintf("%.3f", 1000*x.sec), fmt.Sprintf("%.4g", gf), rate)
	if x.noBytes {
		return append(row, "-", "-", pct(achieved/peak), "-", "-")
	}
	ai := x.cost.flops / x.cost.bytes
	roof := math.Min(peak, bw*ai)
	bound := "compute"
	if ai < peak/bw {
		bound = "memory"
	}
	return append(row, fmtBytes(x.cost.bytes), fmt.Sprintf("%.2f", ai), pct(achieved/peak), pct(achieved/roof), bound)
}
