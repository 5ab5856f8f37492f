"""The array boundary (issue 42): every host array is read through numpy
and borrowed through rust-numpy for the call, so no exporter can make a
call read freed memory or write where it must not; every argument of the
package is checked with an ArgumentError naming it; errors arrive at once.

The property test draws arrays of random element types, shapes, strides,
exporters, read-only flags and lifetimes, and runs each call in a child
process (a crash there is a failure here, never a crash of pytest): every
call must give the right answer or a ringreduce.Error, never a crash and
never a wrong answer. ``RR_HYPOTHESIS_EXAMPLES`` sets how many examples
(CI: 2000)."""

import gc
import os
import subprocess
import sys
import textwrap
import time

import pytest

import ringreduce as rr

np = pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")


def engine(ranks=2, **kw):
    return rr.Engine(backend="cpu", ranks=ranks, **kw)


# -- item 1: use after free ----------------------------------------------------


def test_numpy_scalars_are_read_where_they_live():
    # It gave [4., 4.]: the scalars' interface dicts owned their memory and
    # were gone by the time the call ran.
    e = engine()
    o = [np.zeros(()), np.zeros(())]
    e.all_reduce([np.float64(1), np.float64(2)], o)
    assert [float(x) for x in o] == [3.0, 3.0]
    # A scalar cannot be written: refused as an output, by name.
    with pytest.raises(rr.ArgumentError, match="numpy scalar"):
        e.all_reduce([np.float64(1), np.float64(2)])


