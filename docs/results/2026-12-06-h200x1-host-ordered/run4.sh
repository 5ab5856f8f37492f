#!/usr/bin/env bash
# Fourth call, the binaries with every host write landed before it returns.
# (1) The 2-rank sweep that gave wrong results in call 3 (auto at 1 MiB),
# twice, and the GPU regression tests of landed inputs (threads and
# processes). (2) The 4-rank stop of calls 2 and 3: the same sweep up to
# four times with the engine's timeout at 15 s; when one runs past 25 s,
# the GPU's utilisation and every thread's stack (gdb or cuda-gdb where
# present, else /proc) are logged, then it is killed.
#   bash docs/results/2026-12-06-h200x1-host-ordered/run4.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start host-ordered-4 "$@"
LLB="-b 16 -e 16MiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 15 --algo ring:ll,ring,ring:pipe2,auto"
for i in 1 2; do
  step wrong 40 $RR bench --backend cuda --devices 0 --ranks 2 $LLB --json "$O/ll2-$i.json"
done
step tests 200 .device/integration landed_inputs
diag() {  # pid
  { echo "== stalled at $(date -u +%T): pid $1"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv
    G=$(command -v gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null | head -1)
    if [ -n "$G" ]; then timeout 60 "$G" -p "$1" -batch -ex "set pagination off" -ex "thread apply all bt 12" 2>&1 | grep -E "^Thread|^#" | head -300
    else echo "no gdb"; for t in /proc/$1/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan 2>/dev/null)"; cat $t/stack 2>/dev/null | head -8; done; fi
  } >> "$O/diag.log" 2>&1
}
for i in 1 2 3 4; do
  a=$(date +%s)
  $RR bench --backend cuda --devices 0 --ranks 4 $LLB --json "$O/ll4-$i.json" >> "$O/hang.log" 2>&1 &
  pid=$!; stalled=0
  while kill -0 $pid 2>/dev/null; do
    sleep 1
    if [ $(( $(date +%s) - a )) -ge 25 ] && [ $stalled = 0 ]; then stalled=1; diag $pid; fi
    [ $(( $(date +%s) - a )) -ge 100 ] && kill -9 $pid
  done
  wait $pid; echo "hang: run $i exit $? in $(( $(date +%s) - a )) s (stalled: $stalled)" | tee -a "$O/command.txt"
  [ $stalled = 1 ] && break
done
cd "$O" && grep -E "FAILED|Out of bounds" wrong.log | sort | uniq -c; grep -E "PASS|FAIL|passed|failed|SKIPPED|ok \(" tests.log | tail -8
grep -E "error|Error" hang.log | head; head -120 diag.log 2>/dev/null; cat command.txt
tar cJf logs.tar.xz *.log *.json; rm -f *.log *.json; true
