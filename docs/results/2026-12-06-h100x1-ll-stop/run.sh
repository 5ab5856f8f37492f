#!/usr/bin/env bash
# Call 1: where the 4-rank sweep's stop comes from. Orders of paths on
# 4 rank threads sharing one GPU, 16 B-64 KiB (where every stop was seen),
# engine timeout 5 s; each order up to 6 sweeps, stopping at its first stop.
#   bash docs/results/2026-12-06-h100x1-ll-stop/run.sh   (.device carried: pack.tar.xz)
set -u
tar xJf .device/pack.tar.xz -C .device
. .device/record-command.sh; record_start ll-stop "$@"
B="-b 16 -e 64KiB -f 4 -n 20 -w 5 --blocks 3 --no-ceiling --timeout 5"
sweep() {  # order tries
  local order=$1 tries=$2 i
  for i in $(seq 1 "$tries"); do
    a=$(date +%s)
    timeout -s KILL 70 $RR bench --backend cuda --devices 0 --ranks 4 $B --algo "$order" > "$O/s.log" 2>&1
    rc=$?
    echo "order $order run $i exit $rc in $(( $(date +%s) - a )) s" | tee -a "$O/command.txt"
    if [ $rc != 0 ]; then
      { echo "== order $order run $i (exit $rc)"; tail -40 "$O/s.log"; } >> "$O/stops.log"
      return
    fi
  done
}
sweep ring:ll,ring,ring:pipe2,auto 6
sweep ring,ring:pipe2,auto 6
sweep ring:ll,ring:pipe2,auto 6
sweep ring:ll,ring,auto 6
sweep auto,ring:pipe2,ring:ll 6
sweep ring:ll,oneshot:fused,auto 6
sweep ring:ll,auto 6
cd "$O" && cat stops.log 2>/dev/null | head -150; rm -f s.log; tar cJf logs.tar.xz *.log 2>/dev/null; rm -f stops.log; true
