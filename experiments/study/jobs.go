package study

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// Jobs runs the models of a study of trained models (the vision, graph
// and code studies): one job per model, each trained through the engine
// (resuming from its checkpoint) and evaluated into rows R, saved with the
// spec S they were computed under, and rendered together. It is the part
// those studies share; each supplies its spec, its training and
// evaluation, and its rendering.
//
// Layout under Dir, for the job with key k:
//
//	models/k/ckpt.safetensors   the engine's checkpoint (and its metrics log)
//	models/k/job.lock           held while the job runs (trainer.Lock)
//	results/k.json              {"spec": S, "rows": [R...]}, written atomically
//	render.lock                 held while the outputs are rendered
//
// A job whose saved rows have the same spec (Same) is not run again, so an
// interrupted study resumes where it stopped and several processes (a
// Slurm array: RunJob) may run the jobs of one Dir.
type Jobs[S, R any] struct {
	// Name prefixes errors ("vision").
	Name string
	// Dir is the output directory; Keys are the jobs' keys in plan order
	// (file-system safe).
	Dir  string
	Keys []string
	// Fresh runs every job again, ignoring saved rows.
	Fresh bool
	// Redo lists the labels (Label) whose jobs run again from scratch:
	// their saved rows are ignored and their checkpoints removed; the
	// other jobs are reused as usual. A name that labels no job is an
	// error (CheckRedo).
	Redo []string
	// Label is the label of job i that Redo names (nil: its key without
	// the trailing "-seed<s>").
	Label func(i int) string
	// Log receives one line per job event (nil: discarded).
	Log io.Writer
	// Spec returns what job i's saved rows must agree on to be reused.
	Spec func(i int) (S, error)
	// Same reports whether rows saved under spec saved are valid under
	// now (nil: JSONEqual).
	Same func(saved, now S) bool
	// Do trains (or resumes, from CkptPath(i)) and evaluates job i; tag
	// prefixes its log lines. It runs under the job's lock.
	Do func(ctx context.Context, i int, tag string) ([]R, error)
	// Render writes the study's outputs from the saved rows of the jobs
	// that are done, in plan order, and the keys of those that are not
	// (with the reason if their rows are of another spec). It runs under
	// the render lock.
	Render func(rows []R, pending []string) error
}

// JobFile is the content of results/<key>.json. CkptSHA256 is the
// SHA-256 of the job's checkpoint when its rows were written ("" if the job
// wrote none, and in files of earlier versions): the rows count as done
// only while the checkpoint still has it.
type JobFile[S, R any] struct {
	Spec       S      `json:"spec"`
	Rows       []R    `json:"rows"`
	CkptSHA256 string `json:"ckpt_sha256,omitempty"`
}

// FileSHA256 is the hex SHA-256 of a file's bytes (errors name it).
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", errors.Wrapf(err, "reading %s", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyCkpt returns nil if the checkpoint at path loads (its CRC, tensors
// and metadata check) and, when sum is not "", has SHA-256 sum; else an
// error naming the file and what is wrong.
func VerifyCkpt(path, sum string) error {
	if sum != "" {
		got, err := FileSHA256(path)
		if err != nil {
			return errors.Wrapf(err, "checkpoint %s", path)
		}
		if got != sum {
			return errors.Errorf("checkpoint %s: SHA-256 %s, but %s when its rows were saved (cut short or changed)", path, got, sum)
		}
	}
	if _, err := trainer.LoadCheckpoint(path); err != nil {
		return errors.WithMessagef(err, "checkpoint %s", path)
	}
	return nil
}

// label is the label of job i (Label, or DefaultLabel of its key).
func (js *Jobs[S, R]) label(i int) string {
	if js.Label != nil {
		return js.Label(i)
	}
	return DefaultLabel(js.Keys[i])
}

// DefaultLabel is the label -redo names a job by: its key without the
// trailing "-seed<s>" ("rope-seed2" -> "rope").
func DefaultLabel(key string) string {
	if j := strings.LastIndex(key, "-seed"); j > 0 {
		if _, err := strconv.Atoi(key[j+len("-seed"):]); err == nil {
			return key[:j]
		}
	}
	return key
}

