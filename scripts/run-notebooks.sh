#!/usr/bin/env bash
# run-notebooks.sh executes notebooks headless with the GoNB kernel
# (jupyter nbconvert --to notebook --execute) and fails if any cell of any
# notebook fails or a notebook exceeds its time limit. Run
# scripts/setup-notebooks.sh once before.
#
# Usage: scripts/run-notebooks.sh [--inplace] [NOTEBOOK.ipynb ...]
#
# Without arguments it runs every notebooks/*.ipynb. The executed copies are
# written to a temporary directory (kept if a notebook fails, and named in
# the output); with --inplace, the executed copy of each notebook that
# passed replaces the notebook (how the committed outputs are refreshed).
# A failing cell is printed with its output (a Go panic's message, a
# compile error).
#
# Environment:
#   NB_TIMEOUT       wall-clock limit per notebook in seconds (default 600;
#                    each notebook takes well under 3 minutes on 2 cores with
#                    a warm Go build cache)
#   NB_CELL_TIMEOUT  limit per cell in seconds (default 300)
#   JUPYTER          the jupyter command (default /usr/bin/jupyter, Debian's)
#
# The last line is "notebooks: N passed, M failed"; the exit status is 0 only
# if every notebook passed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jupyter=${JUPYTER:-/usr/bin/jupyter}
nb_timeout=${NB_TIMEOUT:-600}
cell_timeout=${NB_CELL_TIMEOUT:-300}

inplace=0
if [ "${1:-}" = "--inplace" ]; then
	inplace=1
	shift
fi
if (($#)); then
	notebooks=("$@")
else
	notebooks=("$root"/notebooks/*.ipynb)
fi
[ -e "${notebooks[0]}" ] || { echo "run-notebooks: no notebooks found" >&2; exit 1; }
[ -x "$jupyter" ] || { echo "run-notebooks: $jupyter not found: run scripts/setup-notebooks.sh" >&2; exit 1; }

# GoNB runs go and goimports from PATH.
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$(go env GOROOT)/bin:$PATH"
command -v gonb >/dev/null && command -v goimports >/dev/null ||
	{ echo "run-notebooks: gonb or goimports missing from $gobin: run scripts/setup-notebooks.sh" >&2; exit 1; }

# kill_kernels PID ends the processes left by the nbconvert run PID: its
# kernel (jupyter_client starts it in a session of its own and tells it
# JPY_PARENT_PID; GoNB does not exit when that parent dies) and the cell
# programs it started, which inherit that variable.
kill_kernels() {
	local env p
	for env in /proc/[0-9]*/environ; do
		p=${env#/proc/}
		p=${p%/environ}
		if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "JPY_PARENT_PID=$1"; then
			kill -KILL "$p" 2>/dev/null
		fi
	done
	return 0
}

# cell_errors NOTEBOOK prints each cell of the executed NOTEBOOK that has an
# error output (its source and its outputs as text) and fails if there is one.
cell_errors() {
	/usr/bin/python3 - "$1" <<'PY'
import html, json, re, sys

nb = json.load(open(sys.argv[1]))
bad = 0
for i, cell in enumerate(nb["cells"]):
    outs = cell.get("outputs", [])
    if cell["cell_type"] != "code" or not any(o["output_type"] == "error" for o in outs):
        continue
    bad += 1
    src = "".join(cell["source"])
    print(f"cell {i}:")
    print("  " + "\n  ".join(src.splitlines()[:12]))
    for o in outs:
        if o["output_type"] == "stream":
            text = "".join(o["text"])
        elif o["output_type"] == "error":
            text = o.get("ename", "") + ": " + o.get("evalue", "")
        else:
            h = "".join(o.get("data", {}).get("text/html", ""))
            h = re.sub(r"(?s)<style>.*?</style>", "", h)
            text = html.unescape(re.sub(r"<[^>]+>", "", h))
        lines = [l for l in text.splitlines() if l.strip()]
        if lines:
            print("  | " + "\n  | ".join(lines[-25:]))
sys.exit(1 if bad else 0)
PY
}

outdir=$(mktemp -d -t rpe-notebooks.XXXXXX)
passed=0
failed=0
for nb in "${notebooks[@]}"; do
	nb=$(cd "$(dirname "$nb")" && pwd)/$(basename "$nb")
	name=$(basename "$nb")
	start=$(date +%s)
	# The kernel starts in the notebook's directory (nbconvert's default),
	# from which each notebook's first cell finds the repository. Errors are
	# allowed so that the executed copy keeps the failing cell's output
	# (a Go panic's message is there, not in nbconvert's error); the copy is
	# then checked for error outputs.
	"$jupyter" nbconvert --to notebook --execute --allow-errors \
		--ExecutePreprocessor.kernel_name=gonb \
		--ExecutePreprocessor.timeout="$cell_timeout" \
		--output-dir "$outdir" "$nb" >"$outdir/$name.log" 2>&1 &
	pid=$!
	timed_out=0
	while kill -0 "$pid" 2>/dev/null; do
		if (($(date +%s) - start >= nb_timeout)); then
			timed_out=1
			kill -TERM "$pid" 2>/dev/null # (a background job ignores SIGINT)
			for _ in $(seq 10); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 1
			done
			kill -KILL "$pid" 2>/dev/null
			break
		fi
		sleep 1
	done
	wait "$pid"
	rc=$?
	kill_kernels "$pid"
	secs=$(($(date +%s) - start))
	if [ $rc -eq 0 ] && cell_errors "$outdir/$name" >"$outdir/$name.errors"; then
		passed=$((passed + 1))
		echo "PASS $name (${secs}s)"
		if ((inplace)); then
			cp "$outdir/$name" "$nb"
		fi
	else
		failed=$((failed + 1))
		if ((timed_out)); then
			echo "FAIL $name: timed out after ${nb_timeout}s"
		elif [ $rc -ne 0 ]; then
			echo "FAIL $name (${secs}s, nbconvert exit $rc):"
		else
			echo "FAIL $name (${secs}s): a cell failed"
		fi
		if [ -s "$outdir/$name.errors" ]; then
			sed 's/^/    /' "$outdir/$name.errors"
		else
			tail -n 40 "$outdir/$name.log" | sed 's/^/    /'
		fi
	fi
done
if ((failed)); then
	echo "run-notebooks: logs and executed notebooks kept in $outdir"
else
	rm -rf "$outdir"
fi
echo "notebooks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
