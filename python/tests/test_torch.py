"""torch: the Engine over CPU tensors (every type both sides have, every
op, in and out of place, bitwise), the bad inputs, and the torch.distributed
backend with two processes (CPU always; CUDA, two ranks sharing a GPU, when
there is one). SKIPPED with the reason when torch is not installed."""

import glob
import os
import socket
import subprocess
import sys

import pytest

import ringreduce as rr

torch = pytest.importorskip("torch", reason="SKIPPED: torch is not installed")

RANKS = 2
HERE = os.path.dirname(os.path.abspath(__file__))

TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
         torch.float32, torch.float64]
TYPES += [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
OPS = ["sum", "prod", "min", "max", "avg"]


def exact(dt, op, rank, n=33):
    g = torch.Generator().manual_seed(10 + rank)
    if op == "avg":
        v = torch.randint(0, 2, (n,), generator=g) * 4
    elif op == "prod":
        v = torch.randint(1, 3, (n,), generator=g)
    else:
        v = torch.randint(0, 4, (n,), generator=g)
    return v.to(torch.float64).to(dt)


def want(dt, op, xs):
    w = torch.stack([x.to(torch.float64) for x in xs])
    r = {"sum": w.sum(0), "prod": w.prod(0), "min": w.min(0).values, "max": w.max(0).values,
         "avg": torch.trunc(w.sum(0) / len(xs))}[op]
    return r.to(dt)


def bits(t):
    return t.contiguous().view(torch.uint8) if t.element_size() > 0 else t


@pytest.fixture(scope="module")
def engine():
    with rr.Engine(backend="cpu", ranks=RANKS) as e:
        yield e


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", TYPES, ids=str)
def test_all_reduce_tensors(engine, dt, op, in_place):
    xs = [exact(dt, op, r) for r in range(RANKS)]
    w = want(dt, op, xs)
    if in_place:
        engine.all_reduce(xs, op=op)
        outs = xs
    else:
        outs = [torch.zeros_like(x) for x in xs]
        engine.all_reduce(xs, outs, op=op)
    for o in outs:
        assert torch.equal(bits(o), bits(w)), (o, w)


@pytest.mark.parametrize("dt", TYPES, ids=str)
def test_reduce_scatter_and_all_gather_tensors(engine, dt):
    xs = [exact(dt, "max", r, n=RANKS * 5) for r in range(RANKS)]
    w = want(dt, "max", xs)
    outs = [torch.zeros(5, dtype=dt) for _ in range(RANKS)]
    engine.reduce_scatter(xs, outs, op="max")
    for r, o in enumerate(outs):
        assert torch.equal(bits(o), bits(w[r * 5:(r + 1) * 5]))
    g = [torch.zeros(RANKS * 5, dtype=dt) for _ in range(RANKS)]
    engine.all_gather(outs, g)
    for o in g:
        assert torch.equal(bits(o), bits(w))


def test_bad_tensors(engine):
    with pytest.raises(rr.ArgumentError, match="not contiguous"):
        engine.all_reduce([torch.zeros(4, 4).t(), torch.zeros(4, 4).t()])
    with pytest.raises(rr.ArgumentError, match="rank 1"):
        engine.all_reduce([torch.zeros(4), torch.zeros(4, dtype=torch.float64)])
    with pytest.raises(rr.ArgumentError, match="shape"):
        engine.all_reduce([torch.zeros(4), torch.zeros(5)])
    with pytest.raises(rr.ArgumentError, match="complex"):
        engine.all_reduce([torch.zeros(4, dtype=torch.complex64)] * 2)
    with pytest.raises(rr.UnavailableError, match="meta"):
        engine.all_reduce([torch.zeros(4, device="meta"), torch.zeros(4, device="meta")])
    if torch.cuda.is_available():
        with pytest.raises(rr.UnavailableError, match="cuda"):
            engine.all_reduce([torch.zeros(4, device="cuda"), torch.zeros(4, device="cuda")])
    with pytest.raises(rr.ArgumentError, match="one per rank"):
        engine.all_reduce(torch.zeros(2))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(device, mode="ok", timeout="60", **extra):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(RANKS), RR_TEST_TIMEOUT=timeout, **extra)
    stores = set(glob.glob("/dev/shm/ringreduce-*") + glob.glob("/tmp/ringreduce-*"))
    procs = []
    for r in range(RANKS):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "torch_worker.py"), device, mode],
                                      env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [(p.wait(timeout=300), p.stdout.read()) for p in procs]
    left = set(glob.glob("/dev/shm/ringreduce-*") + glob.glob("/tmp/ringreduce-*")) - stores
    assert not left, f"a store directory was made or left behind: {left}"
    return outs


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda-stage", "cuda-device"])
def test_backend_two_processes(device):
    """CUDA tensors: by default small calls through host memory and the
    rest on the CUDA job through device-to-device copies; ``cuda-stage``
    and ``cuda-device`` force one way (RINGREDUCE_TORCH_CUDA)."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("SKIPPED: no CUDA device (torch.cuda.is_available() is False)")
    if device in ("cuda-stage", "cuda-device"):
        outs = run_ranks("cuda", RINGREDUCE_TORCH_CUDA=device.split("-")[1])
    else:
        outs = run_ranks(device, RINGREDUCE_TORCH_CUDA="")
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {r}: OK" in out, out


@pytest.mark.parametrize("mode", ["die", "raise"])
def test_backend_rank_gone(mode):
    outs = run_ranks("cpu", mode, timeout="30")
    rc0, out0 = outs[0]
    assert rc0 == 0 and "rank 0: peer gone" in out0 and "rank 1" in out0, out0
    assert outs[1][0] != 0


def test_cuda_calls_stage_small_uniform_calls_by_default(monkeypatch):
    """Which calls on CUDA tensors go through host memory: by default those
    whose tensors are the same size on every rank, up to 256 KiB (every
    rank decides alike); ``stage`` and ``device`` force one way; any other
    value is refused by name."""
    import ringreduce.torch as rt

    monkeypatch.delenv("RINGREDUCE_TORCH_CUDA", raising=False)
    assert rt._stages(8) and rt._stages(256 << 10)
    assert not rt._stages((256 << 10) + 1)
    assert not rt._stages(None)
    monkeypatch.setenv("RINGREDUCE_TORCH_CUDA", "stage")
    assert rt._stages(None) and rt._stages(1 << 30)
    monkeypatch.setenv("RINGREDUCE_TORCH_CUDA", "device")
    assert not rt._stages(8)
    monkeypatch.setenv("RINGREDUCE_TORCH_CUDA", "both")
    with pytest.raises(ValueError, match="RINGREDUCE_TORCH_CUDA='both'"):
        rt._stages(8)


# A call's completion runs torch's Future.set_result on the thread that ran
# the call (the group's worker, a receive's thread): set_result marks the
# future done, wakes its waiters, then runs its callbacks, all in C++. A
# waiter that returned there and let the process exit left that daemon
# thread inside C++ at interpreter shutdown: CPython ends such a thread with
# pthread_exit, whose unwind through torch's frames aborted the process
# ("terminate called without an active exception"; torch's test_send_recv,
# once in CI). wait() returns only once the completing thread is out of
# set_result.

_EXIT_SCRIPT = r"""
import threading, time, torch
from ringreduce.torch import _Work
w = _Work([torch.zeros(1)])
w.get_future().add_done_callback(lambda f: time.sleep(0.5))
threading.Thread(target=w._finish, args=(None,), daemon=True).start()
w.wait()
"""


# The same exit with the waiter on get_future() (as DDP's communication hook
# waits): wait() cannot hold it back, so the interpreter waits at exit
# (atexit, before daemon threads stop) until no completion is running.
# Before that, 7 of 12 runs of this script aborted here (exit 134).
_FUTURE_EXIT_SCRIPT = _EXIT_SCRIPT.replace("w.wait()", "w.get_future().wait()")


def test_a_process_exiting_right_after_a_futures_wait_exits_cleanly():
    for _ in range(4):
        p = subprocess.run([sys.executable, "-c", _FUTURE_EXIT_SCRIPT], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
        assert "terminate called" not in p.stderr


def test_the_exit_wait_for_completions_is_bounded():
    from ringreduce.torch import _Work, _wait_for_completions
    import threading

    w = _Work([torch.zeros(1)])
    inside, release = threading.Event(), threading.Event()
    w.get_future().add_done_callback(lambda f: (inside.set(), release.wait(10)))
    t = threading.Thread(target=w._finish, args=(None,), daemon=True)
    t.start()
    assert inside.wait(5)
    # A completion stuck in a callback: the exit's wait gives up on time.
    assert _wait_for_completions(0.1) is False
    release.set()
    t.join(5)
    assert _wait_for_completions(1.0) is True


def test_wait_returns_after_the_completing_thread_left_torchs_future():
    from ringreduce.torch import _Work
    import threading
    import time

    w = _Work([torch.zeros(1)])
    ran = []
    w.get_future().add_done_callback(lambda f: (time.sleep(0.3), ran.append(1)))
    t = threading.Thread(target=w._finish, args=(None,), daemon=True)
    t.start()
    assert w.wait() is True
    assert ran == [1], "wait() returned while set_result still ran its callbacks"
    t.join(5)
    # An error still reaches the waiter.
    e = _Work([torch.zeros(1)])
    threading.Thread(target=e._finish, args=(RuntimeError("boom"),), daemon=True).start()
    with pytest.raises(RuntimeError, match="boom"):
        e.wait()


def test_a_process_exiting_right_after_wait_exits_cleanly():
    p = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert "terminate called" not in p.stderr
