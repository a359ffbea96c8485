package trainer

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/graph"
)

// ErrInterrupted is wrapped by the error Run and RunTask return when its context is
// cancelled or RunOptions.BeforeStep returns an error: the checkpoint is
// saved first (if there is one and an update happened since the last
// save), so running again with the same checkpoint resumes.
var ErrInterrupted = errors.New("training interrupted")

// RunOptions configures Run and RunTask, the engine of `go run
// ./experiments/train`, of the extrapolation study and of every task.
type RunOptions struct {
	// Ckpt is the checkpoint file written every SaveEvery updates and at the
	// end ("" writes none). If it exists it is resumed from, unless Fresh.
	Ckpt string
	// Resume, if set, is a checkpoint to resume from instead of Ckpt (it
	// must exist).
	Resume string
	// Fresh starts from scratch even if Ckpt exists (it is then overwritten).
	Fresh bool
	// InitFrom, if set, is a checkpoint or exported weights file whose
	// weights start a new run (fine-tuning, e.g. at another sequence
	// length): the model must have exactly its parameters and the options
	// of InitRules.Refused; the optimizer state, the step and the batches
	// are this run's (InitConfig derives the configuration). The run's
	// checkpoints record the source (Checkpoint.Init); resuming one with
	// InitFrom set checks that it came from a file of the same bytes.
	// InitFrom is used only when the run starts from scratch: an existing
	// Ckpt is resumed (unless Fresh).
	InitFrom string
	// SaveEvery > 0 saves a checkpoint every SaveEvery updates.
	SaveEvery int
	// KeepAt lists steps at which a copy of the checkpoint is kept, as
	// KeepPath(Ckpt, step), besides Ckpt itself (saved at the same step):
	// the weights of a run at chosen points, e.g. a fine-tuning scored after
	// 25, 100 and 400 updates. Each must be positive and needs Ckpt; a
	// resumed run writes those after the step it resumes from.
	KeepAt []int
	// SampleLen is the length of the sample printed at the end (0: none),
	// continuing Prompt at Temperature with seed Config.Seed (the language
	// model only: another task refuses SampleLen > 0).
	SampleLen   int
	Prompt      string
	Temperature float64
	// NoEval skips the final validation (Summary.Val stays zero); periodic
	// evaluations (Config.EvalEvery) still run.
	NoEval bool
	// Progress receives the progress bar (nil: no bar).
	Progress io.Writer
	// Log receives messages, evaluations, the sample and the summary (nil:
	// discarded).
	Log io.Writer
	// OnStart, if set, is called once the trainer is ready, with the step
	// it starts from (0, or the step of the checkpoint resumed from).
	OnStart func(step int)
	// BeforeStep, if set, is called before each update with the number of
	// completed updates (the 0-based index of the update about to run). A
	// non-nil error stops the run as a cancelled context does.
	BeforeStep func(step int) error
	// OnStep, if set, is called after every successful update.
	OnStep func(r StepResult)
	// OnSave, if set, is called after every checkpoint write with the step
	// saved; an error stops the run and is returned.
	OnSave func(step int) error
	// MonitorEvery > 0 turns on the attention monitor: the first update,
	// every MonitorEvery-th and an update that fails (its forward pass run
	// again with the probes armed: on its batch and weights, or after the
	// update for weights it made non-finite) are recorded per layer
	// and head (MonitorRecord: attention entropy, score extremes, position
	// bias RMS, one-hot fraction, gradient norm before clipping, loss), in
	// MonitorPath(Ckpt) when there is a checkpoint (records after the step
	// resumed from are dropped, as for metrics.jsonl). The task must
	// implement Prober (the language model does). 0, the default, records
	// nothing and costs nothing.
	MonitorEvery int
	// OnMonitor, if set, receives the records of each recorded update.
	OnMonitor func([]MonitorRecord)

	// testHook, if set, is called before each update with the trainer
	// (tests poison weights with it).
	testHook func(t *Trainer)
}

