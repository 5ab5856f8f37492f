#!/usr/bin/env bash
# Where the SM-driven paths stand on one GPU: bench of ring, ring:pipe2,
# ring:ll, oneshot:ll (plain and replayed from CUDA graphs) and auto, rank
# threads sharing the GPU (2 and 4 ranks), 8 B-16 MiB, float sum, with the
# fitted model per path that bench prints; JSON of each.
#   bash docs/results/2026-12-07-h100x1-ll-standing/run.sh   (.device carried)
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start ll "$@"
for n in 2 4; do
  algos=ring,ring:pipe2,ring:ll,auto
  [ $n = 2 ] && algos=ring,ring:pipe2,ring:ll,oneshot:ll,oneshot:ll:graph,auto
  step bench-$n 240 "$RR" bench --backend cuda --ranks $n --algo $algos -b 8 -e 16MiB -f 4 -n 50 -w 10 --blocks 5 --no-ceiling --json "$O/bench-$n.json"
  grep -iE "fit|alpha|per step" "$O/bench-$n.log" | head -20
  grep -E "^ +[0-9]+ " "$O/bench-$n.log" | awk '{print $1, $6, $10, $14}' | column -t | head -80
done
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/ll-logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/ll-logs.tar.xz" "$OUT/"
