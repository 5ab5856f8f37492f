#!/usr/bin/env bash
# Host copies in one round (the backend's write and read take every local
# rank's parts of a call together; a drain of drained ranks is skipped), on
# one GPU: the GPU tests (gpu-check.sh tests), the communicator on CUDA
# (gpu-check.sh comm: threads and rank processes over the IPC exchange),
# then call_styles --backend cuda (4 ranks share the GPU; host-slice
# all-reduce through Communicator, all ranks from one caller and one handle
# per rank on its own thread) with the old and the new library alternating.
#   LIMIT=570 bash docs/results/2026-12-07-h100x1-host-rounds/run.sh   (.device carried)
# .device/call_styles-old: the same bench source built against the old
# library (.device/COMMIT-old).
set -u
[ -f .device/pack.tar.xz ] && (cd .device && tar xJf pack.tar.xz && rm -f pack.tar.xz)
. .device/record-command.sh; record_start tests "$@"
OUT="$O" GPU_CHECK_LIMIT_S=230 bash .device/gpu-check.sh tests > "$O/gpu-check-tests.log" 2>&1
echo "gpu-check tests: exit $?" | tee -a "$O/command.txt"
grep -E "FAILED|passed|failed" "$O/tests.log" | tail -8
grep -A6 "^---- " "$O/tests.log" | head -30
(cd "$O" && for f in tests.log gpu-check-tests.log; do [ -f "$f" ] && xz -9 "$f"; done)
. .device/record-command.sh; record_start comm "$@"
OUT="$O" GPU_CHECK_LIMIT_S=200 bash .device/gpu-check.sh comm > "$O/gpu-check-comm.log" 2>&1
echo "gpu-check comm: exit $?" | tee -a "$O/command.txt"
grep -E "test result|rank [01]: ok|panicked|FAILED|\[exit" "$O/gpu-check-comm.log" | tail -12
(cd "$O" && for f in *.log; do [ -f "$f" ] && xz -9 "$f"; done)
. .device/record-command.sh; record_start call-styles "$@"
echo "old: $(cat .device/COMMIT-old)  new: $(cat .device/COMMIT)" | tee -a "$O/command.txt"
i=0
while [ $(( ${LIMIT:-570} - SECONDS )) -gt 60 ] && [ $i -lt ${CS_RUNS:-4} ]; do
    i=$((i + 1))
    order="old new"; [ $((i % 2)) = 0 ] && order="new old"
    for b in $order; do
        BIN=.device/call_styles; [ $b = old ] && BIN=.device/call_styles-old
        step "cs-$b-$i" 60 "$BIN" 7 --backend cuda
        grep -E "^ " "$O/cs-$b-$i.log" | sed "s/^/$b $i /"
    done
done
python3 - "$O" <<'PY' | tee "$O/summary.txt"
import glob, os, re, statistics, sys
o = sys.argv[1]
cells = {}
for p in sorted(glob.glob(os.path.join(o, "cs-*.log"))):
    _, b, i = os.path.basename(p)[:-4].split("-")
    for line in open(p):
        m = re.match(r"\s+(\d+\s?[KMG]?i?B)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            size = m.group(1).replace(" ", "")
            for name, v in (("all_ranks", m.group(3)), ("per_rank", m.group(4))):
                cells.setdefault((size, name), {}).setdefault(b, []).append(float(v))
print("# call_styles --backend cuda, median over runs of each run's median us per call: old | new | new/old (runs)")
for k in cells:
    o_, n_ = cells[k].get("old", []), cells[k].get("new", [])
    if o_ and n_:
        mo, mn = statistics.median(o_), statistics.median(n_)
        print("%-8s %-10s %10.1f %10.1f %6.3f  (%d, %d)" % (k[0], k[1], mo, mn, mn / mo, len(o_), len(n_)))
PY
ls -R "$OUT" | head -40
