#!/usr/bin/env bash
# selftest.sh: checks the Slurm scripts end to end on a one-node cluster on
# this machine, without the Go side.
#
#   scripts/slurm/selftest.sh                 the test (well under a minute)
#   scripts/slurm/selftest.sh --kill-slurmd   also: kill slurmd while an array
#                                             runs, then check that `down`
#                                             leaves no process and no state
#
# It brings the cluster up (cluster.sh up), then runs submit.sh with a fake
# study (a shell script answering -jobs, -job N and -render like the Go
# binary will) of 4 jobs, each writing $OUT/task-$SLURM_ARRAY_TASK_ID.txt:
#   1. all 4 files exist, with the right task IDs, and -render saw them all;
#      at least two tasks ran at the same time (cons_tres with CR_Core);
#   2. a job that fails once: submit.sh exits 1 and names that task's log;
#      the same command again exits 0 and reruns only that job (the fake
#      study skips finished jobs, as the Go side does);
# and brings the cluster down (also on failure, by a trap), checking that
# no process of the cluster is left.
#
# Exit status: 0 passed, or skipped with a line `SKIP: <reason>` where Slurm
# cannot run here (not root; Slurm missing and not installable); 1 failed,
# with the daemons' and tasks' logs printed.
#
# Environment: RPE_SLURM_DIR, RPE_SLURM_*_PORT as for cluster.sh. If a cluster
# is already running in RPE_SLURM_DIR, the test uses it and leaves it running.
set -uo pipefail

kill_slurmd=0
case "${1:-}" in
"") ;;
--kill-slurmd) kill_slurmd=1 ;;
*)
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

name=selftest
logs='out*/logs/*.log'
# shellcheck source=testlib.sh
source "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"
cluster_up

# The fake study: 4 jobs (0-3); -job N writes task-N.txt in $OUT with the
# task ID, the start and end times; it skips a job whose file exists; a job
# listed in $OUT/fail-once fails the first time it runs.
fake="$work/fake-study"
cat >"$fake" <<'EOF'
#!/usr/bin/env bash
set -eu
out=""
while (($#)); do
	case "$1" in
	-out) out="$2"; shift 2 ;;
	-sleep) sleep_s="$2"; shift 2 ;;
	-jobs) for i in 0 1 2 3; do echo "$i fake-job-$i"; done; exit 0 ;;
	-job)
		n="$2"
		[[ "$n" == "${SLURM_ARRAY_TASK_ID:-}" ]] || { echo "-job $n but SLURM_ARRAY_TASK_ID=${SLURM_ARRAY_TASK_ID:-}" >&2; exit 4; }
		[[ -e "$out/task-$n.txt" ]] && { echo "job $n: done already, skipped"; exit 0; }
		echo "$n" >>"$out/runs.txt"
		if grep -qx "$n" "$out/fail-once" 2>/dev/null; then
			sed -i "/^$n\$/d" "$out/fail-once"
			echo "job $n: failing on purpose" >&2
			exit 3
		fi
		start="$(date +%s.%N)"
		sleep "${sleep_s:-2}"
		printf '%s %s %s\n' "$SLURM_ARRAY_TASK_ID" "$start" "$(date +%s.%N)" >"$out/task-$n.txt.tmp"
		mv "$out/task-$n.txt.tmp" "$out/task-$n.txt"
		exit 0 ;;
	-render) cat "$out"/task-*.txt >"$out/rendered.txt"; exit 0 ;;
	*) echo "fake study: bad argument $1" >&2; exit 2 ;;
	esac
done
echo "fake study: no action" >&2
exit 2
EOF
chmod +x "$fake"

# 1. Four tasks.
out="$work/out1"
mkdir -p "$out"
"$submit" --timeout 90 "$out" "$fake" -out "$out" || fail "submit.sh exited $?"
for n in 0 1 2 3; do
	[[ -s "$out/task-$n.txt" ]] || fail "$out/task-$n.txt is missing"
	read -r id _ <"$out/task-$n.txt"
	[[ "$id" == "$n" ]] || fail "task-$n.txt was written by task $id"
