// Command finetune runs the fine-tuning study of issue #33
// (experiments/ftstudy): every model of a finished extrapolation study
// (by default the bible preset's, runs/extrapolation/bible: L = 512 on the
// King James Bible) is fine-tuned at a longer length once per entry (the
// encoding itself, or a RoPE scaling from the rope model), scored before
// and after 25, 100 and 400 updates at 2,048, 4,096 and 8,192 bytes, and
// the curves of bits per byte against fine-tuning updates are written as
// results.csv, results.json, table.md and finetune.png under
// runs/finetune/<preset>/.
//
//	go run ./experiments/extrapolation -preset bible   # the source models first
//	go run ./experiments/finetune -preset bible
//	go run ./experiments/finetune                      # quick: from the extrapolation quick preset's models
//	go run ./experiments/finetune -render              # rewrite tables and plot from saved results
//
// -encodings (entries: rope, rope-pi, rope-yarn, alibi, ...), -seeds and
// -steps (the length of each fine-tuning; the kept steps below it stay)
// change the plan (its output directory becomes runs/finetune/<preset>-custom);
// -from DIR reads the source models of another output directory of the
// same extrapolation preset. -jobs lists the fine-tunings, -job N runs one
// (a Slurm array), -render merges what is done. An interrupted study
// resumes when run again. A source model that is missing or not trained
// to its end is an error naming the command that trains it; with
// -train-sources a missing one is trained into <out>/sources/ (a fresh
// clone has the length study's rows but not its checkpoints). Bad flags exit
// with status 2, a failed run with 1, an interrupted one with 130.
package main

import (
	"io"
	"os"

	"github.com/rpe-go/rpe/experiments/ftstudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("finetune", "fine-tuning study", ftstudy.PresetNames(),
		"fine-tuned encodings (a trained encoding of the source study, or a RoPE scaling fine-tuned from its rope model)", "runs/finetune/<preset>", stdout, stderr)
	from := c.FlagSet.String("from", "", "output directory of the source extrapolation study (default: its preset's, runs/extrapolation/<source preset>)")
	trainSources := c.FlagSet.Bool("train-sources", false, "train a source model that -from lacks (the source preset's configuration and seed: the same model on the same build) into <out>/sources/ instead of refusing the job")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := ftstudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	last := p.LastStep()
	custom, err := c.Override(&p.Entries, &p.Seeds, &last)
	if err != nil {
		return c.Usage(err)
	}
	if last != p.LastStep() {
		var steps []int
		for _, s := range p.Steps {
			if s < last {
				steps = append(steps, s)
			}
		}
		p.Steps = append(steps, last)
	}
	if *from != "" {
		p.From = *from
	}
	p.TrainSources = *trainSources
	if custom {
		p.Preset += "-custom"
		p.Reduced = ftstudy.DescribeReductions(p)
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	opt := c.RunOptions(ftstudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(p.Jobs()), opt, ftstudy.FileTable, ftstudy.Run, ftstudy.RunJob, ftstudy.Render)
}
