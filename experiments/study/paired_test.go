package study

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/stats"
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

func TestPairedSection(t *testing.T) {
	sc := func(vals ...float64) map[int64]Scores {
		m := map[int64]Scores{}
		for i, v := range vals {
			m[int64(i+1)] = Scores{Value: v}
		}
		return m
	}
	var tab ScoreTable
	for _, c := range []struct {
		label, cond string
		m           map[int64]Scores
	}{{"a", "x", sc(90, 91, 92)}, {"b", "x", sc(80, 80.5, 81)}, {"c", "x", sc(95, 85, 91)}, {"a", "y", sc(10, 11, 12)}} {
		for seed := int64(1); seed <= 3; seed++ {
			tab.Add(c.label, c.cond, seed, c.m[seed])
		}
	}
	if fmt.Sprint(tab.Labels) != "[a b c]" {
		t.Errorf("labels %v, want them in the order added", tab.Labels)
	}
	if w := WeightedItems([]int{0, 2, 3}, 0.5); fmt.Sprint(w) != "[0 1 1.5]" {
		t.Errorf("WeightedItems: %v", w)
	}
	s := PairedSection("Paired comparisons", []string{"x", "y"}, &tab, "accuracy", "points", "images", "%.2f", stats.HigherIsBetter)
	for _, want := range []string{
		"| x | a | b | +10.50 [+9.26, +11.74] | — | a beats b by 10.50 points",
		"| x | a | c | +0.67 [", "no difference resolved between a and c",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "| y |") {
		t.Errorf("a condition with one label has no comparison:\n%s", s)
	}
	var single ScoreTable
	single.Add("a", "x", 1, Scores{Value: 1})
	if one := PairedSection("Paired comparisons", []string{"x"}, &single, "accuracy", "points", "images", "%.2f", stats.HigherIsBetter); one != "" {
		t.Errorf("one seed: %q", one)
	}
}

// TestContrastSection: a contrast of two labels, one of a label under two
// conditions, and one whose cell is missing.
func TestContrastSection(t *testing.T) {
	var tab ScoreTable
	for seed := int64(1); seed <= 3; seed++ {
		f := float64(seed)
		tab.Add("a", "x", seed, Scores{Value: 2 + 0.01*f, Items: []float64{2, 2 + 0.02*f}})
		tab.Add("b", "x", seed, Scores{Value: 2.5 + 0.02*f, Items: []float64{2.5, 2.5 + 0.04*f}})
		tab.Add("a", "y", seed, Scores{Value: 2 + 0.011*f})
	}
	cs := []Contrast{{A: "a", CondA: "x", B: "b", CondB: "x", Claim: "a beats b"},
		{A: "a", CondA: "y", B: "a", CondB: "x", Claim: "a is flat"},
		{A: "c", CondA: "x", B: "a", CondB: "x", Claim: "c"}}
	s := ContrastSection("Contrasts of the reading", "The reading's comparisons.", cs, &tab, "bits/byte", "windows", "%.3f", stats.LowerIsBetter)
	for _, want := range []string{
		"## Contrasts of the reading", "| a beats b | a at x | b at x | -0.520 [",
		"a at x beats b at x by 0.520 bits/byte",
		"| a is flat | a at y | a at x | +0.002 [", "| — |",
		"| c | c at x | a at x | not available |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "| -0.520 [") { // the bootstrap over items, both have 2
		t.Errorf("no bootstrap over items:\n%s", s)
	}
	if ContrastSection("x", "", nil, &tab, "bits/byte", "windows", "%.3f", stats.LowerIsBetter) != "" {
		t.Error("no contrasts: want no section")
	}
}
