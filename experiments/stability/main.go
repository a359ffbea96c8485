// Command stability runs the training-stability study of issue #16: the
// byte-level LM on Newton's Opticks, trained once per encoding with
// learnable relative position parameters (and the baselines none and
// rope) at every point of a grid over the survey's remedies (init std of
// the position parameters 0.02 or 1.0, a learnable scale alpha off or on,
// global-norm clipping off or at 1) and two learning rates (the reference
// and a high one), three seeds; each run records its loss and
// gradient-norm curves, loss and gradient spikes, divergence (and the
// update where it happened), the attention monitor's figures and the final
// validation bits per byte. It writes results.csv, results.json, table.md
// and PNG figures under runs/stability/<preset>/.
//
//	go run ./experiments/stability                  # quick preset (t5, shaw-scalar, none; one seed)
//	go run ./experiments/stability -preset full     # every encoding, 3 seeds
//	go run ./experiments/stability -render          # rewrite tables and figures from saved results
//
// -encodings, -seeds, -steps and -high-lr change the plan (its output
// directory becomes runs/stability/<preset>-custom). -jobs lists the runs
// (one per line), -job N trains run N only (for parallel processes or a
// Slurm array), -render merges what is done. An interrupted study (Ctrl-C
// saves the current checkpoint) resumes when run again. Bad flags exit
// with status 2 before anything runs, a failed run with 1, an interrupted
// one with 130; a diverging run is a result (a row with status diverged),
// not a failure.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/rpe-go/rpe/experiments/stabilitystudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("stability", "stability study", stabilitystudy.PresetNames(),
		"encodings (posenc names or variants name@key=value)", "runs/stability/<preset>", stdout, stderr)
	highLR := c.FlagSet.Float64("high-lr", 0, fmt.Sprintf("the high learning rate instead of the preset's (%g)", stabilitystudy.HighLR))
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := stabilitystudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	custom, err := c.Override(&p.Encodings, &p.Seeds, &p.Base.Steps)
	if err != nil {
		return c.Usage(err)
	}
	if c.Given("high-lr") {
		if !(*highLR > 0) || math.IsInf(*highLR, 0) {
			return c.Usage(fmt.Errorf("-high-lr %g must be positive", *highLR))
		}
		p.LRs[len(p.LRs)-1] = *highLR
		custom = true
	}
	c.FlagSet.Visit(func(f *flag.Flag) {
		if f.Name == "save-every" { // the preset saves every 50 updates
			p.SaveEvery = c.SaveEvery
		}
	})
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	jobs, _ := p.Jobs()
	opt := c.RunOptions(stabilitystudy.DefaultDir(p.Preset))
	opt.SaveEvery = 0 // the plan's (the preset's 50, or -save-every) decides
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, stabilitystudy.FileTable, stabilitystudy.Run, stabilitystudy.RunJob, stabilitystudy.Render)
}
