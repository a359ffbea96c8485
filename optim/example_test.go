package optim_test

import (
	"fmt"

	"github.com/rpe-go/rpe/optim"
	"gorgonia.org/tensor"
)

func ExampleWarmupCosine() {
	sched := optim.WarmupCosine{Peak: 1e-3, Warmup: 100, Total: 1100, Floor: 0.1}
	for _, s := range []int{0, 49, 99, 100, 600, 1100, 5000} {
		fmt.Printf("step %4d: lr %.3e\n", s, sched.LR(s))
	}
	// Output:
	// step    0: lr 1.000e-05
	// step   49: lr 5.000e-04
	// step   99: lr 1.000e-03
	// step  100: lr 1.000e-03
	// step  600: lr 5.500e-04
	// step 1100: lr 1.000e-04
	// step 5000: lr 1.000e-04
}

func ExampleClipGradNorm() {
	// Two gradients with total L2 norm sqrt(1² + 2² + 2² + 4²) = 5.
	ps := []optim.Param{
		{Name: "a", Value: tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64)),
			Grad: tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))},
		{Name: "b", Value: tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64)),
			Grad: tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{2, 4}))},
	}
	norm := optim.ClipGradNorm(ps, 1)
	fmt.Printf("norm before clipping: %.4f\n", norm)
	fmt.Printf("grads: %.4f %.4f\n", ps[0].Grad.Data(), ps[1].Grad.Data())
	fmt.Printf("norm after clipping: %.4f\n", optim.GradNorm(ps))
	// Output:
	// norm before clipping: 5.0000
	// grads: [0.2000 0.4000] [0.4000 0.8000]
	// norm after clipping: 1.0000
}

// A training loop: schedule, clipping, then the update, which also zeroes the
// gradients for the next forward/backward pass.
func ExampleAdamW() {
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, -2}))
	g := tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float32))
	ps := []optim.Param{{Name: "w", Value: w, Grad: g}}
	opt := optim.NewAdamW(0, 0.9, 0.999, 1e-8, 0.01)
	sched := optim.Constant(0.1)
	for s := 0; s < 50; s++ {
		// Gradient of the loss ½‖w‖² (Gorgonia would accumulate it into g).
		for i, x := range w.Data().([]float32) {
			g.Data().([]float32)[i] += x
		}
		if n := optim.ClipGradNorm(ps, 1); n != n {
			fmt.Println("NaN gradient norm at step", s)
			return
		}
		opt.SetLR(sched.LR(s))
		if err := opt.Step(ps); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Printf("|w| < 0.1: %v, grads zeroed: %v\n",
		optim.GradNorm([]optim.Param{{Grad: w}}) < 0.1, optim.GradNorm(ps) == 0)
	// Output:
	// |w| < 0.1: true, grads zeroed: true
}
