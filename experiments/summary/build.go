package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/stats"
)

// Spec says how to summarise one study's rows: the metric column, which
// way it improves, its unit (and a factor to print it in that unit), the
// columns that make a condition (one table each), and the condition the
// headline row of the summary reports.
type Spec struct {
	Study, Preset string // results/<Study>/<Preset>/results.csv
	Page          string // the study's docs page, relative to docs/
	Metric        string
	Unit          string
	Scale         float64 // printed value = Scale * column
	Format        string
	Dir           stats.Direction
	Conds         []string          // columns that define a condition
	Headline      map[string]string // the headline condition
	// Claims are the comparisons the study's reading makes, each worded
	// from its paired interval in the summary's last section.
	Claims []Claim
}

// Claim is "A against B under condition Cond" (Cond names some of the
// spec's Conds).
type Claim struct {
	A, B string
	Cond map[string]string
}

// Specs are the studies the summary covers, in the order it prints them.
var Specs = []Spec{
	{Study: "extrapolation", Preset: "full", Page: "studies/extrapolation.md", Metric: "bits_per_byte", Unit: "bits/byte", Scale: 1, Format: "%.4f", Dir: stats.LowerIsBetter,
		Conds: []string{"protocol", "eval_len"}, Headline: map[string]string{"protocol": "last-L", "eval_len": "512"},
		Claims: []Claim{
			{"xl", "alibi", map[string]string{"protocol": "last-L", "eval_len": "512"}},
			{"shaw", "alibi", map[string]string{"protocol": "last-L", "eval_len": "512"}},
			{"xl", "alibi", map[string]string{"protocol": "last-L", "eval_len": "64"}},
			{"alibi", "rope", map[string]string{"protocol": "last-L", "eval_len": "512"}},
		}},
	{Study: "extrapolation", Preset: "long", Page: "studies/extrapolation.md", Metric: "bits_per_byte", Unit: "bits/byte", Scale: 1, Format: "%.4f", Dir: stats.LowerIsBetter,
		Conds: []string{"protocol", "eval_len"}, Headline: map[string]string{"protocol": "last-L", "eval_len": "4096"},
		Claims: []Claim{
			{"alibi", "rope", map[string]string{"protocol": "last-L", "eval_len": "4096"}},
			{"alibi", "rope", map[string]string{"protocol": "all", "eval_len": "512"}},
			{"xl", "alibi", map[string]string{"protocol": "all", "eval_len": "4096"}},
			{"rope-yarn", "rope", map[string]string{"protocol": "all", "eval_len": "4096"}},
		}},
	{Study: "vision", Preset: "full", Page: "studies/vision.md", Metric: "accuracy", Unit: "% accuracy", Scale: 100, Format: "%.2f", Dir: stats.HigherIsBetter,
		Conds: []string{"resolution", "grid", "eval"}, Headline: map[string]string{"resolution": "28px", "grid": "7x7", "eval": ""},
		Claims: []Claim{
			{"cpe", "learned", map[string]string{"resolution": "28px", "grid": "7x7", "eval": ""}},
			{"cpe", "rope-mixed", map[string]string{"resolution": "28px", "grid": "7x7", "eval": ""}},
		}},
	{Study: "graphs", Preset: "full", Page: "studies/graphs.md", Metric: "accuracy", Unit: "% node accuracy", Scale: 100, Format: "%.2f", Dir: stats.HigherIsBetter,
		Conds: []string{"test_set"}, Headline: map[string]string{"test_set": "ood"},
		Claims: []Claim{
			{"graphormer-spatial", "none", map[string]string{"test_set": "test"}},
			{"graphormer-spatial", "laplacian", map[string]string{"test_set": "ood"}},
			{"graphormer-spatial+graphormer-centrality", "graphormer-spatial", map[string]string{"test_set": "ood"}},
		}},
	{Study: "code", Preset: "full", Page: "studies/code.md", Metric: "bits_per_byte", Unit: "bits/byte", Scale: 1, Format: "%.4f", Dir: stats.LowerIsBetter,
		Conds: []string{"factor"}, Headline: map[string]string{"factor": "4"},
		Claims: []Claim{
			{"tree", "none", map[string]string{"factor": "1"}},
			{"tree+rope", "rope", map[string]string{"factor": "1"}},
			{"tree+alibi", "alibi", map[string]string{"factor": "1"}},
			{"rope", "tree", map[string]string{"factor": "1"}},
		}},
	{Study: "times", Preset: "full", Page: "studies/time.md", Metric: "repeat_accuracy", Unit: "% repeat accuracy", Scale: 100, Format: "%.2f", Dir: stats.HigherIsBetter,
		Conds: []string{"factor"}, Headline: map[string]string{"factor": "2"},
		Claims: []Claim{
			{"rope@time", "rope", map[string]string{"factor": "1"}},
			{"alibi@time", "alibi", map[string]string{"factor": "1"}},
		}},
	{Study: "stability", Preset: "full", Page: "studies/stability.md", Metric: "val_bpb", Unit: "bits/byte", Scale: 1, Format: "%.4f", Dir: stats.LowerIsBetter,
		Conds: []string{"lr", "clip", "alpha", "init_std"}, Headline: map[string]string{"lr": "0.3", "clip": "off", "alpha": "off", "init_std": "1"}},
}

