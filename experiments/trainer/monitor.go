package trainer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/graph"
)

// MonitorFile is the name of the attention monitor's log of the runs
// before logs were named after their checkpoint: <dir of ckpt>/monitor.csv.
// It is still read (FindMonitorPath) and, on the first resume of such a
// run, copied into MonitorPath.
const MonitorFile = "monitor.csv"

// MonitorSuffix ends the name of a checkpoint's monitor log.
const MonitorSuffix = ".monitor.csv"

// MonitorPath is the monitor log of a checkpoint, named after it:
// X.safetensors (or X.ckpt, or X) -> X.monitor.csv.
func MonitorPath(ckpt string) string { return logBase(ckpt) + MonitorSuffix }

// LegacyMonitorPath is where runs before per-checkpoint logs wrote the
// monitor records of ckpt: <dir of ckpt>/monitor.csv.
func LegacyMonitorPath(ckpt string) string { return filepath.Join(filepath.Dir(ckpt), MonitorFile) }

// FindMonitorPath is the monitor log to read for ckpt: MonitorPath if it
// exists, else LegacyMonitorPath if that exists, else MonitorPath.
func FindMonitorPath(ckpt string) string { return findLog(MonitorPath(ckpt), LegacyMonitorPath(ckpt)) }

// MonitorPNGPath is the monitor figure of a checkpoint: X.monitor.png.
func MonitorPNGPath(ckpt string) string { return logBase(ckpt) + ".monitor.png" }

// Prober is implemented by a Task whose model exposes one attention probe
// per layer (layers.LM.Probes); RunTask needs it to monitor attention.
type Prober interface {
	Probes() []*graph.AttentionProbe
}

// MonitorRecord is one head of one layer at one recorded update: the
// attention statistics of the update's forward pass (graph.HeadStats: the
// entropy in nats, mean and min over queries; the largest and smallest
// pre-softmax score; the RMS of the position bias or terms, NaN without
// one; the fraction of nearly one-hot queries; the rows counted), with the
// update's global gradient norm before clipping and its training loss in
// bits (bits per byte for the language model). An update that failed has
// the values it reached (NaN where it broke).
type MonitorRecord struct {
	Step, Layer, Head int
	graph.HeadStats
	GradNorm, Loss float64
}

// monitorHeader are the columns of monitor.csv.
var monitorHeader = []string{"step", "layer", "head", "entropy_mean", "entropy_min", "score_max", "score_min",
	"pos_rms", "one_hot", "rows", "grad_norm", "loss"}

func (r MonitorRecord) fields() []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return []string{strconv.Itoa(r.Step), strconv.Itoa(r.Layer), strconv.Itoa(r.Head), f(r.EntropyMean), f(r.EntropyMin),
		f(r.ScoreMax), f(r.ScoreMin), f(r.PosRMS), f(r.OneHot), strconv.Itoa(r.Rows), f(r.GradNorm), f(r.Loss)}
}

func parseMonitorRecord(rec []string) (MonitorRecord, error) {
	var r MonitorRecord
	if len(rec) != len(monitorHeader) {
		return r, errors.Errorf("%d fields, want %d", len(rec), len(monitorHeader))
	}
	ints := []*int{&r.Step, &r.Layer, &r.Head}
	for i, p := range ints {
		v, err := strconv.Atoi(rec[i])
		if err != nil {
			return r, errors.Errorf("%s: %v", monitorHeader[i], err)
		}
		*p = v
	}
	floats := []*float64{&r.EntropyMean, &r.EntropyMin, &r.ScoreMax, &r.ScoreMin, &r.PosRMS, &r.OneHot}
	for i, p := range floats {
		v, err := strconv.ParseFloat(rec[3+i], 64)
		if err != nil {
			return r, errors.Errorf("%s: %v", monitorHeader[3+i], err)
		}
		*p = v
	}
	rows, err := strconv.Atoi(rec[9])
	if err != nil {
		return r, errors.Errorf("rows: %v", err)
	}
	r.Rows = rows
	for i, p := range []*float64{&r.GradNorm, &r.Loss} {
		v, err := strconv.ParseFloat(rec[10+i], 64)
		if err != nil {
			return r, errors.Errorf("%s: %v", monitorHeader[10+i], err)
		}
		*p = v
	}
	return r, nil
}

