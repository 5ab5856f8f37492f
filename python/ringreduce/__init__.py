"""ringreduce from Python: the hand-written Ring AllReduce engine over numpy
arrays and torch tensors, and (``import ringreduce.torch``) a
``torch.distributed`` backend.

    >>> import numpy as np, ringreduce
    >>> eng = ringreduce.Engine(backend="cpu", ranks=2)
    >>> bufs = [np.full(4, 1.0, np.float32), np.full(4, 2.0, np.float32)]
    >>> _ = eng.all_reduce(bufs)            # in place: both become 3.0
    >>> bufs[1].tolist()
    [3.0, 3.0, 3.0, 3.0]

Each call takes one array per rank, in rank order (every rank from this
caller), or this process's array alone (``Engine.job``: one process per
rank). Host arrays are used where they are (zero-copy): numpy arrays, CPU
torch tensors, and anything with ``__array_interface__`` or a CPU
``__dlpack__``. On the CUDA backend (``Engine(backend="cuda")``), torch CUDA
tensors and objects with ``__cuda_array_interface__`` (or a CUDA
``__dlpack__``) run without host staging and stream-ordered: each rank's
tensor is copied on the GPU into the engine's buffer on the tensor's current
torch stream, the call waits on the GPU for those streams, and the result is
copied back on them after the call (one device copy in and out; the call
returns once queued, with no synchronize). Every problem raises a subclass
of :class:`ringreduce.Error` with the engine's message.
"""

import os
import atexit
import sys
import weakref

from ._ringreduce import (
    DTYPES,
    OPS,
    ArgumentError,
    CudaError,
    Error,
    InternalError,
    MismatchError,
    PeerError,
    TimeoutError,
    UnavailableError,
    _CallInfo,
    _Engine,
    _forked,
    __version__,
)
from ._ringreduce import plan as _plan

# The exceptions live in the extension module; named as this package's so
# that they pickle (torch's futures pickle a CUDA work's error, as does
# multiprocessing) and print as `ringreduce.ArgumentError`.
for _cls, _name in (
    (Error, "Error"),
    (ArgumentError, "ArgumentError"),
    (MismatchError, "MismatchError"),
    (TimeoutError, "TimeoutError"),
    (PeerError, "PeerError"),
    (UnavailableError, "UnavailableError"),
    (CudaError, "CudaError"),
    (InternalError, "InternalError"),
):
    _cls.__module__ = "ringreduce"
    _cls.__name__ = _cls.__qualname__ = _name
del _cls, _name
from ._ringreduce import trace as _trace

__all__ = [
    "Engine",
    "Error",
    "ArgumentError",
    "MismatchError",
    "TimeoutError",
    "PeerError",
    "UnavailableError",
    "CudaError",
    "InternalError",
    "DTYPES",
    "OPS",
    "plan",
    "trace",
    "dtype_name",
    "__version__",
]

# numpy / ml_dtypes / torch dtype names -> the engine's (nccl-tests) names.
_DTYPE_NAMES = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "float16": "half",
    "half": "half",
    "float32": "float",
    "float": "float",
    "float64": "double",
    "double": "double",
    "bfloat16": "bfloat16",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
}

# __array_interface__ type strings (little-endian or not applicable).
_TYPESTRS = {
    "|i1": "int8",
    "|u1": "uint8",
    "<i4": "int32",
    "<u4": "uint32",
    "<i8": "int64",
    "<u8": "uint64",
    "<f2": "half",
    "<f4": "float",
    "<f8": "double",
}

_OPS = {"sum", "prod", "min", "max", "avg"}

# The __array_interface__ byte-order mark of the other byte order (its
# elements would be reduced as if they were this machine's).
_SWAPPED = ">" if sys.byteorder == "little" else "<"


class _Buf:
    """One array as the engine sees it: address, bytes, engine dtype name,
    shape, the object that keeps the memory alive, and for device memory
    its GPU and the stream its producer and consumer run on (a raw
    ``CUstream`` integer; 0 is the legacy default stream)."""

    __slots__ = ("addr", "nbytes", "dtype", "shape", "obj", "readonly", "device", "stream")

    def __init__(self, addr, nbytes, dtype, shape, obj, readonly=False, device=None, stream=None):
        self.addr = addr
        self.nbytes = nbytes
        self.dtype = dtype
        self.shape = tuple(shape)
        self.obj = obj
        self.readonly = readonly
        self.device = device
        self.stream = stream

    def where(self):
        return "host memory" if self.device is None else f"CUDA device {self.device}"