// Summary is the outcome of Run.
type Summary struct {
	// Config is the resolved configuration of the run (Config.Resolved).
	Config Config
	// Provenance is the BLAS, Go version and git revision of this process.
	Provenance ProvenanceInfo
	// CorpusHash is Corpus.Hash of the corpus (Task.DataHash of the task).
	CorpusHash string
	// Task is the Task.Kind trained, Units its units (defaults filled in).
	Task  string
	Units Units
	// Val is the final validation (Task.Validate); zero with
	// RunOptions.NoEval. For the language model, Val.Value and
	// Val.BitsPerByte are the bits per byte at length SeqLen over the whole
	// validation text (see Evaluator.Score), Val.Tokens the targets scored.
	Val Validation
	// Init is the source of the initial weights (RunOptions.InitFrom, or
	// recorded in the checkpoint resumed from); nil for a run from scratch.
	Init *InitInfo
	// StartStep is the step resumed from, Steps the step reached.
	StartStep, Steps int
	// Losses are the training losses (nats) of the updates of this run.
	Losses []float64
	// Wall is the time of the whole run, Train the time spent in updates.
	Wall, Train time.Duration
	// MsPerStep and TokensPerSec measure the updates of this run (0 if it
	// made none); TokensPerSec counts the task's items (Task.Items).
	MsPerStep, TokensPerSec float64
	Sample                  []byte
}

// String is the one-line summary printed at the end of a run.
func (s *Summary) String() string {
	u := s.Units
	if u.Loss == "" {
		u = Units{Loss: "bits/byte", Items: "tokens"} // a Summary not made by RunTask
	}
	out := fmt.Sprintf("val %.4f %s", s.Val.Value, s.Val.Name)
	if s.Val.Name == "" {
		out = "val not measured"
	}
	if n := len(s.Losses); n > 0 {
		out += fmt.Sprintf(" | train loss %.4f %s (last update)", s.Losses[n-1]/math.Ln2, u.Loss)
	}
	out += fmt.Sprintf(" | steps %d | wall %s", s.Steps, s.Wall.Round(time.Millisecond))
	if len(s.Losses) > 0 {
		out += fmt.Sprintf(" | %.1f ms/step | %.0f %s/s", s.MsPerStep, s.TokensPerSec, u.Items)
	} else {
		out += " | no update in this run"
	}
	return out
}

// Check returns an error naming the first invalid option.
func (o RunOptions) Check() error {
	switch {
	case o.Fresh && o.Resume != "":
		return errors.New("-fresh and -resume contradict each other: -fresh starts from scratch, -resume continues a checkpoint; pass one")
	case o.InitFrom != "" && o.Resume != "":
		return errors.New("-init-from and -resume contradict each other: -init-from starts a new run from other weights, -resume continues a checkpoint; pass one")
	case sameFile(o.InitFrom, o.Ckpt):
		return errors.Errorf("-init-from %s is the run's own checkpoint -ckpt %s: the run would overwrite the weights it starts from; choose another -ckpt", o.InitFrom, o.Ckpt)
	case o.SaveEvery < 0:
		return errors.Errorf("-save-every %d must not be negative", o.SaveEvery)
	case o.SampleLen < 0:
		return errors.Errorf("-sample %d must not be negative", o.SampleLen)
	case o.MonitorEvery < 0:
		return errors.Errorf("-monitor %d must not be negative (0 turns the monitor off)", o.MonitorEvery)
	case len(o.KeepAt) > 0 && o.Ckpt == "":
		return errors.Errorf("keeping the checkpoints of steps %v needs a checkpoint path", o.KeepAt)
	}
	for _, s := range o.KeepAt {
		if s <= 0 {
			return errors.Errorf("keep-at step %d must be positive", s)
		}
	}
	return nil
}

// CheckWritable checks that path is not a directory (or another non-regular
// file) and that a file can be created in its directory (created if
// needed), by creating and removing a temporary file, so a run fails at the
// start rather than at its first save.
func CheckWritable(path string) error {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return errors.Errorf("cannot write %s: it exists and is not a regular file", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "cannot write %s", path)
	}
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return errors.Wrapf(err, "cannot write %s", path)
	}
	f.Close()
	return errors.Wrapf(os.Remove(f.Name()), "cannot write %s", path)
}

// Run trains the byte-level language model of cfg on c: it checks the
// options (RunOptions.Check), then runs RunTask(ctx, cfg, NewLMTask(cfg, c),
// opt). Its logs, metrics, checkpoints (format v2) and numbers are those of
// the engine before tasks existed.
func Run(ctx context.Context, cfg Config, c *Corpus, opt RunOptions) (*Summary, error) {
	if err := opt.Check(); err != nil {
		return nil, err
	}
	task, err := NewLMTask(cfg, c)
	if err != nil {
		return nil, err
	}
	return RunTask(ctx, cfg, task, opt)
}

