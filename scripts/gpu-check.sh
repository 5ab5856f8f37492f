#!/usr/bin/env bash
# The GPU check, one call on the GPU machine (see CONTRIBUTING.md).
#   bash .device/gpu-check.sh validate   tests, check vs NCCL (every type, op, collective),
#                                        sanitizers, a 10k-call soak, the float auto vs NCCL bench
#   bash .device/gpu-check.sh record     the recorded benches (float, per type, reduce-scatter /
#                                        all-gather, ring paths, graphs), timelines, topology
#   bash .device/gpu-check.sh overlap    issue 16: gradient buckets all-reduced while the next are
#                                        computed (ring, auto, NCCL), ~2 min of GPU time
# Every step is bounded by `timeout`; logs and JSON go to $OUT (or ./gpu-out).
set -uo pipefail
MODE="${1:-validate}"
D="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
RR="$D/ringreduce"
export RINGREDUCE_BIN="$RR"
# The GPU machine's memory grows on demand: MemAvailable reads far too low.
export RINGREDUCE_HOST_MEMORY="${RINGREDUCE_HOST_MEMORY:-200GiB}"
log() { echo; echo "### $*"; }
# run LIMIT_S CMD...: the command, bounded, with its exit status.
run() { local t=$1; shift; log "\$ $*"; timeout "$t" "$@"; echo "[exit $?]"; }

log "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  mode: $MODE  commit: $(cat "$D/COMMIT" 2>/dev/null)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m | head -4
grep -E "MemTotal|MemAvailable" /proc/meminfo
cat /sys/fs/cgroup/memory.max 2>/dev/null || true

if [ "$MODE" = validate ]; then
    if [ -x "$D/integration" ]; then
    log "integration tests (the CUDA variants run here)"
    timeout 600 "$D/integration" > "$OUT/tests.log" 2>&1; echo "[exit $?]"
    grep -vE ' \.\.\. ok' "$OUT/tests.log" | tail -60
    fi
    run 30 "$RR" run --backend cuda --ranks 2 --size 4MiB
    run 30 "$RR" run --backend cuda --ranks 2 --size 4MiB --in-place -d half -o avg
    run 30 "$RR" run --backend cuda --ranks 3 --count 1003 --algo ring:pipe2 -d int8 -o prod
    run 30 "$RR" run --backend cuda --ranks 2 --count 1000 --collective all-gather -d f8e4m3
    {
    run 240 "$RR" check --ranks 2 -d all -o all --collective all --counts 1,7,262147 --algo auto,ring,ring:pipe4
    run 200 "$RR" check --ranks 2 -d float,bfloat16,half,int8 --sizes 1GiB+16 --algo auto,ring:pipe4
    run 60 "$RR" check --ranks 2 -d float --collective all --sizes 64MiB --inputs exact --algo auto,ring,ring:pipe2,oneshot,ps
    } > "$OUT/check.log" 2>&1
    grep -E "^#|FAIL|PASS|error|exit" "$OUT/check.log" | tail -40
    {
    for tool in memcheck racecheck synccheck initcheck; do
        run 150 compute-sanitizer --tool $tool "$RR" run --backend cuda --ranks 2 --size 1MiB --iters 2
        run 150 compute-sanitizer --tool $tool "$RR" run --backend cuda --ranks 2 --size 1MiB --in-place --iters 2 -d bfloat16 -o avg
    done
    run 150 compute-sanitizer --tool memcheck --leak-check full "$RR" run --backend cuda --ranks 3 --count 1003 --in-place --algo ring:pipe2 --iters 2
    run 150 compute-sanitizer --tool memcheck "$RR" run --backend cuda --ranks 2 --count 100003 --collective reduce-scatter -d int8 -o sum --iters 2
    } > "$OUT/sanitizer.log" 2>&1
    grep -E "^###|ERROR SUMMARY|\[exit|check     :" "$OUT/sanitizer.log" | tail -60
    run 300 "$RR" soak --backend cuda --calls 10000 --seed 1 --max-size 1MiB > "$OUT/soak.log" 2>&1; tail -12 "$OUT/soak.log"
    run 240 "$RR" bench --ranks 2 --algo auto,nccl -b 8 -e 1GiB -f 2 -n 20 -w 5 --blocks 3 --big 2GiB -J "$OUT/bench-float-2r.json" > "$OUT/bench.log" 2>&1
    grep -vE "^# row" "$OUT/bench.log" | tail -70
    exit 0
