// Command cope runs the CoPE tasks study (issue #33, point 5): the
// selective copy and counting tasks of Golovneva et al. 2024, "Contextual
// Position Encoding: Learning to Count What's Important" (arXiv
// 2405.18719), on which the paper claims that positions counting content
// (CoPE's gates) succeed where positions counting tokens fail. A causal
// language model is trained once per task, encoding and seed (cope, rope,
// alibi, none), with the loss on the answer tokens only, and scored on
// held-out sequences of the training distribution and of conditions with
// more (and, for copy, fewer) blanks or passes than training: the accuracy
// and bits per answer token. It writes results.csv, results.json,
// table.md and accuracy.png under runs/cope/<preset>/.
//
//	go run ./experiments/cope                  # quick preset (one seed)
//	go run ./experiments/cope -preset full     # 3 seeds, longer training
//	go run ./experiments/cope -render          # rewrite tables and plot from saved results
//
// -encodings ("cope,rope,cope@cope-npos=32"), -tasks (copy or count),
// -seeds and -steps change the plan (its output directory becomes runs/cope/<preset>-custom). -jobs
// lists the models (one per line, "<task>-<encoding>-seed<s>"), -job N
// trains and evaluates model N only (for a Slurm array), -render merges
// what is done, -redo copy-rope retrains one task's encoding. An
// interrupted study (Ctrl-C saves the current checkpoint) resumes when run
// again. Bad flags exit with status 2 before anything runs, a failed run
// with 1, an interrupted one with 130.
package main

import (
	"io"
	"os"

	"github.com/rpe-go/rpe/experiments/copestudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("cope", "CoPE tasks study", copestudy.PresetNames(),
		"encodings or variants (name@key=value)", "runs/cope/<preset>", stdout, stderr)
	tasks := c.FlagSet.String("tasks", "", "comma-separated tasks to run instead of both (copy, count)")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := copestudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	custom, err := c.Override(&p.Encodings, &p.Seeds, &p.Base.Steps)
	if err != nil {
		return c.Usage(err)
	}
	if *tasks != "" {
		if p.Tasks, err = copestudy.SelectTasks(p.Tasks, *tasks); err != nil {
			return c.Usage(err)
		}
		custom = true
	}
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	jobs, _ := p.Jobs()
	opt := c.RunOptions(copestudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, copestudy.FileTable, copestudy.Run, copestudy.RunJob, copestudy.Render)
}
