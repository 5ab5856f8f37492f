#!/usr/bin/env bash
# One GPU check of the CUDA backend over both peer exchanges (rank threads,
# one rank per process: 2 processes share the GPU; no NCCL, which needs a
# GPU per rank). Run from the checkout with .device carried:
#   bash scripts/gpu-fold-check.sh      -> $OUT/fold/*.log
set -u
RR=.device/ringreduce
F="${OUT:-./gpu-out}/fold"
mkdir -p "$F"
# The run's command file (docs/results/README.md, "A new run").
. "$(dirname "$0")/record-command.sh"
record_command "$F" "$@"
export RR_GPU_TAG="fold-$$"
left() { # rank processes of this run still alive (not zombies)
    local n=0 p
    for p in /proc/[0-9]*; do
        tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -qx "RR_GPU_TAG=$RR_GPU_TAG" || continue
        tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -q "^RINGREDUCE_RANK=" || continue
        grep -q '^State:.*Z' "$p/status" 2>/dev/null || n=$((n + 1))
    done
    echo "$n"
}
run() { local t=$1; shift; local s=$(date +%s); timeout "$t" "$@"; echo "[exit $? after $(( $(date +%s) - s )) s] $*" | cut -c1-200; }
echo "### tests (rank threads and processes on CUDA)"
OUT="$F" timeout 200 bash .device/gpu-check.sh tests > "$F/tests-run.log" 2>&1; echo "[exit $?]"
tail -3 "$F/tests.log"
mv "$F/tests.log" "$F/tests-all.log"
echo "### comm (the communicator, its rank processes, the examples)"
OUT="$F" timeout 200 bash .device/gpu-check.sh comm > "$F/comm-run.log" 2>&1; echo "[exit $?]"
grep -E "test result|passed|failed|rank [01]: ok|\[exit|panicked|SKIPPED" "$F/comm-run.log" | tail -12
L="$RR launch -n 2 --timeout 30 --"
{
echo "### one process per rank (2 on one GPU)"
run 40 $L run --backend cuda --size 4MiB
run 40 $L run --backend cuda --size 4MiB --in-place -d half -o avg
run 40 $L run --backend cuda --size 64KiB --algo oneshot:flag --in-place
run 40 $L run --backend cuda --count 1003 --algo ring:pipe2 -d int8 -o prod
echo "### fault: rank 1 killed with SIGKILL in its call 5"
RINGREDUCE_FAULT=kill:rank=1:call=5 run 120 $L run --backend cuda --size 64MiB --iters 50
sleep 1; echo "rank processes left: $(left)"
} > "$F/processes.log" 2>&1
grep -E "^###|\[exit|check|rror|left" "$F/processes.log" | tail -20
echo "### CUPTI's host cost per op, by kind"
timeout 120 python3 scripts/cupti-probe.py cost > "$F/cupti-cost.txt" 2>&1; cat "$F/cupti-cost.txt"
