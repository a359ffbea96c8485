// Command summary derives, from the committed per-seed rows of every study
// (results/<study>/<preset>/results.csv), the mean of each study's metric
// over seeds with its 95% interval and the paired comparisons a reading
// makes (the best encoding against the runner-up and against none, on the
// same seeds), and writes them to results/summary/summary.md and
// summary.csv. With -check it writes nothing and fails if the committed
// files differ from what the CSVs give, so that a summary figure cannot
// drift from its rows (the test suite runs it).
//
//	go run ./experiments/summary          # rewrite results/summary/
//	go run ./experiments/summary -check   # exit 1 if they are stale
//
// The statistics are those of package stats: Student-t intervals over
// seeds, paired by seed; "beats" only when the interval of the
// difference excludes zero.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

func main() {
	root := flag.String("root", ".", "the repository root (holding results/)")
	check := flag.Bool("check", false, "write nothing; exit 1 if results/summary/ differs from what the committed CSVs give")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	md, csv, err := Build(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "results", "summary")
	files := map[string][]byte{"summary.md": md, "summary.csv": csv}
	if check {
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return errors.Wrapf(err, "check (run go run ./experiments/summary)")
			}
			if !bytes.Equal(got, want) {
				return errors.Errorf("results/summary/%s differs from what the committed results give: run go run ./experiments/summary", name)
			}
		}
		fmt.Println("summary: results/summary/ agrees with the committed results")
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	fmt.Printf("summary: wrote %s (summary.md, summary.csv)\n", dir)
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
