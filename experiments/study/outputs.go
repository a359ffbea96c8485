package study

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
)

// The files every study writes in its output directory (WriteOutputs).
const (
	FileCSV   = "results.csv"
	FileJSON  = "results.json"
	FileTable = "table.md"
)

// Results is results.json of a study with plan P and rows R.
type Results[P, R any] struct {
	Preset string `json:"preset"`
	Plan   P      `json:"plan"`
	Rows   []R    `json:"rows"`
	// Pending lists the jobs without saved rows when it was written.
	Pending []string `json:"pending,omitempty"`
}

// ReadResults reads results.json (FileJSON) of an output directory.
func ReadResults[P, R any](dir string) (*Results[P, R], error) {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil, err
	}
	var f Results[P, R]
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errors.Wrapf(err, "%s", filepath.Join(dir, FileJSON))
	}
	return &f, nil
}

// Outputs is what WriteOutputs writes.
type Outputs[R any] struct {
	// Rows are the rows of results.csv; JSON is results.json (usually a
	// Results value, or a study's own type with more fields).
	Rows []R
	JSON any
	// CSVHeader and CSVRow give results.csv; Markdown is table.md.
	CSVHeader []string
	CSVRow    func(R) []string
	Markdown  string
	// Plots write the figures (each given the output directory), only if
	// there are rows.
	Plots []func(dir string) error
}

// WriteOutputs writes results.csv, results.json, table.md (FileCSV,
// FileJSON, FileTable) and the plots into dir, each file atomically.
func WriteOutputs[R any](dir string, o Outputs[R]) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(o.CSVHeader)
	for _, r := range o.Rows {
		_ = w.Write(o.CSVRow(r))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileCSV), buf.Bytes()); err != nil {
		return err
	}
	b, err := json.MarshalIndent(o.JSON, "", " ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileJSON), append(b, '\n')); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileTable), []byte(o.Markdown)); err != nil {
		return err
	}
	if len(o.Rows) == 0 {
		return nil
	}
	for _, plot := range o.Plots {
		if err := plot(dir); err != nil {
			return err
		}
	}
	return nil
}

// JobsOutcome is what a run of a study of trained models produced.
type JobsOutcome[R any] struct {
	Rows []R
	Dir  string
	// Trained counts the models of this run; Reused those whose saved
	// rows were taken as they were.
	Trained, Reused int
	Wall            time.Duration
}

// RunAll is Run with its outcome: every job not done, then the rendering.
func (js *Jobs[S, R]) RunAll(ctx context.Context) (*JobsOutcome[R], error) {
	start := time.Now()
	out := &JobsOutcome[R]{Dir: js.Dir}
	var err error
	if out.Rows, out.Trained, out.Reused, err = js.Run(ctx); err != nil {
		return out, err
	}
	out.Wall = time.Since(start)
	return out, nil
}

// String is the one-line summary of a run: "12 models trained, 0 reused,
// in 14m2s".
func (o *JobsOutcome[R]) String() string {
	return fmt.Sprintf("%d models trained, %d reused, in %s", o.Trained, o.Reused, o.Wall.Round(time.Second))
}

// runDependentColumn reports whether a results.csv column depends on the
// run rather than on the plan: timings, memory, the revision and the
// preset's name.
func runDependentColumn(name string) bool {
	for _, s := range []string{"ms_per", "_ms", "per_sec", "peak_", "rss", "heap", "seconds", "git_rev", "git_dirty"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// CompareCSV compares the results.csv of two output directories of the
// same plan (a single-process run and a cluster run, or two revisions),
// row by row in order, on the columns both files have: every one but the
// run-dependent ones (timings, memory, git revision) must be equal. It
// returns the differences, as "row N (first cells): column a != b", nil if
// none, and notes naming the columns only one file has (added to the
// library between the two builds: not a difference); an error if a file
// cannot be read.
func CompareCSV(a, b string) (diffs, notes []string, err error) {
	read := func(dir string) ([][]string, error) {
		f, err := os.Open(filepath.Join(dir, FileCSV))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err == nil && len(recs) == 0 {
			err = errors.Errorf("compare: %s is empty", filepath.Join(dir, FileCSV))
		}
		return recs, err
	}
	ra, err := read(a)
	if err != nil {
		return nil, nil, err
	}
	rb, err := read(b)
	if err != nil {
		return nil, nil, err
	}
	colB := map[string]int{}
	for j, n := range rb[0] {
		colB[n] = j
	}
	for _, n := range ra[0] {
		if _, ok := colB[n]; !ok && !runDependentColumn(n) {
			notes = append(notes, fmt.Sprintf("column %s only in %s", n, a))
		}
	}
	for _, n := range rb[0] {
		if !slices.Contains(ra[0], n) && !runDependentColumn(n) {
			notes = append(notes, fmt.Sprintf("column %s only in %s", n, b))
		}
	}
	if len(ra) != len(rb) {
		diffs = append(diffs, fmt.Sprintf("%d rows against %d", len(ra)-1, len(rb)-1))
	}
	for i := 1; i < min(len(ra), len(rb)); i++ {
		id := strings.Join(ra[i][:min(4, len(ra[i]))], ",")
		for j, name := range ra[0] {
			jb, ok := colB[name]
			if !ok || runDependentColumn(name) || j >= len(ra[i]) || jb >= len(rb[i]) {
				continue
			}
			if ra[i][j] != rb[i][jb] {
				diffs = append(diffs, fmt.Sprintf("row %d (%s): %s %s != %s", i, id, name, ra[i][j], rb[i][jb]))
			}
		}
	}
	return diffs, notes, nil
}
