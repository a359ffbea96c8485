package study

import (
	"math/rand"
	"slices"
	"testing"
)

func TestPackHits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1, 7, 8, 9, 1000} {
		hits := make([]bool, n)
		for i := range hits {
			hits[i] = rng.Intn(2) == 1
		}
		got, err := UnpackHits(PackHits(hits), n)
		if err != nil || !slices.Equal(got, hits) {
			t.Errorf("n=%d: round trip %v, %v", n, got, err)
		}
		if _, err := UnpackHits(PackHits(hits), n+8); err == nil {
			t.Errorf("n=%d read as %d: no error", n, n+8)
		}
	}
	if _, err := UnpackHits("!!", 3); err == nil {
		t.Error("not base64: no error")
	}
	if _, err := UnpackHits(PackHits([]bool{false, false, false, true}), 3); err == nil {
		t.Error("a bit past the last item: no error")
	}
}

func TestPackCounts(t *testing.T) {
	in := []int{0, 1, 48, 255, 7}
	s, err := PackCounts(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnpackCounts(s, len(in))
	if err != nil || !slices.Equal(got, in) {
		t.Errorf("round trip %v, %v", got, err)
	}
	if _, err := UnpackCounts(s, 4); err == nil {
		t.Error("wrong length: no error")
	}
	if _, err := PackCounts([]int{256}); err == nil {
		t.Error("256: no error")
	}
}
