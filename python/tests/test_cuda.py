"""CUDA memory through the Engine: torch CUDA tensors and
``__cuda_array_interface__`` objects, copied on the GPU into the engine's
buffers on the caller's stream, the call ordered after that stream, the
result copied back on it (no host staging, no host wait).

The error paths run everywhere (fake ``__cuda_array_interface__`` objects
need no GPU); the rest needs torch with a CUDA GPU and prints SKIPPED with
the reason otherwise.
"""

import pytest

import ringreduce as rr


def raises(cls, fn, *words):
    with pytest.raises(cls) as info:
        fn()
    assert isinstance(info.value, rr.Error)
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"
    return info.value


class FakeCuda:
    """An object that speaks ``__cuda_array_interface__`` (no memory behind it)."""

    def __init__(self, shape=(4,), typestr="<f4", addr=0x7000_0000_0000, strides=None, stream=None, **extra):
        self.__cuda_array_interface__ = dict(
            shape=shape, typestr=typestr, data=(addr, False), version=3, strides=strides, stream=stream, **extra
        )


# -- without a GPU: refused by name, never a crash ------------------------------


def test_cuda_memory_on_a_cpu_engine_is_refused_with_the_reason():
    with rr.Engine(backend="cpu", ranks=2) as e:
        assert e.backend == "cpu"
        raises(rr.UnavailableError, lambda: e.all_reduce([FakeCuda(), FakeCuda(addr=0x7000_0000_1000)]),
               "CUDA memory", "backend='cuda'")
        outs = [FakeCuda(addr=0x7100_0000_0000), FakeCuda(addr=0x7100_0000_1000)]
        raises(rr.UnavailableError, lambda: e.all_reduce([FakeCuda(), FakeCuda()], outs), "backend='cuda'")


def test_mixed_host_and_cuda_memory_is_refused():
    np = pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")
    with rr.Engine(backend="cpu", ranks=2) as e:
        raises(rr.ArgumentError, lambda: e.all_reduce([np.zeros(4, np.float32), FakeCuda()]),
               "rank 1", "host memory, or all CUDA memory")
        raises(rr.ArgumentError,
               lambda: e.all_reduce([FakeCuda(), FakeCuda()], [np.zeros(4, np.float32), np.zeros(4, np.float32)]),
               "inputs and outputs must both be host or CUDA memory")
        raises(rr.ArgumentError,
               lambda: e.all_reduce([np.zeros(4, np.float32)] * 2, [FakeCuda(), FakeCuda()]),
               "host")


def test_bad_cuda_array_interfaces_are_refused_by_name():
    with rr.Engine(backend="cpu", ranks=2) as e:
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(typestr="<c8")] * 2), "rank 0", "<c8")
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(shape=(4, 4), strides=(4, 32))] * 2),
               "not contiguous")
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(), FakeCuda(shape=(5,))]), "rank 1", "shape")
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(), FakeCuda(typestr="<i4")]), "rank 1", "int32")
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(mask=object())] * 2), "masked")
        raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda()] * 3), "2 ranks but 3")

        class Broken:
            __cuda_array_interface__ = {"shape": (4,)}

        raises(rr.ArgumentError, lambda: e.all_reduce([Broken(), Broken()]), "malformed")


def test_cuda_backend_without_a_gpu_is_refused_with_the_reason():
    try:
        e = rr.Engine(backend="cuda", ranks=2)
    except rr.UnavailableError as why:
        assert str(why), "the refusal says why"
        return
    e.close()
    pytest.skip("SKIPPED: a GPU is present (the refusal is checked on machines without one)")


# -- on a GPU: torch CUDA tensors ----------------------------------------------


