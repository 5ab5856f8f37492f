#!/usr/bin/env bash
# Second call of the same record: the LL kernel that writes its step times on
# timed calls. The tests (every path, the fault tests of every kernel path,
# CUDA graphs, the timeline's step-time test), compute-sanitizer on a timed
# run, timelines of ring:ll / oneshot:ll / ring with their step tables, and
# bench on 4 ranks for the fitted cost of a step on each path.
#   bash docs/results/2026-12-05-gpu1-oneshot-ll/run2.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/oneshot-ll2; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@"
export NCCL_NVLS_ENABLE=0
export RINGREDUCE_BIN="$PWD/.device/ringreduce" RINGREDUCE_HOST_MEMORY=200GiB
RR=.device/ringreduce
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; nproc; } >> "$O/command.txt" 2>&1
step() {  # log, seconds, command...
  local name=$1 t=$2; shift 2
  local a=$(date +%s)
  echo "== $*" >> "$O/$name.log"
  timeout "$t" "$@" >> "$O/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - a )) s ($*)" | tee -a "$O/command.txt"
}
step tests 240 .device/integration in_an_ fail_mid stall_mid every_path graphs timeline
for tool in memcheck racecheck synccheck; do
  step tests 120 compute-sanitizer --tool $tool --error-exitcode 9 $RR trace --backend cuda --devices 0 --ranks 3 --algo ring:ll --size 64KiB --calls 2 --timeline "$O/sanitized.json"
done
step tests 60 compute-sanitizer --tool memcheck --error-exitcode 9 $RR trace --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --size 4KiB --calls 2 --timeline "$O/sanitized1.json"
for n in 2 4; do
  for s in 64KiB 1MiB; do
    step traces 60 $RR trace --backend cuda --devices 0 --ranks $n --algo ring:ll --size $s --calls 3 --timeline "$O/ringll-$n-$s.json"
  done
  step traces 60 $RR trace --backend cuda --devices 0 --ranks $n --algo ring --size 64KiB --calls 3 --timeline "$O/ring-$n-64KiB.json"
done
step traces 60 $RR trace --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --size 64KiB --calls 3 --timeline "$O/oneshotll-2-64KiB.json"
step traces 60 $RR trace --backend cuda --devices 0 --ranks 4 --algo ring:ll --size 64KiB --calls 1 --svg "$O/ringll-4-64KiB.svg"
step bench4 150 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring,ring:pipe2,ring:ll,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench4.csv"
cd "$O" && grep -E "^test |ERROR SUMMARY|passed" tests.log | head -70; grep -E "^#   call|measurement overhead|^ *[0-9]+ compute +1 " traces.log | head -60; grep -E "Model of" bench4.log; cat command.txt
tar cJf logs.tar.xz tests.log traces.log bench4.log *.json 2>/dev/null && rm -f tests.log traces.log *.json; true
