package graph

import (
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Benchmarks of the fused ops, forward and backward, float32, at the shapes
// of the reference model (batch 32 x 64 tokens, d 128, 4 heads, FFN 512,
// vocab 256), with the unfused graphs they replace for comparison:
//
//	go test ./graph -run XXX -bench . -benchtime 20x

// benchGraph runs the forward pass of out and the backward pass of a fixed
// output gradient dy (an input node) with respect to wrt, b.N times.
func benchGraph(b *testing.B, g *G.ExprGraph, out *G.Node, wrt G.Nodes) {
	b.Helper()
	dy := out
	if !out.IsScalar() {
		dy = input(g, "bench_dy", randDense(rand.New(rand.NewSource(1)), out.Dtype(), 1, out.Shape()...))
	} else {
		dy = G.NewConstant(float32(1))
	}
	if _, err := G.Backpropagate(G.Nodes{out}, G.Nodes{dy}, wrt); err != nil {
		b.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer m.Close()
	step := func() {
		if err := m.RunAll(); err != nil {
			b.Fatal(err)
		}
		m.Reset()
		for _, n := range wrt {
			zeroDualGrad(n)
		}
	}
	step() // warm-up: buffers
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
}

func benchInputs(b *testing.B, seed int64, shapes ...tensor.Shape) (*G.ExprGraph, G.Nodes) {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	var ns G.Nodes
	for i, s := range shapes {
		ns = append(ns, input(g, "in"+string(rune('a'+i)), randDense(rng, tensor.Float32, 0.5, s...)))
	}
	return g, ns
}

func BenchmarkLinear(b *testing.B) {
	shapes := []tensor.Shape{{32, 64, 128}, {128, 512}, {512}}
	b.Run("fused", func(b *testing.B) {
		g, in := benchInputs(b, 1, shapes...)
		benchGraph(b, g, must(b)(Linear(in[0], in[1], in[2])), in)
	})
	b.Run("unfused", func(b *testing.B) { // Reshape, G.Mul, BroadcastAdd, Reshape
		g, in := benchInputs(b, 1, shapes...)
		x := must(b)(Reshape(in[0], 2048, 128))
		y := must(b)(BroadcastAdd(must(b)(G.Mul(x, in[1])), in[2]))
		benchGraph(b, g, must(b)(Reshape(y, 32, 64, 512)), in)
	})
}

func causalMaskNode(g *G.ExprGraph, t int) *G.Node {
	return MaskNode(g, CausalMask(tensor.Float32, t, t, 0, 0), "bench_mask")
}

func BenchmarkAttention(b *testing.B) {
	const bs, t, h, dh = 32, 64, 4, 32
	shapes := []tensor.Shape{{bs, t, h * dh}, {bs, t, h * dh}, {bs, t, h * dh}}
	b.Run("fused", func(b *testing.B) { // AttentionProbs + AttentionOutput on merged heads
		g, in := benchInputs(b, 2, shapes...)
		p := must(b)(AttentionProbs(in[0], in[1], AttentionOpts{Heads: h, Mask: causalMaskNode(g, t)}))
		benchGraph(b, g, must(b)(AttentionOutput(p, in[2], true)), in)
	})
	b.Run("unfused", func(b *testing.B) { // head split, BatchedMatMul, Scale, MaskedSoftmax, merge
		g, in := benchInputs(b, 2, shapes...)
		split := func(x *G.Node) *G.Node {
			return must(b)(Reshape(must(b)(G.Transpose(must(b)(Reshape(x, bs, t, h, dh)), 0, 2, 1, 3)), bs*h, t, dh))
		}
		s := must(b)(G.BatchedMatMul(split(in[0]), split(in[1]), false, true))
		s = must(b)(Scale(must(b)(Reshape(s, bs, h, t, t)), 1/5.656854249492381))
		p := must(b)(MaskedSoftmax(s, causalMaskNode(g, t)))
		o := must(b)(G.BatchedMatMul(must(b)(Reshape(p, bs*h, t, t)), split(in[2])))
		o = must(b)(G.Transpose(must(b)(Reshape(o, bs, h, t, dh)), 0, 2, 1, 3))
		benchGraph(b, g, must(b)(Reshape(o, bs, t, h*dh)), in)
	})
}

func BenchmarkAttentionProbs(b *testing.B) {
	g, in := benchInputs(b, 3, tensor.Shape{32, 64, 128}, tensor.Shape{32, 64, 128})
	benchGraph(b, g, must(b)(AttentionProbs(in[0], in[1], AttentionOpts{Heads: 4, Mask: causalMaskNode(g, 64)})), in)
}

func BenchmarkAttentionOutput(b *testing.B) {
	g, in := benchInputs(b, 4, tensor.Shape{32, 4, 64, 64}, tensor.Shape{32, 64, 128})
	benchGraph(b, g, must(b)(AttentionOutput(in[0], in[1], true)), in)
}

func BenchmarkMaskedSoftmax(b *testing.B) {
	g, in := benchInputs(b, 5, tensor.Shape{32, 4, 64, 64})
	benchGraph(b, g, must(b)(MaskedSoftmax(in[0], causalMaskNode(g, 64))), in)
}

func BenchmarkLayerNorm(b *testing.B) {
	g, in := benchInputs(b, 6, tensor.Shape{32, 64, 128}, tensor.Shape{128}, tensor.Shape{128})
	benchGraph(b, g, must(b)(LayerNorm(in[0], in[1], in[2], 1e-5)), in)
}

func BenchmarkGELU(b *testing.B) {
	g, in := benchInputs(b, 7, tensor.Shape{32, 64, 512})
	benchGraph(b, g, must(b)(GELU(in[0])), in)
}

func BenchmarkCrossEntropy(b *testing.B) {
	g, in := benchInputs(b, 8, tensor.Shape{2048, 256})
	tg := make([]int, 2048)
	for i := range tg {
		tg[i] = (i * 37) % 256
	}
	benchGraph(b, g, must(b)(CrossEntropy(in[0], intInput(g, "targets", tg, 2048))), in)
}

func BenchmarkSplitMergeHeads(b *testing.B) {
	g, in := benchInputs(b, 9, tensor.Shape{32, 64, 128})
	benchGraph(b, g, must(b)(MergeHeads(must(b)(SplitHeads(in[0], 4)))), in)
}

func BenchmarkRelScores(b *testing.B) {
	// Transformer-XL's (q+v)·Pᵀ at the reference shapes: R = 2T-1 = 127
	shapes := []tensor.Shape{{32, 4, 64, 32}, {4, 127, 32}}
	b.Run("fused", func(b *testing.B) {
		g, in := benchInputs(b, 10, shapes...)
		benchGraph(b, g, must(b)(RelScores(in[0], in[1])), in)
	})
	b.Run("unfused", func(b *testing.B) { // posenc's xlRelScores
		g, in := benchInputs(b, 10, shapes...)
		xt := must(b)(Reshape(must(b)(G.Transpose(in[0], 1, 0, 2, 3)), 4, 32*64, 32))
		m := must(b)(G.BatchedMatMul(xt, in[1], false, true))
		benchGraph(b, g, must(b)(G.Transpose(must(b)(Reshape(m, 4, 32, 64, 127)), 1, 0, 2, 3)), in)
	})
}
