package doccheck

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// TestEncodingsTableMatchesRegistry: the tables of docs/encodings.md (the
// rows whose first cell names encodings in backticks, under a header with a
// "learnable" column) list every registered encoding exactly once, no name
// the registry lacks, and mark as learnable exactly the encodings whose
// registry entry is Learnable. A new encoding without its row, a renamed
// one, or a wrong learnable mark fails here.
func TestEncodingsTableMatchesRegistry(t *testing.T) {
	b, err := os.ReadFile("../../docs/encodings.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`([a-z0-9-]+)`")
	seen := map[string]int{}
	learnCol := -1
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			learnCol = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if learnCol < 0 {
			for i, c := range cells {
				if strings.TrimSpace(c) == "learnable" {
					learnCol = i
				}
			}
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		learnable := learnCol < len(cells) && strings.TrimSpace(cells[learnCol]) == "yes"
		for _, m := range names.FindAllStringSubmatch(cells[0], -1) {
			n := m[1]
			seen[n]++
			info, ok := posenc.InfoOf(n)
			if !ok {
				t.Errorf("docs/encodings.md lists %q, which the registry does not have", n)
				continue
			}
			if info.Learnable != learnable {
				t.Errorf("docs/encodings.md marks %q learnable=%v, the registry %v", n, learnable, info.Learnable)
			}
		}
	}
	var missing, twice []string
	for _, i := range posenc.Registered() {
		switch seen[i.Name] {
		case 0:
			missing = append(missing, i.Name)
		case 1:
		default:
			twice = append(twice, i.Name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(twice) > 0 {
		t.Errorf("docs/encodings.md: registered but not in a table: %v; in more than one row: %v", missing, twice)
	}
	if len(seen) < 30 || !slices.Contains(posenc.Names(), "rope") {
		t.Errorf("parsed %d names from the tables: the test reads nothing", len(seen))
	}
}
