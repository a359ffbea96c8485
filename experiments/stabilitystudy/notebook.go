package stabilitystudy

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// ResultsOrQuick returns committed if it holds a results.json (the
// committed full preset), else runs the quick preset in scratch (reusing
// what a previous call saved there; log receives its progress) and
// returns scratch.
func ResultsOrQuick(ctx context.Context, committed, scratch string, log io.Writer) (string, error) {
	if _, err := os.Stat(filepath.Join(committed, FileJSON)); err == nil {
		return committed, nil
	}
	p, err := Preset("quick")
	if err != nil {
		return "", err
	}
	if _, err := Run(ctx, p, Options{Dir: scratch, Log: log}); err != nil {
		return "", err
	}
	return scratch, nil
}

// DemoConfig is the model of the notebook's monitored run: BaseConfig
// with t5, the position table drawn with init std 1.0, no alpha, no
// clipping, lr HighLR and 150 updates (the unremedied setting).
func DemoConfig() trainer.Config {
	c := BaseConfig()
	c.Model.Pos = "t5"
	c.Model.PosOpts.InitStd, c.Model.PosOpts.Alpha = 1, false
	c.ClipNorm, c.LR, c.Steps = 0, HighLR, 150
	return c
}

// MonitorRun trains the LM of cfg on Newton's Opticks with the attention
// monitor every `every` updates and its checkpoint in dir (resumed if it
// is there), and returns the monitor figure (trainer.MonitorPNG) and a
// one-line outcome: the validation bits per byte, or the update at which
// the run diverged (a divergence is an outcome, not an error).
func MonitorRun(ctx context.Context, cfg trainer.Config, dir string, every int) (png []byte, outcome string, err error) {
	c, err := trainer.LoadCorpus("")
	if err != nil {
		return nil, "", err
	}
	ckpt := filepath.Join(dir, "ckpt.safetensors")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	sum, err := trainer.Run(ctx, cfg, c, trainer.RunOptions{Ckpt: ckpt, SaveEvery: 50, MonitorEvery: every})
	if step, why, ok := nonFinite(err); ok {
		outcome = fmt.Sprintf("diverged at update %d (%s)", step, why)
	} else if err != nil {
		return nil, "", err
	} else {
		outcome = fmt.Sprintf("%d updates, validation %.4f bits/byte", sum.Steps, sum.Val.Value)
	}
	recs, err := trainer.ReadMonitor(trainer.FindMonitorPath(ckpt))
	if err != nil {
		return nil, "", err
	}
	if len(recs) == 0 {
		return nil, "", errors.Errorf("stability: %s holds no monitor records", trainer.MonitorPath(ckpt))
	}
	png, err = trainer.MonitorPNG(recs, fmt.Sprintf("%s, init std %g, clip %g, lr %g: %s", cfg.Model.Pos, cfg.Model.PosOpts.InitStd,
		cfg.ClipNorm, cfg.LR, outcome))
	return png, outcome, err
}
