// Command graphs runs the graph study of issue #14: a small graph
// Transformer trained once per position encoding (none, the Laplacian
// eigenvector input, Graphormer's spatial bias, spatial bias plus
// centrality; same seed, same batches) on a task where the answer depends
// on the graph's structure and not on node order (per node, its
// shortest-path distance to a marked node, in randomly shuffled
// Erdős–Rényi graphs of 8-24 nodes), tested on held-out graphs of the
// training sizes and on larger graphs (32-48 nodes). It writes
// results.csv, results.json, table.md and accuracy.png under
// runs/graphs/<preset>/.
//
//	go run ./experiments/graphs                  # quick preset (minutes on 2 cores)
//	go run ./experiments/graphs -preset full     # 3 seeds, longer training
//	go run ./experiments/graphs -render          # rewrite tables and plots from saved results
//	go run ./experiments/graphs -preset molecules  # TPSA regression on real molecules (needs rdkit-data)
//
// -unreachable mask blocks attention between the components of a graph
// (Graphormer's collator) instead of the default learned bucket.
// -encodings, -seeds and -steps change the plan (its output directory
// becomes runs/graphs/<preset>-custom). -jobs lists the models (one per
// line), -job N trains and evaluates model N only (for a Slurm array),
// -render merges what is done. An interrupted study (Ctrl-C saves the
// current checkpoint) resumes when run again. Bad flags exit with status 2
// before anything runs, a failed run with 1, an interrupted one with 130.
package main

import (
	"io"
	"os"

	"github.com/rpe-go/rpe/experiments/graphstudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("graphs", "graph study", graphstudy.PresetNames(),
		"encodings or variants (name@key=value; \"laplacian\" for the Laplacian input)", "runs/graphs/<preset>", stdout, stderr)
	unreachable := c.FlagSet.String("unreachable", graphstudy.UnreachableBucket,
		"pairs of nodes in different components (salts): bucket (the spatial bias's learned unreachable row, attention allowed) or mask (attention blocked, Graphormer's collator)")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := graphstudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	custom, err := c.Override(&p.Encodings, &p.Seeds, &p.Base.Steps)
	if err != nil {
		return c.Usage(err)
	}
	if *unreachable != graphstudy.UnreachableBucket {
		p.Unreachable, custom = *unreachable, true
	}
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	jobs, _ := p.Jobs()
	opt := c.RunOptions(graphstudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, graphstudy.FileTable, graphstudy.Run, graphstudy.RunJob, graphstudy.Render)
}
