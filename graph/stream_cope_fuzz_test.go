package graph

import (
	"testing"

	"gorgonia.org/tensor"
)

// FuzzStreamCoPE compares StreamCoPE's output and gradients with the
// materialised CoPE attention (float64, 1e-10) on any small configuration:
// the fuzzer's dims byte by byte give B, H, Tq, Tk, dh, dv (1..3, 1..3,
// 1..12, 1..12, 1..4, 1..4) and the tiles (0..12, 0 = default); starts are
// any int8, npos 1..16, split picks the layout, and a non-zero padSeed
// draws a key mask (fully padded batch elements included).
func FuzzStreamCoPE(f *testing.F) {
	f.Add(uint64(0x0302_0b07_0202_0302), int8(3), int8(0), uint8(2), false, int64(0))
	f.Add(uint64(0x0405_0303_0605_0102), int8(0), int8(-4), uint8(0), true, int64(7))
	f.Add(uint64(0x0000_0101_0b0b_0000), int8(-2), int8(5), uint8(15), false, int64(-3))
	f.Add(uint64(0x0c01_0203_0000_0201), int8(9), int8(0), uint8(4), false, int64(12))
	f.Fuzz(func(t *testing.T, dims uint64, qStart, kStart int8, npos uint8, split bool, padSeed int64) {
		d := func(i, lo, n int) int { return lo + int(dims>>(8*i)&0xff)%n }
		c := copeCase{streamCase: streamCase{name: "fuzz", b: d(0, 1, 3), h: d(1, 1, 3), tq: d(2, 1, 12), tk: d(3, 1, 12), dh: d(4, 1, 4),
			dv: d(5, 1, 4), tileQ: d(6, 0, 13), tileK: d(7, 0, 13), qStart: int(qStart), kStart: int(kStart), split: split, qStd: 1.5, kStd: 1.5},
			npos: 1 + int(npos)%16}
		c.pad = fuzzPad(padSeed, c.b, c.tk)
		got, want := copeRun(t, c, tensor.Float64, false), copeRun(t, c, tensor.Float64, true)
		for i := range want {
			checkClose(t, copeWhat[i], got[i], want[i], 1e-10, 1e-10)
		}
	})
}
