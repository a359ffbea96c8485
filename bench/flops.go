package main

import "github.com/rpe-go/rpe/posenc"

// StepFLOPs is the floating-point work of one training step of encoding pos,
// counted from the matrix products of the forward pass (2 flops per
// multiply-add) times 3 (the backward pass does two products per forward
// product). Elementwise work (softmax, LayerNorm, GELU, the optimizer) is
// not counted. Both implementations compute the same products, so the same
// count divides both times.
func StepFLOPs(s Shape, pos string) float64 {
	o := posenc.Options{}.Defaults()
	n := float64(s.Tokens())
	b, t := float64(s.Batch), float64(s.Seq)
	d, h, ff, v := float64(s.DModel), float64(s.Heads), float64(s.FFN), float64(s.Vocab)
	dh := d / h
	perLayer := 2*n*d*d*4 + // q, k, v, o projections
		2*n*d*ff*2 + // feed-forward
		2*b*h*t*t*dh*2 // q·kᵀ and probs·v
	switch pos {
	case "shaw":
		r := float64(2*o.ShawK + 1)
		perLayer += 2 * b * h * t * r * dh * 2 // q·shaw_kᵀ, scattered probs·shaw_v
	case "xl":
		r := 2*t - 1
		perLayer += 2*r*d*d + 2*b*h*t*r*dh // R·W_r, (q+v)·Pᵀ
	case "deberta":
		r := float64(2 * o.DebertaBuckets)
		perLayer += 2*2*r*d*d + 2*2*b*h*t*r*dh // rel·W_k, rel·W_q; c2p, p2c
	}
	fwd := float64(s.Layers)*perLayer + 2*n*d*v // + output head
	return 3 * fwd
}