done
[[ "$(wc -l <"$out/rendered.txt")" == 4 ]] || fail "-render did not see 4 tasks: $(cat "$out/rendered.txt")"
[[ "$(wc -l <"$out/runs.txt")" == 4 ]] || fail "jobs ran $(wc -l <"$out/runs.txt") times, want 4"
# Two tasks overlap when one starts before the other ends.
overlap="$(awk '{s[NR]=$2; e[NR]=$3} END {for (i=1;i<=NR;i++) for (j=i+1;j<=NR;j++) if (s[i]<e[j] && s[j]<e[i]) {print 1; exit}}' "$out"/task-*.txt)"
if [[ "$(nproc)" -ge 2 ]]; then
	[[ "$overlap" == 1 ]] || fail "no two tasks ran at once on $(nproc) CPUs: $(cat "$out"/task-*.txt)"
fi
log "1. four tasks: ok ($((SECONDS - t0)) s)"

# 2. A failed task, then resubmission.
out="$work/out2"
mkdir -p "$out"
echo 2 >"$out/fail-once"
"$submit" --timeout 90 "$out" "$fake" -out "$out" -sleep 1 2>"$work/submit2.err"
rc=$?
cat "$work/submit2.err" >&2
((rc == 1)) || fail "submit.sh with a failing task exited $rc, want 1"
grep -q "task 2 failed with exit status 3: $out/logs/[0-9]*_2.log" "$work/submit2.err" || fail "submit.sh did not name task 2 and its log"
grep -q "task [013] failed" "$work/submit2.err" && fail "submit.sh reported a task other than 2 as failed"
"$submit" --timeout 90 "$out" "$fake" -out "$out" -sleep 1 || fail "resubmission exited $?"
runs="$(tr '\n' ' ' <"$out/runs.txt")"
[[ "$(sort -n "$out/runs.txt" | tr '\n' ' ')" == "0 1 2 2 3 " ]] || fail "job runs over both submissions: $runs, want 0 1 2 3 once and 2 again"
log "2. failure and resubmission: ok ($((SECONDS - t0)) s)"

# 3. (--kill-slurmd) slurmd dies mid-way; down must still clean up.
if ((kill_slurmd)); then
	((preexisting)) && fail "--kill-slurmd needs a cluster of its own: stop the running one first"
	dir="${RPE_SLURM_DIR:-/tmp/rpe-slurm}"
	out="$work/out3"
	mkdir -p "$out"
	"$submit" --timeout 600 --no-render "$out" "$fake" -out "$out" -sleep 60 >/dev/null 2>&1 &
	sub=$!
	for ((i = 0; i < 100; i++)); do
		[[ "$(squeue -h -t R 2>/dev/null | wc -l)" -ge 1 ]] && break
		sleep 0.2
	done
	((i < 100)) || fail "no task started"
	pid="$(cat "$dir/run/slurmd.pid")"
	log "3. killing slurmd ($pid) with 1+ tasks running"
	kill -KILL "$pid"
	kill -TERM "$sub" 2>/dev/null # it cancels the array, but slurmd cannot stop the tasks
	wait "$sub"
	log "3. submit.sh exited $? (SIGTERM)"
	started=0
	"$cluster" down || fail "cluster.sh down exited $?"
	[[ -e "$dir" ]] && fail "$dir is left after down"
	left=""
	for p in /proc/[0-9]*; do
		tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" || continue
		read -r c 2>/dev/null <"$p/comm" || continue
		args="$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")"
		if [[ "$c" == slurm* || "$c" == munged || "$c" == sleep || "$args" == *slurm_script* || "$args" == *fake-study* ]]; then
			left+=" ${p#/proc/}($c)"
		fi
	done
	[[ -z "$left" ]] || fail "processes left after down:$left"
	log "3. kill slurmd, down: ok ($((SECONDS - t0)) s)"
fi

# Down (and the check that nothing is left) unless the cluster was there before.
if ((started)); then
	started=0
	"$cluster" down || fail "cluster.sh down exited $?"
	dir="${RPE_SLURM_DIR:-/tmp/rpe-slurm}"
	[[ -e "$dir" ]] && fail "$dir is left after down"
fi
status=0
