#!/usr/bin/env python3
"""DDP on ringreduce's ring, beside NCCL and Gloo, from the same script.

    torchrun --nproc-per-node 2 examples/ddp.py --backend ringreduce
    torchrun --nproc-per-node 2 examples/ddp.py --backend nccl
    torchrun --nproc-per-node 2 examples/ddp.py --backend gloo --device cpu

A small MLP (``--width`` x ``--depth`` linear layers, 8.4M parameters by
default: two 25 MiB DDP buckets) trained with SGD on exact-valued data
(multiples of 1/8, the same on every backend). Three modes, each from the
same initial weights:

* ``compute``: forward and backward under ``no_sync()``: no communication,
  the compute alone;
* ``off``: the same, then every gradient all-reduced after the backward
  pass (one flat buffer, divided by the world size first, as DDP does):
  communication not overlapped;
* ``on``: plain DDP: buckets (``--bucket-mb``, 25 by default) all-reduced
  while the backward pass goes on.

Rank 0 prints the loss of every step (decimal and ``float.hex``: with two
ranks the losses of every backend must match bit for bit, a sum of two
values does not depend on the order) and the median step time of each
mode; ``exposed`` is the step time over the compute alone, what the
communication costs the step with and without overlap. ``--json FILE``
writes all of it.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="ringreduce", choices=["ringreduce", "nccl", "gloo"])
    p.add_argument("--device", default=None, choices=["cpu", "cuda"],
                   help="default: cuda when available (gloo: cpu)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--modes", default="compute,off,on")
    p.add_argument("--json", default=None, help="write the results here (rank 0)")
    return p.parse_args()


def model_of(args, dev):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(args.width, 1))
    m = torch.nn.Sequential(*layers)
    with torch.no_grad():
        for p in m.parameters():
            # exact-valued weights: multiples of 1/1024 (whatever the init drew)
            p.copy_(torch.round(p * 1024) / 1024)
    return m.to(dev)


def batch_of(args, rank, step, dev):
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randint(-8, 9, (args.batch, args.width), generator=g).float() / 8
    y = torch.randint(-8, 9, (args.batch, 1), generator=g).float() / 8
    return x.to(dev), y.to(dev)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_mode(mode, args, rank, world, dev):
    model = model_of(args, dev)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb,
              device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=2 ** -10)
    losses, times = [], []
    for step in range(args.warmup + args.steps):
        x, y = batch_of(args, rank, step, dev)
        sync(dev)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if mode == "on":
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = torch.nn.functional.mse_loss(ddp(x), y)
                loss.backward()
            if mode == "off":
                grads = [p.grad for p in model.parameters()]
                flat = torch.cat([g.reshape(-1) for g in grads])
                flat.div_(world)
                dist.all_reduce(flat)
                off = 0
                for g in grads:
                    g.copy_(flat[off:off + g.numel()].view_as(g))
                    off += g.numel()
        opt.step()
        sync(dev)
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
        losses.append(loss.item())
    return losses, times


def main():
    args = parse()
    if args.backend == "ringreduce":
        import ringreduce.torch  # noqa: F401  (registers the backend)
    use_cuda = args.device == "cuda" or (args.device is None and args.backend != "gloo"
                                         and torch.cuda.is_available())
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        n = torch.cuda.device_count()
        dev = torch.device("cuda", local % n)
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    params = sum(p.numel() for p in model_of(args, torch.device("cpu")).parameters())
    out = {
        "backend": args.backend, "device": str(dev), "world": world, "params": params,
        "bucket_mb": args.bucket_mb, "width": args.width, "depth": args.depth, "batch": args.batch,
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "gpus": torch.cuda.device_count() if use_cuda else 0, "modes": {},
    }
    if rank == 0:
        print(f"ddp: backend {args.backend}, {world} ranks on {dev.type} "
              f"({out['gpus']} GPUs visible), {params} parameters ({params * 4 / 2**20:.1f} MiB of "
              f"gradients), buckets of {args.bucket_mb} MiB, torch {torch.__version__}", flush=True)
    for mode in args.modes.split(","):
        losses, times = run_mode(mode, args, rank, world, dev)
        med = statistics.median(times)
        out["modes"][mode] = {"losses": losses, "losses_hex": [float.hex(v) for v in losses],
                              "step_s": times, "median_step_s": med}
        if rank == 0:
            for i, v in enumerate(losses):
                print(f"  {mode:7} step {i:3} loss {v:.9g} ({float.hex(v)})")
            print(f"{mode:7}: median step {med * 1e3:.3f} ms over {len(times)} steps", flush=True)
    m = out["modes"]
    if rank == 0 and "compute" in m:
        base = m["compute"]["median_step_s"]
        for mode in ("off", "on"):
            if mode in m:
                t = m[mode]["median_step_s"]
                m[mode]["exposed_s"] = t - base
                print(f"exposed communication, overlap {mode:3}: {(t - base) * 1e3:.3f} ms per step "
                      f"({(t / base - 1) * 100:+.1f}% over the compute alone)")
        if "on" in m and "off" in m:
            same = m["on"]["losses_hex"] == m["off"]["losses_hex"]
            print(f"losses with overlap on and off: {'identical' if same else 'DIFFERENT'}")
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
