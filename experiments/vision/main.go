// Command vision runs the vision study of issue #13: a small ViT classifier
// trained on MNIST once per position encoding (the 2-D encodings of posenc
// and the 1-D baselines on the raster order of the patches; same seed, same
// batches), tested at the training resolution (28×28 pixels, a 7×7 grid of
// 4×4 patches) and after two resolution changes that grow the grid to
// 14×14: the digit centred on a 56×56 canvas, and the digit upscaled 2×.
// It writes results.csv, results.json, table.md and accuracy.png under
// runs/vision/<preset>/.
//
//	go run ./experiments/vision                  # quick preset (minutes on 2 cores)
//	go run ./experiments/vision -preset full     # 3 seeds, longer training
//	go run ./experiments/vision -preset fashion  # the full preset on Fashion-MNIST
//	go run ./experiments/vision -render          # rewrite tables and plots from saved results
//
// -encodings, -seeds, -steps, -test-images, -patch and -resample change the plan (its output
// directory becomes runs/vision/<preset>-custom). -dataset fashion trains
// and tests on Fashion-MNIST (Debian's dataset-fashion-mnist, in
// /usr/share/datasets/fashion-mnist; scripts/install-data.sh installs it)
// instead of MNIST, under runs/vision/<preset>-fashion; -preset fashion is
// the full preset on it. -mnist DIR reads the dataset's four standard IDX
// files from DIR instead of the copy the GoMNIST module ships (or the
// Debian directory).
// -jobs lists the models (one per line), -job N trains and evaluates model
// N only (for a Slurm array), -render merges what is done. An interrupted
// study (Ctrl-C saves the current checkpoint) resumes when run again. Bad
// flags exit with status 2 before anything runs, a failed run with 1, an
// interrupted one with 130.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/visionstudy"
	"github.com/rpe-go/rpe/posenc"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	c := study.NewCommand("vision", "vision study", visionstudy.PresetNames(), "encodings or variants (name@key=value)",
		"runs/vision/<preset>", stdout, stderr)
	testN := c.FlagSet.Int("test-images", 0, "test images per resolution instead of the preset's (0: all 10,000)")
	patch := c.FlagSet.Int("patch", 0, "patch side in pixels instead of the preset's 4 (must divide the image side)")
	mnist := c.FlagSet.String("mnist", "", "directory of the dataset's four MNIST-format IDX files (default: MNIST from the GoMNIST module's copy, Fashion-MNIST from "+images.FashionMNISTDir+")")
	dataset := c.FlagSet.String("dataset", "", "dataset: "+strings.Join(visionstudy.Datasets(), " or ")+
		" (Fashion-MNIST, from Debian's "+images.FashionMNISTPackage+"); default: the preset's (fashion for -preset fashion, else mnist); a dataset other than the preset's writes runs/vision/<preset>-<dataset>")
	resample := c.FlagSet.String("resample", "", "how learned-2d's table is resampled to a larger test grid instead of the preset's bicubic: "+
		strings.Join(posenc.ResampleModes, ", ")+" (bicubic-aa: timm's default, antialiased)")
	if code := c.Parse(args); code >= 0 {
		return code
	}
	p, err := visionstudy.Preset(c.Preset)
	if err != nil {
		return c.Usage(err)
	}
	if c.Given("dataset") {
		if p, err = visionstudy.WithDataset(p, *dataset); err != nil {
			return c.Usage(fmt.Errorf("-dataset %q: give %s, or leave the flag out for the preset's", *dataset, strings.Join(visionstudy.Datasets(), " or ")))
		}
	}
	custom, err := c.Override(&p.Encodings, &p.Seeds, &p.Base.Steps)
	if err != nil {
		return c.Usage(err)
	}
	if c.Given("test-images") {
		if *testN < 0 {
			return c.Usage(fmt.Errorf("-test-images %d: give a number of images >= 0 (0: all 10,000), or leave the flag out for the preset's", *testN))
		}
		p.TestImages, custom = *testN, true
	}
	if c.Given("resample") {
		if !slices.Contains(posenc.ResampleModes, *resample) {
			return c.Usage(fmt.Errorf("-resample %q: give one of %s, or leave the flag out for the preset's bicubic", *resample, strings.Join(posenc.ResampleModes, ", ")))
		}
		p.Resample, custom = *resample, true
	}
	if c.Given("patch") {
		if *patch < 1 {
			return c.Usage(fmt.Errorf("-patch %d: give a patch side in pixels >= 1 that divides the image side, or leave the flag out for the preset's 4", *patch))
		}
		p.Patch, custom = *patch, true
	}
	if custom {
		p.Preset += "-custom"
	}
	if err := p.Validate(); err != nil {
		return c.Usage(err)
	}
	p.MNIST = *mnist
	jobs, _ := p.Jobs()
	opt := c.RunOptions(visionstudy.DefaultDir(p.Preset))
	return study.ExecuteStudy(c, p.Preset, p, study.KeysOf(jobs), opt, visionstudy.FileTable, visionstudy.Run, visionstudy.RunJob, visionstudy.Render)
}
