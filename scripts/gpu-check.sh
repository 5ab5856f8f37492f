#!/usr/bin/env bash
# The whole GPU check, in one call on the GPU machine (see CONTRIBUTING in README).
#   bash .device/gpu-check.sh quick     smoke: run cases + GPU tests
#   bash .device/gpu-check.sh full      + compute-sanitizer + check vs NCCL + bench sweeps
#   bash .device/gpu-check.sh flag      the flag one-shot vs the other small-message paths and NCCL
#   bash .device/gpu-check.sh final     auto vs NCCL (plain and graphs), tests, check, sanitizer, Tree
#   bash .device/gpu-check.sh record    the recorded benches only (median of 3 timed blocks per cell)
set -uo pipefail
MODE="${1:-full}"
# MAXB shrinks the sweeps for a dry run of this script (default: the real sizes).
MAXB="${MAXB:-1GiB}"
MAXB4="${MAXB4:-256MiB}"
D="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
RR="$D/ringreduce"
export RINGREDUCE_BIN="$RR"
log() { echo; echo "### $*"; }
run() { log "\$ $*"; "$@"; echo "[exit $?]"; }

log "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  mode: $MODE"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m | head -4

if [ "$MODE" = record ]; then
    # The recorded bench alone (after `final` passed on the same code): auto vs
    # NCCL to 1 GiB, then both replayed from CUDA graphs where auto can be.
    run "$RR" bench --ranks 2 --algo ring,nccl -b 8 -e $MAXB -f 2 -n 20 -w 5 --blocks 3 --big 2GiB -J "$OUT/record-2r.json" --csv "$OUT/record-2r.csv" --plot "$OUT/record-2r.svg"
    run "$RR" bench --ranks 2 --algo ring,nccl,ring:graph,nccl:graph -b 8 -e 16MiB -f 2 -n 20 -w 5 --blocks 3 --no-ceiling -J "$OUT/record-graph-2r.json"
    exit 0
fi
if [ "$MODE" = final ]; then
    # The recorded run: first process on a fresh machine (a real cold start),
    # the shipped auto path vs NCCL, both also replayed from CUDA graphs.
    run "$RR" bench --ranks 2 --algo ring,nccl,ring:graph,nccl:graph -b 8 -e $MAXB -f 2 -n 20 -w 5 --big 2GiB -J "$OUT/final-2r.json" --csv "$OUT/final-2r.csv" --plot "$OUT/final-2r.svg"
    log "cold start with the kernels JIT-compiled from PTX instead of the cubin"
    RINGREDUCE_PTX_JIT=1 "$RR" bench --ranks 2 --algo ring,nccl -b 4MiB -e 4MiB -n 20 -w 5 --no-ceiling 2>&1 | grep -E "setup:|^# (ring|nccl) "; echo "[exit $?]"
    log "integration tests"
    "$D/integration" 2>&1 | tee "$OUT/tests.log" | grep -v ' \.\.\. ok' ; echo "[exit ${PIPESTATUS[0]}]"
    run "$RR" run --backend cuda --ranks 2 --size 4MiB --in-place
    run "$RR" run --backend cuda --ranks 3 --count 5 --in-place
    run "$RR" check --ranks 2 --sizes 8,4KiB,1MiB+12,16MiB+12,64MiB,1GiB+12 --algo ring,oneshot:flag,oneshot:fused,ring:pipe4
    run "$RR" check --ranks 2 --sizes 8,1MiB+12,16MiB+12,256MiB --algo ring --inputs exact
    log "compute-sanitizer memcheck"
    timeout 180 compute-sanitizer --tool memcheck --leak-check full "$RR" run --backend cuda --ranks 2 --size 4MiB 2>&1 | tail -4; echo "[exit ${PIPESTATUS[0]}]"
    timeout 180 compute-sanitizer --tool memcheck "$RR" run --backend cuda --ranks 2 --size 4MiB --in-place 2>&1 | tail -4; echo "[exit ${PIPESTATUS[0]}]"
    timeout 180 compute-sanitizer --tool memcheck "$RR" run --backend cuda --ranks 3 --count 1003 --in-place --algo ring:pipe2 2>&1 | tail -4; echo "[exit ${PIPESTATUS[0]}]"
    log "NCCL_ALGO=Tree"
    NCCL_ALGO=Tree "$RR" bench --ranks 2 --algo nccl -b 1MiB -e $MAXB -f 4 -n 20 -w 5 -c 0 --no-ceiling | grep -vE "^# (Note|Hardware|Using|  Rank)"; echo "[exit $?]"
    exit 0
