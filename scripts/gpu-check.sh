#!/usr/bin/env bash
# The GPU check, one call on the GPU machine (see CONTRIBUTING.md).
#   bash .device/gpu-check.sh validate   tests, check vs NCCL (every type, op, collective),
#                                        sanitizers, a 10k-call soak, the float auto vs NCCL bench
#   bash .device/gpu-check.sh record     the recorded benches (float, per type, reduce-scatter /
#                                        all-gather, ring paths, graphs), timelines, topology
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

if [ "$MODE" = ring ]; then
    # Issue 13: the ring's own speed, plain and replayed from graphs, next to
    # auto and NCCL (plain and graph) in one run; then reduce-scatter /
    # all-gather vs NCCL, 4 ranks on 2 GPUs, the small-call A/B against the
    # previous binary (if staged as ringreduce-old), and the tests.
    run 170 "$RR" bench --ranks 2 --algo auto,ring,ring:pipe2,ring:pipe4,ring:graph,ring:pipe2:graph,nccl,nccl:graph \
        -b 8 -e 1GiB -f 2 -n 20 -w 5 --blocks 3 --big 256MiB -J "$OUT/bench-ring-2r.json" > "$OUT/bench-ring.log" 2>&1
    grep -vE "^# row" "$OUT/bench-ring.log" | tail -75
    run 80 "$RR" bench --ranks 2 --collective reduce-scatter,all-gather --algo auto,ring,nccl \
        -b 1KiB -e 1GiB -f 4 -n 20 -w 5 --blocks 3 --big 256MiB -J "$OUT/bench-rsag-2r.json" > "$OUT/bench-rsag.log" 2>&1
    grep -vE "^# row" "$OUT/bench-rsag.log" | grep -E "^ +[0-9]|Collective|exit|rror" | tail -40
    run 60 "$RR" bench --ranks 4 --algo ring,ring:pipe2,ps,ring:graph \
        -b 64KiB -e 1GiB -f 4 -n 10 -w 3 --blocks 3 --big 128MiB --no-ceiling -J "$OUT/bench-ring-4r.json" > "$OUT/bench-4r.log" 2>&1
    grep -vE "^# row" "$OUT/bench-4r.log" | grep -E "^ +[0-9]|exit|rror|Note" | tail -30
    if [ -x "$D/ringreduce-old" ]; then
        for b in ringreduce-old ringreduce; do
            run 30 "$D/$b" bench --ranks 2 --algo auto,nccl -b 8 -e 64KiB -f 4 -n 50 -w 10 --blocks 5 --no-ceiling \
                --cold-size 4KiB > "$OUT/ab-$b.log" 2>&1
            grep -E "^ +[0-9]" "$OUT/ab-$b.log" | tail -8
        done
    fi
    if [ -x "$D/integration" ]; then
        log "integration tests"
        timeout 200 "$D/integration" > "$OUT/tests.log" 2>&1; echo "[exit $?]"
        grep -vE ' \.\.\. ok' "$OUT/tests.log" | tail -40
    fi
    exit 0
fi

if [ "$MODE" = record ]; then
    echo "record: not yet"
    exit 0
fi
echo "unknown mode $MODE"; exit 2
