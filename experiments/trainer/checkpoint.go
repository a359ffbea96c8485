package trainer

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/safetensors"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Checkpoint file layout (safetensors, https://github.com/huggingface/safetensors):
//
//   - every model parameter under its own name ("block0/attn/wq", ...), in
//     the run's dtype (F32 or F64);
//   - every optimizer state vector under "optim/" + its key, as F64 [n];
//   - metadata: "format" (checkpointFormat), "config" (the resolved
//     Config as JSON), "step" (completed updates), "rng" (hex
//     batch-generator state), "corpus_sha256" (Corpus.Hash of the corpus
//     trained on; for another task its Task.DataHash), "corpus_path" (its
//     file), "provenance" (ProvenanceInfo as JSON) and "crc32c";
//   - in format v3 only: "task" (Task.Kind) and "task_config" (hex of
//     TaskConfigurer.TaskConfig, "" if none).
//
// The language model (task "lm" without a task configuration) writes format
// v2, exactly as before tasks existed, so its checkpoints stay readable by
// older builds; every other task writes v3. The CRC-32C (Castagnoli) covers
// every tensor's name and bytes in name order, then every other metadata
// key and value (the task keys included) in key order, so a corrupted
// tensor or an edited step, config, corpus hash, task or task configuration
// fails the check. Format v1 files (rpe-go/trainer/v1: CRC over the tensors
// only, no corpus hash or provenance) are still read; their metadata is
// trusted. v1 and v2 files are of task "lm".
const (
	checkpointFormatV3 = "rpe-go/trainer/v3"
	checkpointFormat   = "rpe-go/trainer/v2"
	checkpointFormatV1 = "rpe-go/trainer/v1"
	optimPrefix        = "optim/"
	lmKind             = "lm"
)

// Tensor is one named tensor of a Checkpoint, its values held as float64
// (float32 values convert exactly).
type Tensor struct {
	Shape []int
	Data  []float64
}

// Checkpoint is the content of a checkpoint file.
type Checkpoint struct {
	// Config is the configuration of the run that wrote it.
	Config Config
	// Step is the number of completed updates.
	Step int
	// RNG is the batch generator state (Batcher.State).
	RNG []byte
	// Params holds every model parameter by name; they are written in
	// Config.Dtype.
	Params map[string]Tensor
	// Optim is the optimizer state (optim.Optimizer.State).
	Optim map[string][]float64
	// CorpusHash is Corpus.Hash of the corpus trained on ("" in a v1 file),
	// CorpusPath the file it was read from ("" if in memory or v1).
	CorpusHash, CorpusPath string
	// Provenance describes the program that wrote it (zero in a v1 file).
	Provenance ProvenanceInfo
	// Task is the Task.Kind of the run ("" in a v1 or v2 file: "lm"), and
	// TaskConfig its TaskConfigurer.TaskConfig (nil if none).
	Task       string
	TaskConfig []byte
	// Init is the source of the run's initial weights (RunOptions.InitFrom;
	// metadata "init_from"), nil for a run from scratch.
	Init *InitInfo
	// Format is the format read ("rpe-go/trainer/v1", "/v2" or "/v3");
	// Save writes v2 for the language model and v3 for other tasks.
	Format string
}

// kind is the checkpoint's task kind ("lm" if it records none).
func (ck *Checkpoint) kind() string {
	if ck.Task == "" {
		return lmKind
	}
	return ck.Task
}

