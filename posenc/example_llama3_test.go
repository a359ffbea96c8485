package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// Llama 3's scaling of 8 rotary dims (base 10000: θ = 1, 0.1, 0.01, 0.001,
// wavelengths 6.3, 63, 628, 6283 tokens) for a model trained on L = 64
// tokens, stretched by s = 4 with the default frequency factors 1 and 4:
// wavelengths under 64/4 = 16 keep θ, those over 64/1 = 64 are divided by
// 4, and the pair in between (63) is interpolated smoothly.
func ExampleRope_llama3() {
	enc, err := posenc.New("rope-llama3", posenc.Options{RopeScale: 4, RopeTrainLen: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	theta, _, attn, err := enc.(*posenc.Rope).Frequencies(8, 256)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("θ = %.5g, factor %g\n", theta, attn)
	// Output:
	// θ = [1 0.025465 0.0025 0.00025], factor 1
}

// YaRN's attention factor at s = 4: the paper's 0.1 ln s + 1, an explicit
// factor, and DeepSeek-V2's mscale and mscale_all_dim (equal: factor 1).
func ExampleRope_yarnOptions() {
	for _, o := range []posenc.Options{
		{RopeScale: 4},
		{RopeScale: 4, YarnAttentionFactor: 1.5},
		{RopeScale: 4, YarnMscale: 0.707, YarnMscaleAllDim: 0.707},
	} {
		enc, err := posenc.New("rope-yarn", o)
		if err != nil {
			fmt.Println(err)
			return
		}
		_, _, attn, err := enc.(*posenc.Rope).Frequencies(8, 256)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%.4f\n", attn)
	}
	// Output:
	// 1.1386
	// 1.5000
	// 1.0000
}
