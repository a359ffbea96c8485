package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/stats"
)

// TestCommittedSummaryIsCurrent fails when results/summary/ differs from
// what the committed per-seed rows give: a summary figure cannot drift
// from its CSV.
func TestCommittedSummaryIsCurrent(t *testing.T) {
	if err := run(filepath.Join("..", ".."), true); err != nil {
		t.Fatal(err)
	}
}

// writeStudy writes results/<study>/full/results.csv under a temporary
// root and returns the root.
func writeStudy(t *testing.T, study, body string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "results", study, "full")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.csv"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSummarise(t *testing.T) {
	// a: better than b on every seed by 0.1 (paired: resolved) though the
	// seeds differ by 1; none far behind; n/a rows left out
	root := writeStudy(t, "toy", `encoding,seed,cond,status,bpb,git_rev
a,1,x,ok,1.0,0123456789abcdef
a,2,x,ok,2.0,0123456789abcdef
a,3,x,ok,3.0,0123456789abcdef
b,1,x,ok,1.1,0123456789abcdef
b,2,x,ok,2.1,0123456789abcdef
b,3,x,ok,3.11,0123456789abcdef
none,1,x,ok,5,0123456789abcdef
none,2,x,ok,5.5,0123456789abcdef
none,3,x,ok,6,0123456789abcdef
c,1,x,n/a,0,0123456789abcdef
a,1,y,ok,1.0,0123456789abcdef
b,1,y,ok,1.2,0123456789abcdef
`)
	spec := Spec{Study: "toy", Preset: "full", Metric: "bpb", Unit: "bits/byte", Scale: 1, Format: "%.3f", Dir: stats.LowerIsBetter, Conds: []string{"cond"}}
	r, err := Summarise(root, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Conditions) != 2 || r.Conditions[0].Key["cond"] != "x" || r.Conditions[0].Skipped != 1 {
		t.Fatalf("conditions %+v", r.Conditions)
	}
	x := r.Conditions[0]
	if x.Cells[0].Encoding != "a" || x.Cells[1].Encoding != "b" || x.Cells[2].Encoding != "none" || len(x.Cells) != 3 {
		t.Fatalf("cells not ordered best first: %+v", x.Cells)
	}
	if x.Cells[0].Summary.N != 3 || x.Cells[0].Summary.Mean != 2 {
		t.Errorf("a: %+v", x.Cells[0].Summary)
	}
	if len(x.Comparisons) != 2 || x.Comparisons[0].B != "b" || x.Comparisons[1].B != "none" {
		t.Fatalf("comparisons %+v", x.Comparisons)
	}
	if d := x.Comparisons[0].Diff; !d.Resolved() || math.Abs(d.Mean+0.1033333) > 1e-6 || !strings.HasPrefix(x.Comparisons[0].Words, "a beats b by 0.103 bits/byte") {
		t.Errorf("a vs b: %+v %q", d, x.Comparisons[0].Words)
	}
	// one seed: no interval, not a win
	y := r.Conditions[1]
	if len(y.Comparisons) != 1 || strings.Contains(y.Comparisons[0].Words, "beats") {
		t.Errorf("one seed worded %q", y.Comparisons[0].Words)
	}
	if len(r.Revs) != 1 || r.Revs[0] != "0123456789ab" {
		t.Errorf("revisions %v", r.Revs)
	}
}