// RunTask trains task with the optimizer, schedule, clipping, steps, seed
// and dtype of cfg to cfg.Steps updates (cfg.Model is the task's model
// configuration, recorded in the checkpoint). Before any update it checks
// the options (RunOptions.Check; a sample needs the language model), the
// configuration (Config.ValidateTraining), and, with a checkpoint path, takes
// the lock LockPath(Ckpt) (a second run on the same checkpoint fails at
// once, naming the holder), removes the temporary files a killed save left,
// and checks the directory is writable; then it builds the trainer
// (NewTaskTrainer; for the language model this checks the corpus length and
// the estimated memory). It resumes from a checkpoint if one is found (see
// RunOptions and Trainer.Restore: another task, task configuration, model,
// batch, seq-len, seed, dtype or data is refused; the settings a resumption
// may change are listed in the log). A checkpoint already at or beyond
// cfg.Steps is not trained further (the log says "already trained to step
// N; nothing to do"). RunTask shows progress (step, loss in bits, items/s,
// ETA), validates (Task.Validate) every cfg.EvalEvery updates and at the
// end (unless NoEval), writes one line per update to MetricsPath(Ckpt),
// saves checkpoints, and, for the language model, generates a sample.
//
// The final validation is printed (its Text, and in the Summary) before the
// final save, so a failing save does not hide it. A non-finite validation
// value is an error.
//
// A cancelled ctx or a BeforeStep error stops the run before the next
// update: the checkpoint is saved if an update happened since the last
// save, and the error wraps ErrInterrupted. If an update fails (NaN or
// infinite loss, gradient norm or weights) RunTask returns its error
// without saving, so the checkpoint on disk stays the last good one. The
// updates (batches, weights, losses) are those of Trainer.TrainStep, so a
// run stopped and resumed reproduces an uninterrupted one exactly.
func RunTask(ctx context.Context, cfg Config, task Task, opt RunOptions) (sum *Summary, err error) {
	start := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	logw := opt.Log
	if logw == nil {
		logw = io.Discard
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	if err := cfg.ValidateTraining(); err != nil {
		return nil, err
	}
	if task == nil {
		return nil, errors.New("trainer: nil task")
	}
	smp, canSample := task.(interface {
		sample(*graph.Params, RunOptions) ([]byte, error)
	})
	if opt.SampleLen > 0 && !canSample {
		return nil, errors.Errorf("-sample %d: task %q cannot generate samples (only the language model can)", opt.SampleLen, task.Kind())
	}
	units := unitsOf(task)
	if opt.Ckpt != "" {
		unlock, err := Lock(LockPath(opt.Ckpt))
		if err != nil {
			return nil, err
		}
		defer func() {
			if uerr := unlock(); err == nil && uerr != nil {
				err = uerr
			}
		}()
		removed, err := removeStaleTemps(opt.Ckpt)
		for _, p := range removed {
			fmt.Fprintf(logw, "removed %s, left by an interrupted save\n", p)
		}
		if err != nil {
			return nil, err
		}
		if err := CheckWritable(opt.Ckpt); err != nil {
			return nil, err
		}
	}
	t, err := NewTaskTrainer(cfg, task)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	cfg = t.Cfg // resolved

	from := opt.Resume
	if from == "" && !opt.Fresh && opt.Ckpt != "" {
		if _, err := os.Stat(opt.Ckpt); err == nil {
			from = opt.Ckpt
		}
	}
	if from != "" {
		ck, err := LoadCheckpoint(from)
		if err == nil {
			err = errors.WithMessagef(t.Restore(ck), "checkpoint %s", from)
		}
		if err != nil {
			return nil, errors.WithMessage(err, "resuming (start over with -fresh, or choose another -ckpt)")
		}
		fmt.Fprintf(logw, "resumed from %s at step %d\n", from, t.Step())
		if ck.Format == checkpointFormatV1 {
			fmt.Fprintf(logw, "(%s checkpoint: its corpus was not recorded, so it is not checked)\n", ck.Format)
		}
		if err := checkResumedInit(ck, from, opt.InitFrom); err != nil {
			return nil, err
		}
		if ck.Init != nil {
			fmt.Fprintf(logw, "(a run initialised from %s, sha256 %.12s)\n", ck.Init.Path, ck.Init.SHA256)
		}
		if ch := cfg.Changes(ck.Config); len(ch) > 0 {
			fmt.Fprintf(logw, "this run changes: %s\n", strings.Join(ch, ", "))
		}
	} else if opt.InitFrom != "" {
		src, err := readInitSource(opt.InitFrom)
		if err != nil {
			return nil, err
		}
		if err := t.initFrom(src); err != nil {
			return nil, err
		}
		fmt.Fprintln(logw, describeInit(t.Init, cfg))
	}
	fmt.Fprintln(logw, task.Describe())

	var mlog *metricsLog
	if opt.Ckpt != "" {
		if mlog, err = openMetrics(opt.Ckpt, t.Step()); err != nil {
			return nil, err
		}
		defer mlog.close()
	}
	mon, err := newMonitor(opt.MonitorEvery, task, opt.Ckpt, t.Step(), opt.OnMonitor)
	if err != nil {
		return nil, err
	}
	if mon == nil && opt.Ckpt != "" {
		// A run without the monitor still drops the records a killed
		// monitored run left after the step it resumes from.
		if err := truncateMonitor(opt.Ckpt, t.Step()); err != nil {
			return nil, err
		}
	}
	defer mon.close()
	if opt.OnStart != nil {
		opt.OnStart(t.Step())
	}

	sum = &Summary{Config: cfg, Provenance: Provenance(), CorpusHash: task.DataHash(), Task: task.Kind(), Units: units,
		Init: t.Init, StartStep: t.Step(), Steps: t.Step()}
	if t.Step() >= cfg.Steps {
		fmt.Fprintf(logw, "already trained to step %d; nothing to do: use -steps > %d to continue, or -fresh to start over\n",
			t.Step(), t.Step())
	}
	bar := Progress(nopProgress{})
	if opt.Progress != nil && t.Step() < cfg.Steps {
		// The bar spans the updates of this run, so its ETA is right after
		// a resumption; the description shows the global step.
		bar = NewProgress(opt.Progress, int64(cfg.Steps-t.Step()), fmt.Sprintf("step %d/%d", t.Step(), cfg.Steps))
	}
	defer func() { bar.Exit() }()
	say := func(format string, args ...any) {
		bar.Clear()
		fmt.Fprintf(logw, format, args...)
	}
	saved := t.Step()
	save := func() error {
		if err := t.Save(opt.Ckpt); err != nil {
			return err
		}
		saved = t.Step()
		if opt.OnSave != nil {
			if err := opt.OnSave(saved); err != nil {
				return errors.WithMessagef(err, "after saving %s at step %d", opt.Ckpt, saved)
			}
		}
		return nil
	}
	// pending is the metrics line of the last update, written when the next
	// update starts or the run ends, so that an evaluation can join it.
	var pending *Metric
	flush := func() error {
		if pending == nil {
			return nil
		}
		m := *pending
		pending = nil
		return mlog.add(m)
	}
	defer flush()
	tokens := float64(task.Items())
	for t.Step() < cfg.Steps {
		if err := flush(); err != nil {
			return sum, err
		}
		stop := ctx.Err()
		if stop == nil && opt.BeforeStep != nil {
			stop = opt.BeforeStep(t.Step())
		}
		if stop == nil && opt.testHook != nil {
			opt.testHook(t)
		}
		if stop != nil {
			bar.Exit()
			return sum, interrupted(stop, t.Step(), cfg.Steps, opt.Ckpt, t.Step() > saved, save)
		}
		armed := mon.arm(t.Step())
		t0 := time.Now()
		r, err := t.TrainStep()
		dt := time.Since(t0)
		if err != nil && !armed && mon != nil {
			// record the failing update too: its forward pass again, armed
			mon.armAll()
			t.rerunForward()
			armed = true
		}
		if armed {
			if merr := mon.record(r); merr != nil && err == nil {
				return sum, merr
			}
		}
		if err != nil {
			bar.Exit()
			return sum, errors.WithMessage(err, "training stopped; the checkpoint on disk (if any) is the last good one")
		}
		r.Seconds = dt.Seconds()
		sum.Train += dt
		sum.Steps = r.Step
		sum.Losses = append(sum.Losses, r.Loss)
		pending = &Metric{Step: r.Step, LossBPB: r.Loss / math.Ln2, LR: r.LR, GradNorm: r.GradNorm,
			Seconds: r.Seconds, TokensPerSec: tokens / r.Seconds}
		if opt.OnStep != nil {
			opt.OnStep(r)
		}
		bar.Describe(fmt.Sprintf("step %d/%d | loss %.4f %s | %.0f %s/s", r.Step, cfg.Steps, r.Loss/math.Ln2, units.Loss,
			float64(len(sum.Losses))*tokens/sum.Train.Seconds(), units.ItemsShort))
		bar.Add(1)
		if cfg.EvalEvery > 0 && r.Step%cfg.EvalEvery == 0 && r.Step < cfg.Steps {
			v, err := validateTask(t)
			if err != nil {
				return sum, err
			}
			pending.setVal(v)
			say("step %d: train loss %.4f %s, val %.4f %s\n", r.Step, r.Loss/math.Ln2, units.Loss, v.Value, v.Name)
		}
		if opt.Ckpt != "" && (opt.SaveEvery > 0 && r.Step%opt.SaveEvery == 0 || slices.Contains(opt.KeepAt, r.Step)) {
			if err := save(); err != nil {
				return sum, err
			}
		}
		if slices.Contains(opt.KeepAt, r.Step) {
			if err := t.Save(KeepPath(opt.Ckpt, r.Step)); err != nil {
				return sum, err
			}
		}
	}
	bar.Finish()
	if !opt.NoEval {
		if sum.Val, err = validateTask(t); err != nil {
			return sum, err
		}
		if pending != nil {
			pending.setVal(sum.Val)
		}
		fmt.Fprintln(logw, sum.Val.Text)
	}
	if err := flush(); err != nil {
		return sum, err
	}
	if opt.Ckpt != "" && t.Step() > saved {
		if err := save(); err != nil {
			if !opt.NoEval {
				return sum, errors.WithMessage(err, "the validation result above was computed but the checkpoint was not saved")
			}
			return sum, err
		}
		fmt.Fprintf(logw, "checkpoint: %s (step %d)\n", opt.Ckpt, t.Step())
	}
	if opt.SampleLen > 0 {
		if sum.Sample, err = smp.sample(t.Params, opt); err != nil {
			return sum, err
		}
		fmt.Fprintf(logw, "sample (temperature %g): %s%s\n", opt.Temperature, opt.Prompt, printable(sum.Sample))
	}
	sum.Wall = time.Since(start)
	if n := len(sum.Losses); n > 0 {
		sum.MsPerStep = sum.Train.Seconds() * 1000 / float64(n)
		sum.TokensPerSec = float64(n) * tokens / sum.Train.Seconds()
	}
	fmt.Fprintln(logw, sum)
	return sum, nil
}

// KeepPath is the copy of checkpoint ckpt kept at step (RunOptions.KeepAt):
// "dir/ckpt.safetensors" -> "dir/ckpt.step25.safetensors".
func KeepPath(ckpt string, step int) string {
	ext := filepath.Ext(ckpt)
	return fmt.Sprintf("%s.step%d%s", strings.TrimSuffix(ckpt, ext), step, ext)
}

// validateTask runs the task's validation of the trainer's weights; a
// non-finite value is an error.
func validateTask(t *Trainer) (Validation, error) {
	v, err := t.Task.Validate(t.Params)
	if err != nil {
		return v, err
	}
	if v.Name == "" {
		return v, errors.Errorf("validation: task %q returned a validation without a name", t.Task.Kind())
	}
	if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
		return v, errors.Errorf("validation: %s is %v: the model's outputs are not finite (learning rate too high?)", v.Name, v.Value)
	}
	return v, nil
}

