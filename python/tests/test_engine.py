"""The Engine over numpy arrays on the CPU backend: every element type and
op, in and out of place, checked bitwise with exact-valued inputs; bad
inputs raise the right ringreduce.Error subclass with the engine's message."""

import pytest

import ringreduce as rr

np = pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")

try:
    import ml_dtypes
except ImportError:  # bfloat16 and the float8 types need it on the numpy side
    ml_dtypes = None

RANKS = 4
COUNT = 37  # not a multiple of the ranks: uneven chunks

NUMPY_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
ML_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
ALL_TYPES = NUMPY_TYPES + ML_TYPES
OPS = ["sum", "prod", "min", "max", "avg"]


def np_dtype(name):
    if name in ML_TYPES:
        if ml_dtypes is None:
            pytest.skip(f"SKIPPED: ml_dtypes is not installed (numpy has no {name} without it)")
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def exact_inputs(name, op, ranks, count, seed=0):
    """Per-rank inputs whose reduction is exact in `name` in any order:
    small values (every partial sum an integer of at most 8 for the float8 types), products of
    1, 2 (and -1 where signed) over at most 3 ranks' worth of 2s, averages
    of 0 and 4 over 4 ranks."""
    rng = np.random.default_rng(seed)
    signed = not name.startswith("uint")
    if op == "avg":
        vals = [0, 4]
    elif op == "prod":
        vals = [1, 2, -1] if signed else [1, 2]
    elif op == "sum":
        vals = [0, 1, 2] if name.startswith("float8") else [0, 1, 2, 3, -2]
        if not signed:
            vals = [0, 1, 2, 3]
    else:
        vals = [-3, -1, 0, 1, 2, 5] if signed else [0, 1, 2, 5, 9]
    out = []
    for r in range(ranks):
        v = rng.choice(vals, size=count)
        if op == "prod":
            # at most three 2s per element across ranks: 2^3 = 8 fits every type
            v = np.where((v == 2) & (r >= 3), 1, v)
        out.append(v.astype(np.float64).astype(np_dtype(name)))
    return out


def expected(name, op, xs):
    wide = np.stack([x.astype(np.float64) for x in xs])
    n = len(xs)
    if op == "sum":
        r = wide.sum(0)
    elif op == "prod":
        r = wide.prod(0)
    elif op == "min":
        r = wide.min(0)
    elif op == "max":
        r = wide.max(0)
    else:
        r = np.trunc(wide.sum(0) / n)
    return r.astype(np_dtype(name))


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def engine():
    with rr.Engine(backend="cpu", ranks=RANKS, timeout=30) as e:
        yield e


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ALL_TYPES)
def test_all_reduce(engine, name, op, in_place):
    xs = exact_inputs(name, op, RANKS, COUNT)
    want = expected(name, op, xs)
    before = [x.copy() for x in xs]
    if in_place:
        outs = engine.all_reduce(xs, op=op)
        assert outs[0] is xs[0]
    else:
        outs = [np.full_like(x, 7) for x in xs]
        engine.all_reduce(xs, outs, op=op)
        assert all(same_bits(a, b) for a, b in zip(xs, before)), "inputs changed"
    for r, o in enumerate(outs):
        assert same_bits(o, want), f"rank {r}: {o!r} != {want!r}"
    assert engine.last_call["path"]
    assert len(engine.last_call["traffic"]) == RANKS


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ALL_TYPES)
def test_reduce_scatter(engine, name, op, in_place):
    c = 5
    xs = exact_inputs(name, op, RANKS, RANKS * c, seed=1)
    want = expected(name, op, xs)
    if in_place:
        engine.reduce_scatter(xs, op=op)
        got = [xs[r][r * c:(r + 1) * c] for r in range(RANKS)]
    else:
        got = [np.zeros(c, xs[0].dtype) for _ in range(RANKS)]
        engine.reduce_scatter(xs, got, op=op)
    for r in range(RANKS):
        assert same_bits(got[r], want[r * c:(r + 1) * c]), f"rank {r}"


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("name", ALL_TYPES)
def test_all_gather(engine, name, in_place):
    c = 6
    xs = exact_inputs(name, "max", RANKS, c, seed=2)
    want = np.concatenate(xs)
    if in_place:
        bufs = [np.zeros(RANKS * c, xs[0].dtype) for _ in range(RANKS)]
        for r in range(RANKS):
            bufs[r][r * c:(r + 1) * c] = xs[r]
        engine.all_gather(bufs)
    else:
        bufs = [np.zeros(RANKS * c, xs[0].dtype) for _ in range(RANKS)]
        engine.all_gather(xs, bufs)
    for r in range(RANKS):
        assert same_bits(bufs[r], want), f"rank {r}"


