#!/usr/bin/env bash
# One GPU, ranks as threads sharing it: the LL one-shot (oneshot:ll, two
# ranks, the LL ring's kernel as one chunk and one step). Correctness first
# (integration tests: every path, the fault tests of every kernel path, CUDA
# graphs; compute-sanitizer memcheck, racecheck, synccheck; soak with every
# call checked), then bench against the other small-message paths, plain and
# replayed from CUDA graphs.
#   bash docs/results/2026-12-05-gpu1-oneshot-ll/run.sh   (from the checkout, .device carried)
set -u
O=${OUT:-$PWD/ll-out}/oneshot-ll; mkdir -p "$O"
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
step tests 200 .device/integration in_an_ fail_mid stall_mid every_path graphs
step tests 90 .device/api
for tool in memcheck racecheck synccheck; do
  step tests 90 compute-sanitizer --tool $tool --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --size 64KiB+4 --iters 3 --timeout 30
done
step tests 60 compute-sanitizer --tool memcheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 2 --algo oneshot:ll -d bfloat16 -o avg --count 1001 --in-place --iters 3 --timeout 30
step tests 60 compute-sanitizer --tool memcheck --error-exitcode 9 $RR run --backend cuda --devices 0 --ranks 3 --algo ring:ll -d int8 -o min --count 777 --iters 3 --timeout 30
step soak 150 $RR soak --backend cuda --devices 0 --algo oneshot:ll --rank-counts 2 --calls 10000 --max-size 1MiB --seed 21
step soak 60 $RR soak --backend cuda --devices 0 --algo ring:ll --rank-counts 2,3,4 --calls 3000 --max-size 1MiB --seed 22
step soak 40 $RR soak --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --max-size 100KiB --every
step runs 60 bash -c "for s in 1 2 3 7 15 16 17 1000 262147; do $RR run --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --count \$s --iters 3 2>&1 | tail -1; $RR run --backend cuda --devices 0 --ranks 2 --algo oneshot:ll -d half -o prod --count \$s --in-place --iters 3 2>&1 | tail -1; done"
step bench2 150 $RR bench --backend cuda --devices 0 --ranks 2 --algo oneshot:ll,ring:ll,oneshot:flag,oneshot:fused,ring,auto -b 8 -e 16MiB -f 4 -n 50 -w 10 --csv "$O/bench2.csv"
step graph2 150 $RR bench --backend cuda --devices 0 --ranks 2 --algo oneshot:ll:graph,oneshot:flag:graph,ring:ll:graph,auto:graph,oneshot:ll,oneshot:flag -b 8 -e 1MiB -f 4 -n 50 -w 10 --csv "$O/graph2.csv"
step bf16 100 $RR bench --backend cuda --devices 0 --ranks 2 -d bfloat16 --algo oneshot:ll,ring:ll,oneshot:flag,auto -b 8 -e 4MiB -f 8 -n 50 -w 10 --csv "$O/bench2-bf16.csv"
cd "$O" && grep -E "^test |ERROR SUMMARY|passed|PASS|FAIL" tests.log | head -60; grep -E '^(PASS|FAIL)|wrong' soak.log | head; grep -c -i "fail\|wrong" runs.log; grep -E "Model of" bench2.log graph2.log bf16.log; cat command.txt
xz -9 tests.log soak.log runs.log; true