def _is_torch_tensor(x):
    t = type(x)
    return t.__module__.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "dtype")


def dtype_name(x):
    """The engine's name of the element type of ``x`` (an array, a tensor, a
    numpy or torch dtype, or a name), or raise ``ArgumentError``."""
    if isinstance(x, str):
        name = x
    elif isinstance(x, type):
        # A numpy scalar type (numpy.float32, the usual spelling of a
        # dtype): its dtype's name. (Its `dtype` attribute is a descriptor
        # of the class, not a dtype.)
        np = sys.modules.get("numpy")
        try:
            name = np.dtype(x).name if np is not None else x.__name__
        except TypeError:
            name = x.__name__
    elif hasattr(x, "dtype"):
        return dtype_name(x.dtype)
    else:
        name = getattr(x, "name", None) or str(x)
    name = name.replace("torch.", "")
    if name in DTYPES:
        return name
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise ArgumentError(
        f"element type {name} is not one ringreduce reduces "
        f"(int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, "
        f"float64, float8_e4m3fn, float8_e5m2)"
    )


def _c_contiguous(shape, strides, itemsize):
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim > 1 and stride != expected:
            return False
        expected *= dim
    return True


def _dense(x, what, rank):
    """Refuse a torch tensor that is sparse or not contiguous, naming it."""
    if getattr(x, "is_sparse", False) or str(getattr(x, "layout", "torch.strided")) != "torch.strided":
        raise ArgumentError(f"rank {rank}: the {what} is not a dense tensor (layout {x.layout})")
    if not x.is_contiguous():
        raise ArgumentError(
            f"rank {rank}: the {what} is not contiguous (shape {tuple(x.shape)}, strides "
            f"{tuple(x.stride())}); pass .contiguous()"
        )


def _from_torch(x, what, rank):
    dev = x.device.type
    if dev not in ("cpu", "cuda"):
        raise UnavailableError(
            f"rank {rank}: the {what} is a {dev} tensor ({x.device}); ringreduce takes host "
            f"memory and CUDA tensors"
        )
    _dense(x, what, rank)
    name = dtype_name(x.dtype)
    nbytes = x.numel() * x.element_size()
    if dev == "cuda":
        import torch

        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        # The tensor's producer and consumer: torch's current stream of its
        # device (what every torch kernel on it is queued on).
        stream = torch.cuda.current_stream(index).cuda_stream
        return _Buf(x.data_ptr(), nbytes, name, x.shape, x, device=index, stream=stream)
    return _Buf(x.data_ptr(), nbytes, name, x.shape, x)


def _cai_device(x):
    """The GPU of a ``__cuda_array_interface__`` object (the interface does
    not say it): its DLPack device, a ``device.id`` (CuPy) or
    ``device.index`` (torch), else 0 (the engine checks the address's
    device with the driver and refuses a mismatch by name)."""
    if hasattr(x, "__dlpack_device__"):
        try:
            kind, index = x.__dlpack_device__()
            if int(kind) == 2:  # kDLCUDA
                return int(index)
        except Exception:  # not usable: fall through
            pass
    d = getattr(x, "device", None)
    for attr in ("id", "index"):
        v = getattr(d, attr, None)
        if isinstance(v, int):
            return v
    return 0


def _from_cai(x, what, rank):
    """An object speaking ``__cuda_array_interface__`` (version 2 or 3)."""
    ai = x.__cuda_array_interface__
    try:
        shape = tuple(int(d) for d in ai["shape"])
        typestr = ai["typestr"]
        addr = int(ai["data"][0])
        readonly = bool(ai["data"][1])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ArgumentError(
            f"rank {rank}: the {what}'s __cuda_array_interface__ is malformed ({e!r}): it needs "
            f"shape, typestr and data"
        ) from None
    if ai.get("mask") is not None:
        raise ArgumentError(f"rank {rank}: the {what} is a masked array (__cuda_array_interface__ mask)")
    dt = getattr(x, "dtype", None)
    dt_name = getattr(dt, "name", None)
    if dt_name is not None and dt_name.replace("torch.", "") in _DTYPE_NAMES:
        name = _DTYPE_NAMES[dt_name.replace("torch.", "")]
    elif typestr in _TYPESTRS:
        name = _TYPESTRS[typestr]
    else:
        raise ArgumentError(
            f"rank {rank}: the {what} has element type {dt_name or typestr}, which ringreduce "
            f"does not reduce"
        )
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        raise ArgumentError(f"rank {rank}: the {what} has an unreadable typestr {typestr!r}") from None
    strides = ai.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, itemsize):
        raise ArgumentError(
            f"rank {rank}: the {what} is not contiguous (shape {shape}, strides {tuple(strides)}); "
            f"pass a C-contiguous copy"
        )
    n = 1
    for d in shape:
        n *= d
    # Version 3's stream: None means no ordering is needed (the legacy
    # default stream serves), 1 the legacy default stream, 2 the per-thread
    # one (refused by the engine with the reason), else a CUstream.
    stream = ai.get("stream")
    stream = 0 if stream is None else int(stream)
    return _Buf(addr, n * itemsize, name, shape, x, readonly, device=_cai_device(x), stream=stream)