@pytest.mark.parametrize("root", [0, 3])
def test_broadcast(engine, root):
    xs = [np.arange(COUNT, dtype=np.int32) * (r + 1) for r in range(RANKS)]
    outs = [np.zeros(COUNT, np.int32) for _ in range(RANKS)]
    engine.broadcast(xs, outs, root=root)
    for o in outs:
        assert same_bits(o, xs[root])
    engine.broadcast(xs, root=root)
    for x in xs:
        assert same_bits(x, outs[0])


def test_multidimensional_and_barrier(engine):
    xs = [np.full((3, 4), r, np.float32) for r in range(RANKS)]
    engine.all_reduce(xs)
    assert all((x == sum(range(RANKS))).all() for x in xs)
    engine.barrier()


def test_large_buffer(engine):
    n = (1 << 20) + 3
    xs = [np.full(n, r + 1, np.int64) for r in range(RANKS)]
    engine.all_reduce(xs)
    assert all((x == RANKS * (RANKS + 1) // 2).all() for x in xs)


def test_algorithms_agree():
    xs0 = exact_inputs("float32", "sum", 3, 101, seed=3)
    want = expected("float32", "sum", xs0)
    for algo in ["ring", "ring:pipe2", "oneshot", "ps", "auto"]:
        with rr.Engine(backend="cpu", ranks=3, algo=algo) as e:
            xs = [x.copy() for x in xs0]
            e.all_reduce(xs)
            assert all(same_bits(x, want) for x in xs), algo
            if algo != "auto":
                assert e.last_call["path"].startswith(algo.split(":")[0])


# -- bad inputs ----------------------------------------------------------------


def raises(cls, fn, *words):
    with pytest.raises(cls) as info:
        fn()
    assert isinstance(info.value, rr.Error)
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"
    return info.value


def test_wrong_dtype(engine):
    xs = [np.zeros(4, np.float32) for _ in range(RANKS)]
    xs[2] = np.zeros(4, np.float64)
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "rank 2", "double", "float")
    outs = [np.zeros(4, np.int32) for _ in range(RANKS)]
    ins = [np.zeros(4, np.float32) for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(ins, outs), "int32", "float")


def test_unsupported_dtype(engine):
    xs = [np.zeros(4, np.complex64) for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "rank 0", "complex64")
    xs = [np.zeros(4, bool) for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "bool")


def test_wrong_shape(engine):
    xs = [np.zeros(4, np.float32) for _ in range(RANKS)]
    xs[1] = np.zeros(5, np.float32)
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "rank 1", "shape")
    ins = [np.zeros(4, np.float32) for _ in range(RANKS)]
    outs = [np.zeros(3, np.float32) for _ in range(RANKS)]
    e = raises(rr.ArgumentError, lambda: engine.all_reduce(ins, outs))
    assert "4" in str(e) and "3" in str(e)


def test_reduce_scatter_sizes(engine):
    ins = [np.zeros(10, np.float32) for _ in range(RANKS)]
    outs = [np.zeros(2, np.float32) for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.reduce_scatter(ins, outs), "10")


def test_non_contiguous(engine):
    xs = [np.zeros((4, 2), np.float32)[:, 0] for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "not contiguous")
    xs = [np.zeros((4, 3), np.float32).T for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "not contiguous")


