#!/usr/bin/env bash
# One device call, several checks in priority order, each bounded, each
# writing its own files under $OUT (run from the checkout with .device and
# .whl carried). Parts: tests (the integration tests' CUDA variants),
# python (scripts/gpu-python.sh), cupti (gpu-check.sh cupti, quick sizes).
#   PARTS="tests python cupti" bash scripts/gpu-session.sh
set -u
export OUT="${OUT:-./gpu-session-out}"
mkdir -p "$OUT"
# The run's command file (docs/results/README.md, "A new run"): date,
# machine, commit and the exact command with the settings it read, appended
# to DIR/command.txt so that the folder copied into docs/results/ says them.
record_command() {
    local dir=$1; shift
    { echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
      echo "# machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd ';' -)"
      echo "# commit: $(cat .device/COMMIT "$(dirname "$0")/COMMIT" 2>/dev/null | head -1)"
      echo "# command: $(env | grep -E '^(BENCH_PARTS|TESTS|AB_[A-Z]+|PARTS|CUPTI_[A-Z]+|PROC_DIAG|COMM_BACKEND|TIMELINE_BACKEND|GPU_CHECK_LIMIT_S|RINGREDUCE_[A-Z_]+|NCCL_[A-Z_]+)=' | sort | tr '\n' ' ')bash $0 $*"
    } >> "$dir/command.txt"
}
record_command "$OUT" "$@"
for part in ${PARTS:-tests python cupti}; do
    echo "### part $part $(date -u +%H:%M:%S)"
    case $part in
        tests) timeout 170 bash .device/gpu-check.sh tests > "$OUT/tests-run.log" 2>&1
               echo "[exit $?]"; tail -4 "$OUT/tests-run.log";;
        python) mkdir -p "$OUT/py"; timeout 220 bash scripts/gpu-python.sh "$OUT/py" > "$OUT/py/run.log" 2>&1
               echo "[exit $?]"; tail -12 "$OUT/py/run.log";;
        cupti) CUPTI_SIZES="1MiB 64MiB" CUPTI_BENCH=0 timeout 170 bash .device/gpu-check.sh cupti > "$OUT/cupti-run.log" 2>&1
               echo "[exit $?]"; grep -E "timing source|measurement|within|==PROF==|No kernels|rror" "$OUT/cupti-run.log" | head -20;;
    esac
done