// ReadMonitor reads a monitor log (monitor.csv); a last line cut short (a
// killed run) is ignored. Errors name the file and the line.
func ReadMonitor(path string) ([]MonitorRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrapf(err, "monitor %s", path)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' { // cut short
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	rd := csv.NewReader(bytes.NewReader(b))
	rows, err := rd.ReadAll()
	if err != nil {
		return nil, errors.Wrapf(err, "monitor %s", path)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if strings.Join(rows[0], ",") != strings.Join(monitorHeader, ",") {
		return nil, errors.Errorf("monitor %s: header %q, want %q", path, strings.Join(rows[0], ","), strings.Join(monitorHeader, ","))
	}
	out := make([]MonitorRecord, 0, len(rows)-1)
	for i, rec := range rows[1:] {
		r, err := parseMonitorRecord(rec)
		if err != nil {
			return nil, errors.Wrapf(err, "monitor %s: line %d", path, i+2)
		}
		out = append(out, r)
	}
	return out, nil
}

// monitor arms the probes before the updates it records and writes their
// records.
type monitor struct {
	every  int
	probes []*graph.AttentionProbe
	f      *os.File
	w      *csv.Writer
	on     func([]MonitorRecord)
}

// newMonitor returns the monitor of a run (nil when every is 0): it needs
// the task's probes, and with a checkpoint path it opens MonitorPath(ckpt)
// for a run starting at step from, dropping the records of later steps.
func newMonitor(every int, task Task, ckpt string, from int, on func([]MonitorRecord)) (*monitor, error) {
	if every <= 0 {
		return nil, nil
	}
	pr, ok := task.(Prober)
	if !ok {
		return nil, errors.Errorf("-monitor %d: task %q has no attention probes to monitor", every, task.Kind())
	}
	m := &monitor{every: every, probes: pr.Probes(), on: on}
	if len(m.probes) == 0 {
		return nil, errors.Errorf("-monitor %d: the model of task %q has no attention layer", every, task.Kind())
	}
	if ckpt == "" {
		return m, nil
	}
	path := MonitorPath(ckpt)
	keep, err := keptMonitor(ckpt, from)
	if err != nil {
		return nil, err
	}
	err = writeMonitor(path, keep)
	if err != nil {
		return nil, err
	}
	if m.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, errors.Wrapf(err, "monitor %s", path)
	}
	m.w = csv.NewWriter(bufio.NewWriter(m.f))
	return m, nil
}

// keptMonitor reads the monitor records of ckpt up to step from: from
// MonitorPath, or for a resumed run (from > 0) without one from the legacy
// monitor.csv of its directory.
func keptMonitor(ckpt string, from int) ([]MonitorRecord, error) {
	src := MonitorPath(ckpt)
	if from > 0 {
		src = FindMonitorPath(ckpt)
	}
	old, err := ReadMonitor(src)
	if err != nil && !os.IsNotExist(errors.Cause(err)) {
		return nil, err
	}
	var keep []MonitorRecord
	for _, r := range old {
		if r.Step <= from {
			keep = append(keep, r)
		}
	}
	return keep, nil
}

// truncateMonitor drops, from an existing monitor log of ckpt, the records
// of steps after from (a run resumed without the monitor); without a log
// it does nothing.
func truncateMonitor(ckpt string, from int) error {
	path := MonitorPath(ckpt)
	old, err := ReadMonitor(path)
	if err != nil {
		if os.IsNotExist(errors.Cause(err)) {
			return nil
		}
		return err
	}
	keep, _ := keptMonitor(ckpt, from)
	if len(keep) == len(old) {
		return nil
	}
	return writeMonitor(path, keep)
}

// writeMonitor writes a monitor log of records recs atomically.
func writeMonitor(path string, keep []MonitorRecord) error {
	return writeAtomic(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		cw.Write(monitorHeader)
		for _, r := range keep {
			cw.Write(r.fields())
		}
		cw.Flush()
		return cw.Error()
	}, "monitor")
}

// arm arms the probes if the update after step completed updates is
// recorded: the first, and every every-th.
func (m *monitor) arm(step int) bool {
	if m == nil || (step != 0 && (step+1)%m.every != 0) {
		return false
	}
	m.armAll()
	return true
}

func (m *monitor) armAll() {
	for _, p := range m.probes {
		p.Arm()
	}
}

// record disarms the probes and writes the records of update r (loss in
// nats, converted to bits).
func (m *monitor) record(r StepResult) error {
	var recs []MonitorRecord
	for l, p := range m.probes {
		p.Disarm()
		for h, s := range p.Stats() {
			recs = append(recs, MonitorRecord{Step: r.Step, Layer: l, Head: h, HeadStats: s, GradNorm: r.GradNorm, Loss: r.Loss / math.Ln2})
		}
	}
	if m.on != nil {
		m.on(recs)
	}
	if m.w == nil {
		return nil
	}
	for _, rec := range recs {
		m.w.Write(rec.fields())
	}
	m.w.Flush()
	return errors.Wrapf(m.w.Error(), "monitor %s", m.f.Name())
}

