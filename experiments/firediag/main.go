// Command firediag diagnoses the fire models of an extrapolation study
// (issue #33: why does fire degrade beyond the training length?): it reads
// each fire model's checkpoint in the study's output directory, prints its
// learned ψ scale c and threshold L and the inputs its MLP sees, and draws
// its score bias against the distance for queries at the training length
// and beyond (fire.png), with the table (fire.md), into -out.
//
//	go run ./experiments/firediag -from runs/extrapolation/full -out results/extrapolation/full/fire
//	go run ./experiments/firediag -from runs/extrapolation/full-custom -models fire@fire-init-l=64-seed1 -out /tmp/fire
//
// Bad flags or a model that is not a fire model exit with status 2.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rpe-go/rpe/experiments/extrapstudy"
	"github.com/rpe-go/rpe/experiments/study"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("firediag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "runs/extrapolation/full", "output directory of the extrapolation study whose fire models are read")
	models := fs.String("models", "fire-seed1,fire-seed2,fire-seed3", "comma-separated model keys (models/<key>/) to read")
	queries := fs.String("queries", "", "comma-separated query positions (default: L, 2L, 4L and 8L minus 1 of the models' training length L)")
	maxDist := fs.Int("max-dist", 0, "largest distance drawn (default: L-1)")
	out := fs.String("out", "", "directory written: fire.png and fire.md (required)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	usage := func(err error) int { fmt.Fprintf(stderr, "firediag: %v\n", err); return 2 }
	if *out == "" || fs.NArg() > 0 {
		return usage(fmt.Errorf("give -out DIR and no arguments"))
	}
	keys := strings.Split(*models, ",")
	probe, err := extrapstudy.FireDiagnose(*from, keys[:1], nil, 0)
	if err != nil {
		return usage(err)
	}
	L := probe[0].TrainLen
	qs := []int{L - 1, 2*L - 1, 4*L - 1, 8*L - 1}
	if *queries != "" {
		qs = nil
		for _, f := range strings.Split(*queries, ",") {
			q, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return usage(fmt.Errorf("-queries: %q is not an integer", f))
			}
			qs = append(qs, q)
		}
	}
	if *maxDist == 0 {
		*maxDist = L - 1
	}
	ms, err := extrapstudy.FireDiagnose(*from, keys, qs, *maxDist)
	if err != nil {
		return usage(err)
	}
	png, err := extrapstudy.FirePlot(ms)
	if err != nil {
		fmt.Fprintln(stderr, "firediag:", err)
		return 1
	}
	report := fmt.Sprintf("# fire models of %s\n\nCommand: `go run ./experiments/firediag %s`\n\n%s", *from, strings.Join(args, " "), extrapstudy.FireReport(ms))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return usage(err)
	}
	for name, b := range map[string][]byte{"fire.png": png, "fire.md": []byte(report)} {
		if err := study.WriteFileAtomic(filepath.Join(*out, name), b); err != nil {
			fmt.Fprintln(stderr, "firediag:", err)
			return 1
		}
	}
	fmt.Fprint(stdout, report)
	return 0
}
