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


def _from_torch(x, what, rank):
    dev = x.device.type
    if dev not in ("cpu", "cuda"):
        raise UnavailableError(
            f"rank {rank}: the {what} is a {dev} tensor ({x.device}); ringreduce takes host "
            f"memory and CUDA tensors"
        )
    if getattr(x, "is_sparse", False) or str(getattr(x, "layout", "torch.strided")) != "torch.strided":
        raise ArgumentError(f"rank {rank}: the {what} is not a dense tensor (layout {x.layout})")
    if not x.is_contiguous():
        raise ArgumentError(
            f"rank {rank}: the {what} is not contiguous (shape {tuple(x.shape)}, strides "
            f"{tuple(x.stride())}); pass .contiguous()"
        )
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


# numpy dtype objects already resolved (numpy's dtype.name is slow).
_DTYPE_CACHE = {}


def _known_dtype(dt):
    try:
        return _DTYPE_CACHE.get(dt)
    except TypeError:  # an unhashable dtype-like object
        return None


def _remember_dtype(dt, name):
    try:
        if dt is not None and len(_DTYPE_CACHE) < 256:
            _DTYPE_CACHE[dt] = name
    except TypeError:
        pass


def _describe(x, what, rank):
    """Read an array's memory for a call, or raise."""
    if _is_torch_tensor(x):
        return _from_torch(x, what, rank)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x, what, rank)
    ai = getattr(x, "__array_interface__", None)
    if ai is None and hasattr(x, "__dlpack__"):
        kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        if kind == 2:  # kDLCUDA: read through torch (zero-copy)
            try:
                import torch
            except ImportError:
                raise UnavailableError(
                    f"rank {rank}: the {what} is a CUDA DLPack object without "
                    f"__cuda_array_interface__; reading it needs torch (torch.from_dlpack)"
                ) from None
            return _from_torch(torch.from_dlpack(x), what, rank)
        if kind not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise UnavailableError(
                f"rank {rank}: the {what} is on DLPack device type {kind}, neither host memory "
                f"nor a CUDA device (see docs/PYTORCH.md)"
            )
        import numpy

        x = numpy.from_dlpack(x)
        ai = x.__array_interface__
    if ai is None:
        raise ArgumentError(
            f"rank {rank}: the {what} ({type(x).__name__}) is not an array: pass numpy arrays, "
            f"torch tensors, or objects with __array_interface__ or a CPU __dlpack__"
        )
    shape = tuple(ai["shape"])
    dt = getattr(x, "dtype", None)
    name = _known_dtype(dt)
    if name is None:
        dt_name = getattr(dt, "name", None)
        if dt_name in _DTYPE_NAMES:
            name = _DTYPE_NAMES[dt_name]
        elif dt_name is None and ai["typestr"] in _TYPESTRS:
            name = _TYPESTRS[ai["typestr"]]
        else:
            raise ArgumentError(
                f"rank {rank}: the {what} has element type {dt_name or ai['typestr']}, "
                f"which ringreduce does not reduce"
            )
        _remember_dtype(dt, name)
    if ai["typestr"][0] == _SWAPPED:
        raise ArgumentError(
            f"rank {rank}: the {what} is in {'big' if _SWAPPED == '>' else 'little'}-endian byte "
            f"order ({ai['typestr']}), not this machine's: pass a native-order copy "
            f"(a.astype(a.dtype.newbyteorder('=')))"
        )
    itemsize = int(ai["typestr"][2:])
    strides = ai.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, itemsize):
        raise ArgumentError(
            f"rank {rank}: the {what} is not contiguous (shape {shape}, strides {tuple(strides)}); "
            f"pass a C-contiguous copy (numpy.ascontiguousarray)"
        )
    addr, readonly = ai["data"]
    n = 1
    for d in shape:
        n *= d
    return _Buf(addr, n * itemsize, name, shape, x, readonly)


# numpy.ndarray, once numpy is imported (the fast path's arrays; without
# numpy there are none).
_NDARRAY = None


def _ndarray_type():
    global _NDARRAY
    np = sys.modules.get("numpy")
    _NDARRAY = getattr(np, "ndarray", None) if np is not None else None
    return _NDARRAY