func (m *monitor) close() error {
	if m == nil || m.f == nil {
		return nil
	}
	m.w.Flush()
	return m.f.Close()
}

// monitorFigures are the rows of MonitorPNG: a record's figure and its title.
var monitorFigures = []struct {
	name string
	get  func(MonitorRecord) float64
}{
	{"entropy, mean over queries (nats)", func(r MonitorRecord) float64 { return r.EntropyMean }},
	{"entropy, min over queries (nats)", func(r MonitorRecord) float64 { return r.EntropyMin }},
	{"largest pre-softmax score", func(r MonitorRecord) float64 { return r.ScoreMax }},
	{"smallest pre-softmax score", func(r MonitorRecord) float64 { return r.ScoreMin }},
	{"position bias/terms RMS", func(r MonitorRecord) float64 { return r.PosRMS }},
	{fmt.Sprintf("queries nearly one-hot (p ≥ %g)", graph.OneHotThreshold), func(r MonitorRecord) float64 { return r.OneHot }},
}

// MonitorPNG draws the records as a grid: one row per figure (the six
// attention figures, then the gradient norm and the loss), one column per
// layer, one line per head, over the update. Non-finite values are left out
// of the lines; a figure with none (the position RMS of RoPE) is drawn as
// its title marked "n/a". It returns an error if recs is empty.
func MonitorPNG(recs []MonitorRecord, title string) ([]byte, error) {
	if len(recs) == 0 {
		return nil, errors.New("monitor plot: no records")
	}
	layers, heads := 0, 0
	for _, r := range recs {
		layers, heads = max(layers, r.Layer+1), max(heads, r.Head+1)
	}
	var panels [][]viz.Series
	var titles []string
	series := func(name string, keep func(MonitorRecord) bool, get func(MonitorRecord) float64) viz.Series {
		s := viz.Series{Name: name}
		for _, r := range recs {
			if v := get(r); keep(r) && !math.IsNaN(v) && !math.IsInf(v, 0) {
				s.X, s.Y = append(s.X, float64(r.Step)), append(s.Y, v)
			}
		}
		return s
	}
	for _, fig := range monitorFigures {
		for l := range layers {
			var ss []viz.Series
			for h := range heads {
				s := series(fmt.Sprintf("head %d", h), func(r MonitorRecord) bool { return r.Layer == l && r.Head == h }, fig.get)
				if len(s.X) > 0 {
					ss = append(ss, s)
				}
			}
			t := fmt.Sprintf("layer %d: %s", l, fig.name)
			if len(ss) == 0 {
				t += ": n/a"
			}
			panels, titles = append(panels, ss), append(titles, t)
		}
	}
	// the update's global figures, once (layer 0, head 0 carries them)
	first := func(r MonitorRecord) bool { return r.Layer == 0 && r.Head == 0 }
	for _, g := range []struct {
		name string
		get  func(MonitorRecord) float64
	}{
		{"gradient norm before clipping", func(r MonitorRecord) float64 { return r.GradNorm }},
		{"training loss (bits)", func(r MonitorRecord) float64 { return r.Loss }},
	} {
		var ss []viz.Series
		if s := series("", first, g.get); len(s.X) > 0 {
			ss = append(ss, s)
		}
		panels, titles = append(panels, ss), append(titles, g.name)
	}
	return viz.LineGrid(panels, titles, layers, viz.LineOptions{Title: title, XLabel: "update", Width: 420 * max(layers, 2)})
}

// WriteMonitorPNG reads the monitor log of ckpt (FindMonitorPath) and
// writes its figure (MonitorPNG) as MonitorPNGPath(ckpt), returning the
// path.
func WriteMonitorPNG(ckpt, title string) (string, error) {
	src := FindMonitorPath(ckpt)
	recs, err := ReadMonitor(src)
	if err != nil {
		return "", err
	}
	png, err := MonitorPNG(recs, title)
	if err != nil {
		return "", errors.WithMessagef(err, "monitor %s", src)
	}
	out := MonitorPNGPath(ckpt)
	return out, writeAtomic(out, func(w io.Writer) error { _, err := w.Write(png); return err }, "monitor plot")
}
