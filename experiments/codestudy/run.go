package codestudy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// Options configures Run.
type Options struct {
	// Dir is the output directory (DefaultDir(preset) if "").
	Dir string
	// Src is the source root ("" : gocode.DefaultRoot(), GOROOT/src).
	Src string
	// Fresh retrains and re-evaluates every model, ignoring saved work.
	Fresh bool
	// Progress receives progress bars, Log messages (nil: discarded).
	Progress, Log io.Writer
	// SaveEvery saves checkpoints every SaveEvery updates (default 100).
	SaveEvery int
}

// DefaultDir is runs/code/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "code", preset) }

// Row is one result: one model (encoding x seed) at one evaluation length.
type Row struct {
	Preset   string `json:"preset"`
	Encoding string `json:"encoding"` // the trained encoding or variant label
	Seed     int64  `json:"seed"`
	// Factor is EvalLen / TrainLen.
	Factor   int    `json:"factor"`
	EvalLen  int    `json:"eval_len"`
	TrainLen int    `json:"train_len"`
	Status   string `json:"status"`
	Note     string `json:"note,omitempty"`
	// BitsPerByte is the mean over every target of the test windows,
	// BitsPerByteLast over their last TrainLen targets (the same bytes at
	// every length).
	BitsPerByte     float64 `json:"bits_per_byte"`
	BitsPerByteLast float64 `json:"bits_per_byte_last"`
	Windows         int     `json:"windows"`
	Targets         int     `json:"targets"`
	TargetsLast     int     `json:"targets_last"`
	// EvalMsPerByte is the wall time of the evaluation per target.
	EvalMsPerByte float64 `json:"eval_ms_per_byte"`
	// Training: updates, ms per update, mean loss of the last 10 updates
	// (nats), final validation bits per byte.
	TrainSteps     int     `json:"train_steps"`
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	ValBPB         float64 `json:"val_bpb"`
	Params         int     `json:"params"`
	// Skipped counts the corpus files that did not parse or could not be
	// read (gocode.Corpus.Skipped).
	Skipped   int    `json:"skipped_files"`
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	GitRev    string `json:"git_rev"`
	GitDirty  bool   `json:"git_dirty"`
}

// Status values.
const (
	StatusOK = "ok"
	StatusNA = "n/a" // the encoding cannot serve the length; Note says why
)

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config      trainer.Config
	Corpus      gocode.Options
	Factors     []int
	ValWindows  int
	TestWindows int
	WindowSeed  uint64
	CorpusHash  string
}

type jobFile struct {
	Spec spec  `json:"spec"`
	Rows []Row `json:"rows"`
}

// Outcome is what Run produced.
type Outcome struct {
	Rows []Row
	Dir  string
	// Trained counts the models of this run, Reused those whose saved rows
	// were taken as they were.
	Trained, Reused int
	// Skipped is the corpus's count of files that did not parse.
	Skipped int
	// CorpusLoad is the time LoadCorpus took.
	CorpusLoad time.Duration
	Wall       time.Duration
}

type runner struct {
	plan     Plan
	opt      Options
	corpus   *gocode.Corpus
	val      []Anchor
	test     []Anchor
	load     time.Duration
	logw     io.Writer
	hash     string
	testDesc string
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.logw, format, args...) }

// newRunner checks the plan, loads the corpus and draws the windows.
func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if opt.Dir == "" {
		opt.Dir = DefaultDir(p.Preset)
	}
	if opt.SaveEvery == 0 {
		opt.SaveEvery = 100
	}
	r := &runner{plan: p, opt: opt, logw: opt.Log}
	if r.logw == nil {
		r.logw = io.Discard
	}
	t0 := time.Now()
	c, err := gocode.LoadCorpus(opt.Src, p.Corpus)
	if err != nil {
		return nil, err
	}
	r.corpus, r.load, r.hash = c, time.Since(t0), c.Hash()
	r.logf("%s\nloaded in %s; %d files skipped (did not parse or could not be read)\n", c.Summary(), r.load.Round(time.Millisecond), c.Skipped)
	if r.val, err = Anchors(c.Files[gocode.Validation], p.ValWindows, p.TrainLen(), p.WindowSeed); err != nil {
		return nil, errors.WithMessage(err, "code: validation windows")
	}
	if r.test, err = Anchors(c.Files[gocode.Test], p.TestWindows, p.MaxLen(), p.WindowSeed+1); err != nil {
		return nil, errors.WithMessagef(err, "code: test windows (each needs a test file of at least %d bytes)", p.MaxLen()+1)
	}
	files := map[string]bool{}
	for _, a := range r.test {
		files[a.File.Path] = true
	}
	r.testDesc = fmt.Sprintf("%d test windows in %d files of %d test packages", len(r.test), len(files), c.Packages(gocode.Test))
	return r, nil
}

