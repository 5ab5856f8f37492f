"""The plain call's fast path (python/src/ndarray.rs) against the general
reader it stands in for: every case, from plain numpy arrays to each kind
of bad input, gives the same outcome with the fast path on and off (the
same results, the same last_call, or the same ringreduce.Error subclass
with the same message); plain arrays take the fast path, the rest fall
back to the general reader."""

import sys

import pytest

import ringreduce as rr

np = pytest.importorskip("numpy", reason="SKIPPED: numpy is not installed")

RANKS = 2


class Wrapped:
    """Only __array_interface__ (the general reader's path)."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class Sub(np.ndarray):
    """A subclass of ndarray (not the fast path's: it may override anything)."""


class ListOf(list):
    """A list subclass (not the fast path's)."""


def ranks(make):
    return [make(r) for r in range(RANKS)]


def f32(r, n=4):
    return np.arange(n, dtype=np.float32) + r


def read_only(a):
    a.flags.writeable = False
    return a


def misaligned(r):
    return np.frombuffer(bytearray(20), np.float32, count=4, offset=1)


# name: (fast?, call(engine) -> arrays to compare afterwards)
CASES = {
    # -- taken by the fast path ---------------------------------------------
    "in place": (True, lambda e: e.all_reduce(ranks(f32))),
    "out of place int64": (True, lambda e: e.all_reduce(
        ranks(lambda r: np.arange(5, dtype=np.int64) * (r + 1)),
        ranks(lambda r: np.zeros(5, np.int64)), op="max")),
    "every numpy type": (True, lambda e: [
        e.all_reduce(ranks(lambda r: np.full(3, r + 1, t)))[0]
        for t in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
    ]),
    "tuple": (True, lambda e: e.all_reduce(tuple(ranks(f32)))),
    "2-D": (True, lambda e: e.all_reduce(ranks(lambda r: np.ones((3, 4), np.float64) * r))),
    "0-D": (True, lambda e: e.all_reduce(ranks(lambda r: np.array(r + 1.5, np.float32)))),
    "size-1 dim with any stride": (True, lambda e: e.all_reduce(
        ranks(lambda r: np.ones((3, 4), np.float32)[:1]))),
    "read-only input, out of place": (True, lambda e: e.all_reduce(
        ranks(lambda r: read_only(f32(r))), ranks(lambda r: np.zeros(4, np.float32)))),
    "zero-length": (True, lambda e: e.all_reduce(ranks(lambda r: np.zeros(0, np.float32)))),
    "reduce_scatter": (True, lambda e: e.reduce_scatter(
        ranks(lambda r: f32(r, 6)), ranks(lambda r: np.zeros(3, np.float32)), op="min")),
    "all_gather": (True, lambda e: e.all_gather(
        ranks(lambda r: f32(r, 3)), ranks(lambda r: np.zeros(6, np.float32)))),
    "broadcast root 1": (True, lambda e: e.broadcast(ranks(f32), root=1)),
    # -- the general reader's -------------------------------------------------
    "subclass": (False, lambda e: e.all_reduce(ranks(lambda r: f32(r).view(Sub)))),
    "list subclass": (False, lambda e: e.all_reduce(ListOf(ranks(f32)))),
    "one wrapped": (False, lambda e: e.all_reduce([f32(0), Wrapped(f32(1))])),
    "size-0 with odd strides": (False, lambda e: e.all_reduce(
        ranks(lambda r: np.zeros((0, 3), np.float32)[:, ::2]))),
    # -- refused, by the general reader or the engine -------------------------
    "strided view": (False, lambda e: e.all_reduce(ranks(lambda r: f32(r, 8)[::2]))),
    "negative strides": (False, lambda e: e.all_reduce(ranks(lambda r: f32(r)[::-1]))),
    "transposed": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros((4, 3), np.float32).T))),
    "read-only in place": (False, lambda e: e.all_reduce([f32(0), read_only(f32(1))])),
    "read-only output": (False, lambda e: e.all_reduce(
        ranks(f32), [np.zeros(4, np.float32), read_only(np.zeros(4, np.float32))])),
    "big-endian": (False, lambda e: e.all_reduce(ranks(lambda r: f32(r).astype(">f4")))),
    "big-endian output": (False, lambda e: e.all_reduce(
        ranks(f32), ranks(lambda r: np.zeros(4, ">f4")))),
    "buffer protocol only": (False, lambda e: e.all_reduce(ranks(lambda r: memoryview(bytearray(16))))),
    "wrong count": (False, lambda e: e.all_reduce([f32(0)])),
    "one array, not a list": (False, lambda e: e.all_reduce(f32(0))),
    "mixed types": (False, lambda e: e.all_reduce([f32(0), np.zeros(4, np.float64)])),
    "mixed shapes": (False, lambda e: e.all_reduce([f32(0), f32(1, 5)])),
    "output type": (False, lambda e: e.all_reduce(ranks(f32), ranks(lambda r: np.zeros(4, np.int32)))),
    "output count": (False, lambda e: e.all_reduce(ranks(f32), [np.zeros(4, np.float32)])),
    "misaligned": (False, lambda e: e.all_reduce(ranks(misaligned))),
    "aliased outputs": (True, lambda e: (lambda o: e.all_reduce(ranks(f32), [o, o]))(np.zeros(4, np.float32))),
    "input overlaps output": (True, lambda e: (lambda xs: e.all_reduce(xs, list(xs)))(ranks(f32))),
    "bool": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, bool)))),
    "complex64": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, np.complex64)))),
    "uint16": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, np.uint16)))),
    "longdouble": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, np.longdouble)))),
    "datetime64": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, "datetime64[ns]")))),
    "structured": (False, lambda e: e.all_reduce(ranks(lambda r: np.zeros(4, [("a", "<f4")])))),
    "bad op": (False, lambda e: e.all_reduce(ranks(f32), op="xor")),
    "op None": (False, lambda e: e.all_reduce(ranks(f32), op=None)),
    "op not hashable": (False, lambda e: e.all_reduce(ranks(f32), op=["sum"])),
    "op SUM (the engine's parser takes it, the package does not)": (
        False, lambda e: e.all_reduce(ranks(f32), op="SUM")),
    "root -1": (False, lambda e: e.broadcast(ranks(f32), root=-1)),
    "root a string": (False, lambda e: e.broadcast(ranks(f32), root="1")),
    "root True": (False, lambda e: e.broadcast(ranks(f32), root=True)),
    "root a numpy int": (True, lambda e: e.broadcast(ranks(f32), root=np.int64(1))),
    "bad root": (True, lambda e: e.broadcast(ranks(f32), root=RANKS)),
    "reduce_scatter sizes": (True, lambda e: e.reduce_scatter(
        ranks(lambda r: f32(r, 10)), ranks(lambda r: np.zeros(2, np.float32)))),
}


