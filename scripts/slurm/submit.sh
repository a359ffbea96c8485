#!/usr/bin/env bash
# submit.sh: run a study as a Slurm job array and render it.
#
#   scripts/slurm/submit.sh [options] OUTDIR BINARY [ARGS...]
#
# e.g.
#   go build -buildvcs=auto -o bin/extrapolation ./experiments/extrapolation   # stamps the revision (trainer.Provenance)
#   scripts/slurm/submit.sh runs/x bin/extrapolation -preset quick -steps 20 -out runs/x
#
# 1. `BINARY ARGS -jobs` lists the jobs, one line each, the first field the
#    job number (the count is the number of lines);
# 2. sbatch submits scripts/slurm/study.sbatch as an array with one task per
#    job number (task N runs `BINARY ARGS -job N`), a throttle, and a log per
#    task in OUTDIR/logs/JOBID_N.log;
# 3. squeue is polled until the array has left the queue (or the timeout);
# 4. the tasks that failed (exit status != 0, or killed without one) are
#    listed with their logs;
# 5. `BINARY ARGS -render` merges whatever jobs have finished.
# The ARGS must direct the study's output to OUTDIR themselves (e.g.
# `-out OUTDIR`); OUTDIR is where the logs go. A killed or failed array is
# rerun by running the same command again: the whole array is resubmitted and
# the study skips the jobs that finished.
#
# Options:
#   -t, --throttle N       at most N tasks at once (default: nproc of this machine)
#   -c, --cpus-per-task N  CPUs per task (default 1)
#   --timeout SECONDS      cancel the array and fail after this long (default
#                          $RPE_SLURM_SUBMIT_TIMEOUT, else 0 = no limit)
#   --sbatch-arg ARG       an extra sbatch option, e.g. --sbatch-arg=--partition=cpu
#                          (repeatable; SBATCH_PARTITION, SBATCH_TIMELIMIT, ...
#                          in the environment work as well)
#   --no-render            skip step 5
#
# Environment: SLURM_CONF for a test cluster (scripts/slurm/cluster.sh env);
# RPE_SLURM_POLL poll interval in seconds (default 2).
#
# Exit status: 0 every task and the render succeeded; 1 a task, the render or
# sbatch failed; 2 usage or unusable -jobs output; 124 timeout (array cancelled).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'submit.sh: %s\n' "$*" >&2; }
die() {
	local code="$1"
	shift
	log "$*"
	exit "$code"
}
usage() {
	sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
posint() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

throttle="$(nproc)"
cpus=1
timeout_s="${RPE_SLURM_SUBMIT_TIMEOUT:-0}"
poll="${RPE_SLURM_POLL:-2}"
render=1
extra=()
while (($#)); do
	case "$1" in
	-t | --throttle) (($# >= 2)) || usage; throttle="$2"; shift 2 ;;
	--throttle=*) throttle="${1#*=}"; shift ;;
	-c | --cpus-per-task) (($# >= 2)) || usage; cpus="$2"; shift 2 ;;
	--cpus-per-task=*) cpus="${1#*=}"; shift ;;
	--timeout) (($# >= 2)) || usage; timeout_s="$2"; shift 2 ;;
	--timeout=*) timeout_s="${1#*=}"; shift ;;
	--sbatch-arg) (($# >= 2)) || usage; extra+=("$2"); shift 2 ;;
	--sbatch-arg=*) extra+=("${1#*=}"); shift ;;
	--no-render) render=0; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) log "unknown option $1"; usage ;;
	*) break ;;
	esac
