#!/usr/bin/env bash
# Call 2: the stop with a diagnostic build (uncommitted: on a rank's stream
# timeout each rank prints its LL launches issued, its kernels' call counts,
# the newest flags in its LL buffer and its last 24 issued ops; env
# RINGREDUCE_LL_DEBUG=1). Two orders that stopped in call 1.
#   bash docs/results/2026-12-06-h100x1-ll-stop/run2.sh   (.device carried: dbg.tar.xz)
set -u
tar xJf .device/dbg.tar.xz -C .device
. .device/record-command.sh; record_start ll-stop-2 "$@"
export RINGREDUCE_LL_DEBUG=1
B="-b 16 -e 64KiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 5"
for order in ring:ll,ring:pipe2,auto ring:ll,ring,auto; do
  for i in 1 2 3 4 5 6 7 8; do
    a=$(date +%s)
    timeout -s KILL 70 $RR bench --backend cuda --devices 0 --ranks 4 $B --algo "$order" > "$O/s.log" 2>&1
    rc=$?
    echo "order $order run $i exit $rc in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
    if [ $rc != 0 ]; then
      { echo "== order $order run $i (exit $rc)"; grep -v LLDBG "$O/s.log" | tail -6; grep LLDBG "$O/s.log"; } >> "$O/stops.log"
      break
    fi
  done
done
cd "$O" && cat stops.log 2>/dev/null; rm -f s.log; tar cJf logs.tar.xz *.log 2>/dev/null; rm -f stops.log; true
