package main

import (
	"io"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
)

// TestRooflineCosts checks every flop and byte formula against a count by
// hand at B = 2, T = 4, d = 8, H = 2 (d_head 4), FFN 16, vocab 10, so
// N = 8 tokens, P = B·H·T² = 64 scores, x = B·T·d = 64 (floats 4 bytes,
// ids 8 bytes).
func TestRooflineCosts(t *testing.T) {
	type pair struct{ fwd, bwd rcost }
	of := func(f, b rcost) pair { return pair{f, b} }
	for _, c := range []struct {
		name string
		got  pair
		want pair
	}{
		// x [8, 8]·W [8, 16] + b: 2·8·8·16 + 8·16 = 2176 flops; 4·(64 + 128 + 16 + 128) bytes.
		// dx, dW: 2·2·8·8·16 + db 128 = 4224; 4·(dy 128 + x 64 + W 128 + dx 64 + dW 128 + db 16).
		{"linear", of(linearCost(8, 8, 16)), pair{rcost{2176, 1344}, rcost{4224, 2112}}},
		// q·kᵀ 2·64·4 = 512 + 6·64 = 896; 4·(q, k 128 + mask 16 + P 64).
		// dq, dk 4·64·4 = 1024 + 5·64 = 1344; 4·(dP, P 128 + q, k 128 + dq, dk 128).
		{"scores", of(scoresCost(2, 2, 4, 4)), pair{rcost{896, 832}, rcost{1344, 1536}}},
		// P·v 2·64·4 = 512; 4·(P 64 + v 64 + out 64). dP, dv 1024; 4·(dO, P, v, dP, dv: 5·64).
		{"pv", of(pvCost(2, 2, 4, 4)), pair{rcost{512, 768}, rcost{1024, 1280}}},
		// one 4×4 tile per (b, h): 64 pairs · (8 + 5 + 8) + 16 rows · 4 = 1408;
		// 4·(q, k, v 192 + out 64 + lse 16). Backward 2·16·4 + 64·(5·8 + 5) = 3008;
		// 4·(q, k, v, out, dO 320 + lse 16 + dq, dk, dv 192).
		{"stream", of(streamCost(2, 2, 4, 4, 128)), pair{rcost{1408, 1088}, rcost{3008, 2112}}},
		// 128 elements: 9 and 18 flops each; 2 and 3 floats moved each.
		{"gelu", of(geluCost(128)), pair{rcost{1152, 1024}, rcost{2304, 1536}}},
		// up 2176 + GELU 1152 + down (2·8·16·8 + 64 = 2112) = 5440;
		// 4·(x 64 + W1 128 + b1 16 + W2 128 + b2 8 + y 64).
		// 4224 + 2304 + 4160 = 10688; 4·(dy 64 + x 64 + z 128 + W1 128 + W2 128
		// + dx 64 + dW1 128 + db1 16 + dW2 128 + db2 8).
		{"ffn", of(ffnCost(8, 8, 16)), pair{rcost{5440, 1632}, rcost{10688, 3424}}},
		// 7·64 + 4·8 = 480; 4·(x 64 + γ, β 16 + y 64). 13·64 + 2·8 = 848;
		// 4·(dy 64 + x 64 + γ 8 + dx 64 + dγ, dβ 16).
		{"layernorm", of(layerNormCost(8, 8)), pair{rcost{480, 576}, rcost{848, 864}}},
		// ids 8·8 + 4·(8 rows · 8 + out 64) = 576; 64 adds, 64 + 4·(dy 64 + dtable 80) = 640.
		{"embedding", of(embeddingCost(8, 10, 8)), pair{rcost{0, 576}, rcost{64, 640}}},
		// more tokens than rows: the table is read once, 10·8 floats: 8·20 + 4·(80 + 160) = 1120.
		{"embedding n>v", of(embeddingCost(20, 10, 8)), pair{rcost{0, 1120}, rcost{160, 8*20 + 4*(160+80)}}},
		// head 2·8·8·10 + 80 = 1360, + CE 4·80 + 3·8 = 1704; 4·(x 64 + W 80 + b 10) + ids 64 + loss 4.
		// 2640 + 3·80 + 8 = 2888; 4·(logits 80 + x 64 + W 80) + ids 64 + dy 4 + 4·(dx 64 + dW 80 + db 10).
		{"head+ce", of(headCECost(8, 8, 10)), pair{rcost{1704, 684}, rcost{2888, 1580}}},
	} {
		if c.got != c.want {
			t.Errorf("%s: got fwd %+v bwd %+v, want fwd %+v bwd %+v", c.name, c.got.fwd, c.got.bwd, c.want.fwd, c.want.bwd)
		}
	}
	// Stream pairs: a block [i0, i1) visits keys [0, i1).
	for _, c := range []struct {
		t, tile int
		want    float64
	}{
		{4, 128, 16},                           // one 4×4 tile
		{64, 128, 64 * 64},                     // the reference T: one tile, all T²
		{256, 128, 128*128 + 128*256},          // two blocks
		{300, 128, 128*128 + 128*256 + 44*300}, // a clipped last block
		{4096, 128, 128 * 128 * 528},           // 32 blocks: 128²·(1 + ... + 32)
	} {
		if got := streamPairs(c.t, c.tile); got != c.want {
			t.Errorf("streamPairs(%d, %d) = %v, want %v", c.t, c.tile, got, c.want)
		}
	}
}