def outcome(call):
    """What a case does on a fresh engine: ("ok", result bytes, last_call,
    the fast path's info type) or ("raised", type, message)."""
    with rr.Engine(backend="cpu", ranks=RANKS, timeout=30) as e:
        try:
            out = call(e)
        except Exception as err:  # compared, not judged, here
            return ("raised", type(err), str(err))
        kind = type(e._last_call).__name__
        arrays = out if isinstance(out, list) else [out]
        got = [(b.dtype.str, b.shape, b.tobytes()) for b in map(np.asarray, arrays)]
        return ("ok", got, e.last_call, kind)


def without_fast_path(monkeypatch):
    monkeypatch.setattr(rr, "_NDARRAY", None)
    monkeypatch.setattr(rr, "_ndarray_type", lambda: None)


@pytest.mark.parametrize("name", list(CASES))
def test_same_outcome_with_and_without_the_fast_path(name, monkeypatch):
    fast, call = CASES[name]
    on = outcome(call)
    with monkeypatch.context() as m:
        without_fast_path(m)
        off = outcome(call)
    if on[0] == "ok":
        assert off[0] == "ok", off
        assert on[1] == off[1], "the results differ"
        assert on[2] == off[2], "last_call differs"
        # Both paths end in the same Rust call (its record, _CallInfo);
        # the fast path only skips the per-array checks in Python.
        assert on[3] == off[3] == "_CallInfo"
    else:
        assert on == off
        assert issubclass(on[1], rr.Error), on


def test_fast_path_results_are_right():
    with rr.Engine(backend="cpu", ranks=RANKS, timeout=30) as e:
        xs = ranks(f32)
        assert e.all_reduce(xs) == xs and all(x.tolist() == [1, 3, 5, 7] for x in xs)
        assert type(e._last_call).__name__ == "_CallInfo"
        assert e.last_call["path"] and len(e.last_call["traffic"]) == RANKS
        assert e.last_call is e.last_call, "made a dict once"
        ins, outs = ranks(f32), ranks(lambda r: np.zeros(4, np.float32))
        assert e.all_reduce(ins, outs, op="max") == outs
        assert all(o.tolist() == [1, 2, 3, 4] for o in outs)
        assert [i.tolist() for i in ins] == [[0, 1, 2, 3], [1, 2, 3, 4]]


def test_big_endian_arrays_are_refused_not_misread():
    """Before the fast path, a big-endian array was reduced as if native
    (1 + 1 came out as 4.25e37): now it is refused by name."""
    xs = ranks(lambda r: np.ones(4, ">f4"))
    with rr.Engine(backend="cpu", ranks=RANKS, timeout=30) as e:
        with pytest.raises(rr.ArgumentError, match="byte order") as info:
            e.all_reduce(xs)
        assert "rank 0" in str(info.value)
        with pytest.raises(rr.ArgumentError, match="byte order"):
            e.prepare("all_reduce", xs)
    assert all(x.tolist() == [1, 1, 1, 1] for x in xs)


def test_arrays_are_read_every_call():
    """Nothing of an array is kept between plain calls: one resized, given
    other memory or made read-only between calls is read anew."""
    with rr.Engine(backend="cpu", ranks=RANKS, timeout=30) as e:
        xs = ranks(f32)
        e.all_reduce(xs)
        xs[0].resize(8, refcheck=False)
        xs[1] = np.ones(8, np.float32)
        e.all_reduce(xs)
        assert xs[0].tolist() == [2, 4, 6, 8, 1, 1, 1, 1] and xs[1].tolist() == xs[0].tolist()
        xs[1].flags.writeable = False
        with pytest.raises(rr.ArgumentError, match="rank 1: the buffer is read-only"):
            e.all_reduce(xs)
        xs[1] = xs[1].copy()
        xs[1].shape = (2, 4)
        with pytest.raises(rr.ArgumentError, match="shape"):
            e.all_reduce(xs)


def test_without_numpy_imported_no_fast_path(monkeypatch):
    """The fast path asks for numpy.ndarray only once numpy is imported."""
    monkeypatch.setattr(rr, "_NDARRAY", None)
    monkeypatch.setitem(sys.modules, "numpy", None)
    assert rr._ndarray_type() is None
