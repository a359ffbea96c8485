package trainer

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"

	"github.com/nlpodyssey/safetensors"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// weightsFormat is the "format" metadata of an exported weights file. A
// file without a "task" key (written before kinds were recorded) holds a
// language model.
const weightsFormat = "rpe-go/weights/v1"

// ExportWeights writes the weights of the language model p to path as a
// plain safetensors file (no optimizer state, no checksum), atomically
// (writeAtomic: a temporary file in the same directory renamed over path,
// so an interrupted export leaves the previous file intact), mode 0644, in
// p's dtype (F32 or F64), with metadata "format" (weightsFormat), "config"
// (the resolved cfg as JSON, the -config format), "task" ("lm") and
// "provenance" (ProvenanceInfo as JSON). Non-finite weights are refused.
// ExportCheckpoint writes the same file from a checkpoint of any kind;
// LoadWeights reads it back.
//
// Tensor names are the parameter names of package layers, which are also
// the names the PyTorch reference testdata/golden/gen_golden.py uses, with
// the same shapes (x @ W convention: a torch.nn.Linear holding W has
// weight = W.T):
//
//	tok_emb                  [V, d]      token embedding
//	block<i>/ln1/gamma, beta [d]         pre-attention LayerNorm
//	block<i>/attn/wq, wk, wv [d, d]      projections, x @ W + b
//	block<i>/attn/bq, bk, bv [d]
//	block<i>/attn/wo, bo     [d, d], [d] output projection
//	block<i>/ln2/gamma, beta [d]         pre-FFN LayerNorm
//	block<i>/ffn/w1, b1      [d, ffn], [ffn]  up projection (GELU tanh)
//	block<i>/ffn/w2, b2      [ffn, d], [d]    down projection
//	ln_f/gamma, beta         [d]         final LayerNorm
//	head/w                   [d, V]      output head, no bias
//
// plus the position encoding's parameters (package posenc; e.g. pos_emb
// [MaxLen, d] for "learned", t5_bias [T5Buckets, H] for "t5"), listed with
// their shapes by `go run ./experiments/checkpoint info`.
func ExportWeights(path string, p *graph.Params, cfg Config) error {
	params := paramsFrom(p)
	return exportTensors(path, p.Dtype(), params, cfg, lmKind, nil)
}

// ExportCheckpoint writes the weights of ck, a checkpoint of any kind, as
// ExportWeights does (in ck.Config.Dtype), with the metadata "task"
// (ck.Kind()) and, if the task has one, "task_config" (hex of
// Checkpoint.TaskConfig). No model is built: the weights are the
// checkpoint's parameters as they are.
func ExportCheckpoint(path string, ck *Checkpoint) error {
	return exportTensors(path, ck.Config.Dtype, ck.Params, ck.Config, ck.kind(), ck.TaskConfig)
}

// exportTensors writes params in dt with the weights metadata (see
// ExportWeights).
func exportTensors(path string, dt tensor.Dtype, params map[string]Tensor, cfg Config, kind string, taskConfig []byte) error {
	pdt := safetensors.F32
	if dt == tensor.Float64 {
		pdt = safetensors.F64
	}
	views := map[string]tensorView{}
	data := map[string][]float64{}
	for n, t := range params {
		size := 1
		for _, d := range t.Shape {
			size *= d
		}
		if size != len(t.Data) {
			return errors.Errorf("export %s: parameter %q has %d values for shape %v", path, n, len(t.Data), t.Shape)
		}
		data[n] = t.Data
		views[n] = encode(pdt, t.Shape, t.Data)
	}
	if err := finite("weight", data); err != nil {
		return errors.WithMessagef(err, "export %s: refusing non-finite weights", path)
	}
	c, err := json.Marshal(cfg.Resolved())
	if err != nil {
		return errors.Wrapf(err, "export %s", path)
	}
	prov, _ := json.Marshal(Provenance())
	meta := map[string]string{"format": weightsFormat, "config": string(c), "provenance": string(prov), "task": kind}
	if len(taskConfig) > 0 {
		meta["task_config"] = hex.EncodeToString(taskConfig)
	}
	return writeAtomic(path, func(w io.Writer) error { return safetensors.SerializeToWriter(views, meta, w) }, "export")
}