fi
if [ "$MODE" = flag ]; then
    # The flag one-shot (one exchange kernel per rank) against the fused and
    # chained one-shots, the ring and NCCL; cold start from the cubin vs PTX JIT.
    log "setup with the kernels JIT-compiled from PTX (first process: cold JIT cache)"
    RINGREDUCE_PTX_JIT=1 "$RR" run --backend cuda --ranks 2 --size 4MiB --algo oneshot:flag; echo "[exit $?]"
    run "$RR" run --backend cuda --ranks 2 --size 4MiB --algo oneshot:flag --in-place
    log "integration tests"
    "$D/integration" 2>&1 | tee "$OUT/tests.log" | grep -v ' \.\.\. ok' ; echo "[exit ${PIPESTATUS[0]}]"
    run "$RR" check --ranks 2 --sizes 8,4KiB,1MiB+3,16MiB+12,64MiB --algo oneshot:flag,oneshot:fused
    run "$RR" bench --ranks 2 --algo oneshot:flag,oneshot:fused,oneshot,ring:pipe2,nccl,nccl:graph -b 8 -e 64MiB -f 2 -n 30 -w 5 -J "$OUT/flag-2r.json"
    run "$RR" bench --ranks 2 --algo ring,nccl -b 32MiB -e 128MiB -f 2 -n 50 -w 5 -c 0 --no-ceiling
    run "$RR" bench --ranks 2 --algo ring,nccl -b 32MiB -e 128MiB -f 2 -n 50 -w 5 -c 0 --no-ceiling
    log "compute-sanitizer memcheck, flag one-shot"
    timeout 120 compute-sanitizer --tool memcheck "$RR" run --backend cuda --ranks 2 --count 100003 --algo oneshot:flag --in-place 2>&1 | tail -8; echo "[exit ${PIPESTATUS[0]}]"
    exit 0
fi

run "$RR" run --backend cuda --ranks 2 --size 256MiB
run "$RR" run --backend cuda --ranks 8 --count 1000003
run "$RR" run --backend cuda --ranks 3 --count 5 --in-place
run "$RR" run --backend cuda --ranks 2 --size 4MiB --inputs exact --in-place
run "$RR" run --ranks 2 --size 1GiB --algo ring:pipe4
log "integration tests"
"$D/integration" 2>&1 | tee "$OUT/tests.log" | grep -v ' \.\.\. ok' ; echo "[exit ${PIPESTATUS[0]}]"

explore() {
    run "$RR" bench --ranks 2 --algo ring:pipe1,ring:pipe2,ring:pipe4,ring:pipe8,ring:pipe4x2,ring:pipe8x2,oneshot:pull,oneshot:pull4,oneshot:fused,oneshot,oneshot:fenced,oneshot:pipe4,nccl -b 8 -e $MAXB -f 4 -n 20 -w 5 -c 0 -J "$OUT/explore-2r.json"
    log "NCCL_ALGO=Tree"
    NCCL_ALGO=Tree "$RR" bench --ranks 2 --algo nccl -b 1MiB -e $MAXB -f 4 -n 20 -w 5 -c 0 --no-ceiling; echo "[exit $?]"
}
if [ "$MODE" = explore ]; then explore; exit 0; fi
if [ "$MODE" = confirm ]; then
    # After tuning: the tests, a check of every one-shot path against NCCL,
    # and the recorded ring (auto) vs NCCL bench with the fused one-shot beside it.
    log "integration tests"
    "$D/integration" 2>&1 | tee "$OUT/tests.log" | grep -v ' \.\.\. ok' ; echo "[exit ${PIPESTATUS[0]}]"
    run "$RR" check --ranks 2 --sizes 4KiB,4MiB,256MiB --algo ring,oneshot:fused,oneshot:pull
    run "$RR" bench --ranks 2 --algo ring,oneshot:fused,nccl -b 8 -e $MAXB -f 2 -n 20 -w 5 -J "$OUT/confirm-2r.json" --csv "$OUT/confirm-2r.csv" --plot "$OUT/confirm-2r.svg"
    exit 0
fi
if [ "$MODE" = quick ]; then
    run "$RR" bench --ranks 2 --algo ring,nccl -b 8 -e 64MiB -f 8 -n 20 -w 5
    exit 0
fi

[ "$MODE" = full ] && explore
log "compute-sanitizer memcheck"
compute-sanitizer --tool memcheck --leak-check full "$RR" run --backend cuda --ranks 2 --size 4MiB 2>&1 | tail -15
compute-sanitizer --tool memcheck "$RR" run --backend cuda --ranks 3 --count 1003 --in-place --algo ring:pipe2 2>&1 | tail -6

run "$RR" check --ranks 2 --sizes 4KiB,4MiB,256MiB,1GiB+12 --algo ring,ring:pipe4,oneshot
run "$RR" check --ranks 2 --sizes 4KiB,4MiB,256MiB,1GiB+12 --algo ring --inputs exact

run "$RR" bench --ranks 2 --algo ring,nccl,nccl:graph,ps -b 8 -e $MAXB -f 2 -n 20 -w 5 -J "$OUT/bench-2r.json" --csv "$OUT/bench-2r.csv" --plot "$OUT/bench-2r.svg"
run "$RR" bench --ranks 4 --algo ring,ps -b 1KiB -e $MAXB4 -f 4 -n 10 -w 3 -J "$OUT/bench-4r.json"
run "$RR" bench --ranks 8 --algo ring,ps -b 1KiB -e $MAXB4 -f 4 -n 10 -w 3 -J "$OUT/bench-8r.json"
