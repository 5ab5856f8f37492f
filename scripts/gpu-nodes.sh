#!/usr/bin/env bash
# Several nodes on one GPU machine, on the CUDA backend: mpirun with
# RINGREDUCE_RANKS_PER_NODE, ranks of different nodes reaching each other
# only through the network hop (host-staged: device to host, an MPI
# message, host to device), ranks of one node through CUDA IPC.
#
#   bash scripts/gpu-nodes.sh stage        (here) build with the mpi feature into .device-nodes/
#   bash .device-nodes/gpu-nodes.sh $OUT   (on the GPU machine) run it, output under $OUT
#
# What runs there: the MPI test of tools/tests/mpi on the CUDA backend
# (2 nodes x 2 ranks: every type, op and collective of ring and hier:2
# bitwise, 200 random calls, the bytes sent across, a killed rank, a rank
# that never joins), then 2 nodes x 1 rank (ring, exact inputs), and the
# time of the same calls inside one node (CUDA IPC) against over two nodes
# (the hop), with the ranks sharing the GPUs there are.
set -uo pipefail
if [ "${1:-}" = stage ]; then
    set -e
    cd "$(dirname "$0")/.."
    cargo build --release -p ringreduce-tools --features mpi
    json=$(cargo test --release -p ringreduce-tools --features mpi --test mpi --no-run --message-format=json 2>/dev/null)
    t=$(printf '%s\n' "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "mpi" and m.get("executable"):
        print(m["executable"])
')
    rm -rf .device-nodes && mkdir -p .device-nodes
    cp target/release/ringreduce .device-nodes/ringreduce
    cp "$t" .device-nodes/mpi-test
    strip --strip-debug .device-nodes/ringreduce .device-nodes/mpi-test 2>/dev/null || true
    cp scripts/gpu-nodes.sh scripts/record-command.sh .device-nodes/
    git rev-parse --short HEAD > .device-nodes/COMMIT
    git diff --quiet || echo "+uncommitted" >> .device-nodes/COMMIT
    du -sh .device-nodes
    exit 0
fi
OUT=${1:?usage: gpu-nodes.sh OUT}
D="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
# shellcheck source=record-command.sh
. "$D/record-command.sh"
record_command "$OUT" "$@"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RR="$D/ringreduce"
MPI=(mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x NCCL_NVLS_ENABLE)
log() { echo; echo "### $*"; }
if [ "${NODES_NEWCOMER:-0}" = 1 ]; then
    # What a newcomer tries over nodes on the CUDA backend: paths that
    # cannot cross a network (refused by name, no hang), odd sizes, a node
    # size that does not divide the ranks.
    log "newcomer cases over 2 nodes x 2 ranks, CUDA"
    {
        for args in "--algo oneshot --size 1MiB" "--algo ps --size 1MiB" "--algo oneshot:fused --size 4KiB" \
                    "--algo hier:3 --size 1MiB" "--algo ring:pipe4 --count 1001" "--algo auto --count 7" \
                    "--algo ring --count 0" "--collective reduce-scatter --algo ring --count 4099"; do
            echo "## run --backend cuda $args"
            t0=$(date +%s%N)
            # shellcheck disable=SC2086 # $args is a list of flags
            timeout 120 "${MPI[@]}" -np 4 -x RINGREDUCE_RANKS_PER_NODE=2 "$RR" run --backend cuda $args --iters 3 --timeout 20
            rc=$?
            echo "[exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms]"
        done
    } > "$OUT/newcomer.log" 2>&1
    grep -E "^##|check|rror|\[exit" "$OUT/newcomer.log" | awk '!seen[$0]++' | head -60
    exit 0
fi
if [ "${NODES_AB:-0}" = 1 ]; then
    # The staged binary against .device-nodes/ringreduce-old, alternating,
    # 2 nodes x 1 rank (ring) and 2 nodes x 2 (hier:2), and the same over
    # Open MPI's shared-memory transport (vader) to see what TCP costs.
    log "A/B: $RR against $D/ringreduce-old"
    {
        for round in 1 2 3; do
            for bin in ringreduce-old ringreduce; do
                for size in 1MiB 64MiB; do
                    echo "## round $round $bin ring $size 2 nodes x 1 (tcp)"
                    timeout 120 "${MPI[@]}" -np 2 -x RINGREDUCE_RANKS_PER_NODE=1 "$D/$bin" run --backend cuda --algo ring --size "$size" --iters 20 --timeout 30
                    echo "## round $round $bin hier:2 $size 2 nodes x 2 (tcp)"
                    timeout 120 "${MPI[@]}" -np 4 -x RINGREDUCE_RANKS_PER_NODE=2 "$D/$bin" run --backend cuda --algo hier:2 --size "$size" --iters 20 --timeout 30
                done
            done
        done
        for bin in ringreduce-old ringreduce; do
            echo "## $bin ring 64MiB 2 nodes x 1 (vader: shared memory)"
            timeout 120 mpirun --oversubscribe --mca btl self,vader -x NCCL_NVLS_ENABLE -np 2 -x RINGREDUCE_RANKS_PER_NODE=1 "$D/$bin" run --backend cuda --algo ring --size 64MiB --iters 20 --timeout 30
        done
    } > "$OUT/ab.log" 2>&1
    grep -E "^##|steady|check     : F|\[exit|rror" "$OUT/ab.log" | grep -v "^check" | head -80
    exit 0
fi
{
    date -u; nvidia-smi -L; mpirun --version | head -1
    ompi_info --parsable --all 2>/dev/null | grep -E "mpi_built_with_cuda_support:value" || echo "ompi_info: no CUDA support line"
    "$RR" env 2>&1 | grep -iE "mpi|fault" | head -5
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

log "the MPI test on the CUDA backend (2 nodes x 2 ranks; ranks share the GPUs)"
RR_MPI_BACKEND=cuda RR_MPI_BIN="$RR" timeout 900 "$D/mpi-test" > "$OUT/mpi-test-cuda.log" 2>&1
echo "[exit $?]" >> "$OUT/mpi-test-cuda.log"
tail -40 "$OUT/mpi-test-cuda.log"

log "2 nodes x 1 rank, ring, exact inputs"
{
    for size in 4KiB 1MiB 64MiB; do
        echo "## ring $size over 2 nodes of 1"
        timeout 120 "${MPI[@]}" -np 2 -x RINGREDUCE_RANKS_PER_NODE=1 "$RR" run --backend cuda --algo ring --size "$size" --inputs exact --iters 20 --timeout 30
        echo "[exit $?]"
    done
} > "$OUT/two-nodes-of-one.log" 2>&1
grep -E "^##|backend|network|check|steady|\[exit" "$OUT/two-nodes-of-one.log" | head -40

log "inside one node (CUDA IPC) vs over two nodes (the hop): 4 ranks, hier:2 and ring"
{
    for algo in ring hier:2; do
        for size in 1MiB 64MiB; do
            echo "## $algo $size, one node of 4 (RINGREDUCE_MPI=0: the store, CUDA IPC)"
            timeout 120 "${MPI[@]}" -np 4 -x RINGREDUCE_MPI=0 "$RR" run --backend cuda --algo "$algo" --size "$size" --inputs exact --iters 20 --timeout 30
            echo "[exit $?]"
            echo "## $algo $size, two nodes of 2 (the host-staged hop between them)"
            timeout 120 "${MPI[@]}" -np 4 -x RINGREDUCE_RANKS_PER_NODE=2 "$RR" run --backend cuda --algo "$algo" --size "$size" --inputs exact --iters 20 --timeout 30
            echo "[exit $?]"
        done
    done
} > "$OUT/one-node-vs-two.log" 2>&1
grep -E "^##|network|check|steady|\[exit" "$OUT/one-node-vs-two.log" | head -60
date -u
