#!/usr/bin/env bash
# Call 2: the A/B of the session's start (0d4f87d, .device/ringreduce-old)
# against this tree (gpu-check.sh ab, AB_RUNS=2, one GPU), then timelines
# of 2 rank threads sharing the GPU timed by CUPTI (the default) and by
# events (RINGREDUCE_CUPTI=0), ring and ring:ll at 4 MiB.
set -u
(cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start layers-ab "$@"
OUT="$O" AB_RUNS=2 GPU_CHECK_LIMIT_S=480 bash .device/gpu-check.sh ab > "$O/gpu-check-ab.log" 2>&1
echo "gpu-check ab: exit $?" | tee -a "$O/command.txt"
grep "^#" "$O/gpu-check-ab.log" | tail -8
for algo in ring ring:ll; do
  a=${algo/:/-}
  step timeline 60 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline "$O/$a-cupti.json" --calls 3
  step timeline-events 60 env RINGREDUCE_CUPTI=0 $RR trace --backend cuda --ranks 2 --devices 0,0 --algo $algo --size 4MiB --timeline "$O/$a-events.json" --calls 3
done
grep -iE "source|timed by|cupti|events|overhead" "$O/timeline.log" "$O/timeline-events.log" | head -20
cd "$O" && tar cJf timelines.tar.xz *.json && rm -f *.json; for f in gpu-check-ab.log timeline.log timeline-events.log; do [ -f "$f" ] && xz -9 "$f"; done; ls