// format is the format Encode writes: v2 for the language model, v3 for
// any other task or a task configuration.
func (ck *Checkpoint) format() string {
	if ck.kind() == lmKind && len(ck.TaskConfig) == 0 {
		return checkpointFormat
	}
	return checkpointFormatV3
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// tensorView is a safetensors.View over little-endian bytes.
type tensorView struct {
	dt    safetensors.DType
	shape []uint64
	data  []byte
}

func (v tensorView) DType() safetensors.DType { return v.dt }
func (v tensorView) Shape() []uint64          { return v.shape }
func (v tensorView) Data() []byte             { return v.data }
func (v tensorView) DataLen() uint64          { return uint64(len(v.data)) }

func encode(dt safetensors.DType, shape []int, data []float64) tensorView {
	s := make([]uint64, len(shape))
	for i, d := range shape {
		s[i] = uint64(d)
	}
	var b []byte
	if dt == safetensors.F32 {
		b = make([]byte, 0, 4*len(data))
		for _, x := range data {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
		}
	} else {
		b = make([]byte, 0, 8*len(data))
		for _, x := range data {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	return tensorView{dt: dt, shape: s, data: b}
}

func decode(v safetensors.TensorView) ([]int, []float64, error) {
	shape := make([]int, len(v.Shape()))
	n := 1
	for i, d := range v.Shape() {
		shape[i] = int(d)
		n *= int(d)
	}
	b := v.Data()
	out := make([]float64, n)
	switch v.DType() {
	case safetensors.F32:
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case safetensors.F64:
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	default:
		return nil, nil, errors.Errorf("dtype %v, want F32 or F64", v.DType())
	}
	return shape, out, nil
}

// checksum is the CRC-32C of every tensor's name and bytes in name order,
// then (meta != nil) of every metadata key and value but "crc32c" in key
// order.
func checksum(names []string, data func(string) []byte, meta map[string]string) uint32 {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var c uint32
	for _, n := range sorted {
		c = crc32.Update(c, crcTable, []byte(n))
		c = crc32.Update(c, crcTable, []byte{0})
		c = crc32.Update(c, crcTable, data(n))
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if k != "crc32c" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		c = crc32.Update(c, crcTable, []byte(k))
		c = crc32.Update(c, crcTable, []byte{0})
		c = crc32.Update(c, crcTable, []byte(meta[k]))
		c = crc32.Update(c, crcTable, []byte{0})
	}
	return c
}

// finite returns an error naming the first tensor holding a NaN or an
// infinity.
func finite(kind string, m map[string][]float64) error {
	for n, d := range m {
		for i, x := range d {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return errors.Errorf("%s %q holds %v at index %d", kind, n, x, i)
			}
		}
	}
	return nil
}

// Save writes ck to path atomically: it writes a temporary file
// (".<name>.tmp-*") in the same directory, syncs it, and renames it over
// path, so path holds either the previous checkpoint or the new one, never
// a partial file. The directory is created if needed; the file is 0644.
// Weights or optimizer state holding a NaN or an infinity are refused (the
// error names the tensor), so a checkpoint is only ever written from finite
// weights.
func (ck *Checkpoint) Save(path string) error { return ck.save(path, nil) }

// Encode writes ck in the checkpoint format to w (see Save).
func (ck *Checkpoint) Encode(w io.Writer) error {
	views := map[string]tensorView{}
	pdt := safetensors.F32
	if ck.Config.Dtype == tensor.Float64 {
		pdt = safetensors.F64
	}
	pd := map[string][]float64{}
	for name, t := range ck.Params {
		if strings.HasPrefix(name, optimPrefix) {
			return errors.Errorf("parameter name %q uses the reserved prefix %q", name, optimPrefix)
		}
		n := 1
		for _, d := range t.Shape {
			if d < 0 {
				return errors.Errorf("parameter %q has shape %v", name, t.Shape)
			}
			n *= d
		}
		if n != len(t.Data) {
			return errors.Errorf("parameter %q has %d values for shape %v", name, len(t.Data), t.Shape)
		}
		pd[name] = t.Data
		views[name] = encode(pdt, t.Shape, t.Data)
	}
	if err := finite("weight", pd); err != nil {
		return errors.WithMessage(err, "refusing to save non-finite weights")
	}
	if err := finite("optimizer state", ck.Optim); err != nil {
		return errors.WithMessage(err, "refusing to save a non-finite optimizer state")
	}
	for k, v := range ck.Optim {
		views[optimPrefix+k] = encode(safetensors.F64, []int{len(v)}, v)
	}
	cfg, err := json.Marshal(ck.Config)
	if err != nil {
		return errors.Wrap(err, "encoding config")
	}
	prov, err := json.Marshal(ck.Provenance)
	if err != nil {
		return errors.Wrap(err, "encoding provenance")
	}
	names := make([]string, 0, len(views))
	for n := range views {
		names = append(names, n)
	}
	meta := map[string]string{
		"format":        ck.format(),
		"config":        string(cfg),
		"step":          strconv.Itoa(ck.Step),
		"rng":           hex.EncodeToString(ck.RNG),
		"corpus_sha256": ck.CorpusHash,
		"corpus_path":   ck.CorpusPath,
		"provenance":    string(prov),
	}
	if ck.Init != nil {
		if meta["init_from"], err = encodeInit(ck.Init); err != nil {
			return err
		}
	}
	if meta["format"] == checkpointFormatV3 {
		meta["task"] = ck.kind()
		meta["task_config"] = hex.EncodeToString(ck.TaskConfig)
	}
	meta["crc32c"] = strconv.FormatUint(uint64(checksum(names, func(n string) []byte { return views[n].data }, meta)), 10)
	return safetensors.SerializeToWriter(views, meta, w)
}

// save is Save with an optional writer wrapper (tests inject failures).
func (ck *Checkpoint) save(path string, wrap func(io.Writer) io.Writer) error {
	return writeAtomic(path, func(w io.Writer) error {
		if wrap != nil {
			w = wrap(w)
		}
		return ck.Encode(w)
	}, "checkpoint")
}

// tempPattern is the pattern of the temporary files writeAtomic creates for
// path (os.CreateTemp's "*" is replaced by digits).
func tempPattern(path string) string { return "." + filepath.Base(path) + ".tmp-*" }

// writeAtomic writes a file by calling write on a buffered temporary file
// in the same directory, syncing it, and renaming it over path (mode
// 0644). kind names the file in errors.
func writeAtomic(path string, write func(io.Writer) error, kind string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "%s %s", kind, path)
	}
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return errors.Wrapf(err, "%s %s", kind, path)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return errors.WithMessagef(err, "%s %s: writing", kind, path)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return fail(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return errors.Wrapf(err, "%s %s: closing", kind, path)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return errors.Wrapf(err, "%s %s: renaming", kind, path)
	}
	if d, err := os.Open(dir); err == nil { // persist the rename
		d.Sync()
		d.Close()
	}
	return nil
}

