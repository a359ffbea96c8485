package posenc_test

import (
	"fmt"

	"github.com/rpe-go/rpe/posenc"
)

// DeBERTa's log buckets with bucket size 8 (exact up to ±4) and max
// position 32.
func ExampleDebertaBucket() {
	for _, rel := range []int{0, 3, 4, 5, 8, 16, 31, 64, -64} {
		fmt.Printf("%d:%d ", rel, posenc.DebertaBucket(rel, 8, 32))
	}
	fmt.Println()
	// Output:
	// 0:0 3:3 4:4 5:5 8:6 16:7 31:7 64:9 -64:-9
}

// The c2p gather indices of two queries at positions 6, 7 over keys 0..7:
// row i holds bucket(qpos_i - kpos_j) + 8, clamped to the 16 rows of
// deberta_rel.
func ExampleDebertaIndex() {
	enc, err := posenc.New("deberta", posenc.Options{DebertaBuckets: 8, DebertaMaxPosition: 32})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := enc.(*posenc.DeBERTa)
	c2p, p2c := posenc.DebertaIndex(posenc.Span{QStart: 6, TQ: 2, KStart: 0, TK: 8}, d.Buckets, d.MaxPosition)
	fmt.Println(c2p[:8])
	fmt.Println(c2p[8:])
	fmt.Println("p2c equals c2p:", fmt.Sprint(p2c) == fmt.Sprint(c2p))
	fmt.Printf("scale for dh = 16: %.4f\n", d.Scale(16))
	// Output:
	// [13 13 12 11 10 9 8 7]
	// [13 13 13 12 11 10 9 8]
	// p2c equals c2p: true
	// scale for dh = 16: 0.1443
}
