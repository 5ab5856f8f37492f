#!/usr/bin/env bash
# The course's pictures on one GPU (ranks share it; NCCL needs one GPU per
# rank, so no NCCL row). Writes into $OUT/pictures: traces (text, JSON,
# SVG), compare, a 2-rank bench. Run from the checkout with .device carried:
#   bash scripts/gpu-pictures.sh
set -u
RR=.device/ringreduce
P="${OUT:-./gpu-out}/pictures"
mkdir -p "$P"
# The run's command file (docs/results/README.md, "A new run").
. "$(dirname "$0")/record-command.sh"
record_command "$P" "$@"
run() { local t=$1; shift; timeout "$t" "$@"; echo "[exit $?] $*" | cut -c1-160; }
run 60 "$RR" trace --backend cuda --ranks 2 --size 64MiB --algo ring:pipe2 --calls 3 \
    --timeline "$P/trace-ring-pipe2-2r-64MiB.json" --svg "$P/trace-ring-pipe2-2r-64MiB.svg" > "$P/trace-ring-pipe2-2r-64MiB.txt" 2>&1
run 60 "$RR" trace --backend cuda --ranks 4 --size 64MiB --algo ring --calls 3 \
    --timeline "$P/trace-ring-4r-64MiB.json" --svg "$P/trace-ring-4r-64MiB.svg" > "$P/trace-ring-4r-64MiB.txt" 2>&1
run 60 "$RR" trace --backend cuda --ranks 4 --size 64MiB --algo ps --calls 3 \
    --svg "$P/trace-ps-4r-64MiB.svg" > "$P/trace-ps-4r-64MiB.txt" 2>&1
run 90 "$RR" compare --backend cuda --ranks 2,4,8 --size 64MiB --plot "$P/compare.svg" > "$P/compare.txt" 2>&1
run 150 "$RR" bench --backend cuda --ranks 2 --algo auto,ring,ring:pipe2,ps -b 8 -e 1GiB -f 4 \
    --plot "$P/bench-2r.svg" -J "$P/bench-2r.json" > "$P/bench-2r.txt" 2>&1
grep -hE "^# (timing source|measurement)|rror" "$P"/trace-*.txt | sort | uniq -c | head
tail -5 "$P/compare.txt"
ls -la "$P"
