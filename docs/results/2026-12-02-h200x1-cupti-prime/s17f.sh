#!/usr/bin/env bash
# Timing set-up outside the timed calls: the staged binary (ringreduce) against the one before
# (ringreduce-old), alternating, 2 rounds: trace's overhead with 20 and 50 calls per block and
# its first timed call's start, 2 and 4 ranks sharing the GPU; events for reference; then the
# GPU timeline tests.
set -u
O=${OUT:-$PWD/s17f-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
export NCCL_NVLS_ENABLE=0 RINGREDUCE_BIN=$PWD/.device/ringreduce RINGREDUCE_HOST_MEMORY=200GiB
{ date -u; cat .device/COMMIT; echo "ringreduce-old: bac0828"; } > "$O/env.txt"
for r in 1 2; do
  for pt in 2:1MiB 2:4MiB 4:1MiB 4:4MiB 4:16MiB 4:64MiB; do
    n=${pt%%:*} s=${pt#*:}
    for it in 20 50; do
      for b in ringreduce-old ringreduce; do
        f="$O/$b-${n}r-$s-$it-r$r.txt"
        timeout 60 .device/$b trace --backend cuda --ranks $n --size $s --algo ring --overhead-blocks 7 --overhead-iters $it > "$f" 2>&1
        echo "r$r $b ${n}r $s iters $it: $(grep -h 'measurement overhead' "$f" | sed -E 's/.*: ([0-9.]+) us per call with timing off, ([0-9.]+) us with timing on \(([^;]*);.*/off \1 on \2 \3/') | $(grep -h '#   call 1 ' "$f")" | tee -a "$O/summary.txt"
      done
    done
    [ $r = 1 ] && { f="$O/events-${n}r-$s.txt"; RINGREDUCE_CUPTI=0 timeout 60 .device/ringreduce trace --backend cuda --ranks $n --size $s --algo ring --overhead-blocks 7 --overhead-iters 50 > "$f" 2>&1; echo "events ${n}r $s iters 50: $(grep -h 'measurement overhead' "$f" | sed -E 's/.*: ([0-9.]+) us per call with timing off, ([0-9.]+) us with timing on \(([^;]*);.*/off \1 on \2 \3/')" | tee -a "$O/summary.txt"; }
  done
done
timeout 200 .device/integration timeline:: > "$O/tests-timeline.log" 2>&1; echo "[exit $?]" >> "$O/tests-timeline.log"
grep -vE ' \.\.\. ok' "$O/tests-timeline.log" | tail -8 | tee -a "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz *.txt *.log && ls | grep -vE "summary.txt|logs.tar.xz|command.txt|env.txt" | xargs rm -f
