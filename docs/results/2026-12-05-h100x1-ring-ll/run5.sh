#!/usr/bin/env bash
# Fifth call of the same record: the LL kernel with read-ahead (each thread
# issues the loads of its next 4 lines before looking at any). Correctness
# (the LL fault tests, every path, sanitizers, a soak), then the bench on 2
# and 4 ranks to 16 MiB, as in call 3.
#   bash docs/results/2026-12-05-h100x1-ring-ll/run5.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/ll5; mkdir -p "$O"
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
step tests 120 .device/integration in_an_ every_path
for tool in memcheck racecheck synccheck; do
  step tests 90 compute-sanitizer --tool $tool --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 3 --algo ring:ll --size 1MiB+4 --iters 2 --timeout 30
done
step soak 150 $RR soak --backend cuda --devices 0 --algo ring:ll --rank-counts 2,3,4,5 --calls 6000 --max-size 4MiB --seed 12
step bench2 150 $RR bench --backend cuda --devices 0 --ranks 2 --algo ring,ring:ll,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench2.csv"
step bench4 150 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring,ring:ll,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench4.csv"
cd "$O" && grep -E "^test |ERROR SUMMARY|passed|PASS|FAIL" tests.log | head -40; grep -E '^(PASS|FAIL)' soak.log; grep -E "Model of" bench2.log bench4.log; cat command.txt
xz -9 tests.log soak.log; true