class _Exported:
    """An object's ``__array_interface__``, read once and held together
    with the object: numpy makes its array of this (its ``base``), so the
    interface dict (and whatever it keeps alive, numpy's ``__ref``) and the
    object live as long as the array, whatever the object's property would
    return next time."""

    __slots__ = ("__array_interface__", "_obj")

    def __init__(self, interface, obj):
        self.__array_interface__ = interface
        self._obj = obj


# torch's element types numpy does not have, viewed as the unsigned
# integers of their width (the call says what they are: ``dtype=``).
_TORCH_VIEWS = {
    "torch.bfloat16": ("uint16", "bfloat16"),
    "torch.float8_e4m3fn": ("uint8", "f8e4m3"),
    "torch.float8_e5m2": ("uint8", "f8e5m2"),
}


def _numpy():
    try:
        import numpy
    except ImportError:
        raise UnavailableError(
            "host arrays need numpy (pip install numpy): ringreduce reads them through it"
        ) from None
    return numpy


def _host_array(x, what, rank, written):
    """``x`` (host memory) as a numpy array on the same memory, numpy (or
    torch) keeping its owner alive for as long as the array lives, and
    the element type to call it by when the array's own is a stand-in
    (torch's bfloat16 and float8, as unsigned integers); or raise saying
    why not. ``written``: the call writes it (an output, or an in-place
    buffer): a copy would not do."""
    np = _numpy()
    if isinstance(x, np.ndarray):
        ma = sys.modules.get("numpy.ma")
        if ma is not None and isinstance(x, ma.MaskedArray):
            raise ArgumentError(
                f"rank {rank}: the {what} is a masked array: ringreduce would reduce its masked "
                f"elements too; pass x.filled(value), or x.data to reduce every element"
            )
        return x, None
    if _is_torch_tensor(x):
        _dense(x, what, rank)
        t = x.detach()
        view = _TORCH_VIEWS.get(str(t.dtype))
        if view is not None:
            import torch

            return t.view(getattr(torch, view[0])).numpy(), view[1]
        try:
            dtype_name(t.dtype)
        except ArgumentError as e:
            raise ArgumentError(f"rank {rank}: the {what}: {e}") from None
        # numpy's array on the tensor's memory; it keeps the tensor alive.
        return t.numpy(), None
    if isinstance(x, np.generic):
        if written:
            raise ArgumentError(
                f"rank {rank}: the {what} is a numpy scalar ({type(x).__name__}), which cannot be "
                f"written: pass an array (numpy.zeros(()) for one element)"
            )
        return np.asarray(x), None
    ai = getattr(x, "__array_interface__", None)
    if ai is not None:
        if not isinstance(ai, dict):
            raise ArgumentError(
                f"rank {rank}: the {what}'s __array_interface__ is not a dict (a {type(ai).__name__})"
            )
        if ai.get("mask") is not None:
            raise ArgumentError(
                f"rank {rank}: the {what} is a masked array (its __array_interface__ has a mask)"
            )
        try:
            a = np.asarray(_Exported(ai, x))
        except Exception as e:
            raise ArgumentError(
                f"rank {rank}: the {what}'s __array_interface__ cannot be read ({e})"
            ) from None
        if written:
            # A result written where the object does not keep it would be
            # lost: its interface must describe the same memory each time.
            again = getattr(x, "__array_interface__", None)
            if not isinstance(again, dict) or again.get("data") != ai.get("data"):
                raise ArgumentError(
                    f"rank {rank}: the {what}'s __array_interface__ describes different memory "
                    f"each time it is read, so a result written there would be lost: pass an "
                    f"array that owns its memory (numpy.asarray(x)) and read the result from it"
                )
        return a, None
    if hasattr(x, "__array_struct__"):
        return np.asarray(x), None
    if hasattr(x, "__dlpack__"):
        kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        if kind not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise UnavailableError(
                f"rank {rank}: the {what} is on DLPack device type {kind}, not host memory "
                f"(see docs/PYTORCH.md)"
            )
        try:
            return np.from_dlpack(x), None
        except Exception as e:
            raise ArgumentError(f"rank {rank}: the {what}'s DLPack export cannot be read ({e})") from None
    raise ArgumentError(
        f"rank {rank}: the {what} ({type(x).__name__}) is not an array: pass numpy arrays, "
        f"torch tensors, or objects with __array_interface__ or a CPU __dlpack__"
    )


