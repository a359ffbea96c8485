// Command times runs the time study of issue #15: a causal language model
// over music-like event sequences (bars of P = 16 time units; each event of
// a bar is repeated exactly P later with probability 0.7, the others are
// new), trained once per position encoding with index positions (0..T-1)
// and, for the encodings that serve real-valued positions, with the
// events' onsets as positions ("rope@time"), on the same batches; scored
// on held-out sequences by the accuracy and bits on the repeated events
// (predictable exactly from the event one bar earlier) at T and 2T events.
// It writes results.csv, results.json, table.md and repeats.png under
// runs/times/<preset>/.
//
//	go run ./experiments/times                  # quick preset (one seed)
//	go run ./experiments/times -preset full     # 3 seeds, longer training
//	go run ./experiments/times -render          # rewrite tables and plot from saved results
//
// -encodings ("rope,rope@time,fire@time@fire-mlp-width=16"), -seeds and
// -steps change the plan (its output directory becomes
// runs/times/<preset>-custom). -jobs lists the models (one per line), -job
// N trains and evaluates model N only (for a Slurm array), -render merges
// what is done. An interrupted study (Ctrl-C saves the current checkpoint)
// resumes when run again. Bad flags (among them an encoding asked for time
// positions that it does not serve) exit with status 2 before anything
// runs, a failed run with 1, an interrupted one with 130.
package main

import (
	"io"
	"os"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/timestudy"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("times", "time study", timestudy.PresetNames(),
		"encodings with index positions, or with time positions (rope@time), or variants (name[@time]@key=value)", "runs/times/<preset>", stdout, stderr)
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := timestudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	custom, err := c.Override(&p.Encodings, &p.Seeds, &p.Base.Steps)
	if err != nil {
		return c.Usage(err)
	}
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	jobs, _ := p.Jobs()
	opt := c.RunOptions(timestudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, timestudy.FileTable, timestudy.Run, timestudy.RunJob, timestudy.Render)
}
