// Package graph holds the computation-graph pieces that the rest of the
// module builds on: the store of learnable parameters (Params), the
// operations that Gorgonia v0.9.18 lacks or gets wrong, attention masks, and
// a numerical gradient checker used by the tests of every package.
//
// It imports Gorgonia, its tensor package, pkg/errors and gonum's BLAS
// interfaces; the default (cgo) build also links OpenBLAS through gonum's
// netlib binding (see Performance).
//
// # Ops
//
// Every op is a custom Gorgonia Op with a symbolic derivative (G.SDOp) built
// from further custom gradient ops, works on float32 and float64 graphs, never
// writes into its inputs or returns a view of them, validates shapes when the node is built
// (errors name the op and the shapes) and is gradient-checked in float64
// against central finite differences:
//
//	LayerNorm(x, gamma, beta, eps)  x [..., d], gamma, beta [d]: layer normalisation over the last axis
//	GELU(x)                         tanh-approximated GELU, elementwise
//	CrossEntropy(logits, targets)   logits [N, V], targets tensor.Int [N] (negative = ignored): mean loss, a scalar
//	Embedding(table, ids)           table [V, d], ids tensor.Int S: rows of table, S+[d]
//	MaskedSoftmax(x, mask)          softmax over the last axis restricted to mask != 0 (broadcast mask)
//	BroadcastAdd(a, b)              a + b, b broadcast onto a (numpy rules, one-sided)
//	BroadcastMul(a, b)              a * b, likewise
//	Rotary(x, tab, pairing)         rotary rotation of x [..., T, D] by a host cos/sin table (RoPE)
//	RotaryAngles(x, angles, pairing) rotation by angles from a node [..., T, D/2] (learnable: RoPE-Mixed);
//	                                gradients w.r.t. x and the angles
//	GatherRel(m, idx, tq, tk)       m [..., Tq, R] -> [..., Tq, Tk] by host indices (relative lookups, bias tables)
//	TableBias(table, ids)           table [R, H], ids tensor.Int [B, Tq, Tk] -> bias [B, H, Tq, Tk]; ids rebindable
//	                                (per-example graph and syntax-tree relations, one graph for every batch)
//	CoPEInterp(table, pos)          table [..., P], pos [..., K] -> [..., K]: table read at clamp(pos, 0, P-1) by linear
//	                                interpolation (CoPE); gradients w.r.t. both, as PyTorch's autograd of the paper's code
//	CoPEPositions(x, qs, ks, scale) x [..., Tq, Tk] -> CoPE's positions Σ_{k>=j} σ(scale·x_ik) over the keys visible
//	                                by position (ks+k <= qs+i): sigmoid, causal mask and reverse cumulative sum in one op
//	DepthwiseConv(x, w, b, nbr)     x [B, T, d], w [K, d], b [d]: per-channel sum over each token's K neighbours
//	                                (host table nbr [T*K], -1 = empty cell); CPE's convolution on any grid
//
// Fused ops, each replacing a chain of Gorgonia ops on the hot path of a
// Transformer (hand-written gradients, no materialised transposes or
// broadcasts):
//
//	Linear(x, w, b)                 x [..., In] · w [In, Out] + b [Out]: one matrix product, bias folded in
//	AttentionProbs(q, k, opts)      softmax((q·kᵀ + terms)·scale + bias | mask) [B, H, Tq, Tk], q and k
//	                                [B, H, T, dh] or heads merged [B, T, H*dh]
//	AttentionOutput(probs, v, merge) probs·v per head, v and the result split or merged
//	                                (opts.Probe, an AttentionProbe, records per-head entropy, score
//	                                extremes, position-bias RMS and one-hot fraction while armed)
//	StreamAttention(q, k, v, opts)  softmax(q·kᵀ·scale + bias | mask)·v without a [Tq, Tk] tensor: keys in tiles,
//	                                online softmax, backward by recomputation (FlashAttention-2); causal with
//	                                offsets, key padding, bias from a table [R, H|1] by host rows per tile
//	                                (TileIndexer); relative terms per tile (opts.Terms, StreamTerm: query terms
//	                                (q+c)·Table[row], key terms k·Table[row], value terms Σ p·Table[row], tables
//	                                [R, H*d|d]: Shaw, XL, DeBERTa); FIRE's bias computed per tile from its MLP's
//	                                parameter nodes (opts.FIRE, FIREBias); O(tile) work space per thread,
//	                                opts.Probe as AttentionProbs
//	StreamCoPE(q, k, v, emb, opts, co) StreamAttention with CoPE's term: gates carried across key tiles from
//	                                the diagonal backwards, q·emb per query block; causal, key padding, offsets
//	SplitHeads(x, H), MergeHeads(x) [B, T, H*dh] <-> [B, H, T, dh]
//	RelScores(x, tab)               x [B, H, T, dh] · tab [H, R, dh]ᵀ -> [B, H, T, R] (XL, DeBERTa)
//	TransposeLast2(x)               [..., M, N] -> [..., N, M]
//
// Gradient ops (never differentiated again; their SymDiff returns an error):
// layerNormGradX (which also accumulates dgamma and dbeta, handed out by
// layerNormGradGamma and layerNormGradBeta), geluGrad, crossEntropyGrad,
// embeddingGrad (a scatter-add), softmaxGrad, broadcastReduce (sum over the
// broadcast axes) and broadcastMulReduce. The gradient products of Linear
// and of the attention ops (linearGradX, linearGradW, headMatMul) are
// differentiable.
//
// # Performance
//
// Matrix products run on OpenBLAS where it is installed and on gonum's
// pure-Go BLAS elsewhere, in the same binary: with cgo (the default
// wherever a C compiler is found) the package loads libopenblas.so.0 with
// dlopen at start-up (Debian package libopenblas0, pulled in by
// libopenblas-dev; about 4.5x faster on the reference model) and falls back
// to gonum if it is missing. RPE_BLAS=gonum forces gonum, RPE_BLAS=/path
// loads another CBLAS; -tags purego or CGO_ENABLED=0 builds without any C
// (see blas_cgo.go). The same BLAS is installed into Gorgonia (G.Use) for
// its own ops. BLASName says
// which is in use. OpenBLAS runs single-threaded: large products are split
// into row or column blocks, and attention into (batch, head) pairs, over
// Threads() goroutines (SetThreads; default GOMAXPROCS). threads_test.go
// runs every threaded kernel, forward and backward, at 1 and at several
// threads on inputs large enough to take the threaded path (checked by
// counting threaded runs): bitwise equal where the threads split independent
// rows or matrices, equal to float tolerance where per-thread partial sums
// are merged (LayerNorm's dgamma and dbeta, bias row sums) or a product is
// split over several BLAS calls.
//
// The float32 elementwise kernels (GELU, softmax, cross-entropy, LayerNorm,
// the bias reduction) are AVX2 C code in the default build on CPUs with AVX2
// and FMA, and Go otherwise (Kernels says which); exp and tanh are
// polynomial approximations within a few float32 ulps. float64 keeps the
// math package's functions, so gradient checks and golden tests are exact.
//
// Every op keeps its output tensor and overwrites it on the next run of its
// node instead of allocating a new one: a value read from a node is valid
// until the machine runs again, so copy it to keep it.
//
// # Masks
//
// Masks are host tensors of the graph's float dtype, 1 where a query may
// attend to a key and 0 where not: CausalMask [Tq, Tk] (with query and key
// start positions, for caches and memory segments), PaddingMask [B, 1, 1,
// Tk], CombineMasks (broadcast product of two rank-4 masks) and MaskNode
// (an input node holding a mask, reshaped to rank 4, rebindable with G.Let).
//
// # Gradient checking
//
// GradCheck compares Gorgonia's symbolic gradient of a scalar float64 loss
// with respect to input nodes against central differences of the loss, and
// also reports a run that overwrites the value of any input of the loss.
// gorgonia_ops_test.go checks the Gorgonia primitives the layers use (Mul,
// BatchedMatMul with transA/transB, Reshape, Transpose, Add, Sub,
// HadamardProd, Mul by a scalar node, Sum, Concat, Slice): all of them have
// correct gradients on their own.
//
// # Gorgonia v0.9.18 problems worked around here
//
//   - BroadcastAdd onto a 4-D tensor has silently wrong gradients for b
//     whenever axis 2 is broadcast (patterns {2}, {0, 2}, {1, 2}, {0, 1, 2}
//     measured; {0}, {1}, {0, 1} are right): use BroadcastAdd / BroadcastMul.
//   - Reshape returns a view sharing memory with its input, and elementwise
//     ops (Add, HadamardProd, ...) write their result in place into a first
//     input they consider dead: Reshape of an input node (a parameter)
//     followed by such an op overwrites the parameter's value on every run,
//     with or without dual values, and the gradients computed from it are
//     wrong. GradCheck reports it ("overwrote the value of input ... in
//     place"); use this package's copying Reshape.
//   - InverseSqrt has wrong gradients, and there is no layer normalisation:
//     use LayerNorm (which computes 1/sqrt(var+eps) internally).
//   - ByIndices on a 1-D index tensor has wrong gradients: use Embedding.
//   - No categorical cross-entropy with ignored targets: use CrossEntropy.
//   - Concat copies element by element through a tensor iterator (72% of a
//     cached decoding step at a window of 512): use Concat, which copies
//     contiguous blocks (ConcatSplit is its gradient).
//   - No masked softmax: SoftMax has no mask; an additive -Inf bias gives NaN
//     for a fully masked row and a large finite one gives it uniform weights
//     over blocked keys: use MaskedSoftmax (exact zeros).
//   - Gradients accumulate in dual values across RunAll calls and Reset does
//     not zero them; GradCheck zeroes them before its own run, and a training
//     loop must zero or read them once per step.
//   - A custom Op without SDOp or ADOp panics inside G.Grad, and a panic in an
//     Op's Do inside the tape machine's goroutine ends the process: every op
//     here implements SDOp and turns a panic in Do into an error.
//   - Gorgonia merges nodes with equal hashes and children, so every op's
//     String (its hash) names all of its parameters, and input nodes need
//     distinct names.
package graph
