#!/usr/bin/env bash
# NCCL's call on the CUPTI timeline (one GPU, one rank), then the GPU tests.
set -u
O=${OUT:-$PWD/s17d-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
RR=$PWD/.device/ringreduce
export NCCL_NVLS_ENABLE=0 RINGREDUCE_BIN="$RR" RINGREDUCE_HOST_MEMORY=200GiB
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$O/env.txt" 2>&1
t() {  # name, env..., -- args
  local name=$1; shift
  timeout 120 env "$@" > "$O/$name.txt" 2>&1; echo "[exit $?]" >> "$O/$name.txt"
  echo "== $name: $(grep -hE "^# (timing source|NCCL's call)|^\[exit|rror" "$O/$name.txt" | tr '\n' ' ')" | tee -a "$O/summary.txt"
}
for s in 4KiB 64MiB; do
  t trace-nccl-1r-$s RINGREDUCE_CUPTI=1 "$RR" trace --backend cuda --ranks 1 --nccl --size $s --algo ring --timeline "$O/trace-nccl-1r-$s.json"
done
t trace-nccl-1r-inplace RINGREDUCE_CUPTI=1 "$RR" trace --backend cuda --ranks 1 --nccl --size 4MiB --in-place --algo ring
t trace-nccl-1r-events RINGREDUCE_CUPTI=0 "$RR" trace --backend cuda --ranks 1 --nccl --size 4MiB --algo ring
t trace-nccl-1r-order RINGREDUCE_CUPTI_TIE=order "$RR" trace --backend cuda --ranks 1 --nccl --size 4MiB --algo ring
t trace-2r-cupti RINGREDUCE_CUPTI=1 "$RR" trace --backend cuda --ranks 2 --size 4MiB --algo ring
grep -A3 "NCCL\|nccl" "$O/trace-nccl-1r-64MiB.txt" | head -30 >> "$O/summary.txt"
OUT="$O" GPU_CHECK_LIMIT_S=420 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
grep -E "nccl_on_the_same_clock|ring: |NCCL's call" "$O/tests.log" | tee -a "$O/summary.txt"
tail -12 "$O/gpu-check-tests.log" | tee -a "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz *.txt *.log *.json 2>/dev/null; rm -f *.json
