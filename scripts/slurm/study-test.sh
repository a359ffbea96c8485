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
# (every field but timings and memory must be equal). The cluster is brought
# down and the temporary directory removed on every exit, failure included.
#
# Exit status: 0 passed, or skipped with a line `SKIP: <reason>` where Slurm
# cannot run here (not root; Slurm missing and not installable); 1 failed.
#
# Environment: STEPS; RPE_SLURM_DIR and RPE_SLURM_*_PORT as for cluster.sh.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cluster="$here/cluster.sh"
submit="$here/submit.sh"
steps="${STEPS:-5}"
t0=$SECONDS
log() { printf 'study-test: %s\n' "$*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
	echo "SKIP: not root: a one-node Slurm test cluster needs root to start munged and slurmd"
	exit 0
fi

work="$(mktemp -d /tmp/rpe-slurm-study.XXXXXX)"
started=0
status=1
cleanup() {
	trap - EXIT INT TERM
	if ((status != 0)); then
		log "FAILED; logs follow"
		local f
		for f in "${RPE_SLURM_DIR:-/tmp/rpe-slurm}"/log/*.log "$work"/slurm/logs/*.log "$work"/*.log; do
			[[ -f "$f" ]] || continue
			printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
			tail -n 30 "$f" >&2
		done
	fi
	if ((started)); then
		"$cluster" down || status=1
	fi
	rm -rf "$work"
	((status == 0)) && log "PASS ($((SECONDS - t0)) s)"
	exit "$status"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 1' INT TERM
fail() {
	log "FAIL: $*"
	exit 1
}

cd "$root" || fail "no repository at $root"
bin="$work/extrapolation"
go build -o "$bin" ./experiments/extrapolation || fail "go build"
args=(-preset quick -steps "$steps")

log "single process: ${args[*]}"
"$bin" "${args[@]}" -out "$work/single" >"$work/single.log" 2>&1 || fail "the single-process run failed (see single.log)"

"$cluster" up >/dev/null 2>"$work/up.log"
rc=$?
if ((rc == 3)); then
	status=0
	echo "SKIP: Slurm cannot run on this machine: $(grep '^cluster.sh:' "$work/up.log" | tail -n 1 | sed 's/^cluster.sh: //')"
	exit 0
fi
((rc == 0)) || fail "cluster.sh up exited $rc"
started=1
eval "$("$cluster" env)"
njobs=$("$bin" "${args[@]}" -jobs | wc -l)
log "cluster up; submitting $njobs jobs as an array"

"$submit" --timeout 900 "$work/slurm" "$bin" "${args[@]}" -out "$work/slurm" >"$work/submit.log" 2>&1 ||
	fail "submit.sh failed (see submit.log)"
"$bin" -out "$work/slurm" -compare "$work/single" || fail "the cluster's rows differ from the single process's"

# A lost job: its results are deleted; resubmitting the whole array reruns
# only that job (the others find their work done), and the rows still agree.
lost=$("$bin" "${args[@]}" -jobs | sed -n 2p | cut -d' ' -f2)
rm -rf "$work/slurm/models/$lost" "$work/slurm/results/$lost.json"
"$submit" --timeout 900 "$work/slurm" "$bin" "${args[@]}" -out "$work/slurm" >"$work/resubmit.log" 2>&1 ||
	fail "resubmitting failed (see resubmit.log)"
trained=$(grep -h "training(s)" "$work"/slurm/logs/*.log | grep -vc " 0 training(s)")
((trained == njobs + 1)) || fail "after the resubmission $trained jobs trained a model, want $njobs + 1 (only the lost one again)"
"$bin" -out "$work/slurm" -compare "$work/single" || fail "after the resubmission the rows differ"
status=0