def test_wrong_count(engine):
    xs = [np.zeros(4, np.float32) for _ in range(RANKS - 1)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), f"{RANKS} ranks", f"{RANKS - 1}")
    raises(rr.ArgumentError, lambda: engine.all_reduce(np.zeros(4)), "one per rank")


def test_not_an_array(engine):
    raises(rr.ArgumentError, lambda: engine.all_reduce([object()] * RANKS), "not an array")


def test_read_only_output(engine):
    xs = [np.zeros(4, np.float32) for _ in range(RANKS)]
    xs[3].flags.writeable = False
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs), "rank 3", "read-only")


def test_aliased_outputs(engine):
    shared = np.zeros(4, np.float32)
    ins = [np.zeros(4, np.float32) for _ in range(RANKS)]
    outs = [shared] + [np.zeros(4, np.float32) for _ in range(RANKS - 2)] + [shared]
    raises(rr.ArgumentError, lambda: engine.all_reduce(ins, outs), "share memory")
    raises(rr.ArgumentError, lambda: engine.all_reduce(ins, list(ins)), "overlaps")


def test_bad_op_and_root(engine):
    xs = [np.zeros(4, np.float32) for _ in range(RANKS)]
    raises(rr.ArgumentError, lambda: engine.all_reduce(xs, op="xor"), "xor")
    raises(rr.ArgumentError, lambda: engine.broadcast(xs, root=RANKS), str(RANKS))


def test_bad_engine_arguments():
    raises(rr.ArgumentError, lambda: rr.Engine(backend="tpu", ranks=2), "tpu")
    raises(rr.ArgumentError, lambda: rr.Engine(backend="cpu", ranks=0), "at least 1")
    raises(rr.ArgumentError, lambda: rr.Engine(backend="cpu", ranks=2, timeout=-1), "timeout")
    raises(rr.ArgumentError, lambda: rr.Engine(backend="cpu", ranks=2, algo="nope"), "nope")


def test_cuda_without_gpu_or_cuda_array():
    class FakeCuda:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1, False), "version": 3}

    with rr.Engine(backend="cpu", ranks=2) as e:
        raises(rr.UnavailableError, lambda: e.all_reduce([FakeCuda(), FakeCuda()]), "backend='cuda'")


def test_closed_engine():
    e = rr.Engine(backend="cpu", ranks=2)
    e.close()
    raises(rr.Error, lambda: e.all_reduce([np.zeros(2), np.zeros(2)]), "closed")


def test_dlpack_and_array_interface(engine):
    class Wrapped:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    raw = [np.full(6, r, np.int32) for r in range(RANKS)]
    engine.all_reduce([Wrapped(a) for a in raw])
    assert all((a == sum(range(RANKS))).all() for a in raw)
    if hasattr(np, "from_dlpack"):
        class DL:
            def __init__(self, a):
                self.a = a

            def __dlpack__(self, **kw):
                return self.a.__dlpack__(**kw)

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

        raw = [np.full(6, r, np.int32) for r in range(RANKS)]
        if int(np.__version__.split(".")[0]) < 2:
            # numpy 1's from_dlpack gives read-only arrays: an in-place call
            # through them is refused by name, never written.
            with pytest.raises(rr.ArgumentError, match="read-only"):
                engine.all_reduce([DL(a) for a in raw])
            return
        engine.all_reduce([DL(a) for a in raw])
        assert all((a == sum(range(RANKS))).all() for a in raw)


# -- study views -------------------------------------------------------------


def test_plan_objects():
    p = rr.plan("all_reduce", ranks=3, count=9, dtype="float32", algo="ring")
    assert p["name"] == "ring" and p["ranks"] == 3 and p["count"] == 9
    ops = p["ops"]
    assert {o["rank"] for o in ops} == {0, 1, 2}
    kinds = {o["kind"] for o in ops}
    assert "copy" in kinds and "reduce" in kinds
    # a ring: 2(N-1) steps of one copy per rank
    copies = [o for o in ops if o["kind"] == "copy" and o["rank"] == 0]
    assert len(copies) == 2 * (3 - 1)
    assert {o["phase"] for o in copies} == {"ReduceScatter", "AllGather"}
    raises(rr.ArgumentError, lambda: rr.plan("all_reduce", ranks=3, algo="nope"), "nope")


