// Command code runs the code study of issue #14: a byte-level causal
// language model on Go source (GOROOT/src, split by package into train,
// validation and test) trained once per position encoding — none, the 1-D
// t5, alibi and rope, the tree-relative bias over Go syntax trees ("tree")
// and the tree bias combined with a 1-D encoding ("tree+rope",
// "tree+alibi"); same seed, same batches — and scored in bits per byte on
// held-out packages at 1×, 2× and 4× the training length. It writes
// results.csv, results.json, table.md and bpb.png under
// runs/code/<preset>/. Files that do not parse are skipped and counted (in
// the log and the outputs).
//
//	go run ./experiments/code                  # quick preset (minutes on 2 cores)
//	go run ./experiments/code -preset full     # 3 seeds, longer training
//	go run ./experiments/code -render          # rewrite tables and plot from saved results
//
// -encodings, -seeds and -steps change the plan (its output directory
// becomes runs/code/<preset>-custom); -src DIR reads the Go sources under
// DIR instead of $(go env GOROOT)/src. -jobs lists the models (one per
// line), -job N trains and evaluates model N only (for a Slurm array),
// -render merges what is done. An interrupted study (Ctrl-C saves the
// current checkpoint) resumes when run again. Bad flags exit with status 2
// before anything runs, a failed run (a -src directory without Go files
// among others) with 1, an interrupted one with 130.
package main

import (
	"io"
	"os"

	"github.com/rpe-go/rpe/experiments/codestudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("code", "code study", codestudy.PresetNames(),
		"encodings, combinations (tree+rope) or variants (name@key=value)", "runs/code/<preset>", stdout, stderr)
	src := c.FlagSet.String("src", "", "directory of Go sources (default $(go env GOROOT)/src)")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := codestudy.Preset(c.Preset)
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
	p.Src = *src
	opt := c.RunOptions(codestudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, codestudy.FileTable, codestudy.Run, codestudy.RunJob, codestudy.Render)
}
