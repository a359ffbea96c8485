package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

// MetricsFile is the name of the per-step metrics log Run writes next to
// its checkpoint.
const MetricsFile = "metrics.jsonl"

// MetricsPath is the metrics log of a checkpoint: <dir of ckpt>/metrics.jsonl.
func MetricsPath(ckpt string) string { return filepath.Join(filepath.Dir(ckpt), MetricsFile) }

// Metric is one line of metrics.jsonl: one per update. Losses are in bits
// (nats / ln 2; bits per byte for the language model). ValBPB is set on the
// updates after which the validation text was scored (every EvalEvery
// updates and the last update of a run that evaluates) by a task whose
// validation is in "bits/byte" (the language model); another task's
// validation is in Val, named by ValName ("accuracy"). Seconds and
// TokensPerSec (items per second: tokens, images) are timings, the only
// fields that differ between an interrupted-and-resumed run and an
// uninterrupted one.
type Metric struct {
	Step         int      `json:"step"`
	LossBPB      float64  `json:"loss_bpb"`
	LR           float64  `json:"lr"`
	GradNorm     float64  `json:"grad_norm"`
	Seconds      float64  `json:"seconds"`
	TokensPerSec float64  `json:"tokens_per_sec"`
	ValBPB       *float64 `json:"val_bpb,omitempty"`
	Val          *float64 `json:"val,omitempty"`
	ValName      string   `json:"val_name,omitempty"`
}

// setVal records the validation v in m: ValBPB for bits per byte, else Val
// and ValName.
func (m *Metric) setVal(v Validation) {
	x := v.Value
	if v.Name == "bits/byte" {
		m.ValBPB = &x
		return
	}
	m.Val, m.ValName = &x, v.Name
}

// ReadMetrics reads a metrics log; a last line cut short (a killed run) is
// ignored.
func ReadMetrics(path string) ([]Metric, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "metrics %s", path)
	}
	var out []Metric
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var m Metric
		if err := json.Unmarshal(l, &m); err != nil {
			if i == len(lines)-1 { // no newline: cut short
				break
			}
			return out, errors.Wrapf(err, "metrics %s: line %d", path, i+1)
		}
		out = append(out, m)
	}
	return out, nil
}

// metricsLog appends Metric lines to a file.
type metricsLog struct {
	f *os.File
	w *bufio.Writer
}

// openMetrics opens the log at path for a run starting at step from: lines
// of steps after from (left by a run killed after its last checkpoint, or
// by the run a -fresh start replaces) are removed, then new lines are
// appended. The file is 0644.
func openMetrics(path string, from int) (*metricsLog, error) {
	old, err := ReadMetrics(path)
	if err != nil && !os.IsNotExist(errors.Cause(err)) {
		return nil, err
	}
	var keep []Metric
	for _, m := range old {
		if m.Step <= from {
			keep = append(keep, m)
		}
	}
	if len(keep) != len(old) || err != nil {
		err := writeAtomic(path, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, m := range keep {
				if err := enc.Encode(m); err != nil {
					return err
				}
			}
			return nil
		}, "metrics")
		if err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, errors.Wrapf(err, "metrics %s", path)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return nil, errors.Wrapf(err, "metrics %s", path)
	}
	return &metricsLog{f: f, w: bufio.NewWriter(f)}, nil
}

// add writes one line and flushes it.
func (l *metricsLog) add(m Metric) error {
	if l == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	l.w.Write(append(b, '\n'))
	return errors.Wrapf(l.w.Flush(), "metrics %s", l.f.Name())
}

func (l *metricsLog) close() error {
	if l == nil {
		return nil
	}
	l.w.Flush()
	return l.f.Close()
}
