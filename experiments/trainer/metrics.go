package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
)

// MetricsFile is the name of the per-step metrics log of the runs before
// logs were named after their checkpoint: <dir of ckpt>/metrics.jsonl,
// shared by every checkpoint of the directory. It is still read
// (FindMetricsPath) and, on the first resume of such a run, copied into
// MetricsPath.
const MetricsFile = "metrics.jsonl"

// MetricsSuffix ends the name of a checkpoint's metrics log.
const MetricsSuffix = ".metrics.jsonl"

// logBase is a checkpoint path without its extension: the stem of its logs
// (runs/x/ckpt.safetensors -> runs/x/ckpt).
func logBase(ckpt string) string { return strings.TrimSuffix(ckpt, filepath.Ext(ckpt)) }

// MetricsPath is the metrics log of a checkpoint, named after it:
// X.safetensors (or X.ckpt, or X) -> X.metrics.jsonl, so that two runs in
// one directory keep separate logs.
func MetricsPath(ckpt string) string { return logBase(ckpt) + MetricsSuffix }

// LegacyMetricsPath is where runs before per-checkpoint logs wrote the
// metrics of ckpt: <dir of ckpt>/metrics.jsonl.
func LegacyMetricsPath(ckpt string) string { return filepath.Join(filepath.Dir(ckpt), MetricsFile) }

// FindMetricsPath is the metrics log to read for ckpt: MetricsPath if it
// exists, else LegacyMetricsPath if that exists, else MetricsPath.
func FindMetricsPath(ckpt string) string { return findLog(MetricsPath(ckpt), LegacyMetricsPath(ckpt)) }

// findLog returns path if it exists, else legacy if it exists, else path.
func findLog(path, legacy string) string {
	if _, err := os.Stat(path); err != nil && os.IsNotExist(err) {
		if _, err := os.Stat(legacy); err == nil {
			return legacy
		}
	}
	return path
}

// ReadCheckpointMetrics reads the metrics log of a checkpoint
// (FindMetricsPath).
func ReadCheckpointMetrics(ckpt string) ([]Metric, error) { return ReadMetrics(FindMetricsPath(ckpt)) }

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

// openMetrics opens the log of checkpoint ckpt (MetricsPath) for a run
// starting at step from: lines of steps after from (left by a run killed
// after its last checkpoint, or by the run a -fresh start replaces) are
// removed, then new lines are appended. A run resumed (from > 0) whose log
// is still the directory's legacy metrics.jsonl starts its own from the
// legacy lines up to from (the legacy file is left as it is). The file is
// 0644.
func openMetrics(ckpt string, from int) (*metricsLog, error) {
	path := MetricsPath(ckpt)
	src := path
	if from > 0 {
		src = FindMetricsPath(ckpt)
	}
	old, err := ReadMetrics(src)
	if err != nil && !os.IsNotExist(errors.Cause(err)) {
		return nil, err
	}
	if src != path && err == nil {
		err = errors.New("migrating the legacy log") // force the rewrite below
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