// CheckRedo returns an error naming the entries of Redo that label no job
// (and listing the labels), or nil.
func (js *Jobs[S, R]) CheckRedo() error {
	known := map[string]bool{}
	var labels []string
	for i := range js.Keys {
		if l := js.label(i); !known[l] {
			known[l] = true
			labels = append(labels, l)
		}
	}
	var bad []string
	for _, r := range js.Redo {
		if !known[r] {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		return errors.Errorf("%s: -redo %s: no such encoding in the plan (it has %s)", js.Name, strings.Join(bad, ","), strings.Join(labels, ", "))
	}
	return nil
}

// redo reports whether job i is to run again (Redo names its label).
func (js *Jobs[S, R]) redo(i int) bool { return slices.Contains(js.Redo, js.label(i)) }

// JSONEqual reports whether a and b marshal to the same JSON.
func JSONEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// JobDir is the directory of job i's checkpoint and lock.
func (js *Jobs[S, R]) JobDir(i int) string { return filepath.Join(js.Dir, "models", js.Keys[i]) }

// CkptPath is job i's checkpoint.
func (js *Jobs[S, R]) CkptPath(i int) string { return filepath.Join(js.JobDir(i), "ckpt.safetensors") }

// RowsPath is job i's saved rows.
func (js *Jobs[S, R]) RowsPath(i int) string {
	return filepath.Join(js.Dir, "results", js.Keys[i]+".json")
}

func (js *Jobs[S, R]) logf(format string, args ...any) {
	if js.Log != nil {
		fmt.Fprintf(js.Log, format, args...)
	}
}

func (js *Jobs[S, R]) same(saved, now S) bool {
	if js.Same != nil {
		return js.Same(saved, now)
	}
	return JSONEqual(saved, now)
}

// whyOtherConfig is why a job whose saved rows were computed under another
// spec is pending.
const whyOtherConfig = "saved rows are of another configuration"

// saved returns job i's saved rows if they were computed under spec now;
// ok is false if there are none or they are of another spec (why says
// which).
func (js *Jobs[S, R]) saved(i int, now S) (rows []R, ok bool, why string, err error) {
	b, err := os.ReadFile(js.RowsPath(i))
	if os.IsNotExist(err) {
		return nil, false, "", nil
	}
	if err != nil {
		return nil, false, "", err
	}
	var jf JobFile[S, R]
	if err := json.Unmarshal(b, &jf); err != nil {
		return nil, false, "", errors.Wrapf(err, "reading %s (delete it to recompute)", js.RowsPath(i))
	}
	if !js.same(jf.Spec, now) {
		return nil, false, whyOtherConfig, nil
	}
	// A checkpoint removed after its rows were saved (to render from the
	// rows alone, or to save space) leaves the rows valid; one that is
	// present must be the one they came from, intact.
	if _, err := os.Stat(js.CkptPath(i)); err == nil {
		if err := VerifyCkpt(js.CkptPath(i), jf.CkptSHA256); err != nil {
			return nil, false, err.Error(), nil
		}
	}
	return jf.Rows, true, "", nil
}

// Run runs every job that has no valid saved rows, in order, then renders;
// it returns the rendered rows and how many jobs ran and were reused. A
// cancelled ctx stops the running job after its checkpoint is saved (the
// error wraps trainer.ErrInterrupted); the jobs done so far keep their rows.
func (js *Jobs[S, R]) Run(ctx context.Context) (rows []R, ran, reused int, err error) {
	if err := js.CheckRedo(); err != nil {
		return nil, 0, 0, err
	}
	if err := js.checkStale(-1); err != nil {
		return nil, 0, 0, err
	}
	for i := range js.Keys {
		done, err := js.run(ctx, i, fmt.Sprintf("[%d/%d]", i+1, len(js.Keys)))
		if err != nil {
			return nil, ran, reused, err
		}
		if done {
			reused++
		} else {
			ran++
		}
	}
	rows, err = js.RenderSaved()
	return rows, ran, reused, err
}

// RunJob runs job n (0-based, in plan order) unless its rows are saved,
// without rendering. n outside the plan is an error naming the range.
func (js *Jobs[S, R]) RunJob(ctx context.Context, n int) error {
	if err := js.CheckRedo(); err != nil {
		return err
	}
	if n < 0 || n >= len(js.Keys) {
		return errors.Errorf("%s: job %d does not exist (the plan has %d jobs, 0..%d)", js.Name, n, len(js.Keys), len(js.Keys)-1)
	}
	if err := js.checkStale(n); err != nil {
		return err
	}
	_, err := js.run(ctx, n, fmt.Sprintf("[job %d]", n))
	return err
}

// checkStale returns an error, before any work, if a job (job n, or every
// job for n < 0) that is not to be redone has saved rows of another spec
// and still has its checkpoint: that checkpoint was trained under the
// other spec, and the engine would resume from it (it accepts a change of
// steps or learning rate), so the new rows would come from a model of
// neither configuration, and the old rows would be lost. Without a
// checkpoint the job simply runs again from scratch.
func (js *Jobs[S, R]) checkStale(n int) error {
	if js.Fresh {
		return nil
	}
	var stale []string
	for i := range js.Keys {
		if (n >= 0 && i != n) || js.redo(i) {
			continue
		}
		if _, err := os.Stat(js.CkptPath(i)); err != nil {
			continue
		}
		now, err := js.Spec(i)
		if err != nil {
			return err
		}
		if _, _, why, err := js.saved(i, now); err != nil {
			return err
		} else if why == whyOtherConfig {
			stale = append(stale, js.Keys[i])
		}
	}
	if len(stale) == 0 {
		return nil
	}
	ex := stale[:min(3, len(stale))]
	return errors.Errorf("%s: %d job(s) in %s (%s) hold rows and checkpoints of another configuration than this plan's; nothing was run: run with -fresh to start over, -redo their encodings to retrain them, or choose another -out directory",
		js.Name, len(stale), js.Dir, strings.Join(ex, ", "))
}

// run runs job i unless its saved rows are valid; it reports whether they
// were.
func (js *Jobs[S, R]) run(ctx context.Context, i int, tag string) (reused bool, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	now, err := js.Spec(i)
	if err != nil {
		return false, err
	}
	redo := js.redo(i)
	if !js.Fresh && !redo {
		_, ok, why, err := js.saved(i, now)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
		if why != "" {
			js.logf("%s %s: %s; recomputing\n", tag, js.Keys[i], why)
		}
	}
	if err := os.MkdirAll(js.JobDir(i), 0o755); err != nil {
		return false, err
	}
	unlock, err := trainer.Lock(filepath.Join(js.JobDir(i), "job.lock"))
	if err != nil {
		return false, err
	}
	defer func() {
		if uerr := unlock(); err == nil {
			err = uerr
		}
	}()
	ck := js.CkptPath(i)
	if _, serr := os.Stat(ck); serr == nil && !js.Fresh {
		if redo {
			js.logf("%s %s: -redo: removing %s and training again\n", tag, js.Keys[i], ck)
			if err := os.Remove(ck); err != nil {
				return false, err
			}
		} else if verr := VerifyCkpt(ck, ""); verr != nil {
			// A damaged checkpoint cannot be resumed: set it aside and
			// train this job again.
			bad := ck + ".bad"
			js.logf("%s %s: %v; moved to %s, training again\n", tag, js.Keys[i], verr, bad)
			if err := os.Rename(ck, bad); err != nil {
				return false, err
			}
		}
	}
	rows, err := js.Do(ctx, i, tag)
	if err != nil {
		return false, err
	}
	jf := JobFile[S, R]{Spec: now, Rows: rows}
	if _, serr := os.Stat(ck); serr == nil {
		if jf.CkptSHA256, err = FileSHA256(ck); err != nil {
			return false, err
		}
	}
	b, err := json.MarshalIndent(jf, "", " ")
	if err != nil {
		return false, err
	}
	return false, WriteFileAtomic(js.RowsPath(i), b)
}

// Collect returns the saved rows of the jobs that are done, in plan order,
// and the keys of the others (with " (saved rows are of another
// configuration)" when that is why).
func (js *Jobs[S, R]) Collect() (rows []R, pending []string, err error) {
	rows, pending, _, err = js.collect()
	return rows, pending, err
}

// collect is Collect that also lists the jobs whose saved rows are of
// another configuration.
func (js *Jobs[S, R]) collect() (rows []R, pending, stale []string, err error) {
	for i, k := range js.Keys {
		now, err := js.Spec(i)
		if err != nil {
			return nil, nil, nil, err
		}
		rs, ok, why, err := js.saved(i, now)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			if why == whyOtherConfig {
				stale = append(stale, k)
			}
			if why != "" {
				k += " (" + why + ")"
			}
			pending = append(pending, k)
			continue
		}
		rows = append(rows, rs...)
	}
	return rows, pending, stale, nil
}

