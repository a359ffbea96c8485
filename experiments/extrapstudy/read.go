package extrapstudy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"
	"github.com/rpe-go/rpe/experiments/study"
)

// LoadResults reads the results.json that Run or Render wrote in dir (a
// study's output directory, e.g. results/extrapolation/full), for analysis
// without retraining. Errors: the file is missing, not JSON, or has no
// rows.
func LoadResults(dir string) (*File, error) {
	var f File
	path := filepath.Join(dir, FileJSON)
	if err := study.ReadJSON(path, &f); err != nil {
		return nil, errors.WithMessage(err, "study: loading results")
	}
	if len(f.Rows) == 0 {
		return nil, errors.Errorf("study: %s has no results", path)
	}
	return &f, nil
}

// Encodings returns the evaluated encodings in table order (the order of
// their first row).
func (f *File) Encodings() []string {
	var out []string
	for _, r := range f.Rows {
		if !slices.Contains(out, r.Encoding) {
			out = append(out, r.Encoding)
		}
	}
	return out
}

// Lengths returns the evaluation lengths, ascending.
func (f *File) Lengths() []int {
	var out []int
	for _, r := range f.Rows {
		if !slices.Contains(out, r.EvalLen) {
			out = append(out, r.EvalLen)
		}
	}
	slices.Sort(out)
	return out
}

// TrainLen returns the training length L of the results (0 if there are
// none).
func (f *File) TrainLen() int {
	if len(f.Rows) == 0 {
		return 0
	}
	return f.Rows[0].TrainLen
}

// BitsPerByte returns the bits per byte of encoding at evaluation length le
// under protocol (ProtocolAll or ProtocolLast), aggregated over seeds, and
// whether there is such a result.
func (f *File) BitsPerByte(encoding string, le int, protocol string) (study.Cell, bool) {
	c, ok := aggregate(f.Rows, func(r Row) float64 { return r.BitsPerByte })[cellKey{encoding, le, protocol}]
	return c, ok
}

// Change is how an encoding's bits per byte move from Le = L to the longest
// evaluation length it has a result at.
type Change struct {
	Encoding string
	// AtL and AtMax are the mean bits per byte at L and at MaxLen.
	AtL, AtMax float64
	MaxLen     int
	// Delta is AtMax - AtL: negative when the longer context helps.
	Delta float64
}

// Changes returns the Change of every encoding under protocol, in table
// order. Encodings without a result at L (the RoPE scalings, which equal
// rope there) use rope's value at L; encodings with no result beyond L
// (learned) have MaxLen = L and Delta 0.
func (f *File) Changes(protocol string) []Change {
	L := f.TrainLen()
	lens := f.Lengths()
	var out []Change
	for _, e := range f.Encodings() {
		c := Change{Encoding: e, MaxLen: L}
		atL, ok := f.BitsPerByte(e, L, protocol)
		if !ok || atL.NA {
			atL, ok = f.BitsPerByte("rope", L, protocol)
		}
		if !ok || atL.NA {
			continue
		}
		c.AtL, c.AtMax = atL.Mean, atL.Mean
		for _, le := range lens {
			if v, ok := f.BitsPerByte(e, le, protocol); ok && !v.NA && le > c.MaxLen {
				c.MaxLen, c.AtMax = le, v.Mean
			}
		}
		c.Delta = c.AtMax - c.AtL
		out = append(out, c)
	}
	return out
}

// Table formats the bits per byte of protocol as an aligned text table:
// one row per encoding, one column per length, "mean ± std" over seeds,
// "n/a" where the model cannot run, "= rope" for a RoPE scaling at L, and
// a last line saying what ± is and over how many seeds.
func (f *File) Table(protocol string) string {
	var b strings.Builder
	lens := f.Lengths()
	L := f.TrainLen()
	fmt.Fprintf(&b, "%-13s", "encoding")
	for _, le := range lens {
		fmt.Fprintf(&b, " %15s", fmt.Sprintf("%d (%dL)", le, le/max(L, 1)))
	}
	b.WriteString("\n")
	for _, e := range f.Encodings() {
		fmt.Fprintf(&b, "%-13s", e)
		for _, le := range lens {
			s := "-"
			if c, ok := f.BitsPerByte(e, le, protocol); ok {
				s = fmtCell(c, true, 3)
			} else if _, rope := f.BitsPerByte("rope", le, protocol); rope && le == L {
				s = "= rope" // a RoPE scaling at Le = L is rope itself
			}
			fmt.Fprintf(&b, " %15s", s)
		}
		b.WriteString("\n")
	}
	seeds := map[int64]bool{}
	for _, r := range f.Rows {
		seeds[r.Seed] = true
	}
	b.WriteString(seedNote(len(seeds)) + "\n")
	return b.String()
}

