package trainer

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// Activation constants of EstimateMemory: how many values of each size the
// training graph keeps per block (forward values and their gradients),
// measured on the reference block (see TestEstimateMemory).
const (
	actPerTokenD   = 20 // [B*T, d] tensors: LayerNorms, q/k/v/o, residuals, ... and gradients
	actPerScore    = 3  // [B, H, T, T] tensors: scores, mask, softmax, ... and gradients
	actPerTokenFFN = 4  // [B*T, ffn] tensors: up projection, GELU, ... and gradients
	actPerLogit    = 3  // [B*T, V] tensors: logits, softmax, cross-entropy, ... and gradients
)

// MemoryEstimate is a rough count of the bytes a training run needs.
type MemoryEstimate struct {
	// Params is the number of parameters.
	Params float64
	// Weights counts the weights and their gradients (2 values per
	// parameter in the run's dtype), Optimizer AdamW's two float64 moments
	// plus the float64 copies a checkpoint save makes, Activations the
	// values of the training graph and their gradients.
	Weights, Optimizer, Activations float64
	// Total is the sum, in bytes.
	Total float64
}

// String is e.g. "1.2 GiB (12345 parameters: weights 1 MiB, optimizer ..., activations ...)".
func (m MemoryEstimate) String() string {
	return fmt.Sprintf("%s (%.0f parameters: weights+gradients %s, optimizer %s, activations %s)",
		bytesString(m.Total), m.Params, bytesString(m.Weights), bytesString(m.Optimizer), bytesString(m.Activations))
}

func bytesString(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

// EstimateMemory estimates the memory of training cfg, in float64
// arithmetic (no overflow for absurd sizes). With N = Batch*SeqLen tokens,
// d = DModel, f = FFN, H = Heads, V = Vocab, T = SeqLen, L = Layers and s
// the dtype size (4 or 8):
//
//	P           = 2·V·d + L·(4d² + 2·d·f + f + 13d) + 2d + P_pos
//	              (embedding, head, per block q/k/v/o with biases, FFN with
//	              biases, two LayerNorms; final LayerNorm; P_pos = MaxLen·d
//	              for a learned table)
//	Weights     = 2·P·s                 (values and gradients)
//	Optimizer   = 4·P·8                 (AdamW moments, float64 copies on save)
//	Activations = s·(L·(20·N·d + 3·B·H·T² + 4·N·f) + 3·N·V)
//	              (without the 3·B·H·T² scores with Model.Stream)
//
// The activation constants were fitted to the bytes allocated by New and the first update of small float64
// configurations; the estimate is meant to be right within a factor of 2 (measured: 0.93 to 1.09 on five configurations, d 16 to 128, L 16 to 128).
func EstimateMemory(cfg Config) MemoryEstimate {
	m := cfg.Model
	d, f, h, v, l := float64(m.DModel), float64(m.FFN), float64(m.Heads), float64(m.Vocab), float64(m.Layers)
	b, t := float64(cfg.Batch), float64(cfg.SeqLen)
	n := b * t
	s := 4.0
	if cfg.Dtype.Type != nil && cfg.Dtype.Size() > 0 {
		s = float64(cfg.Dtype.Size())
	}
	var e MemoryEstimate
	e.Params = 2*v*d + l*(4*d*d+2*d*f+f+13*d) + 2*d
	if m.Pos == "learned" {
		e.Params += float64(m.PosOpts.Defaults().MaxLen) * d
	}
	e.Weights = 2 * e.Params * s
	e.Optimizer = 4 * e.Params * 8
	scores := actPerScore * b * h * t * t
	if m.Stream { // graph.StreamAttention: no [B, H, T, T] tensor
		scores = 0
	}
	e.Activations = s * (l*(actPerTokenD*n*d+scores+actPerTokenFFN*n*f) + actPerLogit*n*v)
	e.Total = e.Weights + e.Optimizer + e.Activations
	return e
}

// MemAvailable returns MemAvailable of /proc/meminfo in bytes; ok is false
// if it cannot be read (not Linux).
func MemAvailable() (bytes float64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !found {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// CheckMemory returns an error if the estimated memory of training cfg (see
// EstimateMemory) exceeds avail bytes; avail <= 0 means MemAvailable of the
// machine, and if that is unknown nothing is checked.
func CheckMemory(cfg Config, avail float64) error {
	if avail <= 0 {
		var ok bool
		if avail, ok = MemAvailable(); !ok {
			return nil
		}
	}
	e := EstimateMemory(cfg)
	if e.Total > avail {
		return errors.Errorf("config: training needs about %s, more than the %s available; reduce batch, seq-len, d-model, ffn or layers",
			e, bytesString(avail))
	}
	return nil
}
