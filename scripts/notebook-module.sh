#!/usr/bin/env bash
# notebook-module.sh prepares the scratch Go module in which GoNB compiles a
# notebook's cells. The first cell of every notebook runs it there:
#
#   !*bash "$GONB_DIR/../scripts/notebook-module.sh"
#
# (`!*` runs a shell command in GoNB's temporary module directory; GONB_DIR
# is the directory the kernel started in, the notebook's.) It makes this
# repository's packages importable (a replace directive to the checkout this
# script is in, found from the script's own path, so any clone location
# works), pins GoNB's UI package at the kernel's version and Gorgonia's go4
# dependency, and records what the notebooks import, so that the cells can
# run with GoNB's per-cell `go get` turned off (%noautoget; it costs a
# round trip to the module proxy per cell). A cell that imports a module
# outside this set needs `!*go get MODULE@VERSION` first.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=notebook-versions.sh
source "$here/notebook-versions.sh"
root=$(cd "$here/.." && pwd)
[ -f go.mod ] || { echo "notebook-module.sh: run it in GoNB's module directory (with !*)" >&2; exit 1; }

go mod edit -replace "github.com/rpe-go/rpe=$root" \
	-require github.com/rpe-go/rpe@v0.0.0 \
	-require "github.com/janpfeifer/gonb@$GONB_VERSION" \
	-require "go4.org/unsafe/assume-no-moving-gc@$GO4_VERSION"
# Record what the notebooks import in go.mod and go.sum: a throwaway file
# importing the packages, resolved by a plain `go get` as GoNB itself does.
# (`go get PACKAGE` would also ask the proxy whether PACKAGE's path is a
# module of its own, which the proxy reachable here refuses.)
deps=zz_notebook_deps.go
trap 'rm -f "$deps"' EXIT
cat >"$deps" <<'GO'
package main

import (
	_ "github.com/janpfeifer/gonb/gonbui"
	_ "github.com/rpe-go/rpe/experiments/trainer"
	_ "github.com/rpe-go/rpe/experiments/viz"
	_ "github.com/rpe-go/rpe/layers"
)
GO
if ! out=$(GOFLAGS=-mod=mod go get 2>&1); then
	printf '%s\n' "$out" >&2
	exit 1
fi