// TestRooflineMatmulsMatchStepFLOPs: the matrix products of the kernels of
// one block (4 projections, the FFN's two Linears, q·kᵀ and P·v) and of
// the head, forward, are StepFLOPs's forward count for encoding none.
func TestRooflineMatmulsMatchStepFLOPs(t *testing.T) {
	sh := Shape{Batch: 32, Seq: 64, DModel: 128, Heads: 4, Layers: 2, FFN: 512, Vocab: 256}
	n, d, f, v, b, h, tt := 2048.0, 128.0, 512.0, 256.0, 32.0, 4.0, 64.0
	proj, _ := linearCost(2048, 128, 128)
	ffn, _ := ffnCost(2048, 128, 512)
	sc, _ := scoresCost(32, 4, 64, 32)
	pv, _ := pvCost(32, 4, 64, 32)
	head, _ := headCECost(2048, 128, 256)
	p := b * h * tt * tt
	// take the elementwise terms back out
	layer := 4*(proj.flops-n*d) + (ffn.flops - n*f - 9*n*f - n*d) + (sc.flops - 6*p) + pv.flops
	fwd := 2*layer + head.flops - n*v - 4*n*v - 3*n
	if want := StepFLOPs(sh, "none") / 3; fwd != want {
		t.Fatalf("matrix products of the kernels: %v flops, StepFLOPs/3 = %v", fwd, want)
	}
}

// TestRooflinePeak: the GEMM calibration at n = 64 gives positive, finite
// GFLOP/s for sgemm and dgemm at 1 and 2 threads, and the split product
// is the product (an odd n splits unevenly).
func TestRooflinePeak(t *testing.T) {
	rows := calibratePeak([]int{64}, []int{1, 2}, 1, 2)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if !(r.gflops > 0) || math.IsInf(r.gflops, 0) || !(r.bestGflop >= r.gflops) || math.IsInf(r.bestGflop, 0) {
			t.Errorf("%+v: GFLOP/s must be positive and finite, best >= median", r)
		}
	}
	for _, op := range []string{"sgemm", "dgemm"} {
		for _, p := range []int{1, 2} {
			if g := peakOf(rows, op, p); !(g > 0) || math.IsInf(g, 0) {
				t.Errorf("peakOf(%s, %d) = %v", op, p, g)
			}
		}
	}
	const n = 7
	rng := rand.New(rand.NewSource(1))
	a, b := make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i] = rng.Float64(), rng.Float64()
	}
	want := make([]float64, n*n)
	G.WhichBLAS().Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, want, n)
	for _, p := range []int{1, 2, 3} {
		c := make([]float64, n*n)
		gemmSplit(G.WhichBLAS(), n, p, a, b, c)
		for i := range c {
			if math.Abs(c[i]-want[i]) > 1e-12 {
				t.Fatalf("gemmSplit at %d threads: C[%d] = %v, want %v", p, i, c[i], want[i])
			}
		}
	}
	bw := memBandwidth(1, []int{1, 2}, 0, 2)
	for _, p := range []int{1, 2} {
		if g := bandwidthOf(bw, p); !(g > 0) || math.IsInf(g, 0) {
			t.Errorf("bandwidth at %dt = %v GB/s (%+v)", p, g, bw)
		}
	}
}

// tinyRoofShape is a tiny model: d = 8, T = 8.
func tinyRoofShape() Shape {
	s := ReferenceShape()
	s.Batch, s.Seq, s.DModel, s.Heads, s.Layers, s.FFN = 2, 8, 8, 2, 1, 16
	return s
}

