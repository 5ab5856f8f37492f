#!/usr/bin/env bash
# Third call of the same record: the timeline's order check that asks a
# kernel's step (timed by the kernel's own clock) to end after the put it
# waited for; the tests again, and the step tables of ring:ll and
# oneshot:ll with the receive parts named as such.
#   bash docs/results/2026-12-05-h100x1-oneshot-ll/run3.sh   (from the checkout, .device carried)
set -u
. .device/record-command.sh; record_start oneshot-ll3 "$@"
step tests 240 .device/integration in_an_ fail_mid stall_mid every_path graphs timeline
step tests 90 .device/api
for n in 2 3 4; do
  step traces 60 $RR trace --backend cuda --devices 0 --ranks $n --algo ring:ll --size 64KiB --calls 3 --timeline "$O/ringll-$n.json"
done
step traces 60 $RR trace --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --size 64KiB --calls 3 --timeline "$O/oneshotll-2.json"
step traces 60 $RR trace --backend cuda --devices 0 --ranks 2 --algo oneshot:ll --size 64KiB --in-place --calls 3 --svg "$O/oneshotll-2.svg"
step breakdown 90 $RR bench --backend cuda --devices 0 --ranks 4 --algo ring:ll -b 64KiB -e 1MiB -f 4 -n 20 -w 5 --breakdown
cd "$O" && grep -E "^test |passed" tests.log | grep -v " ok " | head; grep -E "passed" tests.log; grep -c "waits for" traces.log; grep -E "order check" traces.log; cat command.txt
tar cJf logs.tar.xz tests.log traces.log breakdown.log *.json 2>/dev/null && rm -f tests.log traces.log breakdown.log *.json; true
