package study

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/rpe-go/rpe/experiments/stats"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// Status of a row.
const (
	StatusOK = "ok"
	// StatusNA marks a length the model cannot run at (a learned table
	// shorter than Le); Note says why.
	StatusNA = "n/a"
)

// Row is one result: one encoding (as evaluated) x seed x length x
// protocol. Training measurements repeat on every row of a model; the memory
// peaks are set on the rows of the longest length only.
type Row struct {
	Preset string `json:"preset"`
	// Encoding is the encoding used at evaluation ("rope-pi", ...); Trained
	// is the encoding the model was trained with ("rope"); Model is the
	// model's key ("rope-seed1"), which indexes File.Configs.
	Encoding string `json:"encoding"`
	Trained  string `json:"trained"`
	Model    string `json:"model"`
	Seed     int64  `json:"seed"`
	TrainLen int    `json:"train_len"`
	EvalLen  int    `json:"eval_len"`
	Protocol string `json:"protocol"`
	// RopeScale is the RopeScale of a RoPE scaling (Le/L), 0 otherwise.
	RopeScale float64 `json:"rope_scale,omitempty"`
	Status    string  `json:"status"`
	Note      string  `json:"note,omitempty"`
	// BitsPerByte, Perplexity (2^bits) and Nats (per byte) are 0 for n/a.
	BitsPerByte float64 `json:"bits_per_byte"`
	Perplexity  float64 `json:"perplexity"`
	Nats        float64 `json:"nats_per_byte"`
	Windows     int     `json:"windows"`
	Tokens      int     `json:"tokens"`
	// EvalMsPerToken is the wall time of the forward pass at this length
	// (shared by both protocols) per window position.
	EvalMsPerToken float64 `json:"eval_ms_per_token"`
	// TrainSteps, TrainMsPerStep, TrainTokensPerSec and TrainLoss (the mean
	// training loss of the last 10 updates, nats) describe the training.
	TrainSteps        int     `json:"train_steps"`
	TrainMsPerStep    float64 `json:"train_ms_per_step"`
	TrainTokensPerSec float64 `json:"train_tokens_per_sec"`
	TrainLoss         float64 `json:"train_loss"`
	// PeakHeapMB and PeakRSSMB are the peaks while the first batch of the
	// longest length is scored (see MeasureMemory and Memory), in MiB.
	PeakHeapMB float64 `json:"peak_heap_mb,omitempty"`
	PeakRSSMB  float64 `json:"peak_rss_mb,omitempty"`
	RSSSource  string  `json:"rss_source,omitempty"`
	GitRev     string  `json:"git_rev"`

	// BaseEncoding is the posenc name the model ran with at this row's
	// evaluation ("t5" for the variant "t5@t5-max-distance=64", "rope-pi"
	// for rope-pi), Overrides the variant's options "key=value@..." ("" for
	// a plain encoding), and PosOptions the resolved position options
	// (posenc.Options with defaults, sinusoidal-scale resolved to
	// 1/sqrt(d_model); no 0 meaning "default") that this encoding reads, by
	// internal/fields name. Render fills them from the plan (collect), so
	// results saved before they existed get them too.
	BaseEncoding string            `json:"base_encoding,omitempty"`
	Overrides    string            `json:"overrides,omitempty"`
	PosOptions   map[string]string `json:"pos_options,omitempty"`
	// BLAS (graph.BLASName()), GoVersion (runtime.Version()) and GitDirty
	// (the work tree had uncommitted changes; see trainer.Provenance) describe the build
	// that computed the row; Run sets them when it evaluates. Rows without
	// BLAS and GoVersion predate these fields (GitDirty unknown).
	BLAS      string `json:"blas,omitempty"`
	GoVersion string `json:"go_version,omitempty"`
	GitDirty  bool   `json:"git_dirty,omitempty"`
}

