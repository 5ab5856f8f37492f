#!/usr/bin/env bash
# The GPU check, one call on the GPU machine (see CONTRIBUTING.md).
#   bash .device/gpu-check.sh validate   tests, check vs NCCL (every type, op, collective),
#                                        sanitizers, a 10k-call soak, the float auto vs NCCL bench
#   bash .device/gpu-check.sh record     the recorded benches (float, per type, reduce-scatter /
#                                        all-gather, ring paths, graphs), timelines, topology
#   bash .device/gpu-check.sh timeline   issue 12: topology, GPU timelines (JSON + SVG) with NCCL on
#                                        the same clock, the timing overhead at 64 MiB, bench with the
#                                        fitted model and the time breakdown, PS vs ring for N = 2, 4, 8
#                                        (~1-2 min on 2 x H200). TIMELINE_BACKEND=cpu RR=target/release/ringreduce
#                                        runs the same steps on the CPU backend, smaller (a dry run).
# Every step is bounded by `timeout`; logs and JSON go to $OUT (or ./gpu-out).
set -uo pipefail
MODE="${1:-validate}"
D="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
RR="${RR:-$D/ringreduce}"
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

if [ "$MODE" = timeline ]; then
    B="${TIMELINE_BACKEND:-cuda}"
    T="$OUT/timeline"
    mkdir -p "$T"
    if [ "$B" = cuda ]; then
        NCCL=(--nccl); BIG=64MiB; SMALL=1MiB; MAXB=256MiB; ITERS=20
    else
        # The dry run: the same commands, sizes a 2-core CPU gets through.
        NCCL=(); BIG=4MiB; SMALL=64KiB; MAXB=8MiB; ITERS=3
    fi
    # step NAME LIMIT_S CMD...: the command's output into $T/NAME.txt, its
    # summary lines here.
    step() { local name=$1 t=$2; shift 2; log "\$ $* > $name.txt"; timeout "$t" "$@" > "$T/$name.txt" 2>&1; echo "[exit $?]"; }
    step topo 120 "$RR" topo --backend "$B" $( [ "$B" = cpu ] && echo --size 16MiB )
    grep -vE "^topo:" "$T/topo.txt" | head -40
    step trace-ring-pipe2-2r-nccl 120 "$RR" trace --backend "$B" --ranks 2 --size "$BIG" --algo ring:pipe2 "${NCCL[@]}" \
        --timeline "$T/ring-pipe2-2r.json" --svg "$T/ring-pipe2-2r.svg"
    grep -E "^# (clock|measurement|  |order|where|  rank)" "$T/trace-ring-pipe2-2r-nccl.txt"
    step trace-ring-pipe2-4r 120 "$RR" trace --backend "$B" --ranks 4 --size "$BIG" --algo ring:pipe2 \
        --timeline "$T/ring-pipe2-4r.json" --svg "$T/ring-pipe2-4r.svg"
    grep -E "^# (backend|clock|measurement|  call|order)" "$T/trace-ring-pipe2-4r.txt"
    step trace-auto-small 120 "$RR" trace --backend "$B" --ranks 2 --size "$SMALL" --algo auto "${NCCL[@]}" \
        --timeline "$T/auto-small.json" --svg "$T/auto-small.svg"
    grep -E "^# (ringreduce|measurement|  call|  NCCL|order)" "$T/trace-auto-small.txt"
    step trace-auto-small-in-place 120 "$RR" trace --backend "$B" --ranks 2 --size "$SMALL" --algo auto --in-place "${NCCL[@]}" \
        --timeline "$T/auto-small-in-place.json" --svg "$T/auto-small-in-place.svg"
    grep -E "^# (ringreduce|measurement|  call|  NCCL|order)" "$T/trace-auto-small-in-place.txt"
    # The overhead of timing at 64 MiB (done when on is at most 10% slower
    # than off), more blocks than the traces' default, auto and ring:pipe2.
    for algo in auto ring:pipe2; do
        step "overhead-$algo" 120 "$RR" trace --backend "$B" --ranks 2 --size "$BIG" --algo "$algo" --calls 1 \
            --overhead-blocks 11 --overhead-iters 50
        grep -E "^# measurement" "$T/overhead-$algo.txt"
    done
    step bench-breakdown 300 "$RR" bench --backend "$B" --ranks 2 --algo "auto$( [ "$B" = cuda ] && echo ,nccl )" \
        -b "$SMALL" -e "$MAXB" -f 2 -n "$ITERS" -w 3 --blocks 3 -c 0 --breakdown \
        -J "$T/bench-breakdown.json" --plot "$T/bench-breakdown.svg"
    grep -E "^# (Model|Measured|Where|  call| +[0-9]+(\.[0-9]+)?[KMG]iB)|^# +size" "$T/bench-breakdown.txt"
    step theory-from-bench 30 "$RR" theory --from-bench "$T/bench-breakdown.json" --ranks 2,4,8 --size 64MiB
    tail -12 "$T/theory-from-bench.txt"
    step compare 240 "$RR" compare --backend "$B" --ranks 2,4,8 --size "$BIG" --plot "$T/compare.svg"
    grep -vE "^compare:" "$T/compare.txt"
    # What comes back: the bundle, and the three pictures for a quick look.
    cp "$T/ring-pipe2-2r.svg" "$T/compare.svg" "$T/bench-breakdown.svg" "$OUT/" 2>/dev/null
    tar -czf "$OUT/timeline.tar.gz" -C "$OUT" timeline && rm -rf "$T"
    ls -la "$OUT"
    exit 0
fi

if [ "$MODE" = record ]; then
    echo "record: not yet"
    exit 0
fi
echo "unknown mode $MODE"; exit 2
