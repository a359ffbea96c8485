#!/usr/bin/env bash
# setup-notebooks.sh installs what the notebooks in notebooks/ need, on a
# Debian machine with Go (1.26) installed, and registers the Go kernel:
#
#   - Jupyter from Debian's packages: jupyter-nbconvert, python3-nbclient,
#     python3-ipykernel (Debian's /usr/bin/jupyter and /usr/bin/python3);
#   - GoNB, the Go kernel (github.com/janpfeifer/gonb), at GONB_VERSION;
#   - goimports (golang.org/x/tools/cmd/goimports), which GoNB runs on every
#     cell, at TOOLS_VERSION (both pinned in scripts/notebook-versions.sh);
#   - the kernel "gonb" (gonb --install), with the Go binaries' directories
#     put on the kernel's PATH so it also works from a shell without them.
#
# Why GoNB and not gophernotes: gophernotes v0.7.5, the newest release, panics
# at start on Go 1.26 (its gomacro interpreter cannot load packages that use
# generics or type aliases), so it cannot import Gorgonia. GoNB compiles each
# cell with the real Go toolchain.
#
# Idempotent: what is already installed at the pinned version is left alone.
# Run as root (or with sudo available for the apt step). The Go tools go to
# $(go env GOBIN), or $(go env GOPATH)/bin.
#
# Usage: scripts/setup-notebooks.sh [--ui]
#
#   --ui  also install Debian's jupyter-notebook, to open the notebooks in a
#         browser with `jupyter notebook notebooks/` (CI needs only nbconvert)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=notebook-versions.sh
source "$here/notebook-versions.sh" # GONB_VERSION, TOOLS_VERSION
APT_PACKAGES=(jupyter-nbconvert python3-nbclient python3-ipykernel)
case "${1:-}" in
"") ;;
--ui) APT_PACKAGES+=(jupyter-notebook) ;;
*) echo "usage: $0 [--ui]" >&2; exit 2 ;;
esac

log() { printf 'setup-notebooks: %s\n' "$*"; }

command -v go >/dev/null || { log "go is not on PATH (install Go 1.26 first)"; exit 1; }

# 1. Jupyter from Debian.
source "$(dirname "$0")/lib/apt.sh"
apt_install_missing "${APT_PACKAGES[@]}"

# 2. GoNB and goimports at pinned versions.
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

# installed_version BINARY MODULE prints the version of MODULE that BINARY
# was built from, or nothing.
installed_version() {
	[ -x "$gobin/$1" ] || return 0
	go version -m "$gobin/$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3 }'
}

# go_install PACKAGE VERSION installs PACKAGE at VERSION of its module.
# It resolves the version in a scratch module: `go install pkg@version`
# asks the proxy for the module's version list (to check deprecation),
# which the proxy reachable here refuses.
go_install() {
	local tmp
	tmp=$(mktemp -d)
	(
		cd "$tmp"
		export GOFLAGS=-mod=mod
		go mod init notebook-tools >/dev/null 2>&1
		go get "$1@$2" >/dev/null
		GOBIN="$gobin" go install "$1"
	)
	rm -rf "$tmp"
}

if [ "$(installed_version gonb github.com/janpfeifer/gonb)" != "$GONB_VERSION" ]; then
	log "installing gonb $GONB_VERSION"
	go_install github.com/janpfeifer/gonb "$GONB_VERSION"
else
	log "gonb $GONB_VERSION present"
fi
if [ "$(installed_version goimports golang.org/x/tools)" != "$TOOLS_VERSION" ]; then
	log "installing goimports (golang.org/x/tools $TOOLS_VERSION)"
	go_install golang.org/x/tools/cmd/goimports "$TOOLS_VERSION"
else
	log "goimports ($TOOLS_VERSION) present"
fi

# 3. The kernel. --force_deps: gopls (completion in an interactive
# notebook) is optional and not installed.
(cd /tmp && "$gobin/gonb" --install --force_deps >/dev/null 2>&1)
spec=$(/usr/bin/python3 -c 'import jupyter_core.paths as p, os; print(os.path.join(p.jupyter_data_dir(), "kernels", "gonb", "kernel.json"))')
[ -f "$spec" ] || { log "gonb --install wrote no kernel spec at $spec"; exit 1; }
goroot_bin="$(go env GOROOT)/bin"
/usr/bin/python3 - "$spec" "$gobin:$goroot_bin" <<'EOF'
import json, sys
path, dirs = sys.argv[1], sys.argv[2]
with open(path) as f:
    spec = json.load(f)
# jupyter_client substitutes ${PATH} from the launching environment.
spec.setdefault("env", {})["PATH"] = dirs + ":${PATH}"
with open(path, "w") as f:
    json.dump(spec, f, indent=1)
EOF
log "kernel gonb registered: $spec"
/usr/bin/jupyter --version | sed -n 's/^\(nbconvert\|nbclient\|jupyter_client\|ipykernel\) *: /  \1 /p'
log "done"
