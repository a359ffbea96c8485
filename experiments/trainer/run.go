package trainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
	"github.com/schollz/progressbar/v3"
)

// ErrInterrupted is wrapped by the error Run returns when its context is
// cancelled or RunOptions.BeforeStep returns an error: the checkpoint is
// saved first (if there is one and an update happened since the last
// save), so running again with the same checkpoint resumes.
var ErrInterrupted = errors.New("training interrupted")

// RunOptions configures Run, the engine of `go run ./experiments/train` and
// of the extrapolation study.
type RunOptions struct {
	// Ckpt is the checkpoint file written every SaveEvery updates and at the
	// end ("" writes none). If it exists it is resumed from, unless Fresh.
	Ckpt string
	// Resume, if set, is a checkpoint to resume from instead of Ckpt (it
	// must exist).
	Resume string
	// Fresh starts from scratch even if Ckpt exists (it is then overwritten).
	Fresh bool
	// SaveEvery > 0 saves a checkpoint every SaveEvery updates.
	SaveEvery int
	// SampleLen is the length of the sample printed at the end (0: none),
	// continuing Prompt at Temperature with seed Config.Seed.
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

	// testHook, if set, is called before each update with the trainer
	// (tests poison weights with it).
	testHook func(t *Trainer)
}

// Summary is the outcome of Run.
type Summary struct {
	// Val is the final validation score at length SeqLen over the whole
	// validation text (see Evaluator.Score); zero with RunOptions.NoEval.
	Val EvalResult
	// StartStep is the step resumed from, Steps the step reached.
	StartStep, Steps int
	// Losses are the training losses of the updates of this run.
	Losses []float64
	// Wall is the time of the whole run, Train the time spent in updates.
	Wall, Train time.Duration
	// MsPerStep and TokensPerSec measure the updates of this run.
	MsPerStep, TokensPerSec float64
	Sample                  []byte
}

// String is the one-line summary printed at the end of a run.
func (s *Summary) String() string {
	return fmt.Sprintf("val %.4f bits/byte | steps %d | wall %s | %.1f ms/step | %.0f tokens/s",
		s.Val.BitsPerByte, s.Steps, s.Wall.Round(time.Millisecond), s.MsPerStep, s.TokensPerSec)
}

