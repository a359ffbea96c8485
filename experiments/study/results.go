package study

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/stats"
)

// WriteJSON writes v indented, atomically (WriteFileAtomic).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding %s", path)
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// ReadJSON reads a JSON file into v; a file that does not parse is an
// error naming it.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.Wrapf(err, "%s is corrupt (delete it to redo that part)", path)
	}
	return nil
}

// WriteFileAtomic writes data to a temporary file next to path and renames
// it over path, so path is never partial. The file is 0644 (readable by
// all, as results are meant to be shared), missing directories 0755.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	tmp := f.Name()
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		f.Close()
		os.Remove(tmp)
		return errors.Wrapf(err, "writing %s", path)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return errors.Wrapf(err, "writing %s", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return errors.Wrapf(err, "writing %s", path)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return errors.Wrapf(err, "writing %s", path)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return errors.Wrapf(err, "writing %s", path)
	}
	return nil
}

// Cell is the aggregate over seeds of one encoding x length x protocol.
type Cell struct {
	// Mean and Std (sample standard deviation, 0 for one seed) of the
	// values of the N seeds with a result, and [Lo, Hi] the 95% Student-t
	// interval of the mean (stats.Describe; NaN for one seed).
	Mean, Std float64
	Lo, Hi    float64
	N         int
	// NA is set if the model could not run at this length (Note says why).
	NA   bool
	Note string
}

// Cells aggregates metric over rows grouped by (label, column) with
// Aggregate (a row for which failed reports true has no result) and
// returns the labels in the order of their first row: the cells of a
// study's table of encodings (rows) by evaluation setting (columns).
func Cells[R any](rows []R, label, column func(R) string, failed func(R) (bool, string), metric func(R) float64) (map[[2]string]Cell, []string) {
	var labels []string
	seen := map[string]bool{}
	for _, r := range rows {
		if l := label(r); !seen[l] {
			seen[l] = true
			labels = append(labels, l)
		}
	}
	return Aggregate(rows, func(r R) [2]string { return [2]string{label(r), column(r)} }, failed, metric), labels
}

// Aggregate groups rows by key and returns, per key, the mean and sample
// standard deviation of value over the rows that have a result. A row for
// which na reports true has none: its key's cell is NA (with the row's
// note) unless another row of the key has a result. Every study's tables
// (this package's and the vision study's) use it.
func Aggregate[R any, K comparable](rows []R, key func(R) K, na func(R) (bool, string), value func(R) float64) map[K]Cell {
	vals := map[K][]float64{}
	out := map[K]Cell{}
	for _, r := range rows {
		k := key(r)
		if isNA, note := na(r); isNA {
			c := out[k]
			c.NA, c.Note = true, note
			out[k] = c
			continue
		}
		vals[k] = append(vals[k], value(r))
	}
	for k, v := range vals {
		c := NewCell(v)
		c.Note = out[k].Note
		out[k] = c
	}
	return out
}

// NewCell summarises the values v of the seeds with a result: mean,
// sample standard deviation and the 95% t interval of the mean.
func NewCell(v []float64) Cell {
	s := stats.Describe(v)
	return Cell{Mean: s.Mean, Std: s.SD, Lo: s.Lo, Hi: s.Hi, N: s.N}
}

// Interval formats c with prec decimals as "mean ± sd [lo, hi]" (the
// sample standard deviation over seeds and the 95% t interval of the
// mean), or the mean alone for one seed.
func (c Cell) Interval(prec int) string {
	if c.N < 2 || math.IsNaN(c.Lo) {
		return fmt.Sprintf("%.*f", prec, c.Mean)
	}
	return fmt.Sprintf("%.*f ± %.*f [%.*f, %.*f]", prec, c.Mean, prec, c.Std, prec, c.Lo, prec, c.Hi)
}

// Err returns the error bar of c's 95% interval below and above the mean
// (0, 0 for one seed).
func (c Cell) Err() (low, high float64) {
	if c.N < 2 || math.IsNaN(c.Lo) {
		return 0, 0
	}
	return c.Mean - c.Lo, c.Hi - c.Mean
}

// IntervalNote is the sentence the tables print for cells of n seeds.
func IntervalNote(n int) string {
	if n < 2 {
		return "one seed: no interval"
	}
	return fmt.Sprintf("mean ± sample standard deviation [95%% t interval of the mean] over %d seeds", n)
}

// MeanStd returns the mean and the sample standard deviation (n-1) of v
// (NaN, NaN if v is empty; std 0 for one value).
func MeanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)-1))
}
