package graph

import (
	"math/rand"
	"testing"

	"gorgonia.org/tensor"
)

// FuzzStreamAttention compares StreamAttention's output and gradients with
// the materialised path (float64, 1e-10) on any small configuration: the
// fuzzer's dims byte by byte give B, H, Tq, Tk, dh, dv (1..3, 1..3, 1..12,
// 1..12, 1..4, 1..4) and the tiles (0..12, 0 = default); starts are any
// int8, table picks none, rel, rel1, alibi or example, and a non-zero
// padSeed draws a key mask (fully padded batch elements included).
func FuzzStreamAttention(f *testing.F) {
	f.Add(uint64(0x0302_0b07_0202_0302), true, int8(3), int8(0), uint8(1), int64(0))
	f.Add(uint64(0x0405_0303_0605_0102), false, int8(0), int8(-4), uint8(4), int64(7))
	f.Add(uint64(0x0000_0101_0b0b_0000), true, int8(-2), int8(5), uint8(3), int64(-3))
	f.Add(uint64(0x0c01_0203_0000_0201), true, int8(0), int8(0), uint8(2), int64(11))
	f.Fuzz(func(t *testing.T, dims uint64, causal bool, qStart, kStart int8, table uint8, padSeed int64) {
		d := func(i, lo, n int) int { return lo + int(dims>>(8*i)&0xff)%n }
		c := streamCase{name: "fuzz", b: d(0, 1, 3), h: d(1, 1, 3), tq: d(2, 1, 12), tk: d(3, 1, 12), dh: d(4, 1, 4), dv: d(5, 1, 4),
			tileQ: d(6, 0, 13), tileK: d(7, 0, 13), causal: causal, qStart: int(qStart), kStart: int(kStart),
			table: []string{"", "rel", "rel1", "alibi", "example"}[table%5]}
		c.pad = fuzzPad(padSeed, c.b, c.tk)
		got, want := streamRun(t, c, tensor.Float64, false), streamRun(t, c, tensor.Float64, true)
		for i := range want {
			checkClose(t, streamWhat[i], got[i], want[i], 1e-10, 1e-10)
		}
	})
}

// fuzzPad is the key mask of a fuzz case with B batch elements of Tk keys:
// nil for padSeed 0, else a third of the keys padded at random (seeded by
// padSeed) and, for an even padSeed and B > 1, batch element 0 fully
// padded.
func fuzzPad(padSeed int64, nb, tk int) func(b, j int) bool {
	if padSeed == 0 {
		return nil
	}
	rng := rand.New(rand.NewSource(padSeed))
	valid := make([]bool, nb*tk)
	for i := range valid {
		valid[i] = rng.Intn(3) > 0
	}
	if nb > 1 && padSeed%2 == 0 {
		clear(valid[:tk]) // batch element 0 fully padded
	}
	return func(b, j int) bool { return valid[b*tk+j] }
}