// Cell is one encoding under one condition: its per-seed values.
type Cell struct {
	Encoding string
	Seeds    []int
	Values   []float64 // in the printed unit, by seed
	Summary  stats.Summary
}

// Comparison is a paired difference a − b on the seeds both have.
type Comparison struct {
	A, B  string
	Diff  stats.Summary
	Words string
}

// Condition is one table of a study.
type Condition struct {
	Key         map[string]string
	Cells       []Cell // best first
	Comparisons []Comparison
	Skipped     int // rows not "ok" (n/a, diverged)
}

// Result is one study's summary.
type Result struct {
	Spec       Spec
	Conditions []Condition
	Revs       []string // the git revisions of its rows
	// Claims are the spec's claims in order, each with the condition it
	// was found under.
	Claims []ClaimResult
}

// ClaimResult is a claim's paired comparison.
type ClaimResult struct {
	Claim
	Label string // the condition
	Comparison
}

// Summarise reads spec's CSV under root and computes its conditions.
func Summarise(root string, spec Spec) (*Result, error) {
	path := filepath.Join(root, "results", spec.Study, spec.Preset, "results.csv")
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Wrap(err, "summary")
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, errors.Wrapf(err, "summary: %s", path)
	}
	if len(recs) < 2 {
		return nil, errors.Errorf("summary: %s has no rows", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range append([]string{"encoding", "seed", spec.Metric}, spec.Conds...) {
		if _, ok := col[c]; !ok {
			return nil, errors.Errorf("summary: %s has no column %q", path, c)
		}
	}
	type key struct{ cond, enc string }
	byCond := map[string]map[string]string{}
	vals := map[key]map[int]float64{}
	skipped := map[string]int{}
	var condOrder []string
	revs := map[string]bool{}
	for ln, r := range recs[1:] {
		ck := make([]string, len(spec.Conds))
		km := map[string]string{}
		for i, c := range spec.Conds {
			ck[i], km[c] = r[col[c]], r[col[c]]
		}
		cs := strings.Join(ck, "\x00")
		if _, ok := byCond[cs]; !ok {
			byCond[cs] = km
			condOrder = append(condOrder, cs)
		}
		if i, ok := col["git_rev"]; ok && r[i] != "" {
			revs[r[i][:min(12, len(r[i]))]] = true
		}
		if i, ok := col["status"]; ok && r[i] != "ok" {
			skipped[cs]++
			continue
		}
		seed, err := strconv.Atoi(r[col["seed"]])
		if err != nil {
			return nil, errors.Errorf("summary: %s line %d: seed %q", path, ln+2, r[col["seed"]])
		}
		v, err := strconv.ParseFloat(r[col[spec.Metric]], 64)
		if err != nil {
			return nil, errors.Errorf("summary: %s line %d: %s %q", path, ln+2, spec.Metric, r[col[spec.Metric]])
		}
		k := key{cs, r[col["encoding"]]}
		if vals[k] == nil {
			vals[k] = map[int]float64{}
		}
		if _, dup := vals[k][seed]; dup {
			return nil, errors.Errorf("summary: %s line %d: a second row for %s seed %d under %v", path, ln+2, k.enc, seed, km)
		}
		vals[k][seed] = spec.Scale * v
	}
	res := &Result{Spec: spec}
	for r := range revs {
		res.Revs = append(res.Revs, r)
	}
	sort.Strings(res.Revs)
	sortConds(condOrder)
	for _, cs := range condOrder {
		c := Condition{Key: byCond[cs], Skipped: skipped[cs]}
		for k, m := range vals {
			if k.cond != cs {
				continue
			}
			cell := Cell{Encoding: k.enc}
			for s := range m {
				cell.Seeds = append(cell.Seeds, s)
			}
			sort.Ints(cell.Seeds)
			for _, s := range cell.Seeds {
				cell.Values = append(cell.Values, m[s])
			}
			cell.Summary = stats.Describe(cell.Values)
			c.Cells = append(c.Cells, cell)
		}
		if len(c.Cells) == 0 {
			continue
		}
		better := func(a, b float64) bool {
			if spec.Dir == stats.HigherIsBetter {
				return a > b
			}
			return a < b
		}
		sort.SliceStable(c.Cells, func(i, j int) bool {
			a, b := c.Cells[i].Summary.Mean, c.Cells[j].Summary.Mean
			if a != b {
				return better(a, b)
			}
			return c.Cells[i].Encoding < c.Cells[j].Encoding
		})
		best := c.Cells[0]
		var others []Cell
		if len(c.Cells) > 1 {
			others = append(others, c.Cells[1])
		}
		if i := slices.IndexFunc(c.Cells, func(x Cell) bool { return x.Encoding == "none" }); i > 1 {
			others = append(others, c.Cells[i])
		}
		for _, o := range others {
			cmp, ok := compare(best, o, spec)
			if ok {
				c.Comparisons = append(c.Comparisons, cmp)
			}
		}
		res.Conditions = append(res.Conditions, c)
	}
	for _, cl := range spec.Claims {
		i := slices.IndexFunc(res.Conditions, func(c Condition) bool { return c.is(cl.Cond) })
		if i < 0 {
			return nil, errors.Errorf("summary: %s (%s): no condition %v for the claim %s vs %s", spec.Study, spec.Preset, cl.Cond, cl.A, cl.B)
		}
		c := res.Conditions[i]
		find := func(e string) (Cell, error) {
			j := slices.IndexFunc(c.Cells, func(x Cell) bool { return x.Encoding == e })
			if j < 0 {
				return Cell{}, errors.Errorf("summary: %s (%s): no %s under %s for a claim", spec.Study, spec.Preset, e, c.label(spec))
			}
			return c.Cells[j], nil
		}
		a, err := find(cl.A)
		if err != nil {
			return nil, err
		}
		b, err := find(cl.B)
		if err != nil {
			return nil, err
		}
		cmp, ok := compare(a, b, spec)
		if !ok {
			return nil, errors.Errorf("summary: %s (%s): %s and %s share no seed under %s", spec.Study, spec.Preset, cl.A, cl.B, c.label(spec))
		}
		res.Claims = append(res.Claims, ClaimResult{Claim: cl, Label: c.label(spec), Comparison: cmp})
	}
	return res, nil
}

// compare pairs a and b on their common seeds.
func compare(a, b Cell, spec Spec) (Comparison, bool) {
	var x, y []float64
	for i, s := range a.Seeds {
		if j := slices.Index(b.Seeds, s); j >= 0 {
			x, y = append(x, a.Values[i]), append(y, b.Values[j])
		}
	}
	d, err := stats.Paired(x, y)
	if err != nil {
		return Comparison{}, false
	}
	return Comparison{A: a.Encoding, B: b.Encoding, Diff: d, Words: stats.Compare(a.Encoding, b.Encoding, d, unitOfDiff(spec), spec.Format, spec.Dir)}, true
}

// unitOfDiff is the unit of a difference: percentage points for a
// percentage.
func unitOfDiff(spec Spec) string {
	if strings.HasPrefix(spec.Unit, "% ") {
		return "points of " + strings.TrimPrefix(spec.Unit, "% ")
	}
	return spec.Unit
}

// sortConds orders condition keys numerically where they are numbers.
func sortConds(keys []string) {
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := strings.Split(keys[i], "\x00"), strings.Split(keys[j], "\x00")
		for k := range a {
			if a[k] == b[k] {
				continue
			}
			x, ex := strconv.ParseFloat(a[k], 64)
			y, ey := strconv.ParseFloat(b[k], 64)
			if ex == nil && ey == nil {
				return x < y
			}
			return a[k] < b[k]
		}
		return false
	})
}

