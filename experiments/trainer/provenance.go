package trainer

import (
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/rpe-go/rpe/graph"
)

// ProvenanceInfo records what produced a result: the BLAS of the graph kernels
// (graph.BLASName()), the Go version, and the git revision of the working
// tree with whether it had uncommitted changes.
type ProvenanceInfo struct {
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	// GitRev is the commit hash of HEAD, "unknown" outside a git checkout
	// (or without git); Dirty reports uncommitted changes
	// (`git status --porcelain` non-empty), false if unknown.
	GitRev string `json:"git_rev"`
	Dirty  bool   `json:"dirty"`
}

var (
	provOnce sync.Once
	prov     ProvenanceInfo
)

// Provenance returns the provenance of this process, computed once (it runs
// git in the current directory).
func Provenance() ProvenanceInfo {
	provOnce.Do(func() {
		prov = ProvenanceInfo{BLAS: graph.BLASName(), GoVersion: runtime.Version(), GitRev: "unknown"}
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return
		}
		prov.GitRev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain").Output(); err == nil {
			prov.Dirty = len(strings.TrimSpace(string(st))) > 0
		}
	})
	return prov
}

// String is "BLAS ..., go1.x, git <rev>[-dirty]".
func (p ProvenanceInfo) String() string {
	rev := p.GitRev
	if p.Dirty {
		rev += " (dirty)"
	}
	return "BLAS " + p.BLAS + ", " + p.GoVersion + ", git " + rev
}