// posOptionNames are the fields names of posenc.Options, in declaration
// order (the CSV's columns).
func posOptionNames() []string {
	var o posenc.Options
	fs, err := fields.Walk(&o)
	if err != nil {
		return nil // a name clash in posenc.Options; fields' own tests catch it
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// resolvedPosOptions returns the resolved position options of model m that
// its encoding m.Pos reads (posenc.OptionsOf, derived from the registry;
// all of them for a name it does not know), formatted as
// fields.Field.String.
func resolvedPosOptions(m layers.Config) map[string]string {
	o := m.PosOpts.Resolve(m.DModel)
	fs, err := fields.Walk(&o)
	if err != nil {
		return nil
	}
	read := posenc.OptionsOf(m.Pos)
	_, known := posenc.InfoOf(m.Pos)
	out := map[string]string{}
	for _, f := range fs {
		if !known || slices.Contains(read, f.Name) {
			out[f.Name] = f.String()
		}
	}
	return out
}

// File is the content of results.json.
type File struct {
	Preset  string `json:"preset"`
	Reduced string `json:"reduced,omitempty"`
	Corpus  string `json:"corpus"`
	// EvalText describes the evaluation text.
	EvalText string `json:"eval_text"`
	// Configs holds the training configuration of every model by key.
	Configs map[string]trainer.Config `json:"configs"`
	Rows    []Row                     `json:"rows"`
}

var csvHeader = []string{"preset", "encoding", "trained", "model", "seed", "train_len", "eval_len", "protocol", "rope_scale",
	"status", "note", "bits_per_byte", "perplexity", "nats_per_byte", "windows", "tokens", "eval_ms_per_token",
	"train_steps", "train_ms_per_step", "train_tokens_per_sec", "train_loss", "peak_heap_mb", "peak_rss_mb", "rss_source",
	"git_rev", "batch", "d_model", "heads", "layers", "ffn", "lr", "warmup", "dtype",
	"base_encoding", "overrides", "blas", "go_version", "git_dirty"}

// CSVHeader returns the header of results.csv: the fixed columns, then one
// column per position option (the fields names of posenc.Options: max-len,
// pos-init-std, ..., filled with the resolved value where the row's
// encoding reads it, empty otherwise).
func CSVHeader() []string { return append(slices.Clone(csvHeader), posOptionNames()...) }

// WriteCSV writes rows with a header (CSVHeader), the model configuration,
// the variant, the build and the resolved position options in the last
// columns; n/a values are empty cells, as is git_dirty for rows without
// BLAS and Go version (computed before they were recorded).
func WriteCSV(path string, rows []Row, configs map[string]trainer.Config) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	posNames := posOptionNames()
	w.Write(append(slices.Clone(csvHeader), posNames...))
	f := func(x float64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 8, 64)
	}
	for _, r := range rows {
		c := configs[r.Model]
		rec := []string{r.Preset, r.Encoding, r.Trained, r.Model, strconv.FormatInt(r.Seed, 10), strconv.Itoa(r.TrainLen),
			strconv.Itoa(r.EvalLen), r.Protocol, f(r.RopeScale), r.Status, r.Note, f(r.BitsPerByte), f(r.Perplexity), f(r.Nats),
			strconv.Itoa(r.Windows), strconv.Itoa(r.Tokens), f(r.EvalMsPerToken), strconv.Itoa(r.TrainSteps),
			f(r.TrainMsPerStep), f(r.TrainTokensPerSec), f(r.TrainLoss), f(r.PeakHeapMB), f(r.PeakRSSMB), r.RSSSource, r.GitRev,
			strconv.Itoa(c.Batch), strconv.Itoa(c.Model.DModel), strconv.Itoa(c.Model.Heads), strconv.Itoa(c.Model.Layers),
			strconv.Itoa(c.Model.FFN), f(c.LR), strconv.Itoa(c.Warmup), c.Dtype.String(),
			r.BaseEncoding, r.Overrides, r.BLAS, r.GoVersion, ""}
		if r.BLAS != "" || r.GoVersion != "" {
			rec[len(rec)-1] = strconv.FormatBool(r.GitDirty)
		}
		for _, n := range posNames {
			rec = append(rec, r.PosOptions[n])
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	return WriteFileAtomic(path, buf.Bytes())
}

// writeJSON writes v indented, atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding %s", path)
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// readJSON reads a JSON file into v.
func readJSON(path string, v any) error {
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

type cellKey struct {
	enc      string
	le       int
	protocol string
}

// aggregate groups rows by encoding, length and protocol and returns the
// mean and std of value over seeds.
func aggregate(rows []Row, value func(Row) float64) map[cellKey]Cell {
	return Aggregate(rows, func(r Row) cellKey { return cellKey{r.Encoding, r.EvalLen, r.Protocol} },
		func(r Row) (bool, string) { return r.Status == StatusNA, r.Note }, value)
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