// Weights is the content of a weights file written by ExportWeights or
// ExportCheckpoint.
type Weights struct {
	// Format is the format read (weightsFormat).
	Format string
	// Config is the configuration recorded (resolved).
	Config Config
	// Task is the kind of the model ("lm" if the file records none) and
	// TaskConfig its task configuration (nil if none).
	Task       string
	TaskConfig []byte
	// Provenance describes the program that exported it.
	Provenance ProvenanceInfo
	// Params holds every weight by name.
	Params map[string]Tensor
}

// LoadWeights reads an exported weights file. The error names the file if
// it cannot be read, is not a complete safetensors file, or is not a
// weights file of this package (a training checkpoint is named as one:
// LoadCheckpoint reads it).
func LoadWeights(path string) (*Weights, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "weights %s", path)
	}
	w, err := DecodeWeights(buf)
	return w, errors.WithMessagef(err, "weights %s", path)
}

// DecodeWeights decodes the bytes of an exported weights file (see
// LoadWeights). It never panics on bad input.
func DecodeWeights(buf []byte) (w *Weights, err error) {
	defer func() {
		if r := recover(); r != nil {
			w, err = nil, errors.Errorf("is corrupt or truncated: %v", r)
		}
	}()
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		return nil, errors.Errorf("is corrupt or truncated: %v", err)
	}
	meta := md.Metadata()
	switch f := meta["format"]; {
	case f == weightsFormat:
	case isCheckpointFormat(f):
		return nil, errors.Errorf("is a training checkpoint (%s), not an exported weights file", f)
	default:
		return nil, errors.Errorf("format %q, want %q (not exported by this trainer?)", f, weightsFormat)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		return nil, errors.Errorf("is corrupt or truncated: %v", err)
	}
	w = &Weights{Format: meta["format"], Task: meta["task"], Params: map[string]Tensor{}}
	if w.Task == "" {
		w.Task = lmKind
	}
	if err := w.Config.decode([]byte(meta["config"]), false); err != nil {
		return nil, errors.Errorf("is corrupt: config: %v", err)
	}
	if w.TaskConfig, err = hex.DecodeString(meta["task_config"]); err != nil {
		return nil, errors.Errorf("is corrupt: task config: %v", err)
	}
	if len(w.TaskConfig) == 0 {
		w.TaskConfig = nil
	}
	if p := meta["provenance"]; p != "" {
		if err := json.Unmarshal([]byte(p), &w.Provenance); err != nil {
			return nil, errors.Errorf("is corrupt: provenance: %v", err)
		}
	}
	for _, n := range st.Names() {
		v, _ := st.Tensor(n)
		shape, data, err := decode(v)
		if err != nil {
			return nil, errors.Errorf("is corrupt: tensor %q: %v", n, err)
		}
		w.Params[n] = Tensor{Shape: shape, Data: data}
	}
	return w, nil
}

// File formats FileFormat reports.
const (
	// FormatCheckpoint is a training checkpoint (LoadCheckpoint).
	FormatCheckpoint = "checkpoint"
	// FormatWeights is an exported weights file (LoadWeights).
	FormatWeights = "weights"
	// FormatOther is any other file.
	FormatOther = "other"
)

// maxHeader bounds the safetensors header FileFormat reads.
const maxHeader = 64 << 20

// FileFormat reads only the header of the file at path and reports what it
// holds: FormatCheckpoint (a training checkpoint of any version),
// FormatWeights (an exported weights file) or FormatOther (anything else,
// including an empty or non-safetensors file), with the "format" metadata
// it found ("" for FormatOther). The error is only for a file that cannot
// be opened or read.
func FileFormat(path string) (kind, format string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return FormatOther, "", nil
		}
		return "", "", errors.Wrapf(err, "reading %s", path)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size < 2 || size > maxHeader {
		return FormatOther, "", nil
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(f, hdr); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return FormatOther, "", nil
		}
		return "", "", errors.Wrapf(err, "reading %s", path)
	}
	var h struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if json.Unmarshal(hdr, &h) != nil {
		return FormatOther, "", nil
	}
	switch f := h.Meta["format"]; {
	case isCheckpointFormat(f):
		return FormatCheckpoint, f, nil
	case f == weightsFormat:
		return FormatWeights, f, nil
	}
	return FormatOther, "", nil
}

// isCheckpointFormat reports whether f is the format of a training
// checkpoint (v1, v2 or v3).
func isCheckpointFormat(f string) bool {
	return f == checkpointFormat || f == checkpointFormatV3 || f == checkpointFormatV1
}
