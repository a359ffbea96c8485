package extrapstudy

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/study"
)

func TestLoadResults(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadResults(dir); err == nil || !strings.Contains(err.Error(), FileJSON) {
		t.Fatalf("missing file: %v", err)
	}
	row := func(enc string, seed int64, le int, pr string, bpb float64) Row {
		return Row{Encoding: enc, Seed: seed, TrainLen: 64, EvalLen: le, Protocol: pr, Status: StatusOK, BitsPerByte: bpb}
	}
	var rows []Row
	for _, pr := range Protocols {
		rows = append(rows,
			row("alibi", 1, 64, pr, 3.0), row("alibi", 2, 64, pr, 3.2), // mean 3.1, std √0.02
			row("alibi", 1, 128, pr, 2.9), row("alibi", 2, 128, pr, 3.1),
			row("rope", 1, 64, pr, 3.0), row("rope", 1, 128, pr, 3.5),
			row("rope-pi", 1, 128, pr, 3.9),
			row("learned", 1, 64, pr, 3.3),
			Row{Encoding: "learned", Seed: 1, TrainLen: 64, EvalLen: 128, Protocol: pr, Status: StatusNA, Note: "beyond"})
	}
	if err := study.WriteJSON(filepath.Join(dir, FileJSON), File{Preset: "t", Rows: rows}); err != nil {
		t.Fatal(err)
	}
	f, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Encodings(), ","); got != "alibi,rope,rope-pi,learned" {
		t.Fatalf("encodings %s", got)
	}
	if got := f.Lengths(); len(got) != 2 || got[0] != 64 || got[1] != 128 || f.TrainLen() != 64 {
		t.Fatalf("lengths %v, L %d", got, f.TrainLen())
	}
	c, ok := f.BitsPerByte("alibi", 64, ProtocolAll)
	if !ok || c.N != 2 || math.Abs(c.Mean-3.1) > 1e-12 || math.Abs(c.Std-math.Sqrt(0.02)) > 1e-12 {
		t.Fatalf("alibi at L: %+v %v", c, ok)
	}
	if c, ok := f.BitsPerByte("learned", 128, ProtocolLast); !ok || !c.NA {
		t.Fatalf("learned beyond L: %+v %v, want n/a", c, ok)
	}
	want := map[string]Change{
		"alibi":   {AtL: 3.1, AtMax: 3.0, MaxLen: 128, Delta: -0.1},
		"rope":    {AtL: 3.0, AtMax: 3.5, MaxLen: 128, Delta: 0.5},
		"rope-pi": {AtL: 3.0, AtMax: 3.9, MaxLen: 128, Delta: 0.9}, // rope's value at L
		"learned": {AtL: 3.3, AtMax: 3.3, MaxLen: 64, Delta: 0},
	}
	ch := f.Changes(ProtocolAll)
	if len(ch) != len(want) {
		t.Fatalf("changes %+v", ch)
	}
	for _, c := range ch {
		w := want[c.Encoding]
		if math.Abs(c.AtL-w.AtL) > 1e-12 || math.Abs(c.AtMax-w.AtMax) > 1e-12 || c.MaxLen != w.MaxLen || math.Abs(c.Delta-w.Delta) > 1e-12 {
			t.Errorf("%s: %+v, want %+v", c.Encoding, c, w)
		}
	}
	tab := f.Table(ProtocolAll)
	for _, s := range []string{"64 (1L)", "128 (2L)", "3.100 ± 0.141", "n/a", "rope-pi", "= rope",
		"mean ± sample standard deviation (denominator n-1) [95% t interval of the mean] over 2 seeds"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestCompare(t *testing.T) {
	rows := []Row{
		{Encoding: "alibi", Model: "alibi-seed1", EvalLen: 64, Protocol: ProtocolAll, BitsPerByte: 2.2, Tokens: 10, EvalMsPerToken: 1, GitRev: "a"},
		{Encoding: "alibi", Model: "alibi-seed1", EvalLen: 128, Protocol: ProtocolAll, BitsPerByte: 2.1, Tokens: 10},
	}
	a := &File{Rows: rows}
	b := &File{Rows: append([]Row(nil), rows...)}
	b.Rows[0].EvalMsPerToken, b.Rows[0].GitRev, b.Rows[0].Preset = 9, "b", "x-custom" // run-dependent
	if d := Compare(a, b); d != nil {
		t.Fatalf("run-dependent fields differ only, got %q", d)
	}
	// an option added to the library since the first run is recorded by
	// the second only: not a difference; one both record is compared
	a.Rows[0].PosOptions = map[string]string{"shaw-k": "16"}
	b.Rows[0].PosOptions = map[string]string{"shaw-k": "16", "cope-npos": "64"}
	if d := Compare(a, b); d != nil {
		t.Fatalf("an option only the second records, got %q", d)
	}
	b.Rows[0].PosOptions["shaw-k"] = "8"
	if d := Compare(a, b); len(d) != 1 || !strings.Contains(d[0], "pos_options") {
		t.Fatalf("shaw-k 16 against 8: got %q, want one pos_options difference", d)
	}
	b.Rows[0].PosOptions["shaw-k"] = "16"
	b.Rows[1].BitsPerByte = 2.1000000001
	b.Rows = append(b.Rows, Row{Encoding: "rope", Model: "rope-seed1", EvalLen: 64, Protocol: ProtocolAll})
	d := Compare(a, b)
	want := []string{"alibi/alibi-seed1/128/all: bits_per_byte 2.1 != 2.1000000001", "rope/rope-seed1/64/all: only in the second"}
	if !slices.Equal(d, want) {
		t.Fatalf("Compare = %q, want %q", d, want)
	}
}

// TestCompareWindowBits: per-window scores are summarised, not printed.
func TestCompareWindowBits(t *testing.T) {
	row := Row{Encoding: "alibi", Model: "alibi-seed1", EvalLen: 8, Protocol: ProtocolAll, Status: StatusOK, WindowBits: []float32{1, 2, 3}}
	other := row
	other.WindowBits = []float32{1, 2.5, 3.5}
	old := row
	old.WindowBits = nil
	got := Compare(&File{Rows: []Row{row}}, &File{Rows: []Row{other}})
	if len(got) != 1 || got[0] != "alibi/alibi-seed1/8/all: window_bits differ in 2 of 3 values (first at 1: 2 != 2.5)" {
		t.Errorf("different windows: %q", got)
	}
	got = Compare(&File{Rows: []Row{row}}, &File{Rows: []Row{old}})
	if len(got) != 1 || got[0] != "alibi/alibi-seed1/8/all: window_bits [3 values] != <nil>" {
		t.Errorf("windows on one side: %q", got)
	}
	if got := Compare(&File{Rows: []Row{row}}, &File{Rows: []Row{row}}); got != nil {
		t.Errorf("equal rows: %q", got)
	}
}
