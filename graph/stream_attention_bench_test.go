package graph

import (
	"fmt"
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkStreamAttention compares StreamAttention with the materialised
// path (AttentionProbs with a TableBias bias and a causal mask, then
// AttentionOutput) on causal ALiBi-as-a-table attention, float32, batch 1,
// 4 heads of 32, forward ("fwd") and forward + backward ("step"):
//
//	go test ./graph -run XXX -bench StreamAttention -benchtime 3x
//
// Besides ns/op and the bytes allocated per run, heap-MB is the heap the
// graph's values hold after a run (the buffers each op keeps: the
// materialised path keeps several [B, H, T, T] tensors).
func BenchmarkStreamAttention(b *testing.B) {
	for _, n := range []int{512, 1024, 2048} {
		for _, ref := range []bool{false, true} {
			for _, step := range []bool{false, true} {
				name := fmt.Sprintf("T=%d/%s/%s", n, map[bool]string{false: "stream", true: "materialised"}[ref],
					map[bool]string{false: "fwd", true: "step"}[step])
				b.Run(name, func(b *testing.B) {
					c := streamCase{b: 1, h: 4, tq: n, tk: n, dh: 32, dv: 32, causal: true, table: "alibi"}
					var before runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					g := G.NewGraph()
					out, wrt := c.build(b, g, tensor.Float32, c.data(1), ref, nil)
					b.ReportAllocs()
					var heap runtime.MemStats
					if step {
						benchGraph(b, g, out, wrt)
					} else {
						m := G.NewTapeMachine(g)
						defer m.Close()
						fwd := func() {
							if err := m.RunAll(); err != nil {
								b.Fatal(err)
							}
							m.Reset()
						}
						fwd()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							fwd()
						}
					}
					b.StopTimer()
					runtime.GC()
					runtime.ReadMemStats(&heap)
					b.ReportMetric(float64(int64(heap.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MB")
					runtime.KeepAlive(g)
				})
			}
		}
	}
}
