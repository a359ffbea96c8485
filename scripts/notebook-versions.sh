# notebook-versions.sh pins the notebook tooling; sourced by
# setup-notebooks.sh (what it installs) and notebook-module.sh (what each
# notebook's scratch module requires), so the kernel and the UI package a
# notebook links against are always the same version.

# GoNB, the Go Jupyter kernel (github.com/janpfeifer/gonb); its gonbui
# package is what cells display figures with.
GONB_VERSION=v0.11.4
# golang.org/x/tools, for goimports, which GoNB runs on every cell.
TOOLS_VERSION=v0.30.0
# go4.org/unsafe/assume-no-moving-gc, as pinned in go.mod: the version
# Gorgonia's dependencies accept on Go 1.26 without panicking at start.
GO4_VERSION=v0.0.0-20231121144256-b99613f794b6
