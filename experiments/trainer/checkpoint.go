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
//   - metadata: "format" (checkpointFormat), "config" (Config as JSON),
//     "step" (completed updates), "rng" (hex batch-generator state),
//     "crc32c" (Castagnoli CRC of every tensor's name and bytes, in name
//     order, which catches corrupted tensor data that the safetensors
//     header cannot).
const (
	checkpointFormat = "rpe-go/trainer/v1"
	optimPrefix      = "optim/"
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

// checksum is the CRC-32C of every tensor's name and bytes in name order.
func checksum(names []string, data func(string) []byte) uint32 {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var c uint32
	for _, n := range sorted {
		c = crc32.Update(c, crcTable, []byte(n))
		c = crc32.Update(c, crcTable, []byte{0})
		c = crc32.Update(c, crcTable, data(n))
	}
	return c
}

// Save writes ck to path atomically: it writes a temporary file in the same
// directory, syncs it, and renames it over path, so path holds either the
// previous checkpoint or the new one, never a partial file. The directory is
// created if needed.
func (ck *Checkpoint) Save(path string) error { return ck.save(path, nil) }

// save is Save with an optional writer wrapper (tests inject failures).
func (ck *Checkpoint) save(path string, wrap func(io.Writer) io.Writer) error {
	views := map[string]tensorView{}
	pdt := safetensors.F32
	if ck.Config.Dtype == tensor.Float64 {
		pdt = safetensors.F64
	}
	for name, t := range ck.Params {
		if strings.HasPrefix(name, optimPrefix) {
			return errors.Errorf("checkpoint %s: parameter name %q uses the reserved prefix %q", path, name, optimPrefix)
		}
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != len(t.Data) {
			return errors.Errorf("checkpoint %s: parameter %q has %d values for shape %v", path, name, len(t.Data), t.Shape)
		}
		views[name] = encode(pdt, t.Shape, t.Data)
	}
	for k, v := range ck.Optim {
		views[optimPrefix+k] = encode(safetensors.F64, []int{len(v)}, v)
	}
	cfg, err := json.Marshal(ck.Config)
	if err != nil {
		return errors.Wrapf(err, "checkpoint %s: encoding config", path)
	}
	names := make([]string, 0, len(views))
	for n := range views {
		names = append(names, n)
	}
	meta := map[string]string{
		"format": checkpointFormat,
		"config": string(cfg),
		"step":   strconv.Itoa(ck.Step),
		"rng":    hex.EncodeToString(ck.RNG),
		"crc32c": strconv.FormatUint(uint64(checksum(names, func(n string) []byte { return views[n].data })), 10),
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "checkpoint %s", path)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return errors.Wrapf(err, "checkpoint %s", path)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return errors.Wrapf(err, "checkpoint %s: writing", path)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return fail(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	if wrap != nil {
		w = wrap(w)
	}
	if err := safetensors.SerializeToWriter(views, meta, w); err != nil {
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
		return errors.Wrapf(err, "checkpoint %s: closing", path)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return errors.Wrapf(err, "checkpoint %s: renaming", path)
	}
	if d, err := os.Open(dir); err == nil { // persist the rename
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadCheckpoint reads and checks a checkpoint file. It returns an error
// naming the file if it cannot be read, is not a complete safetensors file,
// was not written by this package, or fails its checksum.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "checkpoint %s", path)
	}
	corrupt := func(format string, args ...any) error {
		return errors.Errorf("checkpoint %s is corrupt or truncated: "+format, append([]any{path}, args...)...)
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
	if meta["format"] != checkpointFormat {
		return nil, errors.Errorf("checkpoint %s: format %q, want %q (not written by this trainer?)", path, meta["format"], checkpointFormat)
	}
	names := st.Names()
	want, err := strconv.ParseUint(meta["crc32c"], 10, 32)
	if err != nil {
		return nil, corrupt("bad checksum field %q", meta["crc32c"])
	}
	got := checksum(names, func(n string) []byte { v, _ := st.Tensor(n); return v.Data() })
	if uint32(want) != got {
		return nil, corrupt("checksum %08x, header says %08x", got, want)
	}
	ck := &Checkpoint{Params: map[string]Tensor{}, Optim: map[string][]float64{}}
	if err := json.Unmarshal([]byte(meta["config"]), &ck.Config); err != nil {
		return nil, corrupt("config: %v", err)
	}
	if ck.Step, err = strconv.Atoi(meta["step"]); err != nil || ck.Step < 0 {
		return nil, corrupt("step %q", meta["step"])
	}
	if ck.RNG, err = hex.DecodeString(meta["rng"]); err != nil {
		return nil, corrupt("rng state: %v", err)
	}
	for _, n := range names {
		v, _ := st.Tensor(n)
		shape, data, err := decode(v)
		if err != nil {
			return nil, corrupt("tensor %q: %v", n, err)
		}
		if k, ok := strings.CutPrefix(n, optimPrefix); ok {
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