def _on_device(x):
    """Whether ``x`` is CUDA memory (a CUDA tensor, a
    ``__cuda_array_interface__`` object, a CUDA DLPack export)."""
    if _is_torch_tensor(x):
        return x.device.type != "cpu"
    if hasattr(x, "__cuda_array_interface__"):
        return True
    if not hasattr(x, "__array_interface__") and hasattr(x, "__dlpack_device__"):
        try:
            return int(x.__dlpack_device__()[0]) not in (1, 3)
        except Exception:
            return False
    return False


def _describe_device(x, what, rank):
    """A CUDA buffer's description for the device path, or raise."""
    if _is_torch_tensor(x):
        return _from_torch(x, what, rank)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x, what, rank)
    kind = x.__dlpack_device__()[0]
    if kind == 2:  # kDLCUDA: read through torch (zero-copy)
        try:
            import torch
        except ImportError:
            raise UnavailableError(
                f"rank {rank}: the {what} is a CUDA DLPack object without "
                f"__cuda_array_interface__; reading it needs torch (torch.from_dlpack)"
            ) from None
        return _from_torch(torch.from_dlpack(x), what, rank)
    raise UnavailableError(
        f"rank {rank}: the {what} is on DLPack device type {kind}, neither host memory "
        f"nor a CUDA device (see docs/PYTORCH.md)"
    )


# numpy.ndarray, once numpy is imported (the fast path's arrays; without
# numpy there are none).
_NDARRAY = None


def _ndarray_type():
    global _NDARRAY
    np = sys.modules.get("numpy")
    _NDARRAY = getattr(np, "ndarray", None) if np is not None else None
    return _NDARRAY


# The engine's limits (its MAX_RANKS, and what fits an address space).
_MAX_RANKS = 256
_MAX_COUNT = 2**62


