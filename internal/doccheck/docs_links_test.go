// Package doccheck holds only tests of the repository's Markdown
// documentation: README.md and every page under docs/.
package doccheck

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks: every relative link of README.md and docs/**/*.md resolves,
// to a file or directory of the repository and, for a link with #anchor to a
// Markdown file (or to the page itself), to a heading of that file.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // per Markdown file, its heading anchors
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[p] = a
		return a, nil
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, l := range markdownLinks(string(b)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(l.target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			dest := f
			if path != "" {
				if strings.HasPrefix(path, "/") {
					dest = filepath.Join(root, filepath.FromSlash(path))
				} else {
					dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", rel, l.line, l.target, relTo(root, dest))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, l.line, l.target, relTo(root, dest), anchor)
			}
		}
	}
	t.Logf("%d relative links in %d files", checked, len(files))
	if checked < 50 {
		t.Errorf("only %d relative links found in %d files: is the link parser broken?", checked, len(files))
	}
}

// TestAnchor: GitHub's heading anchors, on headings of these pages.
func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Memory at long lengths: streamed attention and gradient checkpointing": "memory-at-long-lengths-streamed-attention-and-gradient-checkpointing",
		"Decoding step, Go vs PyTorch (`go run ./bench -decode`)":               "decoding-step-go-vs-pytorch-go-run-bench--decode",
		"On a cluster (Slurm)":                                   "on-a-cluster-slurm",
		"Long-context preset results":                            "long-context-preset-results",
		"rpe: Transformer position encodings in Go, on Gorgonia": "rpe-transformer-position-encodings-in-go-on-gorgonia",
		"**Bold** and [a link](x.md) and snake_case":             "bold-and-a-link-and-snake_case",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
	a := headingAnchors("# A\n\n```\n# not a heading\n```\n\n## A\n\n### B #\n<a name=\"c\"></a>\n")
	for _, w := range []string{"a", "a-1", "b", "c"} {
		if !a[w] {
			t.Errorf("headingAnchors: no %q in %v", w, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("headingAnchors: a line of a code block counted as a heading")
	}
}

// TestMarkdownLinks: links outside code, with their lines; none inside code.
func TestMarkdownLinks(t *testing.T) {
	doc := "see [a](a.md) and ![img](b.png \"title\")\n`[no](c.md)`\n```\n[no](d.md)\n```\n[`code text`](e.md#x) [f](<f g.md>) `a\nb [no](h.md)` [two\nlines](i.md)\n"
	var got []string
	for _, l := range markdownLinks(doc) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := "1:a.md 1:b.png 6:e.md#x 6:f g.md 8:i.md"
	if strings.Join(got, " ") != want {
		t.Errorf("markdownLinks = %q, want %q", strings.Join(got, " "), want)
	}
}

type link struct {
	line   int
	target string
}

var (
	linkRE = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// code spans of two backticks first (they may hold one), then of one
	codeSpanREs = []*regexp.Regexp{regexp.MustCompile("``[^`](?:[^`]|`[^`])*?``"), regexp.MustCompile("`[^`]+`")}
	headingRE   = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	htmlIDRE    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	schemeRE    = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownLinks returns the inline links and images of a Markdown text,
// outside fenced code blocks and code spans, each with the line of its
// target. A link may span lines within a paragraph.
func markdownLinks(doc string) []link {
	var out []link
	lines := strings.Split(doc, "\n")
	var para []string
	start := 0
	flush := func() {
		text := strings.Join(para, "\n")
		text = blankCode(text)
		for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[4]:m[5]]
			n := start + 1 + strings.Count(text[:m[4]], "\n")
			out = append(out, link{n, strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")})
		}
		para = nil
	}
	code := codeLines(doc)
	for i, line := range lines {
		if code[i] || strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if para == nil {
			start = i
		}
		para = append(para, line)
	}
	flush()
	return out
}

// blankCode replaces every code span of a paragraph by "code", keeping its
// line breaks, so that no link is found inside code.
func blankCode(text string) string {
	for _, re := range codeSpanREs {
		text = re.ReplaceAllStringFunc(text, func(span string) string {
			return "code" + strings.Repeat("\n", strings.Count(span, "\n"))
		})
	}
	return text
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text (a repeated heading gets -1, -2, ...), and the names of
// HTML anchors <a name="..."> or <a id="...">.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	code := codeLines(doc)
	for i, line := range strings.Split(doc, "\n") {
		if code[i] {
			continue
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if c := count[a]; c > 0 {
			out[fmt.Sprintf("%s-%d", a, c)] = true
		} else {
			out[a] = true
		}
		count[a]++
	}
	return out
}

// anchor is GitHub's anchor of a heading: the text as rendered (links by
// their text, no code or emphasis marks), lower case, spaces to '-', and
// every character but letters, digits, '-' and '_' dropped.
func anchor(heading string) string {
	text := linkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// codeLines marks the lines of fenced code blocks (``` or ~~~), fences
// included.
func codeLines(doc string) []bool {
	lines := strings.Split(doc, "\n")
	code := make([]bool, len(lines))
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			code[i] = true
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			code[i], fence = true, trimmed[:3]
		}
	}
	return code
}

func isExternal(target string) bool {
	return schemeRE.MatchString(target) || strings.HasPrefix(target, "//")
}

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