// removeStaleTemps removes the temporary files a killed Save of path left
// (names matching ".<name>.tmp-<digits>"); call it only while holding the
// lock of path. It returns the names removed.
func removeStaleTemps(path string) ([]string, error) {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, "checkpoint %s: listing its directory", path)
	}
	prefix := "." + filepath.Base(path) + ".tmp-"
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			return out, errors.Wrapf(err, "removing the stale temporary file %s", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// LoadCheckpoint reads and checks a checkpoint file. It returns an error
// naming the file if it cannot be read, is not a complete safetensors file,
// was not written by this package, or fails its checksum.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "checkpoint %s", path)
	}
	ck, err := DecodeCheckpoint(buf)
	return ck, errors.WithMessagef(err, "checkpoint %s", path)
}

// DecodeCheckpoint decodes and checks the bytes of a checkpoint file (see
// LoadCheckpoint). It never panics on bad input.
func DecodeCheckpoint(buf []byte) (ck *Checkpoint, err error) {
	defer func() {
		if r := recover(); r != nil { // the safetensors parser on hostile input
			ck, err = nil, errors.Errorf("is corrupt or truncated: %v", r)
		}
	}()
	corrupt := func(format string, args ...any) error {
		return errors.Errorf("is corrupt or truncated: "+format, args...)
	}
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	meta := md.Metadata()
	var withMeta map[string]string
	switch meta["format"] {
	case checkpointFormat, checkpointFormatV3:
		withMeta = meta
	case checkpointFormatV1:
	case weightsFormat:
		return nil, errors.Errorf("is an exported weights file (%s), not a training checkpoint: it holds the weights and the configuration alone (go run ./experiments/checkpoint info reads it)", weightsFormat)
	default:
		return nil, errors.Errorf("format %q, want %q or %q (not written by this trainer?)", meta["format"], checkpointFormat, checkpointFormatV3)
	}
	names := st.Names()
	want, err := strconv.ParseUint(meta["crc32c"], 10, 32)
	if err != nil {
		return nil, corrupt("bad checksum field %q", meta["crc32c"])
	}
	got := checksum(names, func(n string) []byte { v, _ := st.Tensor(n); return v.Data() }, withMeta)
	if uint32(want) != got {
		return nil, corrupt("checksum %08x, header says %08x", got, want)
	}
	ck = &Checkpoint{Params: map[string]Tensor{}, Optim: map[string][]float64{}, Format: meta["format"]}
	if err := ck.Config.decode([]byte(meta["config"]), false); err != nil {
		return nil, corrupt("config: %v", err)
	}
	if ck.Step, err = strconv.Atoi(meta["step"]); err != nil || ck.Step < 0 {
		return nil, corrupt("step %q", meta["step"])
	}
	if ck.RNG, err = hex.DecodeString(meta["rng"]); err != nil {
		return nil, corrupt("rng state: %v", err)
	}
	if ck.Format == checkpointFormatV3 {
		ck.Task = meta["task"]
		if ck.Task == "" {
			return nil, corrupt("no task kind")
		}
		if ck.TaskConfig, err = hex.DecodeString(meta["task_config"]); err != nil {
			return nil, corrupt("task config: %v", err)
		}
		if len(ck.TaskConfig) == 0 {
			ck.TaskConfig = nil
		}
	}
	if withMeta != nil {
		ck.CorpusHash, ck.CorpusPath = meta["corpus_sha256"], meta["corpus_path"]
		if err := json.Unmarshal([]byte(meta["provenance"]), &ck.Provenance); err != nil {
			return nil, corrupt("provenance: %v", err)
		}
		if ck.Init, err = decodeInit(meta["init_from"]); err != nil {
			return nil, corrupt("init_from: %v", err)
		}
	}
	for _, n := range names {
		v, _ := st.Tensor(n)
		shape, data, err := decode(v)
		if err != nil {
			return nil, corrupt("tensor %q: %v", n, err)
		}
		if k, ok := strings.CutPrefix(n, optimPrefix); ok {
			if len(shape) != 1 {
				return nil, corrupt("optimizer tensor %q has shape %v, want a vector", n, shape)
			}
			ck.Optim[k] = data
			continue
		}
		ck.Params[n] = Tensor{Shape: shape, Data: data}
	}
	return ck, nil
}

