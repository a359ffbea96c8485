package trainer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/rpe-go/rpe/graph"
)

// ProvenanceInfo records what produced a result: the BLAS of the graph kernels
// (graph.BLASName()), the Go version, and the git revision of the code with
// whether it had uncommitted changes.
type ProvenanceInfo struct {
	BLAS      string `json:"blas"`
	GoVersion string `json:"go_version"`
	// GitRev is the commit the code was built from, "unknown" if neither
	// the binary nor the working directory says, "unstamped" for a binary
	// built without a VCS stamp that is not a `go run` or `go test` build
	// (its checkout may have moved since); Dirty reports uncommitted
	// changes, false if unknown. See Provenance for where they come from.
	GitRev string `json:"git_rev"`
	Dirty  bool   `json:"dirty"`
	// Machine is the OS and architecture, the CPUs the process may use and
	// the CPU model ("linux/amd64, 2 CPUs, AMD EPYC 7B13").
	Machine string `json:"machine,omitempty"`
}

var (
	provOnce sync.Once
	prov     ProvenanceInfo
)

// Provenance returns the provenance of this process, computed once. The
// revision is the one the Go toolchain stamped into the binary
// (`go build` in a checkout: vcs.revision and vcs.modified), which stays
// right however the checkout moves while the binary runs; without a stamp
// (`go run`, `go test`, or GOFLAGS=-buildvcs=false, as on this project's
// machines) a `go run` or `go test` binary (one in the build cache's
// temporary go-build directory, built just before it runs) takes the HEAD
// of the checkout the source was compiled from (`git -C <source dir>
// rev-parse HEAD`, `git status --porcelain`; the source directory is the
// one this file was compiled from, so a command run from any working
// directory names the project's revision, not that of the directory it
// runs in). Any other unstamped binary records "unstamped": the checkout's
// HEAD when it runs need not be the one it was built from (a binary built
// with `go build -o` and run after later commits would name them). Build
// long-lived binaries with `go build -buildvcs=true`.
func Provenance() ProvenanceInfo {
	provOnce.Do(func() {
		var settings []debug.BuildSetting
		if bi, ok := debug.ReadBuildInfo(); ok {
			settings = bi.Settings
		}
		prov = provenanceFrom(settings, workingTreeRev, transientBinary())
	})
	return prov
}

// provenanceFrom is Provenance from the binary's build settings, falling
// back to gitRev (the working directory's revision) without vcs.revision
// if the binary is transient (built by go run or go test), else to
// "unstamped".
func provenanceFrom(settings []debug.BuildSetting, gitRev func() (rev string, dirty, ok bool), transient bool) ProvenanceInfo {
	p := ProvenanceInfo{BLAS: graph.BLASName(), GoVersion: runtime.Version(), GitRev: "unknown", Machine: machine()}
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			p.GitRev = s.Value
		case "vcs.modified":
			p.Dirty = s.Value == "true"
		}
	}
	if p.GitRev != "unknown" {
		return p
	}
	if !transient {
		p.GitRev = "unstamped"
		return p
	}
	if rev, dirty, ok := gitRev(); ok {
		p.GitRev, p.Dirty = rev, dirty
	}
	return p
}

// transientBinary reports whether this executable was built by go run or
// go test: it lives in a go-build directory of the build cache's temporary
// space.
func transientBinary() bool {
	exe, err := os.Executable()
	return err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build")
}

// machine describes this machine: GOOS/GOARCH, the CPUs this process may
// use and the CPU model of /proc/cpuinfo (left out where there is none).
func machine() string {
	m := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return m + ", " + strings.TrimSpace(v)
			}
		}
	}
	return m
}

// workingTreeRev is the HEAD of the checkout of this source file and whether
// it has uncommitted changes; ok is false if the source is not in a git
// checkout (a -trimpath build, a module cache copy) or git is missing.
func workingTreeRev() (rev string, dirty, ok bool) {
	_, file, _, found := runtime.Caller(0)
	if !found || !filepath.IsAbs(file) {
		return "", false, false
	}
	dir := filepath.Dir(file)
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, false
	}
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); err == nil {
		dirty = len(strings.TrimSpace(string(st))) > 0
	}
	return strings.TrimSpace(string(out)), dirty, true
}

// String is "BLAS ..., go1.x, git <rev>[-dirty]".
func (p ProvenanceInfo) String() string {
	rev := p.GitRev
	if p.Dirty {
		rev += " (dirty)"
	}
	out := "BLAS " + p.BLAS + ", " + p.GoVersion + ", git " + rev
	if p.Machine != "" {
		out += "; " + p.Machine
	}
	return out
}
