#!/usr/bin/env bash
# Call 4: the fix (spinning paths refuse where rank threads share a GPU
# with fewer than 4 hardware queues each; auto takes none there). (1) The
# GPU regression tests: the new one (4 ranks: refused with the driver's
# queues, three sweeps with 16) and landed inputs (2 ranks, ring:ll runs);
# (2) the four-path sweep that stopped, 6 times with the default queues;
# (3) auto and the paths it chooses among on 4 ranks, default queues
# against 16.
#   bash docs/results/2026-12-06-h100x1-ll-stop/run4.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start ll-stop-4 "$@"
step tests 400 .device/integration queue_each landed_inputs
B="-b 16 -e 64KiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 5"
for i in 1 2 3 4 5 6; do
  a=$(date +%s)
  timeout -s KILL 70 $RR bench --backend cuda --devices 0 --ranks 4 $B --algo ring:ll,ring,ring:pipe2,auto > "$O/s$i.log" 2>&1
  echo "default queues, order ring:ll,ring,ring:pipe2,auto run $i exit $? in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
done
P="-b 8 -e 4MiB -f 4 -n 50 -w 10 --blocks 5 --no-ceiling --algo auto,ps,oneshot:fused,ring:ll"
step perf-default 200 $RR bench --backend cuda --devices 0 --ranks 4 $P
CUDA_DEVICE_MAX_CONNECTIONS=16 step perf-q16 200 $RR bench --backend cuda --devices 0 --ranks 4 $P
cd "$O" && grep -E "PASS|FAIL|passed|failed|SKIPPED" tests.log | tail -6
grep -h "leaves its" s1.log | head -2; grep -hE "error|FAILED" s*.log | head
grep -E "^# row|note" perf-default.log | head -30; grep -E "^# row" perf-q16.log | head -30
cat command.txt | tail -12
tar cJf logs.tar.xz *.log; rm -f *.log; true
