#!/usr/bin/env bash
# Fifth call: narrow the 4-rank stop (rank threads on one GPU, ring:ll).
# Short sweeps (16 B-64 KiB) of three orders of paths, 8 times each, the
# engine's timeout at 5 s: which transition into ring:ll stops.
#   bash docs/results/2026-12-06-h200x1-host-ordered/run5.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start host-ordered-5 "$@"
S="-b 16 -e 64KiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 5"
for order in ring:pipe2,ring:ll ring,ring:ll ring:ll oneshot:fused,ring:ll ps,ring:ll; do
  for i in 1 2 3 4 5 6 7 8; do
    a=$(date +%s)
    timeout 40 $RR bench --backend cuda --devices 0 --ranks 4 $S --algo $order >> "$O/narrow.log" 2>&1
    echo "order $order run $i exit $? in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
  done
done
cd "$O" && grep -E "^error|rank [0-9] \(GPU" narrow.log | sort | uniq -c | head; grep "^order" command.txt | awk '{print $2, $6}' | sort | uniq -c
tar cJf logs.tar.xz *.log; rm -f *.log; true
