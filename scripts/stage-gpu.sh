#!/usr/bin/env bash
# Build here (no GPU needed) and stage the binaries for the GPU machine.
#
#   scripts/stage-gpu.sh   -> .device/{ringreduce,integration,gpu-check.sh,COMMIT}
#
# .device/ is git-ignored; carry it to the GPU machine and run there:
#   bash .device/gpu-check.sh validate > $OUT/validate.log 2>&1
set -euo pipefail
cd "$(dirname "$0")/.."
# With fault injection: gpu-check.sh's fault cases set RINGREDUCE_FAULT.
cargo build --release --features fault-injection
json=$(cargo test --release --no-run --message-format=json 2>/dev/null)
integ=$(printf '%s\n' "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "integration" and m.get("executable"):
        print(m["executable"])
')
rm -rf .device && mkdir -p .device
cp target/release/ringreduce .device/
cp "$integ" .device/integration
cp scripts/gpu-check.sh .device/
git rev-parse --short HEAD > .device/COMMIT
git diff --quiet || echo "+uncommitted" >> .device/COMMIT
strip --strip-debug .device/ringreduce .device/integration 2>/dev/null || true
du -sh .device