fi

if [ "$MODE" = overlap ]; then
    # Issue 16, 2 GPUs. Expected GPU time ~2 min (bounds below: 8 min):
    #  1. the synthetic backward pass: 8 buckets of 4, 25 and 100 MiB, the fma and the mem
    #     kernel, ring / auto / NCCL in the same run, 30 timed steps each (~20 s: per step
    #     and contender 3 phases of 0.1-4 ms plus checks; the host check of the last step
    #     reads 8 x 100 MiB x 2 ranks per contender);
    #  2. 25 MiB with the collectives' streams at default priority, and without the gate
    #     (~10 s each);
    #  3. compute-sanitizer memcheck of a small run (ringreduce only: NCCL is not run under
    #     the sanitizer; no gate: cuStreamWaitValue32 is avoided there).
    # 8 files: overlap.log, overlap-2r.json, overlap-timeline.{json,svg},
    # overlap-variants.log, overlap-prio-default.json, overlap-gate-off.json,
    # overlap-sanitizer.log. Dry run without a GPU (scripts/stage-gpu.sh first):
    #   OVERLAP_BACKEND=cpu OVERLAP_SIZES=64KiB OVERLAP_VARIANT=64KiB OVERLAP_STEPS=3 \
    #   OVERLAP_EXTRA="--fmas 64 --passes 1" bash .device/gpu-check.sh overlap
    OB="${OVERLAP_BACKEND:-cuda}"
    OS="${OVERLAP_SIZES:-4MiB,25MiB,100MiB}"
    OV="${OVERLAP_VARIANT:-25MiB}"
    OX="${OVERLAP_EXTRA:-}"
    COMMON=(--backend "$OB" --ranks 2 --buckets 8 --kernel fma,mem --contenders ring,auto,nccl
            --steps "${OVERLAP_STEPS:-30}" --warmup 2)
    # shellcheck disable=SC2086
    run 210 "$RR" overlap "${COMMON[@]}" --bucket-size "$OS" $OX \
        --json "$OUT/overlap-2r.json" --timeline "$OUT/overlap-timeline.json" > "$OUT/overlap.log" 2>&1
    cat "$OUT/overlap.log"
    {
    # shellcheck disable=SC2086
    run 75 "$RR" overlap "${COMMON[@]}" --bucket-size "$OV" $OX --comm-priority default \
        --json "$OUT/overlap-prio-default.json"
    # shellcheck disable=SC2086
    run 75 "$RR" overlap "${COMMON[@]}" --bucket-size "$OV" $OX --gate off \
        --json "$OUT/overlap-gate-off.json"
    } > "$OUT/overlap-variants.log" 2>&1
    grep -vE "^note      : env" "$OUT/overlap-variants.log" | tail -60
    if command -v compute-sanitizer > /dev/null 2>&1; then
        run 120 compute-sanitizer --tool memcheck "$RR" overlap --backend "$OB" --ranks 2 \
            --buckets 2 --bucket-size 1MiB --kernel fma,mem --contenders ring,auto --steps 1 \
            --warmup 1 --fmas 64 --passes 1 --gate off > "$OUT/overlap-sanitizer.log" 2>&1
        grep -E "ERROR SUMMARY|check     :|\[exit" "$OUT/overlap-sanitizer.log"
    else
        echo "compute-sanitizer not found: memcheck step skipped"
    fi
    exit 0
fi

if [ "$MODE" = record ]; then
    echo "record: not yet"
    exit 0
fi
echo "unknown mode $MODE"; exit 2
