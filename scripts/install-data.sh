#!/usr/bin/env bash
# Installs the Debian packages that hold the studies' real data (as root, or
# with sudo), and prints where each one is. Idempotent: a package already
# installed is left alone. Nothing is downloaded at run time by the studies
# themselves; this script is the one place that installs their data.
#
#   bible-kjv               the King James Bible: `bible -f Gen1:1-Rev22:21`
#                           (corpus "kjv" of experiments/corpora)
#   dataset-fashion-mnist   /usr/share/datasets/fashion-mnist/*.gz (IDX)
#   rdkit-data              /usr/share/RDKit/Data/NCI/first_5k.tpsa.csv
#
# Usage: scripts/install-data.sh [PACKAGE ...]   (default: all three)
set -euo pipefail
log() { echo "install-data: $*" >&2; }
pkgs=("$@")
((${#pkgs[@]})) || pkgs=(bible-kjv dataset-fashion-mnist rdkit-data)
for p in "${pkgs[@]}"; do
	case "$p" in
	bible-kjv | dataset-fashion-mnist | rdkit-data) ;;
	*) log "unknown package $p (want bible-kjv, dataset-fashion-mnist or rdkit-data)"; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib/apt.sh"
apt_install_missing "${pkgs[@]}"
for p in "${pkgs[@]}"; do
	case "$p" in
	bible-kjv) log "bible-kjv $(dpkg-query -W -f='${Version}' bible-kjv): $(command -v bible)" ;;
	dataset-fashion-mnist) log "dataset-fashion-mnist $(dpkg-query -W -f='${Version}' dataset-fashion-mnist): /usr/share/datasets/fashion-mnist" ;;
	rdkit-data) log "rdkit-data $(dpkg-query -W -f='${Version}' rdkit-data): /usr/share/RDKit/Data/NCI/first_5k.tpsa.csv" ;;
	esac
done
