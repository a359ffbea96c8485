package optim

import (
	"math/rand"
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkAdamWStep times one AdamW step over ~500k float32 parameters
// (a 1000×500 matrix and a 500-element bias).
func BenchmarkAdamWStep(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	mk := func(shape ...int) *tensor.Dense {
		d := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
		for i := range d.Data().([]float32) {
			d.Data().([]float32)[i] = float32(rng.NormFloat64())
		}
		return d
	}
	ps := []Param{
		{Name: "w", Value: mk(1000, 500), Grad: mk(1000, 500)},
		{Name: "b", Value: mk(500), Grad: mk(500), NoDecay: true},
	}
	opt := NewAdamW(1e-3, 0.9, 0.999, 1e-8, 0.01)
	b.SetBytes(int64(4 * 500500))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := opt.Step(ps); err != nil {
			b.Fatal(err)
		}
	}
}
