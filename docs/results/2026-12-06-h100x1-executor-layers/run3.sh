#!/usr/bin/env bash
# Call 3: the A/B again with 6 runs (alternating which binary goes first).
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start layers-ab6 "$@"
OUT="$O" AB_RUNS=6 GPU_CHECK_LIMIT_S=540 bash .device/gpu-check.sh ab > "$O/gpu-check-ab.log" 2>&1
echo "gpu-check ab: exit $?" | tee -a "$O/command.txt"
grep "^#" "$O/gpu-check-ab.log" | tail -8
cd "$O" && xz -9 gpu-check-ab.log; ls
