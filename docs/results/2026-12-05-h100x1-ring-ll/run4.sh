#!/usr/bin/env bash
# Fourth call of the same record: the LL kernel that writes the step it gave
# up in (the control block grows to 32 bytes): the fault tests of every
# kernel path, the sanitizers, a soak, and the bench on 3 and 4 ranks.
#   bash docs/results/2026-12-05-h100x1-ring-ll/run4.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/ll4; mkdir -p "$O"
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
step tests 150 .device/integration in_an_ fail_mid stall_mid panic_mid every_path
step tests 60 .device/api
for tool in memcheck racecheck synccheck; do
  step tests 90 compute-sanitizer --tool $tool --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 4 --algo ring:ll -d half -o max --size 96KiB+6 --iters 2 --timeout 30
done
step soak 150 $RR soak --backend cuda --devices 0 --algo ring:ll --rank-counts 2,3,4,6 --calls 6000 --max-size 1MiB --seed 9
step soak 60 $RR soak --backend cuda --devices 0 --rank-counts 3,4 --calls 2000 --max-size 1MiB --seed 10
step bench3 120 $RR bench --backend cuda --devices 0 --ranks 3 --algo ring,ring:ll,auto -b 8 -e 4MiB -f 4 -n 50 -w 10 --csv "$O/bench3.csv"
step bench4 120 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring:ll,oneshot:fused,ps,auto -b 8 -e 4MiB -f 4 -n 50 -w 10 --csv "$O/bench4.csv"
cd "$O" && grep -E "^test |ERROR SUMMARY|passed|PASS|FAIL" tests.log | head -40; grep -E '^(PASS|FAIL)' soak.log; grep -E "Model of" bench3.log bench4.log; cat command.txt
xz -9 tests.log soak.log; true