def _torch_cuda():
    try:
        import torch
    except ImportError:
        pytest.skip("SKIPPED: torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("SKIPPED: torch sees no CUDA GPU")
    return torch


@pytest.fixture(scope="module", params=[2, 4], ids=["2ranks", "4ranks"])
def gpu(request):
    torch = _torch_cuda()
    try:
        e = rr.Engine(backend="cuda", ranks=request.param, devices=[0], timeout=60)
    except rr.UnavailableError as why:
        pytest.skip(f"SKIPPED: the CUDA backend is unavailable here ({why})")
    with e:
        yield torch, e


DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8"]
OPS = ["sum", "prod", "max", "min", "avg"]
COUNT = 1000


def _bits(t):
    import torch

    views = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(views[t.element_size()]).cpu()


def _inputs(torch, dtype, op, n, count, seed):
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(seed)
    unsigned = dtype == "uint8"
    lo, hi = ((0, 3) if unsigned else (-2, 3)) if op == "prod" else ((0, 8) if unsigned else (-8, 8))
    return [torch.randint(lo, hi, (count,), generator=g).to(dt).cuda() for _ in range(n)]


def _reduce(torch, xs, op):
    s = torch.stack([x.double().cpu() for x in xs])
    r = {"sum": s.sum(0), "prod": s.prod(0), "max": s.max(0).values, "min": s.min(0).values,
         "avg": s.sum(0) / len(xs)}[op]
    return r.to(xs[0].dtype)


def _same(a, b):
    return bool(torch_equal(_bits(a), _bits(b)))


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_cuda_tensors_bitwise(gpu, dtype, op, in_place):
    torch, e = gpu
    if op == "avg" and not dtype.startswith(("float", "bfloat")):
        pytest.skip("SKIPPED: avg is checked on floating types")
    n = e.size
    xs = _inputs(torch, dtype, op, n, COUNT, seed=1)
    want = _reduce(torch, xs, op)
    if in_place:
        outs = e.all_reduce(xs, op=op)
    else:
        outs = e.all_reduce(xs, [torch.empty_like(x) for x in xs], op=op)
    for r, o in enumerate(outs):
        assert o.is_cuda
        assert _same(o, want), f"rank {r}: {o[:8]} != {want[:8]}"


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "uint8"])
def test_reduce_scatter_cuda_tensors_bitwise(gpu, dtype, in_place):
    torch, e = gpu
    n, c = e.size, 300
    xs = _inputs(torch, dtype, "sum", n, n * c, seed=2)
    want = _reduce(torch, xs, "sum")
    if in_place:
        e.reduce_scatter(xs)
        got = [xs[r][r * c:(r + 1) * c] for r in range(n)]
    else:
        got = e.reduce_scatter(xs, [torch.empty(c, dtype=xs[0].dtype, device="cuda") for _ in range(n)])
    for r in range(n):
        assert _same(got[r], want[r * c:(r + 1) * c]), f"rank {r}"


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8"])
def test_all_gather_and_broadcast_cuda_tensors_bitwise(gpu, dtype, in_place):
    torch, e = gpu
    n, c = e.size, 257
    xs = _inputs(torch, dtype, "sum", n, c, seed=3)
    want = torch.cat([x.cpu() for x in xs])
    if in_place:
        bufs = [torch.zeros(n * c, dtype=xs[0].dtype, device="cuda") for _ in range(n)]
        for r in range(n):
            bufs[r][r * c:(r + 1) * c] = xs[r]
        got = e.all_gather(bufs)
    else:
        got = e.all_gather(xs, [torch.empty(n * c, dtype=xs[0].dtype, device="cuda") for _ in range(n)])
    for r in range(n):
        assert _same(got[r], want), f"all_gather rank {r}"
    root = n - 1
    ys = [x.clone() for x in xs]
    got = e.broadcast(ys, root=root) if in_place else e.broadcast(
        xs, [torch.empty_like(x) for x in xs], root=root)
    for r in range(n):
        assert _same(got[r], xs[root]), f"broadcast rank {r}"


def test_multidimensional_tensors_and_last_call(gpu):
    torch, e = gpu
    xs = [torch.full((8, 16), float(r + 1), device="cuda") for r in range(e.size)]
    e.all_reduce(xs)
    total = sum(range(1, e.size + 1))
    assert all(bool((x == total).all()) for x in xs)
    assert e.last_call["path"]


def test_stream_order_producer_on_a_side_stream(gpu):
    """The producer (a long sleep, then a fill) is queued on a side stream
    that is current during the call: the call sees its result, returns
    before it ran (no host wait), and a consumer queued on the same stream
    after the call reads the result with no synchronize in between."""
    torch, e = gpu
    n = e.size
    side = torch.cuda.Stream()
    xs = [torch.zeros(1 << 16, device="cuda") for _ in range(n)]
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        e.all_reduce(xs)  # warm-up: the engine's buffers for this size exist
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        for r in range(n):
            xs[r].fill_(r + 1)
        e.all_reduce(xs)
        returned_early = not side.query()
        ys = [x * 2 for x in xs]  # the consumer, on the same stream
        got = [y.cpu() for y in ys]  # copies queued on the same stream (no synchronize)
    want = 2 * sum(range(1, n + 1))
    assert all(bool((g == want).all()) for g in got), [g[:4] for g in got]
    assert returned_early, "the call waited on the host for the producer"


def test_default_stream_consumer_waits_for_the_call(gpu):
    """With torch's default stream current (the legacy stream), a kernel
    queued right after the call reads the reduced values."""
    torch, e = gpu
    n = e.size
    xs = [torch.full((4096,), float(r), device="cuda") for r in range(n)]
    e.all_reduce(xs)
    s = [float(x.sum().item()) for x in xs]
    want = 4096 * sum(range(n))
    assert s == [want] * n


def test_cuda_array_interface_objects(gpu):
    torch, e = gpu

    class Cai:
        def __init__(self, t):
            self.t = t

        @property
        def __cuda_array_interface__(self):
            return self.t.__cuda_array_interface__

    xs = [torch.full((100,), float(r + 1), device="cuda") for r in range(e.size)]
    e.all_reduce([Cai(x) for x in xs])
    total = sum(range(1, e.size + 1))
    assert all(bool((x == total).all()) for x in xs)


