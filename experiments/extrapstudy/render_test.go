package extrapstudy

import (
	"context"
	"encoding/csv"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPrecTicks checks that every tick label reads back as the tick's value
// (the old labels of ticks at 3.05, 3.20, 3.35 were "3.1", "3.2", "3.3").
func TestPrecTicks(t *testing.T) {
	for _, r := range [][2]float64{
		{3.02, 3.38}, {3.0, 3.4}, {2.9, 4.4}, {3.03, 3.9}, {0.001, 0.0042}, {1.05, 1.35},
		{100, 500}, {-0.3, 0.25}, {2.1234, 2.1251}, {0, 1}, {4.49, 4.51},
	} {
		n := 0
		for _, tk := range (precTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			n++
			v, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(v-tk.Value) > 1e-9*math.Max(math.Abs(tk.Value), 1e-3) {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
		if n < 2 {
			t.Errorf("range %v: %d labelled ticks", r, n)
		}
	}
}

// TestFileModes runs a tiny study and checks that every file it writes is
// 0644 and every directory 0755 (CreateTemp alone makes files 0600).
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "out")
	p := tinyPlan("none")
	if _, err := Run(context.Background(), p, tinyCorpus(t), Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Errorf("only %d files and directories written", n)
	}
}

// TestRenderDescribes runs a tiny study with a variant and two seeds and
// checks what the outputs say: ± and the number of seeds in table.md, the
// variant's base encoding, overrides and resolved position options in
// results.csv (sinusoidal-scale resolved to 1/sqrt(16), no 0 for
// "default").
func TestRenderDescribes(t *testing.T) {
	dir := t.TempDir()
	p := tinyPlan("sinusoidal", "t5@t5-max-distance=8@t5-buckets=8")
	p.Seeds = []int64{1, 2}
	o, err := Run(context.Background(), p, tinyCorpus(t), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mean ± sample standard deviation (denominator n-1) [95% t interval of the mean] over 2 seeds", "| t5@t5-max-distance=8@t5-buckets=8 |",
		"`t5@t5-max-distance=8@t5-buckets=8` is t5 with t5-max-distance = 8 (default 128), t5-buckets = 8 (default 32)"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("table.md lacks %q:\n%s", s, md)
		}
	}
	// Paired comparisons over seeds and windows, from every row's window
	// scores.
	for _, h := range []string{"## Paired comparisons, every target", "## Paired comparisons, the last L = 8 targets of each window"} {
		i := strings.Index(string(md), h)
		if i < 0 {
			t.Fatalf("table.md lacks %q:\n%s", h, md)
		}
		sec := string(md)[i:]
		if j := strings.Index(sec[1:], "\n## "); j >= 0 {
			sec = sec[:j+1]
		}
		if !strings.Contains(sec, "| 8 (1L) | ") || strings.Contains(sec, "| — |") {
			t.Errorf("%s: want comparisons at 1L, each over seeds and windows:\n%s", h, sec)
		}
	}
	res, err := LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows {
		var bits float64
		for _, v := range r.WindowBits {
			bits += float64(v)
		}
		if r.Status == StatusOK && (len(r.WindowBits) != r.Windows || math.Abs(bits/float64(r.Tokens)-r.BitsPerByte) > 1e-5) {
			t.Errorf("%s Le=%d %s: %d window scores for %d windows, %.6f bits/byte from them, %.6f in the row",
				r.Model, r.EvalLen, r.Protocol, len(r.WindowBits), r.Windows, bits/float64(r.Tokens), r.BitsPerByte)
		}
	}
	if n := strings.Count(string(md), "over 2 seeds"); n < 2 {
		t.Errorf("table.md says the seeds %d times, want the tables and the cost table", n)
	}
	f, err := os.Open(filepath.Join(dir, FileCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	if len(recs)-1 != len(o.Rows) || len(recs[0]) != len(CSVHeader()) {
		t.Fatalf("%d records of %d columns for %d rows", len(recs)-1, len(recs[0]), len(o.Rows))
	}
	for _, r := range recs[1:] {
		get := func(c string) string { return r[col[c]] }
		switch get("encoding") {
		case "sinusoidal":
			if get("base_encoding") != "sinusoidal" || get("overrides") != "" || get("sinusoidal-scale") != "0.25" || get("t5-buckets") != "" {
				t.Errorf("sinusoidal row: base %q overrides %q scale %q buckets %q", get("base_encoding"), get("overrides"),
					get("sinusoidal-scale"), get("t5-buckets"))
			}
		case "t5@t5-max-distance=8@t5-buckets=8":
			if get("base_encoding") != "t5" || get("overrides") != "t5-max-distance=8@t5-buckets=8" || get("t5-max-distance") != "8" ||
				get("t5-buckets") != "8" || get("pos-init-std") != "0.02" || get("alpha") != "false" || get("model") != "t5@t5-max-distance=8@t5-buckets=8-seed2" && get("seed") == "2" {
				t.Errorf("t5 variant row: %v", r)
			}
		default:
			t.Errorf("unexpected encoding %q", get("encoding"))
		}
	}
	for _, pr := range Protocols {
		if _, err := os.Stat(filepath.Join(dir, PlotFile(pr))); err != nil {
			t.Error(err)
		}
	}
	// One seed: no ±.
	q := tinyPlan("none")
	dir1 := t.TempDir()
	if _, err := Run(context.Background(), q, tinyCorpus(t), Options{Dir: dir1}); err != nil {
		t.Fatal(err)
	}
	if md, _ := os.ReadFile(filepath.Join(dir1, FileTable)); !strings.Contains(string(md), "one seed, single values (no ±)") || strings.Contains(string(md), " ± ") {
		t.Errorf("one-seed table.md:\n%s", md)
	}
}

// TestFlatSeries checks the zoom panel's selection: every mean beyond L
// within flatMargin of the mean at L, and at least one point beyond L.
func TestFlatSeries(t *testing.T) {
	for _, c := range []struct {
		le   []int
		mean []float64
		want bool
	}{
		{[]int{64, 128, 256, 512}, []float64{2.20, 2.19, 2.18, 2.185}, true},
		{[]int{64, 128, 256, 512}, []float64{2.10, 2.07, 2.06, 2.05}, true},
		{[]int{64, 128, 256, 512}, []float64{2.14, 2.17, 2.36, 2.97}, false},
		{[]int{64, 128, 256, 512}, []float64{2.14, 1.9, 2.1, 2.1}, false},
		{[]int{64}, []float64{2.15}, false},
		{[]int{128, 256}, []float64{2.2, 2.2}, false}, // no value at L
	} {
		s := series{le: c.le, mean: c.mean, std: make([]float64, len(c.le))}
		if got := s.flat(64); got != c.want {
			t.Errorf("%v %v: flat %v, want %v", c.le, c.mean, got, c.want)
		}
	}
}
