package trainer

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// TestProvenanceFrom: the revision stamped into the binary wins over the
// working directory's (which may have moved since the build); without a
// stamp the working directory's is used; without either it is "unknown".
func TestProvenanceFrom(t *testing.T) {
	tree := func() (string, bool, bool) { return "tree-rev", true, true }
	none := func() (string, bool, bool) { return "", false, false }
	stamped := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "built-rev"}, {Key: "vcs.modified", Value: "false"}}
	for _, c := range []struct {
		name      string
		settings  []debug.BuildSetting
		tree      func() (string, bool, bool)
		transient bool
		rev       string
		dirty     bool
	}{
		{"stamped binary, moved checkout", stamped, tree, false, "built-rev", false},
		{"stamped dirty build", []debug.BuildSetting{{Key: "vcs.revision", Value: "r"}, {Key: "vcs.modified", Value: "true"}}, none, false, "r", true},
		{"go run", nil, tree, true, "tree-rev", true},
		{"unstamped go build -o, run later", nil, tree, false, "unstamped", false},
		{"no git", nil, none, true, "unknown", false},
	} {
		p := provenanceFrom(c.settings, c.tree, c.transient)
		if p.GitRev != c.rev || p.Dirty != c.dirty || p.GoVersion == "" || p.BLAS == "" {
			t.Errorf("%s: %+v, want rev %s dirty %v", c.name, p, c.rev, c.dirty)
		}
	}
}

// TestWorkingTreeRev: without a stamp the revision is that of the checkout
// the source was compiled from, whatever the working directory (it was
// "unknown" when a command ran outside the checkout).
func TestWorkingTreeRev(t *testing.T) {
	want, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v)", err)
	}
	t.Chdir(t.TempDir())
	rev, _, ok := workingTreeRev()
	if !ok || rev != strings.TrimSpace(string(want)) {
		t.Errorf("from %s: revision %q (ok %v), want %s", t.TempDir(), rev, ok, want)
	}
}