// RenderSaved renders the saved rows (Collect, then Render) under the
// render lock and returns them. It refuses, and writes nothing, when a
// job's saved rows were computed under another configuration than the
// plan's (another preset, other flags): rendering would replace the
// tables of those rows by tables without them. Jobs not yet run are
// listed as pending in the tables.
func (js *Jobs[S, R]) RenderSaved() ([]R, error) {
	if err := os.MkdirAll(js.Dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := trainer.Lock(filepath.Join(js.Dir, "render.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	rows, pending, stale, err := js.collect()
	if err != nil {
		return nil, err
	}
	if len(stale) > 0 {
		ex := stale[:min(3, len(stale))]
		return nil, errors.Errorf("%s: render: the saved rows of %d of %d jobs in %s (%s) were made under another configuration than this plan's; rendering would replace their tables: render with the preset and flags they were run with, or run them again",
			js.Name, len(stale), len(js.Keys), js.Dir, strings.Join(ex, ", "))
	}
	return rows, js.Render(rows, pending)
}

// TrainMs is the mean wall time per update (ms) in the engine's metrics
// log of a checkpoint, 0 if there is none.
func TrainMs(ckpt string) float64 {
	ms, err := trainer.ReadCheckpointMetrics(ckpt)
	if err != nil || len(ms) == 0 {
		return 0
	}
	s := 0.0
	for _, m := range ms {
		s += m.Seconds
	}
	return s * 1000 / float64(len(ms))
}

// LastLoss is the mean training loss (nats) of the last 10 updates in the
// metrics log of a checkpoint, 0 if there is none.
func LastLoss(ckpt string) float64 {
	ms, err := trainer.ReadCheckpointMetrics(ckpt)
	if err != nil || len(ms) == 0 {
		return 0
	}
	ms = ms[max(0, len(ms)-10):]
	s := 0.0
	for _, m := range ms {
		s += m.LossBPB
	}
	return s / float64(len(ms)) * 0.6931471805599453
}

// CkptOf is the checkpoint of the job with key k, or an error if the plan
// has no such job.
func (js *Jobs[S, R]) CkptOf(k string) (string, error) {
	for i, key := range js.Keys {
		if key == k {
			return js.CkptPath(i), nil
		}
	}
	return "", errors.Errorf("%s: job %s is not in the plan", js.Name, k)
}

// Keyed is a job of a plan: its key names its files.
type Keyed interface{ Key() string }

// NewJobs returns the Jobs of plan jobs: spec gives a job's spec, do trains
// and evaluates it (from checkpoint ckpt), render writes the outputs; same
// compares specs (nil: JSONEqual). Name, Dir, Fresh and Log are as in Jobs.
func NewJobs[J Keyed, S, R any](name, dir string, fresh bool, log io.Writer, jobs []J,
	spec func(J) (S, error), same func(saved, now S) bool,
	do func(ctx context.Context, j J, ckpt, tag string) ([]R, error), render func(rows []R, pending []string) error) *Jobs[S, R] {
	js := &Jobs[S, R]{Name: name, Dir: dir, Keys: KeysOf(jobs), Fresh: fresh, Log: log, Same: same, Render: render}
	js.Spec = func(i int) (S, error) { return spec(jobs[i]) }
	js.Do = func(ctx context.Context, i int, tag string) ([]R, error) {
		return do(ctx, jobs[i], js.CkptPath(i), tag)
	}
	return js
}
