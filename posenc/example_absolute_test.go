package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// The sinusoidal table of Vaswani et al. for d = 4: the first pair of
// dimensions turns once per 2π positions, the second 100 times slower.
func ExampleSinusoidTable() {
	tab := posenc.SinusoidTable(0, 3, 4) // positions 0, 1, 2
	for p := 0; p < 3; p++ {
		fmt.Printf("PE[%d] = %.4f\n", p, tab[p*4:(p+1)*4])
	}
	// Output:
	// PE[0] = [0.0000 1.0000 0.0000 1.0000]
	// PE[1] = [0.8415 0.5403 0.0100 1.0000]
	// PE[2] = [0.9093 -0.4161 0.0200 0.9998]
}

// New creates encodings by their command-line names; an unknown name is an
// error that lists the valid ones.
func ExampleNew() {
	enc, err := posenc.New("alibi", posenc.Options{})
	fmt.Println(enc.Name(), err)
	_, err = posenc.New("rotary", posenc.Options{})
	fmt.Println(err)
	// Output:
	// alibi <nil>
	// posenc: unknown encoding "rotary" (valid: alibi, alibi-2d, cope, cpe, deberta, dpb, fire, graphormer-centrality, graphormer-spatial, kerple-log, kerple-power, learned, learned-2d, none, rope, rope-2d, rope-dynamic, rope-llama3, rope-mixed, rope-ntk, rope-pi, rope-yarn, sandwich, shaw, shaw-scalar, sinusoidal, sinusoidal-2d, swin, swin-log, t5, tree, xl, xpos, or several joined by "+")
}
