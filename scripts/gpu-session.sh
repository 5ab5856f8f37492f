#!/usr/bin/env bash
# One device call, several checks in priority order, each bounded, each
# writing its own files under $OUT (run from the checkout with .device and
# .whl carried). Parts: tests (the integration tests' CUDA variants),
# python (scripts/gpu-python.sh), cupti (gpu-check.sh cupti, quick sizes).
#   PARTS="tests python cupti" bash scripts/gpu-session.sh
set -u
export OUT="${OUT:-./gpu-session-out}"
mkdir -p "$OUT"
# The run's command file (docs/results/README.md, "A new run").
. "$(dirname "$0")/record-command.sh"
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
