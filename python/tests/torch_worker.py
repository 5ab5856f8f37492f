"""One rank of the torch.distributed tests (started by test_torch.py, or by
hand: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set, as torchrun does).

    python torch_worker.py DEVICE MODE      # DEVICE cpu|cuda, MODE ok|die|raise

Two ranks (the exact values assume it). Prints "rank R: OK" after every
check passed."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import ringreduce.torch  # noqa: F401  (registers the backend)

device, mode = sys.argv[1], sys.argv[2]
timeout = float(os.environ.get("RR_TEST_TIMEOUT", "60"))
dist.init_process_group("ringreduce", timeout=timedelta(seconds=timeout))
rank, size = dist.get_rank(), dist.get_world_size()
dev = torch.device(device)


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {rank}: {what}")


# all_reduce: every op, several types, exact values
DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
for dt in DTYPES:
    for op, want in [
        (dist.ReduceOp.SUM, sum(range(1, size + 1))),
        (dist.ReduceOp.PRODUCT, 2 ** size),
        (dist.ReduceOp.MIN, 1),
        (dist.ReduceOp.MAX, size),
        (dist.ReduceOp.AVG, 2),
    ]:
        if op == dist.ReduceOp.PRODUCT:
            t = torch.full((1000,), 2, dtype=dt, device=dev)
        elif op == dist.ReduceOp.AVG:
            # 0 and 4 on two ranks: 2 whichever way the average is taken
            t = torch.full((1000,), 4 * (rank % 2), dtype=dt, device=dev)
        else:
            t = torch.full((1000,), rank + 1, dtype=dt, device=dev)
        dist.all_reduce(t, op=op)
        check(bool((t == want).all()), f"all_reduce {dt} {op}: {t[:4].tolist()} != {want}")

# asynchronous: a Work and its future
t = torch.arange(10, dtype=torch.float32, device=dev) * (rank + 1)
w = dist.all_reduce(t, async_op=True)
got = w.get_future().wait()
w.wait()
check(torch.equal(t.cpu(), torch.arange(10, dtype=torch.float32) * sum(range(1, size + 1))), "async all_reduce")
check(got[0] is t or torch.equal(got[0].cpu(), t.cpu()), "the future's value")

# reduce_scatter_tensor, all_gather_into_tensor, all_gather, broadcast, barrier
inp = torch.arange(size * 3, dtype=torch.int64, device=dev) + rank
out = torch.zeros(3, dtype=torch.int64, device=dev)
dist.reduce_scatter_tensor(out, inp)
want = sum(torch.arange(size * 3) + r for r in range(size))[rank * 3:(rank + 1) * 3]
check(torch.equal(out.cpu(), want), f"reduce_scatter_tensor {out.tolist()} != {want.tolist()}")

mine = torch.full((4,), float(rank), device=dev)
gathered = torch.zeros(size * 4, device=dev)
dist.all_gather_into_tensor(gathered, mine)
check(torch.equal(gathered.cpu(), torch.arange(size).float().repeat_interleave(4)), "all_gather_into_tensor")

outs = [torch.zeros(2, 2, device=dev) for _ in range(size)]
dist.all_gather(outs, torch.full((2, 2), rank + 0.5, device=dev))
check(all(bool((o == r + 0.5).all()) for r, o in enumerate(outs)), "all_gather")

b = torch.full((5,), float(rank), device=dev)
dist.broadcast(b, src=size - 1)
check(bool((b == size - 1).all()), "broadcast")
dist.barrier()

# stream order on a GPU: the producer (a sleep, then a fill) on a side
# stream that is current during the call; the consumer on the same stream
# after wait() (which orders the stream after the call on the GPU)
if dev.type == "cuda":
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros(1 << 16, device=dev)
        torch.cuda._sleep(100_000_000)
        t.fill_(rank + 1)
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        got = (t * 2).cpu()
    want = 2 * sum(range(1, size + 1))
    check(bool((got == want).all()), f"stream-ordered all_reduce: {got[:4].tolist()} != {want}")

# refused by name
for name, call in [
    ("reduce", lambda: dist.reduce(torch.zeros(2, device=dev), dst=0)),
    ("BAND", lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int32, device=dev), op=dist.ReduceOp.BAND)),
]:
    try:
        call()
        check(False, f"{name} should have been refused")
    except (NotImplementedError, ValueError, RuntimeError) as e:
        check(name.lower() in str(e).lower() or "not supported" in str(e), f"{name}: {e}")

# a bad tensor: the error reaches the caller
try:
    dist.all_reduce(torch.zeros(4, 4, device=dev).t())
    check(False, "a non-contiguous tensor should be refused")
except (ValueError, RuntimeError) as e:
    check("contiguous" in str(e), str(e))

# DDP: a small MLP, exact-valued data, the same losses on every rank
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.125)
for step in range(3):
    x = torch.full((4, 8), 0.5 * (rank + 1), device=dev)
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
ref = [p.detach().clone() for p in model.parameters()]
for p in ref:
    other = p.clone()
    dist.all_reduce(other, op=dist.ReduceOp.MAX)
    check(torch.equal(other, p), "DDP left the ranks' parameters different")

if mode == "die" and rank == 1:
    os._exit(7)
if mode == "raise" and rank == 1:
    raise RuntimeError("rank 1 raises before its call")
if mode in ("die", "raise"):
    try:
        dist.all_reduce(torch.ones(16, device=dev))
        check(False, "rank 0's all_reduce should fail once rank 1 is gone")
    except Exception as e:
        print(f"rank {rank}: peer gone: {type(e).__name__}: {e}", flush=True)

dist.destroy_process_group()
print(f"rank {rank}: OK", flush=True)