def _number(name, v, lowest=0, highest=_MAX_COUNT):
    """``v`` as an int from ``lowest`` to ``highest`` (an int or anything
    with ``__index__``, never a bool), else an ArgumentError naming
    ``name``."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise ArgumentError(f"{name} must be a whole number, not {v!r}")
    v = v.__index__()
    if v < lowest:
        raise ArgumentError(f"{name} must be at least {lowest} (got {v})")
    if v > highest:
        raise ArgumentError(f"{name} must be at most {highest} (got {v})")
    return v


def _seconds(name, v):
    """``v`` (None or a number of seconds) as the extension takes it, else
    an ArgumentError naming ``name`` (the range is the engine's check)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(type(v), "__float__"):
        raise ArgumentError(f"{name} must be a number of seconds, not {v!r}")
    return float(v)


_JOB_ENGINES = weakref.WeakSet()
_HOOKED = False

# Every engine of this process, for the child of a fork() (below).
_ENGINES = weakref.WeakSet()
# The engines a forked child inherited: kept, never dropped (their rank
# threads and their peers' memory stayed with the parent; tearing them down
# in the child would wait for threads that do not exist there).
_INHERITED = []


class _Forked:
    """What an engine is in the child of a ``fork()``: every use raises at
    once (its rank threads, its GPU context and its job stayed with the
    parent; a call would wait for them until the timeout)."""

    def __init__(self, pid):
        self._pid = pid

    def __getattr__(self, name):
        raise UnavailableError(
            f"this engine was made in process {self._pid}, and this process is a fork() of it "
            f"(pid {os.getpid()}): an engine's threads, memory and job do not survive fork(); "
            f"make a new engine in this process (or start it with the spawn method)"
        )


def _after_fork_in_child():
    _forked()
    parent = os.getppid()
    for e in list(_ENGINES):
        inner = e.__dict__.get("_e")
        if inner is not None and not isinstance(inner, _Forked):
            _INHERITED.append(inner)
            e._e = _Forked(parent)
    _JOB_ENGINES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _abort_on_uncaught_exception(engine):
    """A job's rank that dies of an uncaught exception aborts its engine
    first (and engines left open are closed at exit), so the other ranks get a ``PeerError`` naming it at once instead
    of waiting out their timeout for a call that never comes (a rank that
    closes its engine normally has left the job; one that is killed is seen
    dead by the others)."""
    global _HOOKED
    _JOB_ENGINES.add(engine)
    if _HOOKED:
        return
    _HOOKED = True
    previous = sys.excepthook

    def hook(kind, value, tb):
        for e in list(_JOB_ENGINES):
            try:
                e.abort()
            except Exception:  # the engine may be closed already
                pass
        previous(kind, value, tb)

    sys.excepthook = hook
    # A job whose engines are still open at exit (an error, or no
    # destroy_process_group) closes them, so rank 0 removes the store.
    atexit.register(_close_jobs)


def _close_jobs():
    for e in list(_JOB_ENGINES):
        try:
            e.close()
        except Exception:  # closed already, or failing: exit anyway
            pass


class Engine:
    """The engine: ``ranks`` ranks run from this caller (one host thread per
    rank), on ``backend`` ``"auto"`` (CUDA when a driver and a GPU are
    present, else CPU), ``"cpu"`` or ``"cuda"``; ``devices`` the GPUs
    (default all), ``timeout`` the longest any wait may take in seconds
    (default ``RINGREDUCE_TIMEOUT`` or 60), ``algo`` the path
    (``"auto"``, ``"ring"``, ``"ring:pipe2"``, ...).

    Each collective takes one array per rank, in rank order; ``outputs=None``
    runs in place. It returns the arrays that hold the result;
    ``last_call`` says which path ran and what each rank sent and received.
    """

    def __init__(self, backend="auto", ranks=2, devices=None, timeout=None, algo=None, _inner=None):
        if _inner is None:
            ranks = _number("ranks", ranks, 1, _MAX_RANKS)
            if devices is not None:
                if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
                    raise ArgumentError(f"devices must be a list of GPU numbers, not {devices!r}")
                devices = [_number("a device", d) for d in devices]
            _inner = _Engine(backend, ranks, devices, _seconds("timeout", timeout), algo)
        self._e = _inner
        self.last_call = None
        _ENGINES.add(self)

    @classmethod
    def job(cls, rank, size, store, backend="cpu", timeout=None, algo=None):
        """This process's rank of a job of ``size`` processes that meet at
        the store directory ``store`` (rank 0 creates it; it must not exist
        yet; other ranks wait for it), or through ``store``, a key-value
        object with ``set(key, value)`` and ``get(key, timeout)`` returning
        the bytes or None (what ``ringreduce.torch`` makes of
        torch.distributed's Store; no directory is made). Calls then take
        this rank's array alone."""
        if not (hasattr(store, "set") and hasattr(store, "get")):
            try:
                store = os.fspath(store)
            except TypeError:
                raise ArgumentError(
                    f"store must be a directory path or an object with set(key, value) and "
                    f"get(key, timeout) (got a {type(store).__name__})"
                ) from None
        size = _number("size", size, 1, _MAX_RANKS)
        rank = _number("rank", rank, 0, size - 1)
        eng = cls(_inner=_Engine.job(rank, size, store, backend, _seconds("timeout", timeout), algo))
        _abort_on_uncaught_exception(eng)
        return eng

    @property
    def last_call(self):
        """The last call's path and traffic: ``{"path": ..., "traffic":
        [(sent, received) per rank]}`` (None before any call)."""
        info = self._last_call
        if type(info) is _CallInfo:  # the fast path's: made a dict when read
            info = self._last_call = info.as_dict()
        return info

    @last_call.setter
    def last_call(self, info):
        self._last_call = info

    @property
    def size(self):
        """The number of ranks of the engine or job."""
        return self._e.size

    ranks = size

    @property
    def rank(self):
        """This handle's first rank (0 when every rank runs from here)."""
        return self._e.rank

    @property
    def local_ranks(self):
        """The ranks whose arrays a call takes, as a ``range``."""
        a, b = self._e.local_ranks
        return range(a, b)

    @property
    def backend(self):
        """The backend the ranks run on: ``"cpu"`` or ``"cuda"``."""
        return self._e.backend

    @property
    def describe(self):
        """The backend, its devices and how the ranks run, in words."""
        return self._e.describe

    def __repr__(self):
        return f"ringreduce.Engine({self.describe})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Release the engine; later calls raise ``ringreduce.Error``."""
        self._e.close()

    def abort(self):
        """End every wait of this engine now (from any thread)."""
        self._e.abort()

    # -- collectives ---------------------------------------------------------

    def _list(self, arrays, what):
        """``arrays`` as a list of one array per local rank, or raise."""
        is_array = hasattr(arrays, "__array_interface__") or _is_torch_tensor(arrays)
        if is_array or isinstance(arrays, (str, bytes)) or not hasattr(arrays, "__len__"):
            raise ArgumentError(
                f"the {what}s must be a list of arrays, one per rank (got one {type(arrays).__name__})"
            )
        n = len(self.local_ranks)
        if len(arrays) != n:
            raise ArgumentError(
                f"expected one {what} per rank this engine calls for: {n} ranks but "
                f"{len(arrays)} {what}s"
            )
        return list(arrays)

    def _host(self, arrays, what, written):
        """Host arrays as numpy arrays (one per local rank), and the element
        type to call them by (``None``: their own)."""
        base = self.local_ranks.start
        out, names = [], set()
        for i, x in enumerate(arrays):
            a, name = _host_array(x, what, base + i, written)
            out.append(a)
            names.add(name)
        if len(names) > 1:
            raise ArgumentError(
                f"the {what}s mix element types (torch's {sorted(n for n in names if n)} with others): "
                f"every rank's arrays must have the same element type"
            )
        return out, names.pop() if names else None

    def _run(self, kind, inputs, outputs, op="sum", root=0, prepare=False):
        """Any arrays: host memory of any kind (read through numpy), or CUDA
        memory (the device path)."""
        if kind != "all_gather" and kind != "broadcast" and not (isinstance(op, str) and op in _OPS):
            raise ArgumentError(f"unknown reduce op {op!r} (sum, prod, min, max, avg)")
        root = _number("root", root)
        ins = self._list(inputs, "input" if outputs is not None else "buffer")
        outs = None if outputs is None else self._list(outputs, "output")
        base = self.local_ranks.start
        every = ins + (outs or [])
        on_device = [_on_device(x) for x in every]
        if any(on_device):
            if not all(on_device):
                n = len(ins)
                if outs is not None and len(set(on_device[:n])) == 1 and len(set(on_device[n:])) == 1:
                    where = ("CUDA", "host") if on_device[0] else ("host", "CUDA")
                    raise ArgumentError(
                        f"the inputs are {where[0]} memory and the outputs {where[1]} memory: "
                        f"inputs and outputs must both be host or CUDA memory"
                    )
                # The first rank whose memory is not the kind of rank 0's input.
                i = next(j for j, d in enumerate(on_device) if d != on_device[0]) % max(n, 1)
                raise ArgumentError(
                    f"rank {base + i}: some of the call's arrays are in host memory and some are "
                    f"CUDA memory: every rank's arrays must be host memory, or all CUDA memory"
                )
            if prepare:
                raise ArgumentError("a prepared call takes host arrays, not CUDA memory")
            return self._device(kind, ins, outs, op, root, inputs, outputs)
        if outs is None:
            bufs, dtype = self._host(ins, "buffer", True)
            host_in, host_out = bufs, None
        else:
            host_in, din = self._host(ins, "input", False)
            host_out, dout = self._host(outs, "output", True)
            if din != dout:
                raise ArgumentError(
                    f"the inputs are {din or 'numpy'} arrays but the outputs {dout or 'numpy'}: "
                    f"inputs and outputs must have the same element type"
                )
            dtype = din
        if prepare:
            return self._e.prepare(kind, op, host_in, host_out, root, dtype)
        self._last_call = self._e.collective_arrays(kind, op, host_in, host_out, root, dtype)
        return list(inputs if outputs is None else outputs)

    def _device(self, kind, ins, outs, op, root, inputs, outputs):
        """The device path: every array CUDA memory."""
        base = self.local_ranks.start
        what = "input" if outs is not None else "buffer"
        din = [_describe_device(x, what, base + i) for i, x in enumerate(ins)]
        dout = din if outs is None else [_describe_device(x, "output", base + i) for i, x in enumerate(outs)]
        first = din[0] if din else None
        for i, b in enumerate(din + (dout if outs is not None else [])):
            r = base + i % max(len(din), 1)
            if b.dtype != first.dtype:
                raise ArgumentError(
                    f"rank {r}: an array is {b.dtype} but rank {base}'s input is {first.dtype}: "
                    f"every rank's arrays must have the same element type"
                )
            if b.shape != first.shape and (outs is None or i < len(din)):
                raise ArgumentError(
                    f"rank {r}: the {what} has shape {b.shape} but rank {base}'s has "
                    f"{first.shape}: every rank's arrays must have the same shape"
                )
        for i, b in enumerate(dout):
            if b.readonly:
                raise ArgumentError(f"rank {base + i}: the {'output' if outs is not None else 'buffer'} is read-only")
        dtype = first.dtype if first else "float"
        self.last_call = self._run_cuda(kind, dtype, op, din if outs is not None else [], dout, root)
        return list(inputs if outputs is None else outputs)

    def prepare(self, kind, inputs, outputs=None, op="sum", root=0):
        """A call on host arrays read and checked once, to run many times:
        ``call = e.prepare("all_reduce", [a, b])``, then ``call()`` runs the
        collective again on the same arrays (whatever they hold then). The
        prepared call holds the arrays, and borrows them again at every run
        (an output made read-only since is refused then); ``kind`` is
        ``all_reduce``, ``reduce_scatter``, ``all_gather`` or
        ``broadcast``. For hot loops: a call costs the Rust call and the
        boundary, not the reading of the arrays (docs/PYTORCH.md, the
        Python layer's cost)."""
        return self._run(kind, inputs, outputs, op, root, prepare=True)

    def _run_cuda(self, kind, dtype, op, ins, outs, root):
        """CUDA memory: each rank's buffer copied on the GPU into the
        engine's on its stream, the call ordered after those streams, the
        result copied back on them once the call completes; returns when
        queued (no host wait)."""
        base = self.local_ranks.start
        for i, b in enumerate(ins):
            if b.device is None:
                raise ArgumentError(
                    f"rank {base + i}: the input is in host memory but the outputs are CUDA "
                    f"memory: inputs and outputs must both be host or CUDA memory"
                )
            o = outs[i]
            if b.device != o.device:
                raise ArgumentError(
                    f"rank {base + i}: the input is on CUDA device {b.device} but the output on "
                    f"{o.device}: a rank's input and output must be on the same device"
                )
            if b.stream != o.stream:
                raise ArgumentError(
                    f"rank {base + i}: the input names stream {b.stream:#x} but the output "
                    f"{o.stream:#x}: a rank's buffers must be ordered on one stream"
                )
        if self.backend != "cuda":
            raise UnavailableError(
                f"rank {base}: the buffers are CUDA memory but this engine runs on "
                f"{self.describe}; make it with backend='cuda' (or 'auto' on a machine with a GPU)"
            )
        sends = [(b.addr, b.nbytes, b.device) for b in ins]
        recvs = [(b.addr, b.nbytes, b.device) for b in outs]
        streams = [(b.stream, b.device) for b in outs]
        return self._e.collective_cuda(kind, dtype, op, sends, recvs, streams, root)

    # The four collectives first try the plain case in their own frame (a
    # call through one more Python function costs ~0.1 us of the layer's
    # 2 us): a list or tuple of numpy arrays goes straight to the Rust
    # side, which borrows each one through rust-numpy (python/src/ndarray.rs)
    # and raises whatever is wrong with them. Anything else is read by
    # `_run` (torch tensors, other exporters, CUDA memory). `_last_call`
    # keeps the _CallInfo (see last_call).

    def _plain(self, inputs, outputs):
        nd = _NDARRAY or _ndarray_type()
        if nd is None or type(inputs) not in (list, tuple):
            return False
        for x in inputs:
            if type(x) is not nd:
                return False
        if outputs is None:
            return True
        if type(outputs) not in (list, tuple):
            return False
        for x in outputs:
            if type(x) is not nd:
                return False
        return True

    def all_reduce(self, inputs, outputs=None, op="sum"):
        """Every output becomes the reduction (``op``: sum, prod, min, max,
        avg) of every rank's input; ``outputs=None``: in place."""
        if self._plain(inputs, outputs) and type(op) is str and op in _OPS:
            self._last_call = self._e.collective_arrays("all_reduce", op, inputs, outputs, 0)
            return list(inputs if outputs is None else outputs)
        return self._run("all_reduce", inputs, outputs, op)

    def reduce_scatter(self, inputs, outputs=None, op="sum"):
        """Each input holds ``size * c`` elements; rank r's output (``c``
        elements) becomes chunk r of the reduction. In place (NCCL's
        convention): slice r of rank r's array becomes that chunk."""
        if self._plain(inputs, outputs) and type(op) is str and op in _OPS:
            self._last_call = self._e.collective_arrays("reduce_scatter", op, inputs, outputs, 0)
            return list(inputs if outputs is None else outputs)
        return self._run("reduce_scatter", inputs, outputs, op)

    def all_gather(self, inputs, outputs=None):
        """Every output (``size * c`` elements) becomes the concatenation of
        every rank's input (``c`` elements). In place: slice r of rank r's
        array is its input."""
        if self._plain(inputs, outputs):
            self._last_call = self._e.collective_arrays("all_gather", "sum", inputs, outputs, 0)
            return list(inputs if outputs is None else outputs)
        return self._run("all_gather", inputs, outputs)

    def broadcast(self, inputs, outputs=None, root=0):
        """Every output becomes rank ``root``'s input."""
        if self._plain(inputs, outputs) and type(root) is int and 0 <= root < 1 << 62:
            self._last_call = self._e.collective_arrays("broadcast", "sum", inputs, outputs, root)
            return list(inputs if outputs is None else outputs)
        return self._run("broadcast", inputs, outputs, root=root)

    def barrier(self):
        """Every rank reaches this point before any goes on."""
        self.last_call = self._e.barrier()

    # -- study views ---------------------------------------------------------

    def set_timing(self, on=True):
        """Time every op of the calls that follow (``on``), or stop. Timed
        calls are slower: the timeline's cost is in docs/DESIGN.md."""
        self._e.set_timing(bool(on))

    def timeline(self, path=None):
        """The calls timed since the last take (see :meth:`set_timing`), oldest
        first: one dict per call (``plan``, as :func:`ringreduce.plan` gives
        it; ``clock``; ``times``: ``(rank, op, part, start_ns, end_ns)``).
        With ``path``, also written there as Chrome trace-event JSON for
        Perfetto (:mod:`ringreduce.timeline`). Waits for the calls to end."""
        if path is None:
            return self._e.take_timed_calls()
        from . import timeline as _timeline

        # Opened before the take: a path that cannot be written raises
        # (OSError) with the calls still there for the next take.
        with open(os.fspath(path), "w") as f:
            calls = self._e.take_timed_calls()
            _timeline.dump(calls, f)
        return calls

    def plan(self, collective="all_reduce", count=8, dtype="float", in_place=False, algo="ring"):
        """The plan this engine's ranks would run (see :func:`ringreduce.plan`)."""
        return plan(collective, self.size, count, dtype, in_place, algo)

    def trace(self, collective="all_reduce", count=8, dtype="float", op="sum", in_place=False, algo="ring"):
        """The step-by-step trace of a call on this many ranks (see :func:`ringreduce.trace`)."""
        return trace(collective, self.size, count, dtype, op, in_place, algo)


def plan(collective="all_reduce", ranks=4, count=8, dtype="float", in_place=False, algo="ring"):
    """The plan the engine runs for a call, as Python objects: a dict with
    ``name``, ``collective``, ``ranks``, ``count``, ``in_place``, ``scratch``,
    ``lines`` (the elements of LL slots each rank needs) and ``ops``, a list with one dict per op of every rank in issue order
    (``rank``, ``index``, ``lane``, ``kind``, ``detail``, ``waits``,
    ``signal``, ``phase``, ``step``, ``chunk``, ``slice``, ``note``)."""
    return _plan(collective, _number("ranks", ranks, 1, _MAX_RANKS), _number("count", count),
                 dtype_name(dtype), in_place, algo)


def trace(collective="all_reduce", ranks=4, count=8, dtype="float", op="sum", in_place=False, algo="ring"):
    """``ringreduce trace`` as text: the call step by step on symbolic memory
    (who sends which chunk to whom, what every rank holds), then run on the
    CPU backend with exact inputs."""
    return _trace(collective, _number("ranks", ranks, 1, _MAX_RANKS), _number("count", count),
                  dtype_name(dtype), op, in_place, algo)
