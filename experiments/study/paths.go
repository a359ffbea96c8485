package study

import (
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// CheckOut checks the output directory of a study command before any data
// is loaded, so that a bad -out fails at once with an error naming it:
// for a run (render false) files must be creatable in dir (trainer.CheckDir,
// which leaves nothing behind); for -render, dir must be an existing
// directory (a mistyped -out would otherwise render empty tables and report
// success; an existing directory with no results yet renders every model
// as not yet run).
func CheckOut(dir string, render bool) error {
	if !render {
		return errors.WithMessage(trainer.CheckDir(dir), "-out")
	}
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return errors.Errorf("-render: %s does not exist, so there is nothing to render; run the study first (without -render), or give the -out it wrote", abs(dir))
	case err != nil:
		return errors.Wrap(err, "-render")
	case !st.IsDir():
		return errors.Errorf("-render: %s is a file, not a study's output directory", abs(dir))
	}
	return nil
}

// abs is path made absolute, for messages read by a user who may not know
// the command's working directory; path itself if that fails.
func abs(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
