#!/usr/bin/env bash
# cluster.sh: a one-node Slurm cluster on this machine, for tests.
#
#   scripts/slurm/cluster.sh up       install Slurm and munge if needed, start munged, slurmctld, slurmd
#   scripts/slurm/cluster.sh status   show the daemons and the node
#   scripts/slurm/cluster.sh env      print the line to source: export SLURM_CONF=...
#   scripts/slurm/cluster.sh down     cancel jobs, stop the daemons, remove all state
#
# Everything lives in $RPE_SLURM_DIR (default /tmp/rpe-slurm), which the script
# creates and `down` removes: the generated slurm.conf (etc/), its own munge key
# and socket (munge/), the controller's state (state/), slurmd's spool
# (spool/), logs (log/) and the daemons' PIDs (run/). Nothing under /etc is
# written: the daemons and the client commands (sbatch, squeue, sinfo, scancel)
# find the configuration through SLURM_CONF, so after `up` run
#
#   eval "$(scripts/slurm/cluster.sh env)"    # or: export SLURM_CONF=$RPE_SLURM_DIR/etc/slurm.conf
#
# The node is this machine (`nproc` CPUs as single-thread cores, MemTotal of
# /proc/meminfo), one partition `rpe` (Default=YES), select/cons_tres with
# CR_Core so that several 1-CPU tasks run at once, proctrack/linuxproc and
# task/none so that no cgroup is needed (containers and VMs without cgroup v2
# delegation), no accounting database.
#
# Environment:
#   RPE_SLURM_DIR           state directory (default /tmp/rpe-slurm); `down` deletes it,
#                           so it must be empty or one this script made (marker .rpe-slurm)
#   RPE_SLURM_CTLD_PORT     slurmctld port (default 16817, away from a real cluster's 6817)
#   RPE_SLURM_SLURMD_PORT   slurmd port (default 16818)
#   RPE_SLURM_UP_TIMEOUT    seconds `up` waits for the node to be idle (default 60)
#   RPE_SLURM_NO_INSTALL=1  never run apt-get (fail if Slurm or munge is missing)
#
# Exit status: 0 done; 1 failed (daemon logs printed, state removed by `up`'s
# trap); 2 usage; 3 this machine cannot run the cluster (not root, or Slurm
# missing and cannot be installed): callers may skip on 3.
#
# Idempotent: `up` on a running cluster only checks it, `up` on leftovers of a
# crashed one stops them first; `down` without a cluster does nothing. Only the
# processes this script started (by their recorded PIDs) and the job steps of
# this cluster (slurmstepd processes whose environment names this SLURM_CONF,
# and their descendants) are ever signalled.
set -uo pipefail

export PATH="$PATH:/usr/sbin:/sbin"
DIR="${RPE_SLURM_DIR:-/tmp/rpe-slurm}"
CONF="$DIR/etc/slurm.conf"
SOCK="$DIR/munge/munge.socket"
CTLD_PORT="${RPE_SLURM_CTLD_PORT:-16817}"
SLURMD_PORT="${RPE_SLURM_SLURMD_PORT:-16818}"
UP_TIMEOUT="${RPE_SLURM_UP_TIMEOUT:-60}"
MARKER="$DIR/.rpe-slurm"

log() { printf 'cluster.sh: %s\n' "$*" >&2; }

