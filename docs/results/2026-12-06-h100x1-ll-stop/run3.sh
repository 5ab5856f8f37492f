#!/usr/bin/env bash
# Call 3: is the stop the GPU's hardware queues? Streams beyond
# CUDA_DEVICE_MAX_CONNECTIONS (8 by default) share a queue, and a kernel
# queued behind another rank's spinning kernel cannot start. Same build as
# call 2. The four-path order with 32 connections (prediction: no stop in
# 10), with the default (stops in some), and ring:ll alone with 1 and 2
# connections on 2 and 4 ranks (prediction: stops at once).
#   bash docs/results/2026-12-06-h100x1-ll-stop/run3.sh   (.device carried: dbg.tar.xz)
set -u
tar xJf .device/dbg.tar.xz -C .device
. .device/record-command.sh; record_start ll-stop-3 "$@"
B="-b 16 -e 64KiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 3"
sweep() {  # label tries ranks order [env...]
  local label=$1 tries=$2 ranks=$3 order=$4 i; shift 4
  for i in $(seq 1 "$tries"); do
    a=$(date +%s)
    env "$@" timeout -s KILL 60 $RR bench --backend cuda --devices 0 --ranks "$ranks" $B --algo "$order" > "$O/s.log" 2>&1
    rc=$?
    echo "$label ranks $ranks order $order run $i exit $rc in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
    if [ $rc != 0 ]; then
      { echo "== $label ranks $ranks order $order run $i (exit $rc)"; grep -v LLDBG "$O/s.log" | tail -4; grep "LLDBG rank [0-9]: host" "$O/s.log"; } >> "$O/stops.log"
      break
    fi
  done
}
sweep conn32 10 4 ring:ll,ring,ring:pipe2,auto CUDA_DEVICE_MAX_CONNECTIONS=32
sweep conn16 10 4 ring:ll,ring:pipe2,auto CUDA_DEVICE_MAX_CONNECTIONS=16
sweep default 10 4 ring:ll,ring,ring:pipe2,auto RINGREDUCE_X=1
sweep conn1 2 2 ring:ll CUDA_DEVICE_MAX_CONNECTIONS=1
sweep conn2 2 4 ring:ll CUDA_DEVICE_MAX_CONNECTIONS=2
sweep conn4 3 4 ring:ll CUDA_DEVICE_MAX_CONNECTIONS=4
sweep conn4x3 3 3 ring:ll CUDA_DEVICE_MAX_CONNECTIONS=4
cd "$O" && cat stops.log 2>/dev/null; rm -f s.log; tar cJf logs.tar.xz *.log 2>/dev/null; rm -f stops.log; true