// validate scores the whole validation text at the evaluator's length.
func validate(ev *Evaluator, val []byte) (EvalResult, error) {
	s, err := ev.Score(val, []int{0}, 0)
	if err != nil {
		return EvalResult{}, errors.WithMessage(err, "validation")
	}
	r := s[0].Result()
	if math.IsNaN(r.BitsPerByte) || math.IsInf(r.BitsPerByte, 0) {
		return r, errors.Errorf("validation: %v bits/byte: the model's outputs are not finite (learning rate too high?)", r.BitsPerByte)
	}
	return r, nil
}

// interrupted saves the checkpoint if needed and returns the error wrapping
// ErrInterrupted that says how to resume.
func interrupted(cause error, step, steps int, ckpt string, dirty bool, save func() error) error {
	switch {
	case step == 0:
		return fmt.Errorf("%w before the first update (%w); nothing to save", ErrInterrupted, cause)
	case ckpt == "":
		return fmt.Errorf("%w at update %d of %d (%w); no checkpoint file, so this run cannot be resumed",
			ErrInterrupted, step, steps, cause)
	case dirty:
		if err := save(); err != nil {
			return fmt.Errorf("%w at update %d of %d (%w), and saving the checkpoint failed: %v",
				ErrInterrupted, step, steps, cause, err)
		}
	}
	return fmt.Errorf("%w at update %d of %d (%w); checkpoint %s is at step %d, run the same command again to resume",
		ErrInterrupted, step, steps, cause, ckpt, step)
}

// describe is a short description of a configuration.
func describe(c Config) string {
	m := c.Model
	pos := m.Pos
	if pos == "" {
		pos = "none"
	}
	return fmt.Sprintf("pos=%s d=%d heads=%d layers=%d ffn=%d L=%d batch=%d %v", pos, m.DModel, m.Heads, m.Layers, m.FFN,
		c.SeqLen, c.Batch, c.Dtype)
}

// printable replaces control bytes other than newline and tab, and invalid
// UTF-8, so a sample cannot disturb the terminal.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, s)
}