// TestRooflineTable measures and renders a tiny configuration (d = 8,
// T = 8, the long one T = 16): every kernel has a forward and a backward
// row in both configurations, Markdown and plain, with no NaN and nothing
// skipped, and the training step a row per configuration.
func TestRooflineTable(t *testing.T) {
	ro := rooflineOptions{longT: 16, reps: 1, peakN: []int{64}, bwMiB: 1, progress: io.Discard}
	res, err := measureRoofline(tinyRoofShape(), ro, []int{1}, []string{"none"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	kernels := rooflineKernels(tinyRoofShape())
	if len(kernels) != 9 {
		t.Fatalf("%d kernels, want 9", len(kernels))
	}
	for _, md := range []bool{true, false} {
		var out strings.Builder
		renderRoofline(&out, md, res, []int{1})
		s := out.String()
		for _, bad := range []string{"NaN", "skipped", "Inf"} {
			if strings.Contains(s, bad) {
				t.Errorf("md=%v: output has %q:\n%s", md, bad, s)
			}
		}
		lines := strings.Split(s, "\n")
		count := func(kernel, dir string) int {
			n := 0
			for _, l := range lines {
				f := strings.Fields(strings.ReplaceAll(l, "|", " "))
				if strings.Contains(l, kernel) && slices.Contains(f, dir) {
					n++
				}
			}
			return n
		}
		for _, k := range kernels {
			for _, dir := range []string{"fwd", "bwd"} {
				if got := count(k.name, dir); got != 2 {
					t.Errorf("md=%v: %d %s rows of %q, want 2 (one per configuration):\n%s", md, got, dir, k.name, s)
				}
			}
		}
		if got := count("train step (none)", "fwd+bwd+AdamW"); got != 2 {
			t.Errorf("md=%v: %d train-step rows, want 2:\n%s", md, got, s)
		}
		for _, want := range []string{"reference: batch 2 × 8 tokens", "long: batch 1 × 16 tokens", "sgemm", "dgemm", "copy", "axpy", "ridge point"} {
			if !strings.Contains(s, want) {
				t.Errorf("md=%v: no %q in\n%s", md, want, s)
			}
		}
	}
	for i, cells := range res.cells {
		for _, c := range cells {
			if c.skip != "" || (!c.noBytes && !(c.cost.bytes > 0)) || (c.dir != "fwd" || c.kernel != "embedding") && !(c.cost.flops > 0) {
				t.Errorf("config %d: cell %+v", i, c)
			}
		}
	}
}

// TestRooflineSkipsHugeP: materialised attention is not built where P
// [B, H, T, T] would exceed rooflineMaxP; the streamed one is.
func TestRooflineSkipsHugeP(t *testing.T) {
	s := ReferenceShape()
	s.Batch, s.Seq = 1, 32768
	for _, k := range rooflineKernels(s) {
		mat := strings.Contains(k.name, "materialised")
		if (k.skip != "") != mat {
			t.Errorf("%s at T = 32768: skip %q", k.name, k.skip)
		}
	}
}

// TestRooflineFlags: the mode's defaults, and every bad value refused
// with an error naming its flag (exit status 2); a tiny run through
// mainStatus prints the tables.
func TestRooflineFlags(t *testing.T) {
	o, err := parseFlags([]string{"-roofline"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.roof.on || o.roof.longT != 4096 || o.roof.reps != 10 || !slices.Equal(o.roof.peakN, []int{1024, 2048}) ||
		o.roof.bwMiB != 256 || !slices.Equal(o.pos, []string{"none"}) || !slices.Equal(o.threads, []int{1, 2}) || !o.goOnly {
		t.Fatalf("defaults: %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-roofline", "-reps", "0"}, "bench: -reps 0: must be positive"},
		{[]string{"-roofline", "-roofline-t", "-1"}, "bench: -roofline-t -1: must be positive"},
		{[]string{"-roofline", "-roofline-bw-mib", "0"}, "bench: -roofline-bw-mib 0: must be positive"},
		{[]string{"-roofline", "-roofline-peak-n", "64,x"}, `bench: -roofline-peak-n: bad size "x"`},
		{[]string{"-go-only", "-reps", "3"}, "bench: -reps is an option of -roofline"},
		{[]string{"-go-only", "-roofline-t", "512"}, "bench: -roofline-t is an option of -roofline"},
		{[]string{"-roofline", "-eval"}, "bench: -roofline is a mode of its own"},
	} {
		var out, errw strings.Builder
		if got := mainStatus(c.args, &out, &errw); got != 2 || !strings.Contains(errw.String(), c.want) {
			t.Errorf("bench %v: status %d, stderr %q; want 2 and %q", c.args, got, errw.String(), c.want)
		}
	}
	var out, errw strings.Builder
	args := []string{"-roofline", "-md", "-batch", "2", "-seq-len", "8", "-d-model", "8", "-heads", "2", "-ffn", "16", "-layers", "1",
		"-threads", "1", "-warmup-steps", "0", "-reps", "1", "-roofline-t", "16", "-roofline-peak-n", "64", "-roofline-bw-mib", "1"}
	if got := mainStatus(args, &out, &errw); got != 0 {
		t.Fatalf("bench %v: status %d, stderr %s", args, got, errw.String())
	}
	for _, want := range []string{"| attn.stream (StreamAttention, causal) | bwd | 1 |", "| train step (none) |", "roofline: Go "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if !strings.Contains(errw.String(), "roofline reference: layernorm 1t") {
		t.Errorf("progress not on stderr: %q", errw.String())
	}
}
