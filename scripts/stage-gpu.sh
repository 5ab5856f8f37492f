#!/usr/bin/env bash
# Build here (no GPU needed) and stage the binaries for the GPU machine.
#
#   scripts/stage-gpu.sh   -> .device/{ringreduce,integration,api,gpu-check.sh,COMMIT}
#                             and comm-extras.tgz (the mp test binary and the examples
#                             gpu-check.sh comm runs)
#
# .device/ is git-ignored; carry it to the GPU machine and run there:
#   bash .device/gpu-check.sh validate > $OUT/validate.log 2>&1
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
json=$(cargo test --release --no-run --message-format=json 2>/dev/null)
test_binary() {
    printf '%s\n' "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == sys.argv[1] and m.get("executable"):
        print(m["executable"])
' "$1"
}
integ=$(test_binary integration)
api=$(test_binary api)
mp=$(test_binary mp)
cargo build --release --examples
rm -rf .device && mkdir -p .device
cp target/release/ringreduce .device/
cp "$integ" .device/integration
cp "$api" .device/api
cp scripts/gpu-check.sh scripts/record-command.sh scripts/nccl-tests.sh .device/
# nccl-tests' source, for gpu-check.sh's NCCL yardstick (the GPU machine has
# no network): NCCL_TESTS_GIT names a clone of github.com/NVIDIA/nccl-tests.
if [ -n "${NCCL_TESTS_GIT:-}" ]; then
    git -C "$NCCL_TESTS_GIT" archive --format=tar.gz -o "$PWD/.device/nccl-tests.tar.gz" HEAD
fi
git rev-parse --short HEAD > .device/COMMIT
git diff --quiet || echo "+uncommitted" >> .device/COMMIT
strip --strip-debug .device/ringreduce .device/integration 2>/dev/null || true
strip --strip-all .device/api 2>/dev/null || true
# The communicator's extras (gpu-check.sh comm), without symbols and
# packed: the tree and .device travel together in at most 64 MiB.
x=$(mktemp -d)
cp "$mp" "$x/mp"
for ex in device_buffers processes threads; do cp "target/release/examples/$ex" "$x/"; done
strip --strip-all "$x"/* 2>/dev/null || true
tar czf .device/comm-extras.tgz -C "$x" .
rm -rf "$x"
du -sh .device
