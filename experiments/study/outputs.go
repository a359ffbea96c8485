package study

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
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
