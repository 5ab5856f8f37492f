#!/usr/bin/env bash
# Second call of the same record: after the fix that stops the other ranks'
# kernels when a rank fails (fault tests), compute-sanitizer's memcheck,
# racecheck and synccheck on ring:ll, a long soak, and the bench again with
# more calls per row (the first call's rows were noisy on every path).
#   bash docs/results/2026-12-05-h100x1-ring-ll/run2.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/ll2; mkdir -p "$O"
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
step tests 120 .device/integration in_an_ fail_mid stall_mid every_path
for tool in memcheck racecheck synccheck; do
  step tests 90 compute-sanitizer --tool $tool --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 3 --algo ring:ll --size 64KiB+4 --iters 2 --timeout 30
done
step tests 60 compute-sanitizer --tool memcheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 2 --algo ring:ll -d bfloat16 -o avg --count 1001 --in-place --iters 2 --timeout 30
step soak 150 $RR soak --backend cuda --devices 0 --algo ring:ll --rank-counts 2,3,4 --calls 10000 --max-size 256KiB --seed 5
step bench2 150 $RR bench --backend cuda --devices 0 --ranks 2 --algo ring,ring:pipe2,ring:ll,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench2.csv"
step bench4 150 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring,ring:pipe2,ring:ll,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench4.csv"
cd "$O" && grep -E "^test |ERROR SUMMARY|PASS|FAIL" tests.log | head -40; tail -4 soak.log; grep -E "Model of" bench2.log bench4.log; cat command.txt
xz -9 tests.log soak.log; true