// ParamsFrom returns a checkpoint content for the parameters of p.
func paramsFrom(p *graph.Params) map[string]Tensor {
	out := map[string]Tensor{}
	for _, n := range p.Names() {
		info, _ := p.Info(n)
		out[n] = Tensor{Shape: append([]int(nil), info.Shape...), Data: p.Float64s(n)}
	}
	return out
}

// RestoreParams copies the checkpoint's parameters into p, converting to
// p's dtype. Every parameter of p must be in the checkpoint with the same
// shape, and the checkpoint must hold no parameter p lacks; otherwise the
// error names the parameter and the shapes.
func (ck *Checkpoint) RestoreParams(p *graph.Params) error {
	have := map[string]bool{}
	for _, n := range p.Names() {
		have[n] = true
		info, _ := p.Info(n)
		t, ok := ck.Params[n]
		if !ok {
			return errors.Errorf("missing parameter %q (shape %v) of this model", n, info.Shape)
		}
		if !tensor.Shape(t.Shape).Eq(info.Shape) {
			return errors.Errorf("parameter %q has shape %v in the checkpoint, this model has %v", n, tensor.Shape(t.Shape), info.Shape)
		}
	}
	var extra []string
	for n := range ck.Params {
		if !have[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return errors.Errorf("the checkpoint's parameters %v are not in this model", extra)
	}
	for _, n := range p.Names() {
		if err := p.Set(n, ck.Params[n].Data); err != nil {
			return err
		}
	}
	return nil
}