func (c Condition) label(spec Spec) string {
	var parts []string
	for _, k := range spec.Conds {
		v := c.Key[k]
		if v == "" {
			v = "-"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ", ")
}

func (c Condition) is(m map[string]string) bool {
	for k, v := range m {
		if c.Key[k] != v {
			return false
		}
	}
	return true
}

// Build summarises every spec and renders the Markdown page and the CSV;
// it also returns the summaries (for the docs pages' tables).
func Build(root string) (md, csvOut []byte, results []*Result, err error) {
	for _, s := range Specs {
		r, err := Summarise(root, s)
		if err != nil {
			return nil, nil, nil, err
		}
		results = append(results, r)
	}
	return renderMD(results), renderCSV(results), results, nil
}

func renderMD(results []*Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Summary of the studies, with intervals\n\n")
	fmt.Fprintf(&b, "Generated by `go run ./experiments/summary` from the committed per-seed rows\n")
	fmt.Fprintf(&b, "(`results/<study>/<preset>/results.csv`); `go run ./experiments/summary -check` (run by the tests)\n")
	fmt.Fprintf(&b, "fails when this page differs from them. Each value is the mean over seeds with its 95%%\n")
	fmt.Fprintf(&b, "Student-t interval; each comparison is the paired difference on the same seeds, with its\n")
	fmt.Fprintf(&b, "interval (package `experiments/stats`). \"Beats\" is written only when that interval excludes\n")
	fmt.Fprintf(&b, "zero; otherwise the difference is not resolved at this size. The intervals are over seeds\n")
	fmt.Fprintf(&b, "only: the evaluation items' own noise is not in them.\n\n")
	fmt.Fprintf(&b, "## Headline of each study\n\n")
	fmt.Fprintf(&b, "| study | condition | best (mean [95%% CI]) | against the runner-up | against none |\n|---|---|---|---|---|\n")
	for _, r := range results {
		for _, c := range r.Conditions {
			if !c.is(r.Spec.Headline) {
				continue
			}
			best := c.Cells[0]
			vs := []string{"-", "-"}
			for _, cmp := range c.Comparisons {
				i := 0
				if cmp.B == "none" && (len(c.Cells) < 2 || c.Cells[1].Encoding != "none") {
					i = 1
				}
				vs[i] = cmp.Words
			}
			fmt.Fprintf(&b, "| [%s (%s)](../../docs/%s) | %s | %s %s %s | %s | %s |\n", r.Spec.Study, r.Spec.Preset, r.Spec.Page,
				c.label(r.Spec), best.Encoding, best.Summary.Format(r.Spec.Format), r.Spec.Unit, vs[0], vs[1])
		}
	}
	fmt.Fprintf(&b, "\n## Comparisons the readings make\n\n")
	fmt.Fprintf(&b, "Each is the paired difference on the same seeds; \"not resolved\" means its 95%% interval contains\nzero, and the reading may not call it a win.\n\n")
	fmt.Fprintf(&b, "| study | condition | comparison | resolved |\n|---|---|---|---|\n")
	for _, r := range results {
		for _, c := range r.Claims {
			fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s |\n", r.Spec.Study, r.Spec.Preset, c.Label, c.Words, map[bool]string{true: "yes", false: "no"}[c.Diff.Resolved()])
		}
	}
	for _, r := range results {
		s := r.Spec
		fmt.Fprintf(&b, "\n## %s (%s preset)\n\n", s.Study, s.Preset)
		fmt.Fprintf(&b, "Metric `%s` in %s (%s is better), from `results/%s/%s/results.csv`; revisions of its rows: %s.\n",
			s.Metric, s.Unit, map[stats.Direction]string{stats.LowerIsBetter: "lower", stats.HigherIsBetter: "higher"}[s.Dir], s.Study, s.Preset, strings.Join(r.Revs, ", "))
		for _, c := range r.Conditions {
			fmt.Fprintf(&b, "\n### %s\n\n", c.label(s))
			fmt.Fprintf(&b, "| encoding | seeds | mean [95%% CI] | sd |\n|---|---|---|---|\n")
			for _, cell := range c.Cells {
				fmt.Fprintf(&b, "| %s | %d | %s | "+s.Format+" |\n", cell.Encoding, cell.Summary.N, cell.Summary.Format(s.Format), cell.Summary.SD)
			}
			if c.Skipped > 0 {
				fmt.Fprintf(&b, "\n%d rows not scored (status n/a or diverged) are left out.\n", c.Skipped)
			}
			if len(c.Comparisons) > 0 {
				b.WriteString("\n")
			}
			for _, cmp := range c.Comparisons {
				fmt.Fprintf(&b, "- %s.\n", cmp.Words)
			}
		}
	}
	return b.Bytes()
}

func renderCSV(results []*Result) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"study", "preset", "condition", "kind", "encoding", "versus", "metric", "unit", "seeds", "mean", "sd", "lo", "hi", "resolved"})
	num := func(x float64) string {
		if math.IsNaN(x) {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 10, 64)
	}
	for _, r := range results {
		for _, c := range r.Conditions {
			for _, cell := range c.Cells {
				s := cell.Summary
				w.Write([]string{r.Spec.Study, r.Spec.Preset, c.label(r.Spec), "mean", cell.Encoding, "", r.Spec.Metric, r.Spec.Unit, strconv.Itoa(s.N), num(s.Mean), num(s.SD), num(s.Lo), num(s.Hi), ""})
			}
			for _, cmp := range c.Comparisons {
				s := cmp.Diff
				w.Write([]string{r.Spec.Study, r.Spec.Preset, c.label(r.Spec), "paired difference", cmp.A, cmp.B, r.Spec.Metric, unitOfDiff(r.Spec), strconv.Itoa(s.N), num(s.Mean), num(s.SD), num(s.Lo), num(s.Hi), strconv.FormatBool(s.Resolved())})
			}
		}
	}
	for _, r := range results {
		for _, c := range r.Claims {
			s := c.Diff
			w.Write([]string{r.Spec.Study, r.Spec.Preset, c.Label, "claim", c.Claim.A, c.Claim.B, r.Spec.Metric, unitOfDiff(r.Spec), strconv.Itoa(s.N), num(s.Mean), num(s.SD), num(s.Lo), num(s.Hi), strconv.FormatBool(s.Resolved())})
		}
	}
	w.Flush()
	return b.Bytes()
}

