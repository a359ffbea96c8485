package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// The Sandwich bias of 2 heads with d̄ = 128 for a query at position 8 and
// keys at 0, 2, 4, 6, 8: the sum of 64 cosines of the distance, divided by
// 4 (head 0) and 8 (head 1); it falls with the distance.
func ExampleSandwichBias() {
	b := posenc.SandwichBias(2, 128, []int{8}, []int{0, 2, 4, 6, 8})
	fmt.Printf("head 0: %.3f\nhead 1: %.3f\n", b[:5], b[5:])
	// Output:
	// head 0: [11.430 11.767 12.147 14.345 16.000]
	// head 1: [5.715 5.883 6.073 7.173 8.000]
}