def test_trace_text():
    t = rr.trace("all_reduce", ranks=2, count=4)
    assert t.startswith("ring: all-reduce on N = 2 ranks")
    e = rr.Engine(backend="cpu", ranks=3)
    assert "N = 3" in e.trace(count=6)
    raises(rr.ArgumentError, lambda: rr.trace(ranks=2, count=1 << 20), "small examples")


# -- the CUDA backend (host arrays staged by the library; on a GPU machine) ----


@pytest.fixture(scope="module")
def cuda_engine():
    try:
        e = rr.Engine(backend="cuda", ranks=2, timeout=60)
    except rr.UnavailableError as why:
        pytest.skip(f"SKIPPED: the CUDA backend is unavailable here ({why})")
    with e:
        yield e


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ALL_TYPES)
def test_cuda_backend_all_reduce(cuda_engine, name, op, in_place):
    xs = exact_inputs(name, op, 2, COUNT, seed=5)
    want = expected(name, op, xs)
    outs = xs if in_place else [np.zeros_like(x) for x in xs]
    if in_place:
        cuda_engine.all_reduce(xs, op=op)
    else:
        cuda_engine.all_reduce(xs, outs, op=op)
    for r, o in enumerate(outs):
        assert same_bits(o, want), f"rank {r}: {o!r} != {want!r}"


def test_cuda_backend_reduce_scatter_all_gather(cuda_engine):
    xs = exact_inputs("float32", "sum", 2, 2 * 1000, seed=6)
    want = expected("float32", "sum", xs)
    outs = [np.zeros(1000, np.float32) for _ in range(2)]
    cuda_engine.reduce_scatter(xs, outs)
    for r in range(2):
        assert same_bits(outs[r], want[r * 1000:(r + 1) * 1000])
    g = [np.zeros(2000, np.float32) for _ in range(2)]
    cuda_engine.all_gather(outs, g)
    assert all(same_bits(x, want) for x in g)


