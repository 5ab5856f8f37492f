#!/usr/bin/env bash
# HEAD on the GPU (the CUPTI entry/exit refactor not yet run there): the timeline/comm/api tests,
# then what the CUPTI timeline costs by kind under the callback tie (held on), 3 rounds.
set -u
O=${OUT:-$PWD/s18a-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0 RINGREDUCE_BIN=$PWD/.device/ringreduce RINGREDUCE_HOST_MEMORY=200GiB
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$O/env.txt"
timeout 200 .device/integration timeline:: comm:: api:: > "$O/tests.log" 2>&1; echo "[exit $?]" >> "$O/tests.log"
grep -vE ' \.\.\. ok' "$O/tests.log" | tail -8 | tee "$O/summary.txt"
COST_CONFIGS="events callback ckernel ccopy" COST_POINTS="4:1MiB 4:4MiB 2:1MiB 2:4MiB 4:64MiB" COST_ROUNDS=3 COST_BUDGET_S=300 \
  GPU_CHECK_LIMIT_S=340 OUT="$O" bash .device/gpu-check.sh cupticost > "$O/cupticost.log" 2>&1
echo "[cupticost exit $?]" >> "$O/summary.txt"
cat "$O/cupticost/table.txt" >> "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz tests.log cupticost.log cupticost && rm -rf tests.log cupticost.log cupticost
