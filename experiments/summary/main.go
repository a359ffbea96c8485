// Command summary derives, from the committed per-seed rows of every study
// (results/<study>/<preset>/results.csv), the mean of each study's metric
// over seeds with its 95% interval and the paired comparisons a reading
// makes (the best encoding against the runner-up and against none, on the
// same seeds), and writes them to results/summary/summary.md and
// summary.csv. With -check it writes nothing and fails if the committed
// files differ from what the CSVs give, so that a summary figure cannot
// drift from its rows (the test suite runs it).
//
//	go run ./experiments/summary          # rewrite results/summary/
//	go run ./experiments/summary -check   # exit 1 if they are stale
//
// The statistics are those of package stats: Student-t intervals over
// seeds, paired by seed; "beats" only when the interval of the
// difference excludes zero.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
)

func main() {
	root := flag.String("root", ".", "the repository root (holding results/)")
	check := flag.Bool("check", false, "write nothing; exit 1 if results/summary/ differs from what the committed CSVs give")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	md, csv, results, err := Build(root)
	if err != nil {
		return err
	}
	if err := syncDocs(root, results, check); err != nil {
		return err
	}
	dir := filepath.Join(root, "results", "summary")
	files := map[string][]byte{"summary.md": md, "summary.csv": csv}
	if check {
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return errors.Wrapf(err, "check (run go run ./experiments/summary)")
			}
			if !bytes.Equal(got, want) {
				return errors.Errorf("results/summary/%s differs from what the committed results give: run go run ./experiments/summary", name)
			}
		}
		fmt.Println("summary: results/summary/ agrees with the committed results")
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	fmt.Printf("summary: wrote %s (summary.md, summary.csv)\n", dir)
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// The docs pages embed each study's table between the markers
// "<!-- summary:STUDY/PRESET -->" and "<!-- /summary -->" (each on its own
// line); syncDocs rewrites what lies between them, or with check fails if
// it differs. A marker "<!-- summary:include FILE#HEADING -->" embeds instead
// the section of the generated Markdown FILE (relative to the repository
// root, e.g. a study's table.md) under the heading "## HEADING", up to the
// next "## " heading: a study's own rendered tables (paired effects, per
// condition) reach its page the same checked way.
const (
	markOpen  = "<!-- summary:"
	markClose = "<!-- /summary -->"
)

func syncDocs(root string, results []*Result, check bool) error {
	lookup := docLookup(root, results)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "studies", "*.md"))
	if err != nil {
		return err
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			return err
		}
		out, n, err := fillMarkers(string(b), lookup)
		if err != nil {
			return errors.Wrapf(err, "%s", page)
		}
		if n == 0 || out == string(b) {
			continue
		}
		if check {
			return errors.Errorf("%s: a generated table differs from the committed results: run go run ./experiments/summary", page)
		}
		if err := writeAtomic(page, []byte(out)); err != nil {
			return err
		}
	}
	return nil
}

// docLookup gives the text of a marker's key: a study's table of means
// ("STUDY/PRESET") or a section of a generated file ("include FILE#HEADING").
func docLookup(root string, results []*Result) func(key string) (string, error) {
	tables := map[string]string{}
	for _, r := range results {
		tables[r.Spec.Study+"/"+r.Spec.Preset] = StudyTable(r)
	}
	return func(key string) (string, error) {
		if inc, ok := strings.CutPrefix(key, "include "); ok {
			return includeSection(root, strings.TrimSpace(inc))
		}
		t, ok := tables[key]
		if !ok {
			return "", errors.Errorf("summary marker for %q: no such study/preset in experiments/summary's Specs", key)
		}
		return t, nil
	}
}

// fillMarkers replaces the text between each pair of markers of doc with
// the text lookup gives for its key; n is the number of pairs.
func fillMarkers(doc string, lookup func(key string) (string, error)) (out string, n int, err error) {
	var b strings.Builder
	rest := doc
	for {
		i := strings.Index(rest, markOpen)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), n, nil
		}
		j := strings.Index(rest[i:], "-->")
		if j < 0 {
			return "", n, errors.New("an unclosed summary marker")
		}
		key := strings.TrimSpace(rest[i+len(markOpen) : i+j])
		t, err := lookup(key)
		if err != nil {
			return "", n, err
		}
		k := strings.Index(rest[i:], markClose)
		if k < 0 {
			return "", n, errors.Errorf("summary marker %q without %s", key, markClose)
		}
		b.WriteString(rest[:i+j+3])
		b.WriteString("\n" + t)
		b.WriteString(markClose)
		rest = rest[i+k+len(markClose):]
		n++
	}
}

// includeSection returns the body of section "## HEADING" of the Markdown
// file named by spec ("FILE#HEADING", FILE relative to root), without its
// heading line, up to the next level-2 heading, with surrounding blank
// lines trimmed and one newline at the end.
func includeSection(root, spec string) (string, error) {
	file, heading, ok := strings.Cut(spec, "#")
	if !ok || file == "" || heading == "" {
		return "", errors.Errorf("summary include %q: want FILE#HEADING", spec)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return "", errors.Wrapf(err, "summary include %q", spec)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, " ") == "## "+heading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return "", errors.Errorf("summary include %q: %s has no heading \"## %s\"", spec, file, heading)
	}
	end := len(lines)
	for i := start; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}
	body := strings.Trim(strings.Join(lines[start:end], "\n"), "\n")
	return "Generated by `go run ./experiments/summary` from [`" + file + "`](../../" + file + "):\n\n" + body + "\n", nil
}