func (r *runner) jobDir(j Job) string   { return filepath.Join(r.opt.Dir, "models", j.Key()) }
func (r *runner) rowsPath(j Job) string { return filepath.Join(r.opt.Dir, "results", j.Key()+".json") }
func (r *runner) ckptPath(j Job) string { return filepath.Join(r.jobDir(j), "ckpt.safetensors") }
func (r *runner) lockPath(j Job) string { return filepath.Join(r.jobDir(j), "job.lock") }
func (r *runner) renderLock() string    { return filepath.Join(r.opt.Dir, "render.lock") }

func (r *runner) spec(cfg trainer.Config) spec {
	return spec{Config: cfg.Resolved(), Corpus: r.plan.Corpus, Factors: r.plan.Factors, ValWindows: r.plan.ValWindows,
		TestWindows: r.plan.TestWindows, WindowSeed: r.plan.WindowSeed, CorpusHash: r.hash}
}

// sameSpec reports whether saved rows were computed under the spec of this
// run (configurations compared resolved).
func sameSpec(saved, now spec) bool {
	saved.Config, now.Config = saved.Config.Resolved(), now.Config.Resolved()
	x, err1 := json.Marshal(saved)
	y, err2 := json.Marshal(now)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// Run trains and evaluates every model of the plan that has no saved rows
// (resuming interrupted trainings from their checkpoints), then writes
// results.csv, results.json, table.md and bpb.png under the output
// directory. A finished study only re-renders. A cancelled ctx stops after
// saving the current checkpoint; the error wraps trainer.ErrInterrupted.
// A source directory without Go files is gocode's error.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) {
	start := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, err
	}
	jobs, err := p.Jobs()
	if err != nil {
		return nil, err
	}
	out := &Outcome{Dir: r.opt.Dir, Skipped: r.corpus.Skipped, CorpusLoad: r.load}
	for i, j := range jobs {
		reused, err := r.runJob(ctx, j, fmt.Sprintf("[%d/%d]", i+1, len(jobs)))
		if err != nil {
			return out, err
		}
		if reused {
			out.Reused++
		} else {
			out.Trained++
		}
	}
	if out.Rows, err = r.render(); err != nil {
		return out, err
	}
	out.Wall = time.Since(start)
	return out, nil
}

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	if ctx == nil {
		ctx = context.Background()
	}
	jobs, err := p.Jobs()
	if err != nil {
		return err
	}
	if n < 0 || n >= len(jobs) {
		return errors.Errorf("code: job %d does not exist (the plan has %d jobs, 0..%d)", n, len(jobs), len(jobs)-1)
	}
	r, err := newRunner(p, opt)
	if err != nil {
		return err
	}
	_, err = r.runJob(ctx, jobs[n], fmt.Sprintf("[job %d]", n))
	return err
}

// Render rewrites the tables and plot from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, err
	}
	return r.render()
}

