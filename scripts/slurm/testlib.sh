# testlib.sh: the harness shared by selftest.sh and study-test.sh, sourced
# after they set `name` (the prefix of their messages) and `logs` (extra log
# file globs, relative to $work, printed on failure).
#
# It skips (prints `SKIP: <reason>`, exits 0) when not root; makes $work, a
# temporary directory removed on exit; on failure prints the daemons' and the
# given logs; brings the cluster down on exit if it brought it up; prints
# PASS with the time. Tests set status=0 when they pass and call fail MSG
# otherwise. cluster_up brings the cluster up (or uses one already running,
# and leaves it running), skipping where Slurm cannot run here.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cluster="$here/cluster.sh"
submit="$here/submit.sh"
t0=$SECONDS
log() { printf '%s: %s\n' "$name" "$*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
	echo "SKIP: not root: a one-node Slurm test cluster needs root to start munged and slurmd"
	exit 0
fi

work="$(mktemp -d "/tmp/rpe-slurm-$name.XXXXXX")"
logs_abs=()
started=0
status=1
cleanup() {
	trap - EXIT INT TERM
	if ((status != 0)); then
		log "FAILED; logs follow"
		local f
		local g
		for g in $logs; do # each glob of $logs, expanded under $work below
			logs_abs+=("$work/$g")
		done
		# shellcheck disable=SC2068 # the globs must expand
		for f in "${RPE_SLURM_DIR:-/tmp/rpe-slurm}"/log/*.log ${logs_abs[@]}; do
			[[ -f "$f" ]] || continue
			printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
			tail -n 30 "$f" >&2
		done
	fi
	if ((started)); then
		"$cluster" down || status=1
	fi
	rm -rf "$work"
	if ((status == 0)); then
		log "PASS ($((SECONDS - t0)) s)"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 1' INT TERM

fail() {
	log "FAIL: $*"
	exit 1
}

# cluster_up brings the cluster up unless one is running (preexisting=1
# then), exports SLURM_CONF, and skips the test where Slurm cannot run.
cluster_up() {
	if "$cluster" status >/dev/null 2>&1; then
		log "a cluster is already running; using it and leaving it running"
		preexisting=1
	else
		preexisting=0
		started=1
		"$cluster" up >/dev/null 2>"$work/up.err"
		local rc=$?
		cat "$work/up.err" >&2
		if ((rc == 3)); then
			started=0
			status=0
			echo "SKIP: Slurm cannot run on this machine: $(grep '^cluster.sh:' "$work/up.err" | tail -n 1 | sed 's/^cluster.sh: //')"
			exit 0
		fi
		((rc == 0)) || fail "cluster.sh up exited $rc"
	fi
	eval "$("$cluster" env)"
	log "cluster up after $((SECONDS - t0)) s"
}
