#!/usr/bin/env bash
# study-test.sh: the extrapolation study on a real (one-node) Slurm cluster,
# compared with a single-process run of the same plan.
#
#   scripts/slurm/study-test.sh            # about 2 minutes on 2 cores
#
# It builds the extrapolation command once, runs the quick preset with
# STEPS updates (default 5) in one process, then brings up the one-node
# cluster (cluster.sh up), runs the same plan as a job array through
# submit.sh (one task per study job, each writing its own files into the
# shared output directory, then -render), kills one finished job's results
# and resubmits the array to check that only that job runs again, and
# finally compares the two result sets with `extrapolation -compare`
# (every field but timings and memory must be equal). Then every study of
# trained models (vision, graphs, code, times, stability, cope) runs a tiny plan
# the same two ways, compared with its own -compare (results.csv, every
# column but timings, memory and revision). The cluster is brought
# down and the temporary directory removed on every exit, failure included.
#
# Exit status: 0 passed, or skipped with a line `SKIP: <reason>` where Slurm
# cannot run here (not root; Slurm missing and not installable); 1 failed.
#
# Environment: STEPS; RPE_SLURM_DIR and RPE_SLURM_*_PORT as for cluster.sh.
set -uo pipefail

name=study-test
logs='slurm/logs/*.log *-slurm/logs/*.log *.log'
# shellcheck source=testlib.sh
source "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
root="$(cd "$here/../.." && pwd)"
steps="${STEPS:-5}"

cd "$root" || fail "no repository at $root"
bin="$work/extrapolation"
go build -buildvcs=auto -o "$bin" ./experiments/extrapolation || fail "go build"
args=(-preset quick -steps "$steps")

log "single process: ${args[*]}"
"$bin" "${args[@]}" -out "$work/single" >"$work/single.log" 2>&1 || fail "the single-process run failed (see single.log)"

cluster_up
njobs=$("$bin" "${args[@]}" -jobs | wc -l)
log "submitting $njobs jobs as an array"

"$submit" --timeout 900 "$work/slurm" "$bin" "${args[@]}" -out "$work/slurm" >"$work/submit.log" 2>&1 ||
	fail "submit.sh failed (see submit.log)"
"$bin" -out "$work/slurm" -compare "$work/single" || fail "the cluster's rows differ from the single process's"

# A lost job: its results are deleted; resubmitting the whole array reruns
# only that job (the others find their work done), and the rows still agree.
lost=$("$bin" "${args[@]}" -jobs | sed -n 2p | cut -d' ' -f2)
rm -rf "$work/slurm/models/$lost" "$work/slurm/results/$lost.json"
"$submit" --timeout 900 "$work/slurm" "$bin" "${args[@]}" -out "$work/slurm" >"$work/resubmit.log" 2>&1 ||
	fail "resubmitting failed (see resubmit.log)"
trained=$(grep -h "^job [0-9]* done: " "$work"/slurm/logs/*.log | grep -vc " 0 models trained")
((trained == njobs + 1)) || fail "after the resubmission $trained jobs trained a model, want $njobs + 1 (only the lost one again)"
"$bin" -out "$work/slurm" -compare "$work/single" || fail "after the resubmission the rows differ"

# Every study of trained models: a tiny plan in one process and as an array.
declare -A plans=(
	[vision]="-encodings none,rope-2d -steps $steps -test-images 40"
	[graphs]="-encodings none,graphormer-spatial -steps $steps"
	[code]="-encodings none,tree -steps $steps"
	[times]="-encodings rope,rope@time -steps $steps"
	[stability]="-encodings t5 -seeds 1 -steps $steps"
	[cope]="-encodings cope,none -tasks copy -steps $steps"
)
for s in vision graphs code times stability cope; do
	sbin="$work/$s"
	go build -buildvcs=auto -o "$sbin" "./experiments/$s" || fail "go build $s"
	read -r -a sargs <<<"${plans[$s]}"
	log "$s: single process, then as an array: ${sargs[*]}"
	"$sbin" "${sargs[@]}" -out "$work/$s-single" >"$work/$s-single.log" 2>&1 || fail "$s: the single-process run failed (see $s-single.log)"
	"$submit" --timeout 900 "$work/$s-slurm" "$sbin" "${sargs[@]}" -out "$work/$s-slurm" >"$work/$s-submit.log" 2>&1 ||
		fail "$s: submit.sh failed (see $s-submit.log)"
	"$sbin" "${sargs[@]}" -out "$work/$s-slurm" -compare "$work/$s-single" || fail "$s: the cluster's rows differ from the single process's"
done
status=0