// RunDependent lists the row fields (JSON names) that measure the run rather
// than the model: timings, memory peaks, the build's revision. Compare
// ignores them.
var RunDependent = []string{"eval_ms_per_token", "train_ms_per_step", "train_tokens_per_sec", "peak_heap_mb",
	"peak_rss_mb", "rss_source", "base_heap_mb", "base_rss_mb", "git_rev", "git_dirty", "machine", "preset"}

// Compare returns the differences between the rows of two studies of the
// same plan (for example a single-process run and a cluster run): rows
// present in one only, and every field outside RunDependent that differs,
// as "encoding/model/Le/protocol: field a != b". No differences: nil.
// Position options (pos_options) are compared on the options both rows
// record: an option only one side has was added to the library between the
// two builds, and the older build ran without it (its default, or the
// encoding's label names it as a variant).
func Compare(a, b *File) []string {
	key := func(r Row) string {
		return fmt.Sprintf("%s/%s/%d/%s", r.Encoding, r.Model, r.EvalLen, r.Protocol)
	}
	fieldsOf := func(r Row) map[string]any {
		var m map[string]any
		raw, _ := json.Marshal(r)
		_ = json.Unmarshal(raw, &m)
		for _, k := range RunDependent {
			delete(m, k)
		}
		return m
	}
	index := func(f *File) (map[string]Row, []string) {
		rows, keys := map[string]Row{}, []string(nil)
		for _, r := range f.Rows {
			k := key(r)
			if _, dup := rows[k]; !dup {
				keys = append(keys, k)
			}
			rows[k] = r
		}
		return rows, keys
	}
	ra, ka := index(a)
	rb, kb := index(b)
	var out []string
	for _, k := range ka {
		rowB, ok := rb[k]
		if !ok {
			out = append(out, k+": only in the first")
			continue
		}
		fa, fb := fieldsOf(ra[k]), fieldsOf(rowB)
		names := make([]string, 0, len(fa)+len(fb))
		for n := range fa {
			names = append(names, n)
		}
		for n := range fb {
			if _, ok := fa[n]; !ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		samePosOptions(fa, fb)
		for _, n := range names {
			if !reflect.DeepEqual(fa[n], fb[n]) {
				out = append(out, fmt.Sprintf("%s: %s %s", k, n, diffValues(fa[n], fb[n])))
			}
		}
	}
	for _, k := range kb {
		if _, ok := ra[k]; !ok {
			out = append(out, k+": only in the second")
		}
	}
	return out
}

// diffValues describes two different field values, "a != b"; lists (the
// per-window scores) are summarised: their lengths, and where two of one
// length first differ and in how many places.
func diffValues(a, b any) string {
	la, okA := a.([]any)
	lb, okB := b.([]any)
	brief := func(v any, l []any, ok bool) string {
		if ok {
			return fmt.Sprintf("[%d values]", len(l))
		}
		return fmt.Sprint(v)
	}
	if okA && okB && len(la) == len(lb) {
		first, n := -1, 0
		for i := range la {
			if !reflect.DeepEqual(la[i], lb[i]) {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		return fmt.Sprintf("differ in %d of %d values (first at %d: %v != %v)", n, len(la), first, la[first], lb[first])
	}
	return brief(a, la, okA) + " != " + brief(b, lb, okB)
}

// samePosOptions drops from the pos_options of two rows' fields the
// options only one of them records (see Compare).
func samePosOptions(fa, fb map[string]any) {
	a, okA := fa["pos_options"].(map[string]any)
	b, okB := fb["pos_options"].(map[string]any)
	if !okA || !okB {
		return
	}
	for n := range a {
		if _, ok := b[n]; !ok {
			delete(a, n)
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			delete(b, n)
		}
	}
}

// Contrasts returns the section "Contrasts of the reading" of table.md
// (Markdown), computed from the file's rows: each comparison the reading
// of the file's preset makes, with its paired interval; "" for a preset
// without a written reading.
func (f *File) Contrasts() string {
	L := f.TrainLen()
	if L == 0 {
		return ""
	}
	p := Plan{Preset: f.Preset}
	p.Base.SeqLen = L
	for _, le := range f.Lengths() {
		p.Factors = append(p.Factors, le/L)
	}
	return contrastSection(f.Rows, p)
}
