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

# A synchronous call with nothing queued runs on the caller's thread (no
# hand-off to the group's worker); one made while asynchronous calls are
# queued goes behind them, in order; an asynchronous one never runs here.
import threading  # noqa: E402

import ringreduce.torch as rrt  # noqa: E402

ran_on = []
_orig_run = rrt.ProcessGroupRingreduce._run


def _spy(self, item):
    ran_on.append(threading.get_ident())
    return _orig_run(self, item)


rrt.ProcessGroupRingreduce._run = _spy
me = threading.get_ident()
t = torch.full((8,), float(rank + 1), device=dev)
dist.all_reduce(t)
check(ran_on == [me], f"a synchronous call with nothing queued ran on {ran_on}, not the caller {me}")
check(bool((t == sum(range(1, size + 1))).all()), "synchronous all_reduce")
ran_on.clear()
chain = [torch.full((1 << 12,), float(rank + 1), device=dev) for _ in range(6)]
works = [dist.all_reduce(c, async_op=True) for c in chain[:5]]
# In place on the tensor the last queued call reduces: ordered behind it,
# it sums the others' sums.
dist.all_reduce(chain[4])
for w in works:
    w.wait()
check(all(x != me for x in ran_on[:5]), "an asynchronous call ran on the caller's thread")
total = sum(range(1, size + 1))
check(all(bool((c == total).all()) for c in chain[:4]), "asynchronous calls queued before a synchronous one")
check(bool((chain[4] == total * size).all()), f"the synchronous call behind them: {chain[4][:2].tolist()}")
rrt.ProcessGroupRingreduce._run = _orig_run

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

# the collectives built on the engine's four: reduce, gather, scatter,
# reduce_scatter (list), all_to_all (single, any splits, and list), the
# coalesced variants, point to point with tags and from any source
for dst in range(size):
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.reduce(t, dst=dst)
    want = float(sum(range(1, size + 1))) if rank == dst else float(rank + 1)
    check(bool((t == want).all()), f"reduce to {dst}: {t.tolist()} != {want}")

x = torch.full((2,), float(rank), device=dev)
gl = [torch.zeros(2, device=dev) for _ in range(size)] if rank == 1 else None
dist.gather(x, gl, dst=1)
if rank == 1:
    check(all(bool((g == r).all()) for r, g in enumerate(gl)), f"gather {[g.tolist() for g in gl]}")

y = torch.zeros(3, dtype=torch.int32, device=dev)
sl = [torch.full((3,), 10 + r, dtype=torch.int32, device=dev) for r in range(size)] if rank == 0 else None
dist.scatter(y, sl, src=0)
check(bool((y == 10 + rank).all()), f"scatter {y.tolist()}")

rs_in = [torch.full((2,), float(r * 10 + rank), device=dev) for r in range(size)]
rs_out = torch.zeros(2, device=dev)
dist.reduce_scatter(rs_out, rs_in)
want = float(sum(rank * 10 + q for q in range(size)))
check(bool((rs_out == want).all()), f"reduce_scatter {rs_out.tolist()} != {want}")

a2a_in = torch.arange(size * 2, device=dev) + 100 * rank
a2a_out = torch.zeros(size * 2, dtype=a2a_in.dtype, device=dev)
dist.all_to_all_single(a2a_out, a2a_in)
want = torch.cat([torch.arange(rank * 2, rank * 2 + 2) + 100 * r for r in range(size)])
check(torch.equal(a2a_out.cpu(), want), f"all_to_all_single {a2a_out.tolist()} != {want.tolist()}")

# uneven: rank r sends r + 1 + d rows of 3 to rank d
ins = [torch.full((r_ + 1 + d, 3), float(10 * rank + d), device=dev) for d, r_ in [(d, rank) for d in range(size)]]
a_in = torch.cat(ins)
in_splits = [rank + 1 + d for d in range(size)]
out_splits = [s_ + 1 + rank for s_ in range(size)]
a_out = torch.zeros(sum(out_splits), 3, device=dev)
dist.all_to_all_single(a_out, a_in, out_splits, in_splits)
want = torch.cat([torch.full((s_ + 1 + rank, 3), float(10 * s_ + rank)) for s_ in range(size)])
check(torch.equal(a_out.cpu(), want), "all_to_all_single with splits")

l_in = [torch.full((d + 1,), float(rank * 10 + d), device=dev) for d in range(size)]
l_out = [torch.zeros(rank + 1, device=dev) for _ in range(size)]
dist.all_to_all(l_out, l_in)
check(all(bool((o == s_ * 10 + rank).all()) for s_, o in enumerate(l_out)), f"all_to_all {[o.tolist() for o in l_out]}")

bools = torch.tensor([rank % 2 == 0, True, False], device=dev)
dist.broadcast(bools, src=1)
check(bools.tolist() == [False, True, False], f"bool broadcast {bools.tolist()}")

co = [torch.full((3,), float(rank + 1), device=dev), torch.full((2, 2), float(rank), device=dev)]
with dist._coalescing_manager(async_ops=False):
    for c in co:
        dist.all_reduce(c)
check(bool((co[0] == sum(range(1, size + 1))).all()) and bool((co[1] == sum(range(size))).all()),
      "coalesced all_reduce")
ag_in = [torch.full((2,), float(rank), device=dev), torch.full((1,), float(rank + 5), device=dev)]
ag_out = [torch.zeros(2 * size, device=dev), torch.zeros(size, device=dev)]
with dist._coalescing_manager(async_ops=False):
    for o, i in zip(ag_out, ag_in):
        dist.all_gather_into_tensor(o, i)
check(torch.equal(ag_out[1].cpu(), torch.arange(size).float() + 5), "coalesced all_gather_into_tensor")
rs_src = [torch.ones(2 * size, device=dev) * (rank + 1), torch.ones(size, device=dev)]
rs_dst = [torch.zeros(2, device=dev), torch.zeros(1, device=dev)]
with dist._coalescing_manager(async_ops=False):
    for o, i in zip(rs_dst, rs_src):
        dist.reduce_scatter_tensor(o, i)
check(bool((rs_dst[0] == sum(range(1, size + 1))).all()) and float(rs_dst[1]) == size,
      "coalesced reduce_scatter_tensor")

peer = (rank + 1) % size
frm = (rank - 1) % size
sent = torch.arange(5, dtype=torch.float64, device=dev) + rank
got = torch.zeros(5, dtype=torch.float64, device=dev)
got7 = torch.zeros(5, dtype=torch.float64, device=dev)
reqs = [dist.irecv(got7, src=frm, tag=7), dist.irecv(got, src=frm, tag=3),
        dist.isend(sent * 2, dst=peer, tag=7), dist.isend(sent, dst=peer, tag=3)]
for q in reqs:
    q.wait()
check(torch.equal(got.cpu(), torch.arange(5, dtype=torch.float64) + frm), "irecv tag 3")
check(torch.equal(got7.cpu(), (torch.arange(5, dtype=torch.float64) + frm) * 2), "irecv tag 7")
if rank == 0:
    srcs = set()
    for _ in range(size - 1):
        z = torch.zeros(1, device=dev)
        srcs.add(dist.recv(z))
        check(float(z) == 1000.0, "recv from any source")
    check(srcs == set(range(1, size)), f"recv from any source: {srcs}")
else:
    dist.send(torch.full((1,), 1000.0, device=dev), dst=0)
dist.barrier()

# refused by name
for name, call in [
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
