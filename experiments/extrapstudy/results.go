package extrapstudy

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
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
	// WindowBits is the cross-entropy in bits of the targets this protocol
	// scores in each evaluation window (trainer.Score.WindowNats / ln 2,
	// Windows of them in text order, the tail window last): the items of
	// the paired comparisons over windows. Not in results.csv; nil for n/a
	// and in rows that predate it.
	WindowBits []float32 `json:"window_bits,omitempty"`
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
	// BaseHeapMB and BaseRSSMB are the Go heap in use and the RSS when that
	// measurement started (the model, the text and what the process held
	// before), in MiB: the peak minus the base is what the evaluation added.
	// 0 in rows that predate them.
	BaseHeapMB float64 `json:"base_heap_mb,omitempty"`
	BaseRSSMB  float64 `json:"base_rss_mb,omitempty"`
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
	// Machine is the OS/architecture, CPUs and CPU model of the process
	// (trainer.ProvenanceInfo.Machine; "" in rows that predate it).
	Machine string `json:"machine,omitempty"`
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
	"train_steps", "train_ms_per_step", "train_tokens_per_sec", "train_loss", "peak_heap_mb", "peak_rss_mb", "rss_source", "base_heap_mb", "base_rss_mb",
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
			f(r.TrainMsPerStep), f(r.TrainTokensPerSec), f(r.TrainLoss), f(r.PeakHeapMB), f(r.PeakRSSMB), r.RSSSource, f(r.BaseHeapMB), f(r.BaseRSSMB), r.GitRev,
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
	return study.WriteFileAtomic(path, buf.Bytes())
}

type cellKey struct {
	enc      string
	le       int
	protocol string
}

// aggregate groups rows by encoding, length and protocol and returns the
// mean and std of value over seeds.
func aggregate(rows []Row, value func(Row) float64) map[cellKey]study.Cell {
	return study.Aggregate(rows, func(r Row) cellKey { return cellKey{r.Encoding, r.EvalLen, r.Protocol} },
		func(r Row) (bool, string) { return r.Status == StatusNA, r.Note }, value)
}