func TestSummariseErrors(t *testing.T) {
	spec := Spec{Study: "toy", Preset: "full", Metric: "bpb", Scale: 1, Format: "%.3f", Conds: []string{"cond"}}
	for _, c := range []struct{ body, want string }{
		{"encoding,seed,cond\na,1,x\n", `no column "bpb"`},
		{"encoding,seed,cond,bpb\na,1,x,zz\n", `line 2: bpb "zz"`},
		{"encoding,seed,cond,bpb\na,1,x,1\na,1,x,2\n", "a second row for a seed 1"},
		{"encoding,seed,cond,bpb\n", "has no rows"},
	} {
		_, err := Summarise(writeStudy(t, "toy", c.body), spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
	if _, err := Summarise(t.TempDir(), spec); err == nil {
		t.Error("missing CSV: no error")
	}
	// a claim about an encoding or condition the rows do not have
	body := "encoding,seed,cond,bpb\na,1,x,1\na,2,x,2\nb,1,x,1.5\nb,2,x,2.5\n"
	for _, c := range []struct {
		claim Claim
		want  string
	}{
		{Claim{"a", "z", map[string]string{"cond": "x"}}, "no z under cond=x"},
		{Claim{"a", "b", map[string]string{"cond": "y"}}, "no condition map[cond:y]"},
	} {
		sp := spec
		sp.Claims = []Claim{c.claim}
		if _, err := Summarise(writeStudy(t, "toy", body), sp); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("claim %+v: error %v, want %q", c.claim, err, c.want)
		}
	}
	sp := spec
	sp.Claims = []Claim{{"b", "a", map[string]string{"cond": "x"}}}
	r, err := Summarise(writeStudy(t, "toy", body), sp)
	if err != nil || len(r.Claims) != 1 || r.Claims[0].Diff.Mean != 0.5 || !strings.Contains(r.Claims[0].Words, "b trails a") {
		t.Errorf("claim b vs a: %+v, %v", r, err)
	}
}

// TestCheckFailsOnDrift changes one committed figure and sees -check fail.
func TestCheckFailsOnDrift(t *testing.T) {
	root := writeStudy(t, "toy", "encoding,seed,cond,bpb\na,1,x,1\na,2,x,2\nb,1,x,1.5\nb,2,x,2.5\n")
	saved := Specs
	defer func() { Specs = saved }()
	Specs = []Spec{{Study: "toy", Preset: "full", Page: "x.md", Metric: "bpb", Unit: "bits/byte", Scale: 1, Format: "%.3f", Conds: []string{"cond"}}}
	page := filepath.Join(root, "docs", "studies", "toy.md")
	if err := os.MkdirAll(filepath.Dir(page), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, []byte("# Toy\n\n<!-- summary:toy/full -->\nstale\n<!-- /summary -->\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(root, true); err == nil || !strings.Contains(err.Error(), "toy.md: a generated table differs") {
		t.Fatalf("check of a stale docs table: %v", err)
	}
	if err := run(root, false); err != nil {
		t.Fatal(err)
	}
	if err := run(root, true); err != nil {
		t.Fatalf("check right after writing: %v", err)
	}
	doc, _ := os.ReadFile(page)
	if !strings.Contains(string(doc), "| b | 2.000 [-4.353, 8.353] |") || strings.Contains(string(doc), "stale") || !strings.HasSuffix(string(doc), "<!-- /summary -->\n\nafter\n") {
		t.Errorf("docs page after writing:\n%s", doc)
	}
	if _, _, err := fillMarkers("<!-- summary:nope/full -->\n<!-- /summary -->", docLookup(t.TempDir(), nil)); err == nil || !strings.Contains(err.Error(), "nope/full") {
		t.Errorf("unknown marker: %v", err)
	}
	p := filepath.Join(root, "results", "summary", "summary.md")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("1.500"), []byte("1.400"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(root, true); err == nil || !strings.Contains(err.Error(), "summary.md differs") {
		t.Fatalf("check of an edited summary: %v", err)
	}
}

// TestIncludeSection embeds a section of a generated file, sees -check fail
// when the file changes, and names a missing heading.
func TestIncludeSection(t *testing.T) {
	root := writeStudy(t, "toy", "encoding,seed,cond,bpb\na,1,x,1\na,2,x,2\n")
	saved := Specs
	defer func() { Specs = saved }()
	Specs = []Spec{{Study: "toy", Preset: "full", Page: "x.md", Metric: "bpb", Unit: "bits/byte", Scale: 1, Format: "%.3f", Conds: []string{"cond"}}}
	table := filepath.Join(root, "results", "toy", "full", "table.md")
	if err := os.WriteFile(table, []byte("# Toy\n\n## Effects\n\n| a | +0.10 [+0.01, +0.19] |\n\n## Next\n\nnot this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "studies", "toy.md")
	if err := os.MkdirAll(filepath.Dir(page), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, []byte("<!-- summary:include results/toy/full/table.md#Effects -->\n<!-- /summary -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(root, false); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(page)
	if !strings.Contains(string(doc), "| a | +0.10 [+0.01, +0.19] |\n<!-- /summary -->") || strings.Contains(string(doc), "not this") {
		t.Errorf("page with an included section:\n%s", doc)
	}
	if err := os.WriteFile(table, []byte("## Effects\n\n| a | +0.20 [+0.01, +0.39] |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(root, true); err == nil || !strings.Contains(err.Error(), "generated table differs") {
		t.Errorf("check after the included file changed: %v", err)
	}
	if _, err := includeSection(root, "results/toy/full/table.md#Missing"); err == nil || !strings.Contains(err.Error(), `no heading "## Missing"`) {
		t.Errorf("missing heading: %v", err)
	}
}
