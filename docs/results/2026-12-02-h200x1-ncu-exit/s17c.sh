#!/usr/bin/env bash
# The exit under ncu: the binary before (ringreduce-old) and after (ringreduce) keeping
# libcupti loaded, 3 times each, alternating; the trace's CUPTI on and off.
set -u
O=${OUT:-$PWD/s17c-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
{ date -u; cat .device/COMMIT; "$NCU" --version | tail -1; } > "$O/env.txt" 2>&1
TR=(trace --backend cuda --ranks 2 --size 4KiB --algo ring --warmup 1 --calls 1 --overhead-blocks 0)
for i in 1 2 3; do
  for b in ringreduce-old ringreduce; do
    timeout 150 "$NCU" --nvtx -c 2 ".device/$b" "${TR[@]}" > "$O/$b-$i.txt" 2>&1
    echo "$b run $i: ncu exit $?; $(grep -hoE 'timing source[^;]*' "$O/$b-$i.txt" | head -1); $(grep -c 'ringreduce' "$O/$b-$i.txt") lines naming ringreduce" | tee -a "$O/summary.txt"
  done
done
timeout 60 .device/ringreduce "${TR[@]}" > "$O/plain.txt" 2>&1; echo "without ncu: exit $?; $(grep -hoE 'timing source[^;]*' "$O/plain.txt" | head -1)" | tee -a "$O/summary.txt"
cd "$O" && tar cJf logs.tar.xz *.txt && rm -f ringreduce*.txt plain.txt