class FreshEachTime:
    """An exporter whose ``__array_interface__`` makes a new array each time
    (and keeps it alive through the dict's ``__ref``, as numpy's own do)."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)

    @property
    def __array_interface__(self):
        fresh = self.values.copy()
        ai = dict(fresh.__array_interface__)
        ai["__ref"] = fresh
        return ai


def test_an_exporter_that_makes_a_new_array_each_time():
    # It crashed the interpreter (exit 139).
    e = engine()
    out = [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    e.all_reduce([FreshEachTime([1, 2, 3]), FreshEachTime([10, 20, 30])], out)
    assert out[0].tolist() == [11, 22, 33] == out[1].tolist()


# -- item 2: rr.plan's arguments -------------------------------------------------


@pytest.mark.parametrize(
    "kw, what",
    [
        (dict(ranks=2**40), "ranks"),
        (dict(ranks=10000), "ranks"),
        (dict(ranks=0), "ranks"),
        (dict(ranks=-1), "ranks"),
        (dict(count=2**64), "count"),
        (dict(count=-3), "count"),
    ],
)
def test_plan_arguments_are_capped(kw, what):
    t0 = time.monotonic()
    with pytest.raises(rr.ArgumentError, match=what):
        rr.plan("all_reduce", **kw)
    assert time.monotonic() - t0 < 5


def test_plan_of_the_largest_engine_is_quick():
    t0 = time.monotonic()
    p = rr.plan("all_reduce", ranks=256, count=256)
    assert p["ranks"] == 256 and time.monotonic() - t0 < 30


# -- items 3 and 4: masked and read-only arrays ----------------------------------


def test_masked_arrays_are_refused():
    e = engine()
    a = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.raises(rr.ArgumentError, match="masked"):
        e.all_reduce([a, a.copy()])
    with pytest.raises(rr.ArgumentError, match="masked"):
        e.all_reduce([np.ones(2), np.ones(2)], [a, a.copy()])


def test_read_only_outputs_are_refused_also_when_prepared():
    e = engine()
    a, b = np.ones(4, np.float32), np.ones(4, np.float32)
    call = e.prepare("all_reduce", [a, b])
    call()
    assert a.tolist() == [2.0] * 4
    b.flags.writeable = False
    with pytest.raises(rr.ArgumentError, match="read-only"):
        call()
    # Neither rank's buffer moved: the refusal comes before any write.
    assert a.tolist() == [2.0] * 4 and b.tolist() == [2.0] * 4, "a read-only array was written"
    b.flags.writeable = True
    call()
    assert a.tolist() == [4.0] * 4 and b.tolist() == [4.0] * 4


def test_an_output_that_is_also_an_input_is_refused():
    e = engine()
    a, b = np.ones(4), np.ones(4)
    with pytest.raises(rr.ArgumentError, match="rank 0: the output overlaps rank 0's input"):
        e.all_reduce([a, b], [a, np.zeros(4)])
    with pytest.raises(rr.ArgumentError, match="rank 1: the output overlaps rank 0's input"):
        e.all_reduce([a, b], [np.zeros(4), a[:]])


def test_object_and_structured_arrays_are_refused():
    e = engine()
    for a in (np.array([1, "x"], dtype=object), np.zeros(2, dtype=[("x", "f4")])):
        with pytest.raises(rr.ArgumentError, match="element type"):
            e.all_reduce([a, a.copy()])


# -- item 5: a peer that leaves, a world-size mismatch ----------------------------


JOB = textwrap.dedent(
    """
    import sys, time, numpy as np, ringreduce as rr
    rank, size, store, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    e = rr.Engine.job(rank, size, store, timeout=30)
    x = np.ones(4, np.float32)
    e.all_reduce([x])
    if rank == 1:
        if what == "close":
            e.close()
            time.sleep(5)
        sys.exit(0)
    t0 = time.monotonic()
    try:
        e.all_reduce([x])
        print("no error")
    except rr.Error as err:
        print(f"{type(err).__name__} after {time.monotonic() - t0:.2f} s: {err}")
    """
)


@pytest.mark.parametrize("what", ["close", "exit"])
def test_a_peer_that_leaves_is_told_at_once(tmp_path, what):
    store = str(tmp_path / "store")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", JOB, str(r), "2", store, what],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    out = [p.communicate(timeout=60)[0] for p in procs]
    assert "PeerError after" in out[0], out
    secs = float(out[0].split("after ")[1].split(" s")[0])
    assert secs < 5, out[0]
    assert "rank 1" in out[0], out[0]


def test_a_world_size_mismatch_is_told_at_once(tmp_path):
    store = str(tmp_path / "store")
    code = textwrap.dedent(
        """
        import sys, time, ringreduce as rr
        t0 = time.monotonic()
        try:
            rr.Engine.job(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], timeout=30)
            print("joined")
        except rr.Error as e:
            print(f"{type(e).__name__} after {time.monotonic() - t0:.2f} s: {e}")
        """
    )
    p0 = subprocess.Popen([sys.executable, "-c", code, "0", "2", store], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p1 = subprocess.Popen([sys.executable, "-c", code, "1", "3", store], stdout=subprocess.PIPE, text=True)
    out0, out1 = p0.communicate(timeout=60)[0], p1.communicate(timeout=60)[0]
    for out in (out0, out1):
        assert "Error after" in out, (out0, out1)
        assert float(out.split("after ")[1].split(" s")[0]) < 10, (out0, out1)


# -- items 6, 7, 10: arguments ------------------------------------------------------


def test_numpy_types_are_dtypes():
    assert rr.dtype_name(np.float32) == "float"
    assert rr.dtype_name(np.int8) == "int8"
    assert rr.dtype_name(np.dtype("float16")) == "half"
    assert rr.plan("all_reduce", ranks=2, count=4, dtype=np.float64)["ranks"] == 2


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rr.Engine(backend="cpu", ranks=2**64), "ranks"),
        (lambda: rr.plan("all_reduce", ranks=2, count=2**64), "count"),
        (lambda: engine().broadcast([np.ones(2), np.ones(2)], root=2**70), "root"),
        (lambda: engine().broadcast([np.ones(2), np.ones(2)], root=-1), "root"),
        (lambda: rr.Engine.job(2**64, 2, "/tmp/x"), "rank"),
        (lambda: rr.Engine.job(0, 2**64, "/tmp/x"), "size"),
    ],
)
def test_numbers_too_big_name_the_argument(call, name):
    with pytest.raises(rr.ArgumentError, match=name):
        call()


def test_devices_on_the_cpu_backend_are_refused():
    with pytest.raises(rr.ArgumentError, match="devices"):
        rr.Engine(backend="cpu", ranks=2, devices=[0, 1])


# -- item 8: fork ---------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="SKIPPED: no fork() here")
def test_a_forked_child_is_refused_at_once():
    e = engine()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        t0 = time.monotonic()
        try:
            e.all_reduce([np.ones(2), np.ones(2)])
            msg = b"no error"
        except rr.Error as err:
            msg = f"{type(err).__name__} {time.monotonic() - t0:.3f} {err}".encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    got = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    assert got.startswith("UnavailableError"), got
    assert float(got.split()[1]) < 1.0 and "fork" in got, got
    # The parent's engine goes on.
    a, b = np.ones(2), np.ones(2)
    e.all_reduce([a, b])
    assert a.tolist() == [2.0, 2.0]


# -- item 9: ringreduce.torch without torch -----------------------------------------


def test_ringreduce_torch_without_torch_says_what_is_needed():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # no torch here, whatever is installed
        try:
            import ringreduce.torch
        except ImportError as e:
            print(e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "needs PyTorch" in out.stdout and "pip install torch" in out.stdout, out


# -- the property: random arrays, exporters and lifetimes, in child processes ---------

hyp = pytest.importorskip("hypothesis", reason="SKIPPED: hypothesis is not installed")
from hypothesis import given, settings, HealthCheck, strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("RR_HYPOTHESIS_EXAMPLES", "200"))
TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
         "bool", "complex64", "object", ">f4", "<i2"]
EXPORTERS = ["ndarray", "view", "strided", "interface", "fresh", "dlpack", "scalar", "list",
             "readonly", "masked", "subclass", "deleted"]

# One child process runs a batch of cases (a crash fails the whole batch,
# naming it); each case prints "ok", "error <class>" or "WRONG ...".
CHILD = textwrap.dedent(
    """
    import gc, json, sys
    import numpy as np, ringreduce as rr

    class Iface:
        def __init__(self, a): self.a = a
        @property
        def __array_interface__(self): return self.a.__array_interface__

    class Fresh:
        def __init__(self, a): self.a = a
        @property
        def __array_interface__(self):
            f = self.a.copy(); ai = dict(f.__array_interface__); ai["__ref"] = f; return ai

    class DL:
        def __init__(self, a): self.a = a
        def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
        def __dlpack_device__(self): return self.a.__dlpack_device__()

    class Sub(np.ndarray):
        pass

    def make(kind, dtype, shape, r):
        n = int(np.prod(shape)) if shape else 1
        base = (np.arange(n) % 5 + r).astype("float64")
        try:
            a = base.astype(dtype).reshape(shape)
        except Exception:
            a = np.array(list(base), dtype=object).reshape(shape)
        if kind == "view": return a[...]
        if kind == "strided":
            b = np.repeat(a.reshape(-1), 2)[::2]
            return b.reshape(shape)
        if kind == "interface": return Iface(a)
        if kind == "fresh": return Fresh(a)
        if kind == "dlpack":
            try: return DL(a)
            except Exception: return a
        if kind == "scalar": return a.reshape(-1)[0] if n else a
        if kind == "list": return a.tolist()
        if kind == "readonly": a.flags.writeable = False; return a
        if kind == "masked": return np.ma.masked_array(a, mask=np.zeros(a.shape, bool))
        if kind == "subclass": return a.view(Sub)
        if kind == "deleted":
            x = Iface(a.copy()); return x
        return a

    def value(x):
        # What the caller reads back from a result, as float64.
        if isinstance(x, DL):
            x = np.from_dlpack(x)
        if isinstance(x, Fresh):
            # numpy keeps the exporter, not the dict's "__ref", alive: an
            # array made from a Fresh may read freed memory (the oracle
            # once computed a wrong sum that way). The values it exports.
            x = x.a
        return np.asarray(np.asarray(x), dtype=np.float64)

    def engine(ranks):
        return rr.Engine(backend="cpu", ranks=ranks)

    def release(e):
        e.close()

    def want_of(coll, dtype, vals):
        return sum(vals) if coll == "all_reduce" else None

    def same(got, want):
        return got.shape == want.shape and np.array_equal(got, want)

    def shown(v):
        return None if v is None else v.tolist()

    def settle():
        pass

    def finish():
        pass
    """
)

# The case loop both children share (the hooks above are each child's own:
# make, value, engine, release, want_of, same, shown, settle, finish).
LOOP = textwrap.dedent(
    """
    # The case loop both children share (the hooks above are each child's own).
    out = []
    for case in json.loads(sys.argv[1]):
        ranks, dtype, shape, kinds, place, coll = case
        e = engine(ranks)
        ins = [make(kinds[r], dtype, tuple(shape), r) for r in range(ranks)]
        outs = None
        if place == "out":
            outs = [make(kinds[ranks + r], dtype, tuple(shape), 100) for r in range(ranks)]
        gc.collect()
        want = None
        try:
            want = want_of(coll, dtype, [value(x) for x in ins])
            # The result has the caller's output shape: a numpy scalar's
            # input is 0-d where the output array is `shape`.
            if want is not None:
                want = want.reshape(tuple(shape))
        except Exception:
            pass
        try:
            res = getattr(e, coll)(ins, outs)
            settle()
        except rr.Error as err:
            out.append("error " + type(err).__name__)
            release(e)
            continue
        except Exception as err:
            out.append(f"UNTYPED {type(err).__name__}: {err} ({case})")
            release(e)
            continue
        gc.collect()
        verdict = "ok"
        if want is not None:
            for r, x in enumerate(res):
                got = value(x)
                if got is None or not same(got, want):
                    verdict = f"WRONG rank {r}: {shown(got)} != {shown(want)} ({case})"
                    break
        out.append(verdict)
        release(e)
    finish()
    print(json.dumps(out))
    """
)
CHILD += LOOP


@st.composite
def cases(draw):
    ranks = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(TYPES))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    place = draw(st.sampled_from(["in", "out"]))
    kinds = draw(st.lists(st.sampled_from(EXPORTERS), min_size=2 * ranks, max_size=2 * ranks))
    # Mostly plain arrays, so that enough calls run to be checked.
    if draw(st.booleans()):
        kinds = ["ndarray"] * (2 * ranks)
    coll = draw(st.sampled_from(["all_reduce", "all_reduce", "broadcast", "all_gather"]))
    return [ranks, dtype, shape, kinds, place, coll]


def run_batch(batch, child=None, timeout=300):
    import json

    p = subprocess.run([sys.executable, "-c", child or CHILD, json.dumps(batch)], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"the child CRASHED (exit {p.returncode}) on {batch}: {p.stderr[-2000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


@settings(max_examples=max(1, EXAMPLES // 25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(cases(), min_size=25, max_size=25))
def test_the_boundary_cannot_be_fooled(batch):
    # 25 cases per child process: EXAMPLES cases in all.
    for result in run_batch(batch):
        assert not result.startswith("WRONG"), result
        assert not result.startswith("UNTYPED"), result


# -- the same property on a GPU: CUDA tensors and their exporters ---------------

CUDA_TYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8", "bool",
              "complex64", "int16"]
CUDA_EXPORTERS = ["tensor", "view", "strided", "interface", "dlpack", "host", "deleted", "scalar"]

CUDA_CHILD = textwrap.dedent(
    """
    import gc, json, sys
    import torch, ringreduce as rr

    class Iface:
        # __cuda_array_interface__ of a tensor it keeps
        def __init__(self, t): self.t = t
        @property
        def __cuda_array_interface__(self): return self.t.__cuda_array_interface__

    class DL:
        def __init__(self, t): self.t = t
        def __dlpack__(self, **kw): return self.t.__dlpack__(**kw)
        def __dlpack_device__(self): return self.t.__dlpack_device__()

    def make(kind, dtype, shape, r):
        n = 1
        for s in shape: n *= s
        base = (torch.arange(n, dtype=torch.float64) % 5 + r)
        t = base.to(getattr(torch, dtype)).reshape(shape).cuda()
        if kind == "view": return t.view(shape)
        if kind == "strided": return torch.repeat_interleave(t.reshape(-1), 2)[::2].reshape(shape)
        if kind == "interface":
            return Iface(t) if dtype not in ("bfloat16", "bool") else t
        if kind == "dlpack": return DL(t)
        if kind == "host": return t.cpu()
        if kind == "deleted":
            # the interface object outlives nothing: the call must keep it
            x = Iface(t.clone()); del t; gc.collect(); return x
        if kind == "scalar": return t.reshape(-1)[0] if n else t
        return t

    def value(x):
        if isinstance(x, Iface): x = x.t
        if isinstance(x, DL): x = x.t
        return x.detach().to("cpu", torch.float64) if hasattr(x, "detach") else None

    engines = {}

    def engine(ranks):
        # one engine per rank count for the whole batch (a CUDA engine's
        # setup costs more than a case)
        if ranks not in engines:
            engines[ranks] = rr.Engine(backend="cuda", ranks=ranks, devices=[0])
        return engines[ranks]

    def release(e):
        pass

    def want_of(coll, dtype, vals):
        if dtype == "bool" or any(v is None for v in vals):
            return None
        return {"all_reduce": lambda: sum(vals), "broadcast": lambda: vals[0]}.get(coll, lambda: None)()

    def same(got, want):
        return got.shape == want.shape and torch.equal(got, want)

    def shown(v):
        return v

    def settle():
        torch.cuda.synchronize()

    def finish():
        for e in engines.values():
            e.close()
    """
) + LOOP


def _cuda_fuzz_ready():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    return None


@st.composite
def cuda_cases(draw):
    ranks = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(CUDA_TYPES))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    place = draw(st.sampled_from(["in", "out"]))
    kinds = draw(st.lists(st.sampled_from(CUDA_EXPORTERS), min_size=2 * ranks, max_size=2 * ranks))
    if draw(st.booleans()):
        kinds = ["tensor"] * (2 * ranks)
    coll = draw(st.sampled_from(["all_reduce", "all_reduce", "broadcast", "all_gather"]))
    return [ranks, dtype, shape, kinds, place, coll]


@settings(max_examples=max(1, EXAMPLES // 25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(cuda_cases(), min_size=25, max_size=25))
def test_the_cuda_boundary_cannot_be_fooled(batch):
    """CUDA tensors, views, strided tensors, ``__cuda_array_interface__``
    and DLPack objects, host tensors mixed in, objects whose tensor is
    dropped before the call: the right answer or a ringreduce.Error, in a
    child process (0 crashes, 0 wrong results)."""
    why = _cuda_fuzz_ready()
    if why:
        pytest.skip(f"SKIPPED: {why}")
    for result in run_batch(batch, CUDA_CHILD, timeout=600):
        assert not result.startswith("WRONG"), result
        assert not result.startswith("UNTYPED"), result
