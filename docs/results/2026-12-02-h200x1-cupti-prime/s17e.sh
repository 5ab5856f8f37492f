#!/usr/bin/env bash
# Where the CUPTI timeline's per-block cost is: trace's overhead with 20, 50 and 200 calls per
# block (a cost per batch falls as 1/calls, a cost per call does not), with the kinds kept on
# (RINGREDUCE_CUPTI_KEEP=1), with the order tie; 1 rank 4 KiB and 2 ranks 4 MiB; events for reference.
set -u
O=${OUT:-$PWD/s17e-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0
RR=$PWD/.device/ringreduce
for pt in 1:4KiB 2:4MiB; do
  n=${pt%%:*} s=${pt#*:}
  for cfg in "RINGREDUCE_CUPTI=0" "RINGREDUCE_CUPTI=1" "RINGREDUCE_CUPTI_KEEP=1" "RINGREDUCE_CUPTI_TIE=order"; do
    for it in 20 50 200; do
      f="$O/${n}r-$s-${cfg#RINGREDUCE_}-$it.txt"
      timeout 60 env $cfg "$RR" trace --backend cuda --ranks $n --size $s --algo ring --overhead-blocks 7 --overhead-iters $it > "$f" 2>&1
      echo "${n}r $s $cfg iters $it: $(grep -h 'measurement overhead' "$f" | sed -E 's/.*: ([0-9.]+) us per call with timing off, ([0-9.]+) us with timing on \(([^;]*);.*/off \1 on \2 \3/') | $(grep -h '#   call 1 ' "$f")" | tee -a "$O/summary.txt"
    done
  done
done
cd "$O" && tar cJf logs.tar.xz *.txt && ls *.txt | grep -v summary | xargs rm -f