def test_timeline_of_real_calls(tmp_path):
    """set_timing, the calls, then timeline(path): each timed call with its
    plan and one time per op part, written as trace-event JSON whose slices
    name the plan's cells; untimed calls leave nothing."""
    import json

    engine = rr.Engine(backend="cpu", ranks=RANKS, timeout=30, algo="ring")
    xs = [np.full(1024, r + 1, np.float32) for r in range(engine.size)]
    engine.all_reduce(xs)
    assert engine.timeline() == []
    engine.set_timing(True)
    for _ in range(2):
        engine.all_reduce(xs)
    engine.set_timing(False)
    engine.all_reduce(xs)
    with pytest.raises(FileNotFoundError):
        engine.timeline(tmp_path / "missing" / "tl.json")  # the calls stay for the next take
    path = tmp_path / "tl.json"
    calls = engine.timeline(path)
    assert [c["plan"]["name"] for c in calls] == ["ring", "ring"]
    for c in calls:
        ops = {(o["rank"], o["index"]) for o in c["plan"]["ops"]}
        assert c["times"] and all((r, i) in ops and e >= s for r, i, _, s, e in c["times"])
    doc = json.loads(path.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == sum(len(c["times"]) for c in calls)
    assert any(e["name"].startswith("copy RS") for e in slices), slices[:3]
    assert {e["pid"] for e in slices} == set(range(engine.size))
    assert min(e["ts"] for e in slices) == 0
    assert engine.timeline() == [], "taken twice"
    engine.close()


def test_errors_pickle_as_the_packages():
    """torch's CUDA futures and multiprocessing pickle an error: every class
    is importable as ringreduce.<Name> and comes back as itself."""
    import pickle

    for cls in (rr.Error, rr.ArgumentError, rr.MismatchError, rr.TimeoutError, rr.PeerError,
                rr.UnavailableError, rr.CudaError, rr.InternalError):
        assert cls.__module__ == "ringreduce" and getattr(rr, cls.__name__) is cls
        e = pickle.loads(pickle.dumps(cls("rank 1: why")))
        assert type(e) is cls and str(e) == "rank 1: why"
    with pytest.raises(rr.ArgumentError) as info:
        rr.Engine(backend="cpu", ranks=2).all_reduce([np.zeros(3, np.float32)])
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is rr.ArgumentError and str(again) == str(info.value)


def test_prepared_calls_rerun_on_the_same_arrays():
    """Engine.prepare reads the arrays once; each call runs the collective
    on what they hold then; the arrays are held (numpy refuses to resize
    them); anything but numpy host arrays is refused by name."""
    e = rr.Engine(backend="cpu", ranks=2, timeout=30)
    xs = [np.full(5, 1.0, np.float32), np.full(5, 2.0, np.float32)]
    call = e.prepare("all_reduce", xs)
    call()
    assert all((x == 3).all() for x in xs)
    xs[0][:] = 10
    xs[1][:] = 1
    call()
    assert all((x == 11).all() for x in xs)
    with pytest.raises(ValueError):
        xs[0].resize(10)  # held by the prepared call
    outs = [np.zeros(10, np.int32), np.zeros(10, np.int32)]
    g = e.prepare("all_gather", [np.arange(5, dtype=np.int32), np.arange(5, 10, dtype=np.int32)], outs)
    g()
    assert all(o.tolist() == list(range(10)) for o in outs)
    with pytest.raises(rr.ArgumentError, match="numpy arrays"):
        e.prepare("all_reduce", [memoryview(bytearray(8)), memoryview(bytearray(8))])
    with pytest.raises(rr.ArgumentError):
        e.prepare("all_reduce", [np.zeros(4, np.float32), np.zeros(5, np.float32)])
    e.close()
    with pytest.raises(rr.Error, match="closed"):
        call()


@pytest.mark.parametrize("prepared", [False, True], ids=["plain", "prepared"])
def test_zero_length_arrays_are_empty_calls(prepared):
    """numpy gives a size-0 array an address that need not be aligned: the
    call is an empty one, not a misaligned buffer."""
    e = rr.Engine(backend="cpu", ranks=2, timeout=30)
    xs = [np.zeros(0, np.float32), np.zeros(0, np.float32)]
    if prepared:
        e.prepare("all_reduce", xs)()
    else:
        e.all_reduce(xs)
        e.all_reduce(xs, [np.zeros(0, np.float32), np.zeros(0, np.float32)])
    e.close()


@pytest.mark.parametrize("call, says", [
    (lambda: rr.Engine(backend="cpu", ranks=-1), "ranks must be at least 1"),
    (lambda: rr.Engine(backend="cpu", ranks="2"), "ranks must be a whole number"),
    (lambda: rr.Engine(backend="cpu", ranks=True), "ranks must be a whole number"),
    (lambda: rr.Engine(backend="cpu", ranks=2, timeout="x"), "timeout must be a number of seconds"),
    (lambda: rr.Engine(backend="cpu", ranks=2, devices=[-1]), "a device must be at least 0"),
    (lambda: rr.Engine(backend="cpu", ranks=2, devices=3), "devices must be a list of GPU numbers"),
    (lambda: rr.plan("all_reduce", count=-1), "count must be at least 0"),
    (lambda: rr.plan("all_reduce", ranks=2.5), "ranks must be a whole number"),
    (lambda: rr.trace("all_reduce", count="x"), "count must be a whole number"),
    (lambda: rr.Engine.job(-1, 2, "/nonexistent/ringreduce-store"), "rank must be at least 0"),
])
def test_numbers_of_the_wrong_kind_raise_our_error(call, says):
    """A negative or non-integer number where a count, a rank or a device
    goes is a ringreduce.ArgumentError naming the argument (it was
    OverflowError or TypeError from the extension's conversion)."""
    with pytest.raises(rr.ArgumentError, match=says):
        call()

