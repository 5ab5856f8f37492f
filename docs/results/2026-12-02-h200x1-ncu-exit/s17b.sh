#!/usr/bin/env bash
# Why ringreduce exits with code 11 under ncu: each case's exit code, with and without
# --nvtx, CUPTI on and off, a run without timing, and a torch program for comparison.
set -u
O=${OUT:-$PWD/s17b-out}; mkdir -p "$O"
. .device/record-command.sh; record_command "$O" "$@" 2>/dev/null || true
RR=$PWD/.device/ringreduce
NCU="$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)"
{ date -u; "$NCU" --version | tail -1; command -v gdb; cat /proc/sys/kernel/core_pattern; ulimit -c; } > "$O/env.txt" 2>&1
TR=(trace --backend cuda --ranks 2 --size 4KiB --algo ring --warmup 1 --calls 1 --overhead-blocks 0)
RUN=(run --backend cuda --ranks 2 --size 4KiB --algo ring)
case_() {  # name, command...
  local name=$1; shift
  local t0=$SECONDS
  timeout 150 "$@" > "$O/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s; $(grep -hoE 'returned code [0-9]+|Segmentation|signal [0-9A-Z]+|timing source[^;]*' "$O/$name.txt" | sort | uniq -c | tr -s ' ' | paste -sd ';' -)" | tee -a "$O/summary.txt"
}
case_ plain-trace "$RR" "${TR[@]}"
case_ ncu-nvtx-trace "$NCU" --nvtx -c 2 "$RR" "${TR[@]}"
case_ ncu-trace "$NCU" -c 2 "$RR" "${TR[@]}"
case_ ncu-nvtx-trace-cupti0 env RINGREDUCE_CUPTI=0 "$NCU" --nvtx -c 2 "$RR" "${TR[@]}"
case_ ncu-nvtx-run "$NCU" --nvtx -c 2 "$RR" "${RUN[@]}"
case_ ncu-run "$NCU" -c 2 "$RR" "${RUN[@]}"
case_ ncu-run-c0 "$NCU" -c 0 "$RR" "${RUN[@]}"
case_ ncu-torch "$NCU" -c 2 python3 -c 'import torch; x = torch.ones(1024, device="cuda"); print((x + 1).sum().item())'
case_ ncu-nvtx-torch "$NCU" --nvtx -c 2 python3 -c 'import torch; x = torch.ones(1024, device="cuda"); torch.cuda.nvtx.range_push("t"); print((x + 1).sum().item()); torch.cuda.nvtx.range_pop()'
ls core* /tmp/core* 2>/dev/null | head >> "$O/env.txt"
cd "$O" && tar cJf logs.tar.xz *.txt
