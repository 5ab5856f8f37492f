#!/usr/bin/env bash
# One GPU, ranks as threads sharing it: the LL ring kernel (ring:ll) on the
# CUDA backend. Correctness first (integration tests: every path incl.
# ring:ll, the LL kernel's fail/stall fault tests; soak with every call
# checked over types, ops, 2-4 ranks and random sizes), then compute-sanitizer
# memcheck on one small run, then bench: ring, ring:pipe2, ring:ll, auto.
#   bash docs/results/2026-12-05-h100x1-ring-ll/run.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/ll; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@"
export NCCL_NVLS_ENABLE=0
export RINGREDUCE_BIN="$PWD/.device/ringreduce" RINGREDUCE_HOST_MEMORY=200GiB
RR=.device/ringreduce
{ date -u; cat .device/COMMIT; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; nproc; } > "$O/env.txt" 2>&1
step() {  # name, seconds, command...
  local name=$1 t=$2; shift 2
  local a=$(date +%s)
  timeout "$t" "$@" >> "$O/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - a )) s ($*)" | tee -a "$O/steps.txt"
}
step integration 150 .device/integration ll_ring every_path a_path_refuses
for d in float half bfloat16 double int8 int32 uint64 f8e4m3; do
  for o in sum avg max; do
    step soak 40 $RR soak --backend cuda --devices 0 --algo ring:ll -d $d -o $o --rank-counts 2,3,4 --calls 24 --max-size 3MiB --seed 7
  done
done
step soak 40 $RR soak --backend cuda --devices 0 --algo ring:ll -o prod -d int32 --rank-counts 2,5,8 --calls 40 --max-size 1MiB --seed 11
for n in 2 3 4; do step every 40 $RR soak --backend cuda --devices 0 --ranks $n --algo ring:ll --max-size 100KiB --every; done
step runs 60 bash -c "for s in 1 2 7 15 16 17 1000 262147; do for n in 2 3; do $RR run --backend cuda --devices 0 --ranks \$n --algo ring:ll --count \$s --iters 3 2>&1 | tail -2; $RR run --backend cuda --devices 0 --ranks \$n --algo ring:ll --count \$s --in-place --iters 3 2>&1 | tail -2; done; done"
step sanitizer 90 compute-sanitizer --tool memcheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 3 --algo ring:ll --size 64KiB+4 --iters 2 --timeout 30
step bench2 150 $RR bench --backend cuda --devices 0 --ranks 2 --algo ring,ring:pipe2,ring:ll,auto -b 8 -e 64MiB -f 4 -n 20 -w 5 --csv "$O/bench2.csv"
step bench4 120 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring,ring:ll,auto -b 8 -e 16MiB -f 4 -n 20 -w 5 --csv "$O/bench4.csv"
cd "$O" && grep -h -E "FAIL|panicked|error" integration.log soak.log runs.log every.log | head -20; tail -4 integration.log; grep -c "" soak.log; tail -5 sanitizer.log; cat steps.txt
xz -9 soak.log runs.log integration.log every.log 2>/dev/null; true
