#!/usr/bin/env bash
# NCCL's own benchmark beside ours: nccl-tests' all_reduce_perf, built on the
# GPU machine (nvcc, sm_90 only) against the NCCL that `bench` loads (the
# torch wheel's nvidia/nccl), run on GPUS GPUs of one process with -R 0, 1
# and 2 (buffers unregistered, registered, symmetric windows from
# ncclMemAlloc): the yardstick that checks bench's nccl, nccl:reg and
# nccl:sym columns. The GPU machine has no network: the source comes staged
# (`NCCL_TESTS_GIT=<a clone of github.com/NVIDIA/nccl-tests>
# scripts/stage-gpu.sh` writes .device/nccl-tests.tar.gz).
#
#   bash scripts/nccl-tests.sh SRC.tar.gz OUTDIR [GPUS] [all_reduce_perf arguments]
#
# Writes OUTDIR/nccl-tests-build.log and OUTDIR/nccl-tests-R{0,1,2}.log.
set -u
SRC=${1:?nccl-tests source tarball}
OUTD=${2:?output folder}
GPUS=${3:-$(nvidia-smi -L 2>/dev/null | wc -l)}
shift $(( $# < 3 ? $# : 3 ))
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-b 8 -e 1G -f 4 -n 20 -w 5)
mkdir -p "$OUTD"
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
tar xzf "$SRC" -C "$B" || { echo "SKIPPED: cannot unpack $SRC"; exit 0; }
NCCL_DIR=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
if [ -z "$NCCL_DIR" ] || [ ! -f "$NCCL_DIR/include/nccl.h" ] || [ ! -f "$NCCL_DIR/lib/libnccl.so.2" ]; then
    echo "SKIPPED: no NCCL headers and library in python3's nvidia.nccl (${NCCL_DIR:-not installed})"
    exit 0
fi
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] || { echo "SKIPPED: no nvcc on PATH"; exit 0; }
# The wheel ships libnccl.so.2 only: the link needs the unversioned name.
mkdir -p "$B/nccl/lib"
ln -s "$NCCL_DIR/include" "$B/nccl/include"
ln -s "$NCCL_DIR/lib/libnccl.so.2" "$B/nccl/lib/libnccl.so"
a=$(date +%s)
make -C "$B/src" -j"$(nproc)" CUDA_HOME="$(dirname "$(dirname "$NVCC")")" NCCL_HOME="$B/nccl" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$B/build" "$B/build/all_reduce_perf" \
    > "$OUTD/nccl-tests-build.log" 2>&1
rc=$?
echo "nccl-tests build: exit $rc in $(( $(date +%s) - a )) s (NCCL from $NCCL_DIR)"
[ $rc -eq 0 ] || { tail -20 "$OUTD/nccl-tests-build.log"; exit 1; }
export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
for r in 0 1 2; do
    timeout 300 "$B/build/all_reduce_perf" -g "$GPUS" -R "$r" "${ARGS[@]}" > "$OUTD/nccl-tests-R$r.log" 2>&1
    echo "all_reduce_perf -g $GPUS -R $r ${ARGS[*]}: exit $?"
    grep -iE "^# *(avg bus bandwidth|nccl-tests version)" "$OUTD/nccl-tests-R$r.log" | head -3
done
