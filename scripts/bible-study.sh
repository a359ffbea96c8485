#!/usr/bin/env bash
# bible-study.sh runs issue #33's Bible study job by job: the extrapolation
# study's bible preset (24 models) and the fine-tuning of its models at
# 2,048 (27 runs), each encoding's fine-tunings right after its three source
# models, since fine-tuning needs their checkpoints and checkpoints are not
# committed (the rows are: results/extrapolation/bible/results/*.json,
# results/finetune/bible/results/*.json). Jobs whose rows are saved are
# skipped, so it resumes where it stopped, on a fresh clone too.
#
#   scripts/bible-study.sh            build both commands (stamped with the
#                                     checkout's revision) into bin/, then run
#   BIN=DIR scripts/bible-study.sh    use DIR/extrapolation and DIR/finetune
#   PAUSE=FILE                        while FILE exists, wait between jobs
#                                     (default runs/pause): for a CI run or
#                                     a benchmark that needs the machine
#
# Each job's wall time and peak RSS are printed (/usr/bin/time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
	BIN=bin
	go build -buildvcs=true -o "$BIN/extrapolation" ./experiments/extrapolation
	go build -buildvcs=true -o "$BIN/finetune" ./experiments/finetune
fi
E="$BIN/extrapolation"
F="$BIN/finetune"
BO=results/extrapolation/bible
FO=results/finetune/bible
PAUSE=${PAUSE:-runs/pause}
ejobs=$("$E" -preset bible -jobs -out "$BO")
fjobs=$("$F" -preset bible -jobs -from "$BO" -out "$FO")
job() { awk -v k="$2" '$2 == k { print $1 }' <<<"$1"; }
wait_pause() { while [ -e "$PAUSE" ]; do sleep 15; done; }
timed() { if [ -x /usr/bin/time ]; then /usr/bin/time -f "wall %e s, maxrss %M kB" "$@"; else "$@"; fi; }
train() { # train ENC: its three source models
	for s in 1 2 3; do
		wait_pause
		n=$(job "$ejobs" "$1-seed$s")
		echo "== $(date +%T) bible $1-seed$s (job $n)"
		timed "$E" -preset bible -out "$BO" -job "$n"
	done
}
tune() { # tune ENTRY...: their fine-tunings, seeds 1-3
	for e in "$@"; do
		for s in 1 2 3; do
			[ -e "$FO/results/$e-seed$s.json" ] && continue
			wait_pause
			n=$(job "$fjobs" "$e-seed$s")
			echo "== $(date +%T) finetune $e-seed$s (job $n)"
			# -train-sources: a source whose checkpoint is gone (rows saved in
			# another session) is trained again into $FO/sources/
			timed "$F" -preset bible -from "$BO" -out "$FO" -train-sources -job "$n"
		done
	done
}
train rope;       tune rope rope-pi rope-yarn rope-ntk
train alibi;      tune alibi
train xl;         tune xl
train kerple-log; tune kerple-log
train t5;         tune t5
train fire;       tune fire
train cope
train none
"$E" -preset bible -out "$BO" -render
"$F" -preset bible -from "$BO" -out "$FO" -render
echo "== $(date +%T) done"
