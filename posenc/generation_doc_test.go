package posenc_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// TestGenerationDocTable: the table of docs/generation.md between its
// nodecode markers lists every line encoding of the registry with its
// Info.NoDecode ("yes" if it decodes) and Info.NoSlide ("yes" if its cache
// slides, "—" if it does not decode), and nothing else.
func TestGenerationDocTable(t *testing.T) {
	b, err := os.ReadFile("../docs/generation.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "<!-- nodecode -->"), strings.Index(s, "<!-- /nodecode -->")
	if i < 0 || j < i {
		t.Fatal("docs/generation.md: no <!-- nodecode --> block")
	}
	got := map[string]string{}
	for _, line := range strings.Split(s[i:j], "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 || !strings.HasPrefix(strings.TrimSpace(f[1]), "`") {
			continue
		}
		got[strings.Trim(strings.TrimSpace(f[1]), "`")] = strings.TrimSpace(f[2]) + " | " + strings.TrimSpace(f[3])
	}
	want := map[string]string{}
	for _, n := range posenc.Names() {
		info, _ := posenc.InfoOf(n)
		if !slices.Contains(info.Positions, posenc.PosLine) {
			continue
		}
		dec, slide := info.NoDecode, info.NoSlide
		switch {
		case dec != "":
			slide = "—"
		case slide == "":
			dec, slide = "yes", "yes"
		default:
			dec = "yes"
		}
		want[n] = dec + " | " + slide
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("docs/generation.md: %s says %q, the registry %q", n, got[n], w)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("docs/generation.md lists %s, which is not a line encoding of the registry", n)
		}
	}
}
