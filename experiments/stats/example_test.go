package stats_test

import (
	"fmt"

	"github.com/rpe-go/rpe/experiments/stats"
)

// Two encodings trained with seeds 1, 2 and 3: bits per byte of each seed.
func ExamplePaired() {
	rope := []float64{1.702, 1.731, 1.690}
	alibi := []float64{1.721, 1.745, 1.712}
	fmt.Println("rope ", stats.Describe(rope).Format("%.3f"))
	fmt.Println("alibi", stats.Describe(alibi).Format("%.3f"))
	d, _ := stats.Paired(rope, alibi)
	fmt.Println(stats.Compare("rope", "alibi", d, "bits/byte", "%.3f", stats.LowerIsBetter))
	// Output:
	// rope  1.708 [1.655, 1.760]
	// alibi 1.726 [1.684, 1.768]
	// rope beats alibi by 0.018 bits/byte [0.008, 0.028] (3 seeds)
}
