#!/usr/bin/env bash
# A call's host copies of at most 64 KiB a rank in one round of the rank
# threads, a larger one in a round of its own (a drain of drained ranks is
# skipped), on one GPU: the same steps as the branch's run before it
# (../2026-12-07-h100x1-host-rounds/run.sh: the GPU tests, the communicator
# on CUDA, then call_styles --backend cuda with the old and the new library
# alternating), with every output packed into one file afterwards.
#   LIMIT=570 bash docs/results/2026-12-07-h100x1-host-batch/run.sh   (.device carried)
set -u
bash docs/results/2026-12-07-h100x1-host-rounds/run.sh "$@"
# Every output in one file (the device tool returns a limited number).
T=$(mktemp -d); (cd "$OUT" && tar cJf "$T/all-logs.tar.xz" .) && rm -rf "${OUT:?}"/* && mv "$T/all-logs.tar.xz" "$OUT/"
