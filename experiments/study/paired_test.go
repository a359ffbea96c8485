package study

import (
	"math"
	"testing"
)

func TestPair(t *testing.T) {
	// a is right on 2 more items of 4 than b on every seed: +50 points
	a := map[int64]Scores{1: {Value: 75, Items: []float64{100, 100, 100, 0}}, 2: {Value: 100, Items: []float64{100, 100, 100, 100}}, 3: {Value: 1}}
	b := map[int64]Scores{1: {Value: 25, Items: []float64{100, 0, 0, 0}}, 2: {Value: 50, Items: []float64{100, 100, 0, 0}}}
	p, ok := Pair(a, b)
	if !ok || p.Seeds.N != 2 || p.Seeds.Mean != 50 || p.Seeds.SD != 0 {
		t.Fatalf("over seeds: %+v, %v", p.Seeds, ok)
	}
	if p.Items.N != 2 || p.Items.Mean != 50 || !(p.Items.Lo < 50 && p.Items.Hi > 50) || !p.Items.Resolved() {
		t.Errorf("over seeds and items: %+v", p.Items)
	}
	again, _ := Pair(a, b)
	if again != p {
		t.Errorf("not reproducible: %+v then %+v", p, again)
	}
	// a seed without items: no bootstrap
	b[2] = Scores{Value: 50}
	if p, _ := Pair(a, b); p.Items.N != 0 || !math.IsNaN(p.Items.Lo) {
		t.Errorf("missing items: %+v", p.Items)
	}
	if _, ok := Pair(a, map[int64]Scores{9: {}}); ok {
		t.Error("no common seed: ok")
	}
}
