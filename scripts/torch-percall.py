#!/usr/bin/env python3
"""The time of one torch.distributed all_reduce, per backend, world size and
size: what a user of ``dist.all_reduce`` waits for a call.

    python scripts/torch-percall.py --backends ringreduce,gloo --worlds 2,3 \\
        --device cuda --json percall.json

Each world is a set of processes started here (RANK, WORLD_SIZE,
MASTER_ADDR/PORT, as torchrun sets them); with ``--device cuda`` every rank
uses GPU ``rank % GPUs`` (on one GPU: the ranks share it). Each rank, per
size: a barrier, ``--warmup`` calls, then ``--iters`` calls, each timed from
the call to ``torch.cuda.synchronize()`` after it (the call and its result
on the device); one call before them is checked bitwise. The table is rank 0's
median per call in microseconds, with the spread (min-max over the calls);
``--json`` writes every row.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def worker(args):
    import torch
    import torch.distributed as dist

    if args.backend == "ringreduce":
        import ringreduce.torch  # noqa: F401 (registers the backend)
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.device == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        sync = torch.cuda.synchronize
    else:
        dev = torch.device("cpu")

        def sync():
            pass

    rows = []
    for nbytes in args.sizes:
        count = max(1, nbytes // 4)
        # One call checked (every rank's rank + 1), then zeros: the timed
        # calls keep the values (0 + 0) whatever their number.
        t = torch.full((count,), float(rank + 1), dtype=torch.float32, device=dev)
        dist.all_reduce(t)
        sync()
        want = float(size * (size + 1) // 2)
        ok = bool((t == want).all().item())
        t.zero_()
        dist.barrier()
        for _ in range(args.warmup):
            dist.all_reduce(t)
        sync()
        iters = args.iters if nbytes <= (1 << 20) else max(10, args.iters // 5)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(t)
            sync()
            times.append((time.perf_counter() - t0) * 1e6)
        ok = ok and bool((t == 0).all().item())
        rows.append({"bytes": count * 4, "median_us": statistics.median(times), "min_us": min(times),
                     "max_us": max(times), "calls": iters, "correct": ok})
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("ROWS " + json.dumps(rows), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(args, backend, world):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--backend", backend, "--device", args.device,
           "--warmup", str(args.warmup), "--iters", str(args.iters), "--sizes", ",".join(map(str, args.sizes))]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += f"\n(killed after {args.timeout} s)"
        outs.append((p.returncode, out))
    rows = None
    for line in outs[0][1].splitlines():
        if line.startswith("ROWS "):
            rows = json.loads(line[5:])
    if rows is None:
        for r, (rc, out) in enumerate(outs):
            print(f"-- {backend} world {world} rank {r} exit {rc}:\n{out[-3000:]}", file=sys.stderr)
    return rows


def human(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b // k} {unit}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="ringreduce,gloo")
    ap.add_argument("--worlds", default="2,3")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes per rank, comma-separated")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per world")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    args = ap.parse_args()

    def numbers(flag, text, lowest, highest):
        try:
            vals = [int(x) for x in str(text).split(",") if x.strip()]
        except ValueError:
            ap.error(f"{flag} takes whole numbers, comma-separated (got {text!r})")
        if not vals or any(not lowest <= v <= highest for v in vals):
            ap.error(f"{flag} takes numbers from {lowest} to {highest} (got {text!r})")
        return vals

    args.sizes = numbers("--sizes", args.sizes, 1, 1 << 34)
    worlds = numbers("--worlds", args.worlds, 1, 64)
    if args.worker:
        return worker(args)
    backends = [b for b in args.backends.split(",") if b]
    if not backends:
        ap.error("--backends names no backend")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        ap.error(f"--json {args.json}: its directory does not exist")
    results = {}
    for world in worlds:
        for b in backends:
            t0 = time.monotonic()
            rows = run_world(args, b, world)
            results[f"{b}/{world}"] = rows
            print(f"# {b}, {world} ranks on {args.device}: {'done' if rows else 'FAILED'} in "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
    for world in worlds:
        print(f"\n{world} ranks, {args.device} tensors, all_reduce float32 sum, median us per call (min-max)")
        head = "| size | " + " | ".join(backends) + (" | " + f"{backends[0]} / {backends[1]}" if len(backends) > 1 else "") + " |"
        print(head)
        print("|" + " --- |" * (head.count("|") - 1))
        for i, nbytes in enumerate(args.sizes):
            cells, meds = [], []
            for b in backends:
                rows = results.get(f"{b}/{world}")
                if not rows:
                    cells.append("failed")
                    meds.append(None)
                    continue
                r = rows[i]
                flag = "" if r["correct"] else " WRONG"
                cells.append(f"{r['median_us']:.1f} ({r['min_us']:.0f}-{r['max_us']:.0f}){flag}")
                meds.append(r["median_us"])
            ratio = ""
            if len(backends) > 1:
                ratio = f" | {meds[0] / meds[1]:.3f}" if meds[0] and meds[1] else " | -"
            print(f"| {human(nbytes)} | " + " | ".join(cells) + ratio + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "sizes": args.sizes, "results": results}, f, indent=1)
    bad = [k for k, v in results.items() if not v or not all(r["correct"] for r in v)]
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `| head`: the reader is gone, nothing to say
        sys.stderr.close()
        sys.exit(0)
