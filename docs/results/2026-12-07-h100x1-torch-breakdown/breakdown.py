#!/usr/bin/env python3
"""Where a small torch.distributed all_reduce of a CUDA tensor spends its
time when the ranks are processes sharing one GPU: ringreduce's staged path
(through pinned host memory) against gloo, beside the GPU round trips
alone.

    python breakdown.py --world 2 --iters 200 --sizes 8,262144 > breakdown.txt

Per rank process, per size, each row timed from the call to
torch.cuda.synchronize() after it (median and quartiles, rank 0):
  turns     no collective: a D2H copy on a side stream, its synchronize,
            an H2D copy back, torch.cuda.synchronize() (the two GPU round
            trips every staged call makes, the other ranks doing the same)
  cpu       the ringreduce CPU job's all_reduce of a host tensor of the
            same size (the collective part alone)
  gloo      dist.all_reduce on the gloo group
  rr        dist.all_reduce on the ringreduce group (staged: the default
            for these sizes); its worker's steps stamped (submit -> worker
            start -> host copy landed -> collective done -> copy back queued
            -> caller back -> synchronize done)
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def q(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 4], statistics.median(xs), xs[(3 * n) // 4]


def worker(args):
    import torch
    import torch.distributed as dist
    import ringreduce.torch as rrt

    stamps = []
    orig = rrt.ProcessGroupRingreduce._run_staged

    def stamped(self, work, fn, staged, cuda, event):
        # The same steps as ProcessGroupRingreduce._run_staged, stamped.
        s = {"start": time.perf_counter()}
        dev = cuda[0].tensor.device
        stream = self._stage_streams.get(dev)
        if stream is None:
            stream = self._stage_streams[dev] = torch.cuda.Stream(dev)
        with torch.cuda.device(dev), torch.cuda.stream(stream):
            if event is not None:
                stream.wait_event(event)
            for x in staged:
                x.before()
            s["queued_in"] = time.perf_counter()
            stream.synchronize()
            s["landed"] = time.perf_counter()
            fn(self._engine)
            s["reduced"] = time.perf_counter()
            for x in staged:
                x.after()
            s["queued_back"] = time.perf_counter()
            work._finish(None)
        stamps.append(s)

    assert orig.__code__.co_argcount == stamped.__code__.co_argcount
    rrt.ProcessGroupRingreduce._run_staged = stamped

    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    rr = dist.new_group(backend="ringreduce")
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    side = torch.cuda.Stream(dev)
    out = {}
    for nbytes in args.sizes:
        count = max(1, nbytes // 4)
        t = torch.zeros(count, dtype=torch.float32, device=dev)
        h = torch.zeros(count, dtype=torch.float32, pin_memory=True)
        hc = torch.zeros(count, dtype=torch.float32)
        rows = {}

        def timed(name, body, n=args.iters):
            for _ in range(10):
                body()
            torch.cuda.synchronize()
            dist.barrier()
            ts = []
            for _ in range(n):
                t0 = time.perf_counter()
                body()
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t0) * 1e6)
            rows[name] = q(ts)
            return ts

        def turns():
            ev = torch.cuda.Event()
            ev.record()
            with torch.cuda.stream(side):
                side.wait_event(ev)
                h.copy_(t, non_blocking=True)
                side.synchronize()
                t.copy_(h, non_blocking=True)
            torch.cuda.current_stream().wait_stream(side)

        timed("turns", turns)
        timed("cpu", lambda: dist.all_reduce(hc, group=rr))
        timed("gloo", lambda: dist.all_reduce(t))
        stamps.clear()
        back = []

        def rr_call():
            t0 = time.perf_counter()
            dist.all_reduce(t, group=rr)
            back.append((t0, time.perf_counter()))

        ts = timed("rr", rr_call)
        # The last args.iters stamps belong to the timed calls.
        st = stamps[-args.iters:]
        bk = back[-args.iters:]
        steps = {"submit->worker": [], "worker->landed": [], "landed->reduced": [],
                 "reduced->queued back": [], "queued back->caller back": [], "caller back->synced": []}
        for s, (t0, t1), total in zip(st, bk, ts):
            steps["submit->worker"].append((s["start"] - t0) * 1e6)
            steps["worker->landed"].append((s["landed"] - s["start"]) * 1e6)
            steps["landed->reduced"].append((s["reduced"] - s["landed"]) * 1e6)
            steps["reduced->queued back"].append((s["queued_back"] - s["reduced"]) * 1e6)
            steps["queued back->caller back"].append((t1 - s["queued_back"]) * 1e6)
            steps["caller back->synced"].append(total - (t1 - t0) * 1e6)
        out[nbytes] = {"rows": rows, "rr_steps": {k: q(v) for k, v in steps.items()}}
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("OUT " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--sizes", default="8,262144")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]
    if args.worker:
        return worker(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.world))
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--iters", str(args.iters),
           "--sizes", ",".join(map(str, args.sizes))]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(args.world)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    res = None
    for line in outs[0].splitlines():
        if line.startswith("OUT "):
            res = json.loads(line[4:])
    if res is None:
        for r, o in enumerate(outs):
            print(f"-- rank {r}:\n{o[-3000:]}")
        return 1
    print(f"{args.world} processes sharing one GPU, float32, us per call: quartiles q1 / median / q3 (rank 0)")
    for nbytes, r in res.items():
        print(f"\n## {nbytes} B")
        for k, v in r["rows"].items():
            print(f"{k:28} {v[0]:9.1f} {v[1]:9.1f} {v[2]:9.1f}")
        print("rr, its steps:")
        for k, v in r["rr_steps"].items():
            print(f"  {k:26} {v[0]:9.1f} {v[1]:9.1f} {v[2]:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
