#!/usr/bin/env bash
# test.sh runs every test of the project, as CI does:
#   1. go vet and gofmt;
#   2. go test ./... (the default build), and again with -tags openblas when
#      OpenBLAS is installed (Debian: libopenblas-dev; CI installs it) and
#      with -tags purego (no C at all);
#   3. the notebooks: installs what they need (scripts/setup-notebooks.sh:
#      Debian's Jupyter, GoNB and goimports at pinned versions; idempotent,
#      needs root for apt) and executes every notebook headless
#      (scripts/run-notebooks.sh).
# Set SKIP_NOTEBOOKS=1 to run only the Go tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go test"
go test -count=1 -timeout 45m ./...
echo "== go test -tags purego (no C)"
go test -count=1 -timeout 20m -tags purego ./graph ./layers ./posenc
if [ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so '; then
	echo "== go test -tags openblas"
	go test -count=1 -timeout 20m -tags openblas ./graph ./layers ./posenc ./experiments/trainer ./bench
else
	echo "== go test -tags openblas skipped: libopenblas-dev is not installed"
fi

if [ "${SKIP_NOTEBOOKS:-0}" = 1 ]; then
	echo "== notebooks skipped (SKIP_NOTEBOOKS=1)"
	exit 0
fi
echo "== notebooks (setup, then execute every notebook headless)"
bash scripts/setup-notebooks.sh
bash scripts/run-notebooks.sh