done
(($# >= 2)) || { log "need OUTDIR and BINARY"; usage; }
out="$1"
bin="$2"
shift 2
args=("$@")

posint "$throttle" || die 2 "--throttle $throttle: not a positive integer"
posint "$cpus" || die 2 "--cpus-per-task $cpus: not a positive integer"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die 2 "--timeout $timeout_s: not a number of seconds"
[[ "$poll" =~ ^[0-9]+([.][0-9]+)?$ ]] || die 2 "RPE_SLURM_POLL $poll: not a number of seconds"
command -v sbatch >/dev/null 2>&1 || die 2 "sbatch not found: is Slurm installed (scripts/slurm/cluster.sh up)?"
if [[ "$bin" != */* ]]; then
	bin="$(command -v "$bin")" || die 2 "BINARY $2 not found"
fi
[[ -f "$bin" && -x "$bin" ]] || die 2 "BINARY $bin is not an executable file"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" # tasks may start elsewhere
mkdir -p "$out/logs" || die 1 "cannot create $out/logs"
out="$(cd "$out" && pwd)"
logs="$out/logs"

# 1. The jobs.
listing="$("$bin" "${args[@]}" -jobs)" || die 2 "$bin ${args[*]} -jobs failed"
ids=()
while IFS= read -r line; do
	[[ -z "${line// /}" ]] && continue
	n="${line%%[[:space:]]*}"
	[[ "$n" =~ ^[0-9]+$ ]] || die 2 "-jobs printed \"$line\": its first field is not a job number"
	ids+=("$((10#$n))")
done <<<"$listing"

if ((${#ids[@]} == 0)); then
	log "the study has no jobs"
else
	# Array spec: sorted unique numbers as ranges, e.g. 0-3,7,9-10, then the throttle.
	mapfile -t ids < <(printf '%s\n' "${ids[@]}" | sort -n -u)
	spec=""
	start="${ids[0]}"
	prev="$start"
	for n in "${ids[@]:1}" ""; do
		if [[ -n "$n" && "$n" == $((prev + 1)) ]]; then
			prev="$n"
			continue
		fi
		[[ "$start" == "$prev" ]] && r="$start" || r="$start-$prev"
		spec="${spec:+$spec,}$r"
		start="$n"
		prev="$n"
	done
	spec="$spec%$throttle"

	# 2. Submit.
	export RPE_STUDY_BIN="$bin" RPE_STUDY_LOGS="$logs"
	sub="$(sbatch --parsable --array="$spec" --cpus-per-task="$cpus" \
		--output="$logs/%A_%a.log" --chdir="$PWD" "${extra[@]}" \
		"$here/study.sbatch" "${args[@]}")" || die 1 "sbatch failed"
	jobid="${sub%%;*}"
	[[ "$jobid" =~ ^[0-9]+$ ]] || die 1 "sbatch printed \"$sub\", not a job ID"
	log "submitted array $jobid: ${#ids[@]} task(s) --array=$spec, logs in $logs/${jobid}_N.log"

	# 3. Wait until the array has left the queue.
	cancel() {
		trap - INT TERM
		log "cancelling array $jobid"
		scancel "$jobid" 2>/dev/null
		exit "$1"
	}
	trap 'cancel 130' INT
	trap 'cancel 143' TERM
	t0=$SECONDS
	last=""
	errs=0
	while :; do
		if [[ -n "${SLURM_CONF:-}" && ! -f "$SLURM_CONF" ]]; then
			log "SLURM_CONF=$SLURM_CONF is gone (cluster stopped?)"
			exit 1
		fi
		if q="$(squeue -h -j "$jobid" -o %T 2>&1)"; then
			errs=0
		elif grep -qi 'invalid job id' <<<"$q"; then
			q="" # finished and already purged
		else
			((++errs < 10)) || { log "squeue keeps failing: $q"; cancel 1; }
			q="?"
		fi
		[[ -z "$q" ]] && break
		now="$(sort <<<"$q" | uniq -c | awk '{printf "%s%s %s", (NR>1?", ":""), $1, tolower($2)}')"
		if [[ "$now" != "$last" ]]; then
			log "array $jobid: $now ($((SECONDS - t0)) s)"
			last="$now"
		fi
		if ((timeout_s > 0 && SECONDS - t0 >= timeout_s)); then
			log "timeout after ${timeout_s}s; logs in $logs"
			cancel 124
		fi
		sleep "$poll"
	done
	trap - INT TERM
	log "array $jobid left the queue after $((SECONDS - t0)) s"

	# 4. Failed tasks.
	failed=0
	for n in "${ids[@]}"; do
		f="$logs/${jobid}_$n"
		if [[ -f "$f.rc" ]] && [[ "$(cat "$f.rc")" == 0 ]]; then
			continue
		fi
		failed=$((failed + 1))
		if [[ -f "$f.rc" ]]; then
			log "task $n failed with exit status $(cat "$f.rc"): $f.log"
		else
			log "task $n has no exit status (killed, or never started): $f.log"
		fi
		if [[ -f "$f.log" ]]; then
			tail -n 20 "$f.log" | sed "s/^/  [$n] /" >&2
		fi
	done
	if ((failed)); then
		log "$failed of ${#ids[@]} task(s) failed; resubmit the same command to rerun the unfinished jobs"
	else
		log "all ${#ids[@]} task(s) succeeded"
	fi
fi

# 5. Render.
rc=0
((${failed:-0})) && rc=1
if ((render)); then
	if ! "$bin" "${args[@]}" -render; then
		log "$bin ${args[*]} -render failed"
		rc=1
	fi
fi
exit "$rc"