// runJob trains (or resumes) and evaluates one model unless its rows are
// saved with the same spec; it reports whether they were.
func (r *runner) runJob(ctx context.Context, j Job, tag string) (reused bool, err error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return false, err
	}
	sp := r.spec(cfg)
	if !r.opt.Fresh {
		var jf jobFile
		if b, err := os.ReadFile(r.rowsPath(j)); err == nil {
			if err := json.Unmarshal(b, &jf); err != nil {
				return false, errors.Wrapf(err, "reading %s (delete it to recompute)", r.rowsPath(j))
			}
			if sameSpec(jf.Spec, sp) {
				return true, nil
			}
			r.logf("%s %s: saved rows are of another configuration; recomputing\n", tag, j.Key())
		}
	}
	if err := os.MkdirAll(r.jobDir(j), 0o755); err != nil {
		return false, err
	}
	unlock, err := trainer.Lock(r.lockPath(j))
	if err != nil {
		return false, err
	}
	defer func() {
		if uerr := unlock(); err == nil {
			err = uerr
		}
	}()
	task, err := NewTask(cfg, Data{Corpus: r.corpus, Val: r.val})
	if err != nil {
		return false, err
	}
	r.logf("%s training %s (%d updates)\n", tag, j.Key(), cfg.Steps)
	sum, err := trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: r.ckptPath(j), Fresh: r.opt.Fresh,
		SaveEvery: r.opt.SaveEvery, Progress: r.opt.Progress, Log: r.logw})
	if err != nil {
		return false, err
	}
	p, _, err := trainer.LoadTaskModel(r.ckptPath(j), task)
	if err != nil {
		return false, err
	}
	base := Row{Preset: r.plan.Preset, Encoding: j.Variant.Label(), Seed: j.Seed, TrainLen: r.plan.TrainLen(), TrainSteps: sum.Steps,
		ValBPB: sum.Val.Value, Params: p.Count(), Skipped: r.corpus.Skipped}
	base.TrainMsPerStep, base.TrainLoss = trainStats(r.ckptPath(j))
	prov := trainer.Provenance()
	base.BLAS, base.GoVersion, base.GitRev, base.GitDirty = prov.BLAS, prov.GoVersion, prov.GitRev, prov.Dirty
	var rows []Row
	for i, le := range r.plan.Lengths() {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("%w (%w)", trainer.ErrInterrupted, err)
		}
		row := base
		row.Factor, row.EvalLen = r.plan.Factors[i], le
		t0 := time.Now()
		res, err := Evaluate(p, r.test, task.EvalSpec(le))
		el := time.Since(t0)
		if err != nil {
			if errors.Is(err, posenc.ErrBeyondTable) {
				row.Status, row.Note = StatusNA, err.Error()
				rows = append(rows, row)
				r.logf("%s %s at length %d: n/a (%v)\n", tag, j.Key(), le, err)
				continue
			}
			return false, err
		}
		row.Status, row.BitsPerByte, row.BitsPerByteLast = StatusOK, res.BitsPerByte, res.BitsPerByteLast
		row.Windows, row.Targets, row.TargetsLast = res.Windows, res.Targets, res.TargetsLast
		row.EvalMsPerByte = el.Seconds() * 1000 / float64(res.Targets)
		rows = append(rows, row)
		r.logf("%s %s at length %d (%dL): %.4f bits/byte over %d windows (%d bytes), last %d: %.4f\n",
			tag, j.Key(), le, row.Factor, row.BitsPerByte, row.Windows, row.Targets, row.TrainLen, row.BitsPerByteLast)
	}
	b, err := json.MarshalIndent(jobFile{Spec: sp, Rows: rows}, "", " ")
	if err != nil {
		return false, err
	}
	return false, study.WriteFileAtomic(r.rowsPath(j), b)
}

// trainStats reads the metrics log of ckpt: the mean wall time per
// update (ms) over every update, and the mean training loss (nats) of the
// last 10.
func trainStats(ckpt string) (msPerStep, loss float64) {
	ms, err := trainer.ReadMetrics(trainer.MetricsPath(ckpt))
	if err != nil || len(ms) == 0 {
		return 0, 0
	}
	for _, m := range ms {
		msPerStep += m.Seconds
	}
	last := ms[max(0, len(ms)-10):]
	for _, m := range last {
		loss += m.LossBPB
	}
	return msPerStep * 1000 / float64(len(ms)), loss / float64(len(last)) * math.Ln2
}