usage() {
	sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# node_name prints the name of the one node: the short hostname when it is a
# plain name, else rpe-node. slurmd is started with -N, so it need not resolve.
node_name() {
	local h
	h="$(hostname -s 2>/dev/null || true)"
	if [[ "$h" =~ ^[A-Za-z0-9][A-Za-z0-9-]*$ && "$h" != localhost ]]; then
		printf '%s\n' "$h"
	else
		printf 'rpe-node\n'
	fi
}
NODE="$(node_name)"

for v in CTLD_PORT SLURMD_PORT; do
	if [[ ! "${!v}" =~ ^[1-9][0-9]{0,4}$ ]] || ((${!v} > 65535)); then
		log "RPE_SLURM_$v=${!v}: not a port number (1-65535)"
		exit 2
	fi
done
if [[ ! "$UP_TIMEOUT" =~ ^[1-9][0-9]*$ ]]; then
	log "RPE_SLURM_UP_TIMEOUT=$UP_TIMEOUT: not a positive number of seconds"
	exit 2
fi

have_slurm() {
	local c
	for c in munged munge unmunge slurmctld slurmd sbatch squeue sinfo scancel; do
		command -v "$c" >/dev/null 2>&1 || return 1
	done
}

# install installs Debian's slurm-wlm and munge unless they are there;
# apt-get update runs only when apt does not know the package.
install() {
	have_slurm && return 0
	if [[ "$(id -u)" != 0 ]]; then
		log "Slurm or munge is not installed and we are not root to install it"
		exit 3
	fi
	if [[ "${RPE_SLURM_NO_INSTALL:-}" == 1 ]]; then
		log "Slurm or munge is not installed and RPE_SLURM_NO_INSTALL=1"
		exit 3
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		log "Slurm or munge is not installed and there is no apt-get to install them"
		exit 3
	fi
	if ! apt-cache show slurm-wlm >/dev/null 2>&1 || ! apt-cache show munge >/dev/null 2>&1; then
		log "apt-get update (slurm-wlm or munge unknown to apt)"
		apt-get update -q >&2 || { log "apt-get update failed"; exit 3; }
	fi
	log "apt-get install -y slurm-wlm munge"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >&2; then
		log "apt-get install slurm-wlm munge failed"
		exit 3
	fi
	have_slurm || { log "slurm-wlm and munge installed but their commands are missing"; exit 3; }
}

# alive PID COMM: the process PID exists, is not a zombie, and its command
# name starts with COMM (so that a PID reused by another program is never
# signalled).
alive() {
	local pid="$1" comm="$2" c stat f
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	read -r c 2>/dev/null <"/proc/$pid/comm" || return 1
	[[ "$c" == "$comm"* ]] || return 1
	read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
	read -ra f <<<"${stat##*) }"
	[[ "${f[0]}" != Z && "${f[0]}" != X ]]
}

pid_of() { cat "$DIR/run/$1.pid" 2>/dev/null; }

# stop_pid NAME COMM: TERM the recorded daemon, KILL it after 10 s.
stop_pid() {
	local name="$1" comm="$2" pid i
	pid="$(pid_of "$name")"
	alive "$pid" "$comm" || return 0
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		alive "$pid" "$comm" || return 0
		sleep 0.1
	done
	log "$name ($pid) ignored SIGTERM; SIGKILL"
	kill -KILL "$pid" 2>/dev/null
	sleep 0.2
}

# steps prints the PIDs of this cluster's slurmstepd processes (their
# environment holds SLURM_CONF=$CONF, inherited from our slurmd) and of all
# their descendants.
steps() {
	local p c roots=() want="SLURM_CONF=$CONF"
	for p in /proc/[0-9]*; do
		read -r c 2>/dev/null <"$p/comm" || continue
		[[ "$c" == slurmstepd ]] || continue
		tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "$want" && roots+=("${p#/proc/}")
	done
	((${#roots[@]})) || return 0
	# Descendants: follow the parent links of every process.
	local -A parent=() mine=()
	local stat f
	for p in /proc/[0-9]*; do
		read -r stat 2>/dev/null <"$p/stat" || continue
		read -ra f <<<"${stat##*) }" # state ppid ...
		parent[${p#/proc/}]="${f[1]}"
	done
	for p in "${roots[@]}"; do mine[$p]=1; done
	local changed=1
	while ((changed)); do
		changed=0
		for p in "${!parent[@]}"; do
			if [[ -z "${mine[$p]:-}" && -n "${mine[${parent[$p]}]:-}" ]]; then
				mine[$p]=1
				changed=1
			fi
		done
	done
	printf '%s\n' "${!mine[@]}"
}

print_logs() {
	local f
	for f in "$DIR"/log/*; do
		[[ -f "$f" ]] || continue
		printf '\n===== %s (last 40 lines) =====\n' "$f" >&2
		tail -n 40 "$f" >&2
	done
}

down() {
	if [[ ! -e "$DIR" ]]; then
		log "down: no cluster in $DIR"
		return 0
	fi
	if [[ ! -e "$MARKER" ]]; then
		log "down: $DIR was not made by cluster.sh (no $MARKER); not touching it"
		return 1
	fi
	export SLURM_CONF="$CONF"
	local ids
	if alive "$(pid_of slurmctld)" slurmctld; then
		ids="$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u)"
		if [[ -n "$ids" ]]; then
			log "down: cancelling jobs $(tr '\n' ' ' <<<"$ids")"
			# shellcheck disable=SC2086
			timeout 10 scancel $ids 2>/dev/null
			# The steps end through slurmd; without it they are killed below.
			local deadline=$((SECONDS + 10))
			while alive "$(pid_of slurmd)" slurmd && ((SECONDS < deadline)); do
				[[ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ]] && break
				sleep 0.2
			done
		fi
	fi
	stop_pid slurmd slurmd
	stop_pid slurmctld slurmctld
	local left
	left="$(steps)"
	if [[ -n "$left" ]]; then
		log "down: stopping leftover job steps: $(tr '\n' ' ' <<<"$left")"
		# shellcheck disable=SC2086
		kill -TERM $left 2>/dev/null
		sleep 1
		left="$(steps)"
		# shellcheck disable=SC2086
		[[ -n "$left" ]] && kill -KILL $left 2>/dev/null
	fi
	stop_pid munged munged
	rm -rf "$DIR"
	log "down: stopped; removed $DIR"
}

# node_state prints the state of our node as sinfo shows it (idle, mixed, ...).
node_state() { SLURM_CONF="$CONF" timeout 10 sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1; }

running() {
	[[ -e "$MARKER" ]] &&
		alive "$(pid_of munged)" munged &&
		alive "$(pid_of slurmctld)" slurmctld &&
		alive "$(pid_of slurmd)" slurmd
}

write_conf() {
	local cpus mem_kb mem_mb
	cpus="$(nproc)"
	mem_kb="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
	mem_mb=$((mem_kb / 1024))
	cat >"$CONF" <<EOF
# Generated by scripts/slurm/cluster.sh: a one-node test cluster. Do not edit;
# \`cluster.sh down\` deletes this directory.
ClusterName=rpe
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.daemon.pid
SlurmdPidFile=$DIR/run/slurmd.daemon.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: works in containers and VMs without cgroup v2 delegation.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Use the node as configured here even where the hardware reports less
# (threads, memory reserved by the kernel).
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=60
KillWait=5
MinJobAge=600
MaxArraySize=10001
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem_mb State=UNKNOWN
PartitionName=rpe Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

# start NAME CMD...: start a daemon in the foreground mode of its own session,
# in the background, recording its PID.
start() {
	local name="$1"
	shift
	setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
	local pid=$! i
	echo "$pid" >"$DIR/run/$name.pid"
	# Until exec, the child is a copy of this shell or setsid.
	for ((i = 0; i < 100; i++)); do
		alive "$pid" "$name" && return 0
		[[ -e "/proc/$pid" ]] || break
		sleep 0.05
	done
	fail_up "$name did not start"
}

fail_up() {
	trap - EXIT INT TERM
	log "up failed: $*"
	log "logs: $DIR/log/"
	print_logs
	down
	exit 1
}

up() {
	if [[ "$(id -u)" != 0 ]]; then
		log "not root: starting munged and slurmd for a test cluster needs root"
		exit 3
	fi
	install
	if [[ -e "$DIR" && ! -e "$MARKER" ]] && [[ -n "$(ls -A "$DIR" 2>/dev/null)" ]]; then
		log "$DIR exists, is not empty and was not made by cluster.sh; set RPE_SLURM_DIR"
		exit 1
	fi
	if running; then
		local st
		st="$(node_state)"
		if [[ "$st" == idle* || "$st" == mixed* || "$st" == allocated* ]]; then
			log "up: already running (node $NODE $st)"
			printf 'export SLURM_CONF=%s\n' "$CONF"
			return 0
		fi
	fi
	[[ -e "$MARKER" ]] && { log "up: stopping the leftovers of an earlier cluster"; down; }

	trap 'fail_up "interrupted or exited early"' EXIT
	trap 'exit 1' INT TERM
	{ mkdir -p "$DIR" && touch "$MARKER"; } || fail_up "cannot create $DIR"
	chmod 0755 "$DIR"
	mkdir -p "$DIR"/{etc,munge,state,spool,log,run} || fail_up "cannot create the directories under $DIR"
	chmod 0700 "$DIR/state" "$DIR/spool"
	chmod 0755 "$DIR/munge" # munged: clients need to reach the socket
	write_conf || fail_up "cannot write $CONF"
	export SLURM_CONF="$CONF"

	# munge: our own key and socket, so that a system munged (if any) is untouched.
	local key="$DIR/munge/munge.key"
	if [[ ! -s "$key" ]]; then
		if command -v mungekey >/dev/null 2>&1; then
			mungekey --create --keyfile="$key" >/dev/null 2>&1 || dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
		else
			dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
		fi
	fi
	{ chown root:root "$key" && chmod 0400 "$key"; } || fail_up "cannot set the owner and mode of $key"
	start munged munged --foreground --force --socket="$SOCK" --key-file="$key" \
		--pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed" \
		--log-file="$DIR/log/munged.log"
	local i
	for ((i = 0; i < 50; i++)); do
		munge -n --socket="$SOCK" 2>/dev/null | unmunge --socket="$SOCK" >/dev/null 2>&1 && break
		alive "$(pid_of munged)" munged || fail_up "munged exited"
		sleep 0.2
	done
	((i < 50)) || fail_up "munged does not answer on $SOCK"

	start slurmctld slurmctld -D
	start slurmd slurmd -D -N "$NODE"

	local st="" deadline=$((SECONDS + UP_TIMEOUT))
	while ((SECONDS < deadline)); do
		alive "$(pid_of slurmctld)" slurmctld || fail_up "slurmctld exited"
		alive "$(pid_of slurmd)" slurmd || fail_up "slurmd exited"
		st="$(node_state)"
		[[ "$st" == idle ]] && break
		sleep 0.5
	done
	[[ "$st" == idle ]] || fail_up "node $NODE is not idle after ${UP_TIMEOUT}s (state: ${st:-none}; $(SLURM_CONF="$CONF" timeout 5 sinfo -h -R 2>/dev/null))"
	trap - EXIT INT TERM
	log "up: node $NODE idle ($(nproc) CPUs) in $DIR; logs in $DIR/log"
	printf 'export SLURM_CONF=%s\n' "$CONF"
}

status() {
	if [[ ! -e "$MARKER" ]]; then
		echo "no cluster in $DIR"
		return 1
	fi
	local d ok=0
	for d in munged slurmctld slurmd; do
		if alive "$(pid_of "$d")" "$d"; then
			echo "$d: running, PID $(pid_of "$d")"
		else
			echo "$d: not running"
			ok=1
		fi
	done
	echo "SLURM_CONF=$CONF"
	echo "logs: $DIR/log"
	if alive "$(pid_of slurmctld)" slurmctld; then
		SLURM_CONF="$CONF" timeout 10 sinfo -N -l 2>&1
		SLURM_CONF="$CONF" timeout 10 squeue 2>&1
	fi
	local st
	st="$(node_state)"
	[[ "$st" == idle* || "$st" == mixed* || "$st" == allocated* ]] || ok=1
	return $ok
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
env) printf 'export SLURM_CONF=%s\n' "$CONF" ;;
*) usage ;;
esac
