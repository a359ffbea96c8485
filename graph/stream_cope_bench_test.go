package graph

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkStreamCoPE compares StreamCoPE with the materialised CoPE
// attention, forward + backward, float32, 4 heads of 32, npos 64: the
// reference model's shape (batch 32 × 64) and one long sequence:
//
//	go test ./graph -run XXX -bench StreamCoPE -benchtime 3x
func BenchmarkStreamCoPE(b *testing.B) {
	for _, s := range [][2]int{{32, 64}, {1, 1024}} {
		for _, ref := range []bool{false, true} {
			b.Run(fmt.Sprintf("B=%d,T=%d/%s", s[0], s[1], map[bool]string{false: "stream", true: "materialised"}[ref]), func(b *testing.B) {
				c := copeCase{streamCase: streamCase{b: s[0], h: 4, tq: s[1], tk: s[1], dh: 32, dv: 32}, npos: 64}
				g := G.NewGraph()
				out, wrt := c.build(b, g, tensor.Float32, 1, ref, nil)
				benchGraph(b, g, out, wrt)
			})
		}
	}
}
