package study

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"
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
type Outputs[P, R any] struct {
	Results Results[P, R]
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
func WriteOutputs[P, R any](dir string, o Outputs[P, R]) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(o.CSVHeader)
	for _, r := range o.Results.Rows {
		_ = w.Write(o.CSVRow(r))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileCSV), buf.Bytes()); err != nil {
		return err
	}
	b, err := json.MarshalIndent(o.Results, "", " ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileJSON), append(b, '\n')); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, FileTable), []byte(o.Markdown)); err != nil {
		return err
	}
	if len(o.Results.Rows) == 0 {
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