// StudyTable renders r as one Markdown table: a row per encoding, a column
// per condition, each cell "mean [lo, hi]" over seeds (the 95% t
// interval; the mean alone for one seed; "" where the encoding has no
// result). It is the block the study's docs page embeds.
func StudyTable(r *Result) string {
	var b strings.Builder
	s := r.Spec
	fmt.Fprintf(&b, "Metric `%s` in %s (%s is better), mean [95%% t interval] over seeds; generated by `go run ./experiments/summary` from `results/%s/%s/results.csv`:\n\n",
		s.Metric, s.Unit, map[stats.Direction]string{stats.LowerIsBetter: "lower", stats.HigherIsBetter: "higher"}[s.Dir], s.Study, s.Preset)
	var encs []string
	for _, c := range r.Conditions {
		for _, cell := range c.Cells {
			if !slices.Contains(encs, cell.Encoding) {
				encs = append(encs, cell.Encoding)
			}
		}
	}
	sort.SliceStable(encs, func(i, j int) bool { return rank(r, encs[i]) < rank(r, encs[j]) })
	b.WriteString("| encoding |")
	for _, c := range r.Conditions {
		fmt.Fprintf(&b, " %s |", c.label(s))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Conditions)) + "\n")
	for _, e := range encs {
		fmt.Fprintf(&b, "| %s |", e)
		for _, c := range r.Conditions {
			v := ""
			if i := slices.IndexFunc(c.Cells, func(x Cell) bool { return x.Encoding == e }); i >= 0 {
				v = c.Cells[i].Summary.Format(s.Format)
				if i == 0 {
					v = "**" + v + "**"
				}
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nBold: the best mean of its column. Paired comparisons: [results/summary/summary.md](../../results/summary/summary.md).\n")
	return b.String()
}

// rank orders encodings by their place under the headline condition
// (then by name).
func rank(r *Result, e string) int {
	for _, c := range r.Conditions {
		if c.is(r.Spec.Headline) {
			if i := slices.IndexFunc(c.Cells, func(x Cell) bool { return x.Encoding == e }); i >= 0 {
				return i
			}
		}
	}
	return 1 << 20
}
