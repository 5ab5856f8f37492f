#!/usr/bin/env bash
# Fourth call of the same record: the review's mend (Stream::ring_ll takes
# the half index and computes the LL half's offset itself): the kernel-path
# tests, a soak of both LL paths across both halves, a timed trace.
#   bash docs/results/2026-12-05-h100x1-oneshot-ll/run4.sh   (from the checkout, .device carried)
set -u
. .device/record-command.sh; record_start oneshot-ll4 "$@"
step tests 240 .device/integration in_an_ fail_mid stall_mid every_path graphs timeline
step soak 120 $RR soak --backend cuda --devices 0 --algo oneshot:ll --rank-counts 2 --calls 3000 --max-size 1MiB --seed 41
step soak 120 $RR soak --backend cuda --devices 0 --algo ring:ll --rank-counts 2,3,4 --calls 3000 --max-size 1MiB --seed 42
step traces 60 $RR trace --backend cuda --devices 0 --ranks 4 --algo ring:ll --size 64KiB --calls 3
cd "$O" && grep -E "passed" tests.log; grep -E "^soak: [0-9]+ calls" soak.log | tail -2; grep -E "order check" traces.log; cat command.txt
tar cJf logs.tar.xz tests.log soak.log traces.log && rm -f tests.log soak.log traces.log; true