// Run trains cfg on c to cfg.Steps updates: it resumes from a checkpoint if
// one is found (see RunOptions), shows a progress bar (step, loss, tokens/s,
// ETA), evaluates the validation bits per byte every cfg.EvalEvery updates
// and at the end (unless NoEval), saves checkpoints, and generates a sample.
//
// A cancelled ctx or a BeforeStep error stops the run before the next
// update: the checkpoint is saved if an update happened since the last
// save, and the error wraps ErrInterrupted. If an update fails (NaN or
// infinite loss or gradient norm) Run returns its error without saving, so
// the checkpoint on disk stays the last good one. The updates (batches,
// weights, losses) are those of Trainer.TrainStep, so a run stopped and
// resumed reproduces an uninterrupted one exactly.
func Run(ctx context.Context, cfg Config, c *Corpus, opt RunOptions) (*Summary, error) {
	start := time.Now()
	if ctx == nil {
		ctx = context.Background()
	}
	logw := opt.Log
	if logw == nil {
		logw = io.Discard
	}
	t, err := New(cfg, c)
	if err != nil {
		return nil, err
	}
	defer t.Close()

	from := opt.Resume
	if from == "" && !opt.Fresh && opt.Ckpt != "" {
		if _, err := os.Stat(opt.Ckpt); err == nil {
			from = opt.Ckpt
		}
	}
	if from != "" {
		if err := t.Load(from); err != nil {
			return nil, errors.WithMessage(err, "resuming (start over with -fresh, or choose another -ckpt)")
		}
		fmt.Fprintf(logw, "resumed from %s at step %d\n", from, t.Step())
	}
	fmt.Fprintf(logw, "model %s: %d parameters; corpus %s: %d training / %d validation bytes\n",
		describe(cfg), t.Params.Count(), c.Path, len(c.Train), len(c.Val))

	ev, err := NewEvaluator(t.Params, cfg.Model, cfg.EvalBatch, cfg.SeqLen)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	if opt.OnStart != nil {
		opt.OnStart(t.Step())
	}

	sum := &Summary{StartStep: t.Step()}
	var bar *progressbar.ProgressBar
	if opt.Progress != nil && t.Step() < cfg.Steps {
		// The bar spans the updates of this run, so its ETA is right after
		// a resumption; the description shows the global step.
		bar = progressbar.NewOptions(cfg.Steps-t.Step(),
			progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("step %d/%d", t.Step(), cfg.Steps)),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(20),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(opt.Progress) }),
		)
	}
	stopBar := func() {
		if bar != nil {
			bar.Exit()
			bar = nil
		}
	}
	defer stopBar()
	say := func(format string, args ...any) {
		if bar != nil {
			bar.Clear()
		}
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
	tokens := float64(cfg.Batch * cfg.SeqLen)
	for t.Step() < cfg.Steps {
		stop := ctx.Err()
		if stop == nil && opt.BeforeStep != nil {
			stop = opt.BeforeStep(t.Step())
		}
		if stop == nil && opt.testHook != nil {
			opt.testHook(t)
		}
		if stop != nil {
			stopBar()
			return sum, interrupted(stop, t.Step(), cfg.Steps, opt.Ckpt, t.Step() > saved, save)
		}
		t0 := time.Now()
		r, err := t.TrainStep()
		dt := time.Since(t0)
		if err != nil {
			stopBar()
			return sum, errors.WithMessage(err, "training stopped; the checkpoint on disk (if any) is the last good one")
		}
		r.Seconds = dt.Seconds()
		sum.Train += dt
		sum.Losses = append(sum.Losses, r.Loss)
		if opt.OnStep != nil {
			opt.OnStep(r)
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("step %d/%d | loss %.4f | %.0f tok/s", r.Step, cfg.Steps, r.Loss,
				float64(len(sum.Losses))*tokens/sum.Train.Seconds()))
			bar.Add(1)
		}
		if cfg.EvalEvery > 0 && r.Step%cfg.EvalEvery == 0 && r.Step < cfg.Steps {
			v, err := validate(ev, c.Val)
			if err != nil {
				return sum, err
			}
			say("step %d: train loss %.4f, val %.4f bits/byte\n", r.Step, r.Loss, v.BitsPerByte)
		}
		if opt.Ckpt != "" && opt.SaveEvery > 0 && r.Step%opt.SaveEvery == 0 {
			if err := save(); err != nil {
				return sum, err
			}
		}
	}
	if bar != nil {
		bar.Finish()
		bar = nil
	}
	sum.Steps = t.Step()
	if !opt.NoEval {
		if sum.Val, err = validate(ev, c.Val); err != nil {
			return sum, err
		}
		fmt.Fprintf(logw, "validation: %.4f bits/byte over %d windows of %d bytes (%d targets)\n",
			sum.Val.BitsPerByte, sum.Val.Windows, cfg.SeqLen, sum.Val.Tokens)
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
		sum.Sample, err = Sample(t.Params, cfg.Model, SampleOptions{Prompt: []byte(opt.Prompt), N: opt.SampleLen,
			Temperature: opt.Temperature, Seed: uint64(cfg.Seed), Window: cfg.SeqLen})
		if err != nil {
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

// validate scores the whole validation text at the evaluator's length.
func validate(ev *Evaluator, val []byte) (EvalResult, error) {
	s, err := ev.Score(val, []int{0}, 0)
	if err != nil {
		return EvalResult{}, errors.WithMessage(err, "validation")
	}
	return s[0].Result(), nil
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