def test_bad_device_memory_is_refused_on_a_gpu(gpu):
    torch, e = gpu
    n = e.size
    raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(addr=0x1000 + 64 * i) for i in range(n)]),
           "rank 0", "cuPointerGetAttribute")
    xs = [torch.zeros(8, device="cuda") for _ in range(n)]
    # A view that runs past its allocation: a tensor's storage is 8 floats,
    # the interface claims 1 << 30.
    raises(rr.ArgumentError, lambda: e.all_reduce([FakeCuda(shape=(1 << 30,), addr=x.data_ptr()) for x in xs]),
           "run past")
    raises(rr.ArgumentError, lambda: e.all_reduce(xs[:1] * n), "share memory")
    raises(rr.ArgumentError, lambda: e.all_reduce(xs, [torch.zeros(4, device="cuda") for _ in range(n)]),
           "rank 0", "expected 8")
    raises(rr.ArgumentError, lambda: e.all_reduce([x.double() for x in xs], [x for x in xs]), "element type")
    raises(rr.ArgumentError, lambda: e.all_reduce([torch.zeros(8, 2, device="cuda").t() for _ in range(n)]),
           "not contiguous")
    raises(rr.ArgumentError, lambda: e.all_reduce(xs, [torch.zeros(8) for _ in range(n)]), "host")
    # The engine still works after every refusal.
    e.all_reduce(xs)


# -- processes sharing one GPU: a job on the CUDA backend ----------------------

JOB_WORKER = r"""
import sys, torch, ringreduce as rr
rank, size, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
e = rr.Engine.job(rank, size, store, backend="cuda", timeout=60)
dev = torch.device("cuda", 0)
paths = set()

def check(got, want, what):
    if not torch.equal(got.cpu(), want):
        raise AssertionError(f"rank {rank}: {what}: {got[:6].tolist()} != {want[:6].tolist()}")
    paths.add((what, e.last_call["path"]))

count, s = 1000, sum(range(1, size + 1))
for in_place in (False, True):
    where = "in place" if in_place else "out of place"
    x = torch.arange(count, dtype=torch.float32, device=dev) * (rank + 1)
    if in_place:
        e.all_reduce([x])
        got = x
    else:
        got = torch.empty_like(x)
        e.all_reduce([x], [got])
    check(got, torch.arange(count, dtype=torch.float32) * s, f"all_reduce {where}")
    # reduce-scatter: rank r's input is [r+1]*size*count; the buffer itself in place
    x = torch.arange(size * count, dtype=torch.int64, device=dev) + rank
    if in_place:
        e.reduce_scatter([x])
        got = x[rank * count:(rank + 1) * count]
    else:
        got = torch.empty(count, dtype=torch.int64, device=dev)
        e.reduce_scatter([x], [got])
    want = (torch.arange(size * count, dtype=torch.int64) * size + sum(range(size)))[rank * count:(rank + 1) * count]
    check(got, want, f"reduce_scatter {where}")
    # all-gather: in place, the rank's chunk of the buffer is its input
    mine = torch.full((count,), rank + 0.5, dtype=torch.float64, device=dev)
    buf = torch.zeros(size * count, dtype=torch.float64, device=dev)
    if in_place:
        buf[rank * count:(rank + 1) * count] = mine
        e.all_gather([buf])
    else:
        e.all_gather([mine], [buf])
    check(buf, torch.arange(size, dtype=torch.float64).repeat_interleave(count) + 0.5, f"all_gather {where}")
    b = torch.full((count,), float(rank), device=dev)
    if in_place:
        e.broadcast([b], root=size - 1)
        got = b
    else:
        got = torch.empty_like(b)
        e.broadcast([b], [got], root=size - 1)
    check(got, torch.full((count,), float(size - 1)), f"broadcast {where}")
torch.cuda.synchronize()
e.close()
print(f"rank {rank}: OK", sorted(paths))
"""


@pytest.mark.parametrize("size", [2, 3])
def test_processes_sharing_a_gpu_take_paths_with_no_wait_between_ranks(size):
    """Ranks that are processes on one GPU (their kernels take turns on it):
    every collective, in and out of place, bitwise, and every call on a
    path whose ranks never wait on each other's GPU work
    (``oneshot:fused``: in place runs out of place between the staging
    buffers)."""
    import os
    import subprocess
    import sys
    import tempfile

    torch = _torch_cuda()
    store = os.path.join(tempfile.mkdtemp(prefix="rr-cuda-job-"), "store")
    procs = [
        subprocess.Popen([sys.executable, "-c", JOB_WORKER, str(r), str(size), store],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(size)
    ]
    outs = [(p.wait(timeout=300), p.stdout.read()) for p in procs]
    for r, (rc, out) in enumerate(outs):
        if "UnavailableError" in out and "CUDA" in out:
            pytest.skip(f"SKIPPED: the CUDA backend is unavailable here ({out.strip()[-200:]})")
        assert rc == 0 and f"rank {r}: OK" in out, out
        assert "'oneshot:fused')" in out and all(
            p == "oneshot:fused" for p in __import__("re").findall(r"'([^']+)'\)", out)
        ), out
    del torch