def _number(name, v, lowest=0):
    """``v`` as an int of at least ``lowest`` (an int or anything with
    ``__index__``, never a bool), else an ArgumentError naming ``name``."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise ArgumentError(f"{name} must be a whole number, not {v!r}")
    v = v.__index__()
    if v < lowest:
        raise ArgumentError(f"{name} must be at least {lowest} (got {v})")
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
            ranks = _number("ranks", ranks)
            if devices is not None:
                if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
                    raise ArgumentError(f"devices must be a list of GPU numbers, not {devices!r}")
                devices = [_number("a device", d) for d in devices]
            _inner = _Engine(backend, ranks, devices, _seconds("timeout", timeout), algo)
        self._e = _inner
        self.last_call = None

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
        rank, size = _number("rank", rank), _number("size", size)
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

    def _buffers(self, arrays, what):
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
        base = self.local_ranks.start
        bufs = [_describe(a, what, base + i) for i, a in enumerate(arrays)]
        first = bufs[0] if bufs else None
        for i, b in enumerate(bufs):
            if b.dtype != first.dtype:
                raise ArgumentError(
                    f"rank {base + i}: the {what} is {b.dtype} but rank {base}'s is {first.dtype}: "
                    f"every rank's arrays must have the same element type"
                )
            if b.shape != first.shape:
                raise ArgumentError(
                    f"rank {base + i}: the {what} has shape {b.shape} but rank {base}'s has "
                    f"{first.shape}: every rank's arrays must have the same shape"
                )
            if (b.device is None) != (first.device is None):
                raise ArgumentError(
                    f"rank {base + i}: the {what} is in {b.where()} but rank {base}'s is in "
                    f"{first.where()}: every rank's arrays must be host memory, or all CUDA memory"
                )
        return bufs

    def _run(self, kind, inputs, outputs, op="sum", root=0, prepare=False):
        if kind != "all_gather" and kind != "broadcast" and not (isinstance(op, str) and op in _OPS):
            raise ArgumentError(f"unknown reduce op {op!r} (sum, prod, min, max, avg)")
        root = _number("root", root)
        ins = self._buffers(inputs, "input")
        if outputs is None:
            outs, ins_raw = ins, []
            for i, b in enumerate(outs):
                if b.readonly:
                    raise ArgumentError(f"rank {self.local_ranks.start + i}: the buffer is read-only")
            dtype = outs[0].dtype if outs else "float"
        else:
            outs = self._buffers(outputs, "output")
            if outs and ins and outs[0].dtype != ins[0].dtype:
                raise ArgumentError(
                    f"the outputs are {outs[0].dtype} but the inputs are {ins[0].dtype}: "
                    f"inputs and outputs must have the same element type"
                )
            for i, b in enumerate(outs):
                if b.readonly:
                    raise ArgumentError(f"rank {self.local_ranks.start + i}: the output is read-only")
            ins_raw = [(b.addr, b.nbytes) for b in ins]
            dtype = ins[0].dtype if ins else "float"
        on_device = bool(outs) and outs[0].device is not None
        if on_device and prepare:
            raise ArgumentError("a prepared call takes host arrays, not CUDA memory")
        if on_device:
            info = self._run_cuda(kind, dtype, op, ins if outputs is not None else [], outs, root)
        else:
            if ins and outputs is not None and ins[0].device is not None:
                raise ArgumentError(
                    f"rank {self.local_ranks.start}: the inputs are in {ins[0].where()} but the "
                    f"outputs in host memory: inputs and outputs must both be host or CUDA memory"
                )
            outs_raw = [(b.addr, b.nbytes) for b in outs]
            if prepare:
                return self._e.prepare(kind, dtype, op, ins_raw, outs_raw, root,
                                       (list(inputs), None if outputs is None else list(outputs)))
            info = self._e.collective(kind, dtype, op, ins_raw, outs_raw, root)
        self.last_call = info
        return list(inputs if outputs is None else outputs)

    def prepare(self, kind, inputs, outputs=None, op="sum", root=0):
        """A call on host numpy arrays read and checked once, to run many
        times: ``call = e.prepare("all_reduce", [a, b])``, then ``call()``
        runs the collective again on the same arrays (whatever they hold
        then). The prepared call holds the arrays (numpy then refuses to
        resize them, so their memory stays put); ``kind`` is ``all_reduce``,
        ``reduce_scatter``, ``all_gather`` or ``broadcast``. For hot loops:
        a call costs the Rust call and the boundary, not the reading of the
        arrays (docs/PYTORCH.md, the Python layer's cost)."""
        for what, arrays in (("input", inputs), ("output", outputs)):
            for i, a in enumerate(arrays if isinstance(arrays, (list, tuple)) else []):
                if not (type(a).__name__ == "ndarray" and type(a).__module__ == "numpy"):
                    raise ArgumentError(
                        f"rank {self.local_ranks.start + i}: a prepared call takes numpy arrays "
                        f"(the {what} is a {type(a).__module__}.{type(a).__name__}: its memory "
                        f"could move between calls); call e.{kind}(...) instead"
                    )
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

    # The four collectives first try the fast path, in their own frame (a
    # call through one more Python function costs ~0.1 us of the layer's
    # 2 us): a list or tuple of plain numpy arrays (exactly numpy.ndarray,
    # C-contiguous, native byte order, a type numpy has natively, every
    # rank's alike, outputs writable, a known op) is read and run in one
    # Rust call (python/src/ndarray.rs). Anything else comes back None,
    # nothing run, and `_run` reads it the general way (and raises what is
    # wrong). `_last_call` keeps the fast path's _CallInfo (see last_call).

    def all_reduce(self, inputs, outputs=None, op="sum"):
        """Every output becomes the reduction (``op``: sum, prod, min, max,
        avg) of every rank's input; ``outputs=None``: in place."""
        info = self._e.collective_ndarrays("all_reduce", op, inputs, outputs, 0,
                                           _NDARRAY or _ndarray_type())
        if info is None:
            return self._run("all_reduce", inputs, outputs, op)
        self._last_call = info
        return list(inputs if outputs is None else outputs)

    def reduce_scatter(self, inputs, outputs=None, op="sum"):
        """Each input holds ``size * c`` elements; rank r's output (``c``
        elements) becomes chunk r of the reduction. In place (NCCL's
        convention): slice r of rank r's array becomes that chunk."""
        info = self._e.collective_ndarrays("reduce_scatter", op, inputs, outputs, 0,
                                           _NDARRAY or _ndarray_type())
        if info is None:
            return self._run("reduce_scatter", inputs, outputs, op)
        self._last_call = info
        return list(inputs if outputs is None else outputs)

    def all_gather(self, inputs, outputs=None):
        """Every output (``size * c`` elements) becomes the concatenation of
        every rank's input (``c`` elements). In place: slice r of rank r's
        array is its input."""
        info = self._e.collective_ndarrays("all_gather", "sum", inputs, outputs, 0,
                                           _NDARRAY or _ndarray_type())
        if info is None:
            return self._run("all_gather", inputs, outputs)
        self._last_call = info
        return list(inputs if outputs is None else outputs)

    def broadcast(self, inputs, outputs=None, root=0):
        """Every output becomes rank ``root``'s input."""
        info = self._e.collective_ndarrays("broadcast", "sum", inputs, outputs, root,
                                           _NDARRAY or _ndarray_type())
        if info is None:
            return self._run("broadcast", inputs, outputs, root=root)
        self._last_call = info
        return list(inputs if outputs is None else outputs)

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
    ``name``, ``collective``, ``ranks``, ``count``, ``in_place``, ``scratch``
    and ``ops``, a list with one dict per op of every rank in issue order
    (``rank``, ``index``, ``lane``, ``kind``, ``detail``, ``waits``,
    ``signal``, ``phase``, ``step``, ``chunk``, ``slice``, ``note``)."""
    return _plan(collective, _number("ranks", ranks), _number("count", count), dtype_name(dtype),
                 in_place, algo)


def trace(collective="all_reduce", ranks=4, count=8, dtype="float", op="sum", in_place=False, algo="ring"):
    """``ringreduce trace`` as text: the call step by step on symbolic memory
    (who sends which chunk to whom, what every rank holds), then run on the
    CPU backend with exact inputs."""
    return _trace(collective, _number("ranks", ranks), _number("count", count), dtype_name(dtype),
                  op, in_place, algo)
