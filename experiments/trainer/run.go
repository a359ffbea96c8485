package trainer

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
	"github.com/schollz/progressbar/v3"
)

// RunOptions configures Run, the engine of `go run ./experiments/train`.
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
	// Progress receives the progress bar (nil: no bar).
	Progress io.Writer
	// Log receives messages, evaluations, the sample and the summary (nil:
	// discarded).
	Log io.Writer
	// BeforeStep, if set, is called before each update (tests use it).
	BeforeStep func(t *Trainer)
}

// Summary is the outcome of Run.
type Summary struct {
	// Val is the final validation score at length SeqLen.
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
// and at the end, saves checkpoints, and generates a sample. If an update
// fails (NaN or infinite loss or gradient norm) Run returns its error
// without saving, so the checkpoint on disk stays the last good one.
func Run(cfg Config, c *Corpus, opt RunOptions) (*Summary, error) {
	start := time.Now()
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
	say := func(format string, args ...any) {
		if bar != nil {
			bar.Clear()
		}
		fmt.Fprintf(logw, format, args...)
	}
	tokens := float64(cfg.Batch * cfg.SeqLen)
	for t.Step() < cfg.Steps {
		if opt.BeforeStep != nil {
			opt.BeforeStep(t)
		}
		t0 := time.Now()
		r, err := t.TrainStep()
		dt := time.Since(t0)
		if err != nil {
			if bar != nil {
				bar.Exit()
			}
			return sum, errors.WithMessage(err, "training stopped; the checkpoint on disk (if any) is the last good one")
		}
		sum.Train += dt
		sum.Losses = append(sum.Losses, r.Loss)
		if bar != nil {
			bar.Describe(fmt.Sprintf("step %d/%d | loss %.4f | %.0f tok/s", r.Step, cfg.Steps, r.Loss,
				float64(len(sum.Losses))*tokens/sum.Train.Seconds()))
			bar.Add(1)
		}
		if cfg.EvalEvery > 0 && r.Step%cfg.EvalEvery == 0 && r.Step < cfg.Steps {
			v, err := ev.Eval(c.Val, 0, 0)
			if err != nil {
				return sum, err
			}
			say("step %d: train loss %.4f, val %.4f bits/byte\n", r.Step, r.Loss, v.BitsPerByte)
		}
		if opt.Ckpt != "" && opt.SaveEvery > 0 && r.Step%opt.SaveEvery == 0 {
			if err := t.Save(opt.Ckpt); err != nil {
				return sum, err
			}
		}
	}
	if bar != nil {
		bar.Finish()
	}
	sum.Steps = t.Step()
	if opt.Ckpt != "" && len(sum.Losses) > 0 {
		if err := t.Save(opt.Ckpt); err != nil {
			return sum, err
		}
		fmt.Fprintf(logw, "checkpoint: %s (step %d)\n", opt.Ckpt, t.Step())
	}
	if sum.Val, err = ev.Eval(c.Val, 0, 0); err != nil {
		return sum, err
	}
	fmt.Fprintf(logw, "validation: %.4f bits/byte over %d windows of %d bytes (%d targets)\n",
		sum.Val.BitsPerByte, sum.Val.Windows, cfg.SeqLen, sum.Val.Tokens)
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
