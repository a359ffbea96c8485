package extrapstudy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContrastSection: the long preset's contrasts are rendered from the
// rows at their lengths, a RoPE scaling at L is the rope model, and a
// contrast whose encoding did not run is "not available".
func TestContrastSection(t *testing.T) {
	p, err := Preset("long")
	if err != nil {
		t.Fatal(err)
	}
	L := p.TrainLen()
	var rows []Row
	for _, s := range []int64{1, 2, 3} {
		for _, f := range []int{1, 2, 4, 8} {
			d := 0.001 * float64(s)
			rows = append(rows,
				Row{Encoding: "alibi", Seed: s, EvalLen: f * L, Protocol: ProtocolAll, Status: StatusOK, BitsPerByte: 2 + d},
				Row{Encoding: "rope", Seed: s, EvalLen: f * L, Protocol: ProtocolAll, Status: StatusOK, BitsPerByte: 2 + float64(f) - 1 + 2*d})
		}
	}
	s := contrastSection(rows, p)
	for _, want := range []string{
		"## Contrasts of the reading",
		"| the document's ALiBi against RoPE | alibi at 2048 (4L) | rope at 2048 (4L) | -3.002 [",
		"alibi at 2048 (4L) beats rope at 2048 (4L) by 3.002 bits/byte",
		"| ALiBi keeps its loss beyond L | alibi at 4096 (8L) | alibi at 512 (1L) | +0.000 [",
		"no difference resolved between alibi at 4096 (8L) and alibi at 512 (1L)",
		"| Transformer-XL beats ALiBi at 8L | xl at 4096 (8L) | alibi at 4096 (8L) | not available |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if got := contrastSection(rows, Plan{Preset: "tiny", Factors: []int{1, 2}}); got != "" {
		t.Errorf("a preset without a reading has no contrasts: %q", got)
	}
}

// TestFileContrasts: File.Contrasts of the committed full results is the
// section table.md carries.
func TestFileContrasts(t *testing.T) {
	dir := filepath.Join("..", "..", "results", "extrapolation", "full")
	f, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Contrasts()
	if c == "" || !strings.Contains(string(md), strings.TrimSpace(c)) {
		t.Errorf("File.Contrasts is not table.md's section:\n%s", c)
	}
}

// TestProtocolPlot: the protocol figure is drawn from rows with long-text
// protocols (one panel per encoding), and refused without any.
func TestProtocolPlot(t *testing.T) {
	var rows []Row
	for _, s := range []int64{1, 2} {
		for _, le := range []int{8, 16} {
			for _, pr := range []string{ProtocolAll, ProtocolLast, "chunks:8"} {
				rows = append(rows, Row{Encoding: "alibi", Seed: s, EvalLen: le, Protocol: pr, Status: StatusOK, BitsPerByte: 2 + 0.01*float64(s)})
			}
		}
	}
	path := filepath.Join(t.TempDir(), FileProtocols)
	if err := ProtocolPlot(rows, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("protocols.png: %d bytes, %v", len(b), err)
	}
	if err := ProtocolPlot(rows[:2], path); err == nil || !strings.Contains(err.Error(), "no row has a long-text protocol") {
		t.Errorf("without long-text rows: %v", err)
	}
}
