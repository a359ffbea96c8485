package posnames

import (
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// TestTrainable checks that Trainable lists every name of posenc except the
// RoPE scalings, once each, in the README's order.
func TestTrainable(t *testing.T) {
	got := Trainable()
	var want []string
	for _, n := range posenc.Names() {
		if !strings.HasPrefix(n, "rope-") {
			want = append(want, n)
		}
	}
	s := slices.Clone(got)
	slices.Sort(s)
	if !slices.Equal(s, want) {
		t.Fatalf("Trainable() = %v, want the names %v", got, want)
	}
	if got[0] != "none" || !slices.Contains(got, "shaw-scalar") ||
		slices.Index(got, "shaw") > slices.Index(got, "t5") || slices.Index(got, "rope") > slices.Index(got, "alibi") {
		t.Errorf("Trainable() = %v, not in the README's table order", got)
	}
}
