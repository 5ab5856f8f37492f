"""A ``torch.distributed`` backend on ringreduce's ring.

    import torch.distributed as dist
    import ringreduce.torch          # registers the backend "ringreduce"
    dist.init_process_group("ringreduce")   # under torchrun: one process per rank

What it runs: every collective of ``torch.distributed`` that Gloo runs:
``all_reduce`` (sum, prod, min, max, avg; any other op is refused by
name), ``reduce``, ``reduce_scatter`` and ``reduce_scatter_tensor``,
``all_gather`` (equal sizes), ``all_gather_into_tensor``, ``gather``,
``scatter``, ``broadcast``, ``all_to_all`` and ``all_to_all_single`` (any
split sizes), the ``_coalesced`` variants (``all_reduce_coalesced``,
``all_gather_coalesced``, and the all-gather and reduce-scatter that FSDP
coalesces), ``send``/``recv``/``isend``/``irecv`` with tags and from any
source, ``barrier``, and ``monitored_barrier`` (which torch itself lets
only Gloo call through ``dist.monitored_barrier``). The first four are the
engine's own; the others are built on them (see the methods), and
point-to-point messages go through torch's Store (correct, not fast).
Types the engine does not reduce (bool, int16, complex) are moved as bytes
by the gathers, scatters, broadcasts and all-to-all.

How: each process is one rank of a ringreduce job (``Engine.job``). CPU
tensors run on a job on the CPU backend, its ranks meeting through shared
memory on this machine, reduced where they are (zero-copy). CUDA tensors run
on a second job on the CUDA backend (made at the first CUDA call; ranks
reach each other's device buffers through CUDA IPC): the worker's own CUDA
stream waits (on the GPU) for an event recorded on the caller's current
stream, the tensor is copied device to device into the engine's buffer on
that stream, the worker thread waits for that stream (the producer and the
copy: a stream synchronize, never a device one; the IPC exchange has no
stream-ordered calls), runs the collective, and queues the copy back on its
stream; the ``Work``'s CUDA future is completed on that stream, so waiters'
streams wait for the copy back on the GPU. Small calls (up to 256 KiB, of
the collectives whose tensors are the same size on every rank) are staged
through host memory instead: copied to pinned host memory on a staging
stream after the producer, one wait for that stream, the collective on the
CPU job, the copies back queued on the stream and the future completed on
it. ``RINGREDUCE_TORCH_CUDA=stage`` or ``device`` takes one way for every
call. Both jobs meet through the ``Store`` that ``init_process_group``
hands the backend: rank 0 sets one key per job (its control segment's
handle), the others read it; no directory of ringreduce's is made. Calls run in order on one worker thread
per process group and return at once with a ``Work`` whose future completes
when the call did (a synchronous call, ``async_op=False``, with nothing
queued before it runs on the caller's thread instead and returns done); errors and timeouts (``timeout`` of
``init_process_group``) surface from ``wait()``. Single machine only: the
ranks share memory.
"""

import atexit
import os
import queue
import threading
from datetime import timedelta

try:
    import torch
    import torch.distributed as dist
except ImportError as _e:  # torch missing, or broken: say what is needed
    raise ImportError(
        "ringreduce.torch is ringreduce's torch.distributed backend and needs PyTorch "
        f"with torch.distributed ({_e}); install it (pip install torch), or use "
        "ringreduce.Engine on numpy arrays without torch"
    ) from _e

import ringreduce as _rr

__all__ = ["ProcessGroupRingreduce", "BACKEND_NAME", "create"]

BACKEND_NAME = "ringreduce"


_OPS = {}


def _op_name(op):
    """ringreduce's name of a torch ReduceOp, or raise naming it."""
    if not _OPS:
        R = dist.ReduceOp
        _OPS.update({R.SUM: "sum", R.PRODUCT: "prod", R.MIN: "min", R.MAX: "max"})
        if hasattr(R, "AVG"):
            _OPS[R.AVG] = "avg"
    for k, v in _OPS.items():
        try:
            if op == k:
                return v
        except TypeError:  # an op that refuses comparison
            break
    name = str(op)
    for n in ("BAND", "BOR", "BXOR", "PREMUL_SUM", "UNUSED"):
        try:
            if hasattr(dist.ReduceOp, n) and op == getattr(dist.ReduceOp, n):
                name = n
                break
        except TypeError:
            continue
    raise ValueError(
        f"ringreduce: reduce op {name} is not supported (SUM, PRODUCT, MIN, MAX and AVG are)"
    )


class _TorchStore:
    """torch.distributed's ``Store`` as a ringreduce job's key-value store
    (``Engine.job``): ``set``, and ``get`` that waits at most ``timeout``
    seconds and returns None when the key never came. Keys go under
    ``prefix`` (one job per prefix)."""

    def __init__(self, store, prefix):
        self._store = store
        self._prefix = prefix

    def set(self, key, value):
        self._store.set(self._prefix + key, bytes(value))

    def get(self, key, timeout):
        k = self._prefix + key
        try:
            self._store.wait([k], timedelta(seconds=timeout))
        except getattr(dist, "DistStoreError", RuntimeError):
            # torch's wait raises when the key did not come in time
            if not self._store.check([k]):
                return None
        return bytes(self._store.get(k))

    def __repr__(self):
        return f"torch.distributed {type(self._store).__name__} (keys under {self._prefix!r})"


# Threads inside a future's completion (Future.set_result or
# set_exception, which wake the future's waiters before they run its
# callbacks, in C++). A waiter on get_future() (DDP's communication hook,
# say) may return while the completing thread is still in there, and let
# the process exit: CPython then ends that daemon thread with pthread_exit,
# whose unwind through torch's frames aborts the process ("terminate
# called without an active exception"). At exit the interpreter waits here,
# a few seconds at most, until none is left; atexit runs before daemon
# threads are stopped.
_completing = threading.Condition()
_completing_now = 0
_EXIT_WAIT_S = 5.0


def _wait_for_completions(limit=_EXIT_WAIT_S):
    """Wait, at most ``limit`` seconds, until no thread is inside a call's
    completion; True when none is."""
    with _completing:
        return _completing.wait_for(lambda: _completing_now == 0, timeout=limit)


atexit.register(_wait_for_completions)


class _Work(dist._Work):
    """One call's handle: ``wait()`` blocks until the call is done and
    raises its error; ``get_future()`` completes (with the output tensors)
    when the call is done."""

    def __init__(self, result, devices=None):
        super().__init__()
        # A future holding CUDA tensors names their devices: its waiters'
        # streams then wait for it (the worker has synchronized already).
        self._future = torch.futures.Future(devices=devices) if devices else torch.futures.Future()
        self._result = result
        self._error = None
        # Run once, first thing in _finish (the group's count of calls in
        # flight drops before a waiter wakes).
        self._on_done = None
        # Set once the completing thread is out of the future's
        # set_result: torch marks the future done and wakes its waiters
        # before it runs the callbacks, in C++; a waiter that then let the
        # process exit left that (daemon) thread inside C++ at interpreter
        # shutdown, where CPython's pthread_exit aborts the process.
        self._left = threading.Event()

    # called on the worker thread (or the caller's, for a call run there)
    def _finish(self, error):
        done, self._on_done = self._on_done, None
        if done is not None:
            done()
        self._error = error
        global _completing_now
        with _completing:
            _completing_now += 1
        try:
            if error is None:
                self._future.set_result(self._result)
            else:
                self._future.set_exception(error)
        finally:
            self._left.set()
            with _completing:
                _completing_now -= 1
                _completing.notify_all()

    def wait(self, timeout=None):
        self._left.wait()
        self._future.wait()  # done by now: raises the call's error
        return True

    def get_future(self):
        return self._future

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        return self._future.done() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result

    def _source_rank(self):
        """The rank a receive from any source got its message from."""
        src = getattr(self, "_src", None)
        if src is None:
            raise RuntimeError("ringreduce: _source_rank is for a finished recv from any source")
        return src


# CUDA tensors of at most this many bytes are staged through host memory by
# default (`RINGREDUCE_TORCH_CUDA` unset or ``auto``), in the calls whose
# tensors have the same size on every rank (all_reduce, reduce,
# reduce_scatter_tensor, all_gather_into_tensor, broadcast): with rank
# processes sharing a GPU the device path pays two GPU round trips a call
# (the copy in landed, the collective done), staging one (the copy to host
# memory). The other collectives take the device path.
_STAGE_MAX_BYTES = 256 << 10


def _cuda_mode():
    """``RINGREDUCE_TORCH_CUDA``: ``auto`` (the default), ``stage`` or
    ``device``; anything else is refused by name."""
    v = os.environ.get("RINGREDUCE_TORCH_CUDA", "").strip().lower() or "auto"
    if v not in ("auto", "stage", "device"):
        raise ValueError(
            f"ringreduce: RINGREDUCE_TORCH_CUDA={v!r}: expected auto, stage or device"
        )
    return v


def _stages(auto_bytes):
    """Whether a call on CUDA tensors stages through host memory: always
    with ``stage``, never with ``device``, and by default when the call's
    tensors are the same size on every rank (``auto_bytes`` given) and at
    most ``_STAGE_MAX_BYTES``."""
    mode = _cuda_mode()
    if mode != "auto":
        return mode == "stage"
    return auto_bytes is not None and auto_bytes <= _STAGE_MAX_BYTES


# Element types the engine moves but does not reduce are moved as bytes.
_MOVED_AS_BYTES = {"torch.bool", "torch.int16", "torch.uint16", "torch.complex64", "torch.complex128",
                   "torch.complex32", "torch.uint32", "torch.uint64"}


def _movable(t):
    """``t`` flat, as a type the engine can move (for gathers, scatters,
    broadcasts and all-to-all: bytes for the types it does not reduce)."""
    flat = t.reshape(-1)
    if str(t.dtype) in _MOVED_AS_BYTES:
        return flat.view(torch.uint8)
    return flat


def _nbytes(t):
    return t.numel() * t.element_size()


def _scaled(counts, t):
    """Element counts of ``t`` as counts of ``_movable(t)``."""
    k = t.element_size() if str(t.dtype) in _MOVED_AS_BYTES else 1
    return [c * k for c in counts]


class _Staged:
    """A tensor as the engine sees it: the tensor itself (on the CPU, or on
    a GPU for the CUDA job), or, for a call staged through host memory
    (``staged``, set per call by ``_submit``), a pinned host copy of a CUDA
    tensor, copied back after the call."""

    def __init__(self, t, copy_in=True):
        if not t.is_contiguous():
            raise ValueError(
                f"ringreduce: a non-contiguous tensor (shape {tuple(t.shape)}, strides "
                f"{tuple(t.stride())}); pass .contiguous()"
            )
        self.tensor = t
        self.cuda = t.device.type == "cuda"
        self.staged = False
        self.copy_in = copy_in
        self.host = t

    def before(self):
        """On the worker, on its staging stream: the pinned host copy of a
        staged CUDA tensor, queued after the caller's producer (the worker
        then synchronizes that stream)."""
        if self.staged:
            self.host = torch.empty(self.tensor.shape, dtype=self.tensor.dtype, pin_memory=True)
            if self.copy_in:
                self.host.copy_(self.tensor, non_blocking=True)

    def after(self):
        """The copy back, queued on the current (staging) stream; torch's
        allocators keep both memories until it ran."""
        if self.staged:
            self.tensor.copy_(self.host, non_blocking=True)
            self.tensor.record_stream(torch.cuda.current_stream(self.tensor.device))


class ProcessGroupRingreduce(dist.ProcessGroup):
    """One rank's process group on ringreduce (see the module doc)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._timeout = max(1.0, min(seconds, 1e7))
        self._store = store
        self._engine = _rr.Engine.job(
            rank, size, _TorchStore(store, "ringreduce-cpu/"), backend="cpu", timeout=self._timeout
        )
        self._cuda_engine = None
        self._stream = None
        self._stage_streams = {}
        self._queue = queue.Queue()
        # Calls queued or running (under _count), and the lock a call runs
        # under (the worker's and a synchronous caller's alike).
        self._count = threading.Lock()
        self._pending = 0
        self._exec = threading.Lock()
        self._p2p_lock = threading.Lock()
        self._p2p_seq = {}
        self._worker = threading.Thread(target=self._serve, name=f"ringreduce-pg-{rank}", daemon=True)
        self._worker.start()

    # -- identity ------------------------------------------------------------

    def getBackendName(self):
        return BACKEND_NAME

    def getRank(self):
        return self._rank

    def getSize(self):
        return self._size

    def __repr__(self):
        return f"ProcessGroupRingreduce(rank {self._rank} of {self._size})"

    # torch names every group (`destroy_process_group` unregisters it by
    # that name); a Python process group keeps the name and description
    # itself, as its C++ base keeps them on its backends.
    def setGroupName(self, name):
        self._group_name = name

    def getGroupName(self):
        return getattr(self, "_group_name", "")

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def getGroupDesc(self):
        return getattr(self, "_group_desc", "")

    # -- the worker ------------------------------------------------------------

    def _serve(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._run(item)

    def _run(self, item):
        """One call, on the worker or (synchronous, nothing queued) on the
        caller's thread; one at a time."""
        work, fn, staged, event = item
        counted = {"call": True}

        def uncount():
            # Once, before the call's waiters wake: a synchronous call the
            # waiter makes next finds nothing in flight.
            if counted.pop("call", False):
                with self._count:
                    self._pending -= 1

        work._on_done = uncount
        with self._exec:
            try:
                cuda = [x for x in staged if x.cuda]
                if cuda and not cuda[0].staged:
                    self._run_on_device(work, fn, cuda, event)
                elif cuda:
                    self._run_staged(work, fn, staged, cuda, event)
                else:
                    fn(self._engine)
                    work._finish(None)
            except Exception as e:  # every error reaches the caller's wait()
                work._finish(e)
            finally:
                uncount()

    def _device_engine(self, dev):
        """The CUDA job (collective: every rank makes it at its first CUDA
        call) and this worker's stream on ``dev``."""
        if self._cuda_engine is None:
            self._cuda_engine = _rr.Engine.job(
                self._rank,
                self._size,
                _TorchStore(self._store, "ringreduce-cuda/"),
                backend="cuda",
                timeout=self._timeout,
            )
            self._stream = torch.cuda.Stream(dev)
        return self._cuda_engine

    def _run_on_device(self, work, fn, cuda, event):
        """A call on CUDA tensors without host staging (see the module doc):
        everything on the worker's stream, which waits for the caller's
        producer on the GPU; the engine copies in on it and waits for it,
        runs the collective, copies out on it; the future completes on it."""
        dev = cuda[0].tensor.device
        eng = self._device_engine(dev)
        with torch.cuda.device(dev), torch.cuda.stream(self._stream):
            if event is not None:
                self._stream.wait_event(event)
            for x in cuda:
                # torch's allocator must not reuse the memory before the
                # worker's stream is done with it (as NCCL's process group
                # does for its stream).
                x.tensor.record_stream(self._stream)
            fn(eng)
            work._finish(None)

    def _run_staged(self, work, fn, staged, cuda, event):
        """A call on CUDA tensors staged through host memory: on the
        worker's staging stream, after the caller's producer (on the GPU),
        the copies to pinned host memory; one wait for that stream; the
        collective on the CPU job; the copies back queued on the stream,
        and the future completed on it (no wait for them)."""
        dev = cuda[0].tensor.device
        stream = self._stage_streams.get(dev)
        if stream is None:
            stream = self._stage_streams[dev] = torch.cuda.Stream(dev)
        with torch.cuda.device(dev), torch.cuda.stream(stream):
            if event is not None:
                stream.wait_event(event)
            for x in staged:
                x.before()
            stream.synchronize()
            fn(self._engine)
            for x in staged:
                x.after()
            work._finish(None)

    def _submit(self, opts, result, staged, fn, auto_bytes=None):
        """Queue ``fn(engine)`` on the worker; the ``Work`` completes when it
        ran. With CUDA tensors, an event on the caller's current stream
        marks the producer, which the worker's call waits for on the GPU;
        the call stages through host memory or not by ``_stages``
        (``auto_bytes``: the size of the call's tensors where it is the
        same on every rank, so that every rank decides alike).

        A synchronous call (``opts.asyncOp`` false: the caller waits for
        the ``Work`` at once) with nothing queued before it runs here, on
        the caller's thread, and returns complete: the hand-off to the
        worker and back took about 250 us of a 0.7 ms staged call with two
        processes on one GPU. Calls still run one at a time in submission
        order (``_exec``), and an asynchronous one always goes to the
        worker."""
        event, devices = None, None
        if any(s.cuda for s in staged):
            stage = _stages(auto_bytes)
            for s in staged:
                s.staged = s.cuda and stage
            dev = next(s.tensor.device for s in staged if s.cuda)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(dev))
            devices = [dev]
        work = _Work(result, devices)
        item = (work, fn, staged, event)
        with self._count:
            here = self._pending == 0 and opts is not None and getattr(opts, "asyncOp", True) is False
            self._pending += 1
        if here:
            self._run(item)
        else:
            self._queue.put(item)
        return work

    # -- collectives -----------------------------------------------------------

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise ValueError(f"ringreduce: {what} takes one tensor per process (got {len(tensors)})")
        return tensors[0]

    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "allreduce")
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        s = _Staged(t)
        return self._submit(opts, tensors, [s], lambda eng: eng.all_reduce([s.host], op=op), _nbytes(t))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        si, so = _Staged(input), _Staged(output, copy_in=False)
        return self._submit(
            opts,
            [output],
            [si, so],
            lambda eng: eng.reduce_scatter([si.host.reshape(-1)], [so.host.reshape(-1)], op=op),
            _nbytes(input),
        )

    def _allgather_base(self, output, input, opts=None):
        si, so = _Staged(input), _Staged(output, copy_in=False)
        return self._submit(
            opts,
            [output],
            [si, so],
            lambda eng: eng.all_gather([_movable(si.host)], [_movable(so.host)]),
            _nbytes(output),
        )

    # torch 2.11 calls the two above from reduce_scatter_tensor and
    # all_gather_into_tensor; later versions call these names.
    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = self._one(input_tensors, "allgather")
        outs = self._one(output_tensors, "allgather")
        if len(outs) != self._size:
            raise ValueError(f"ringreduce: allgather needs {self._size} output tensors (got {len(outs)})")
        for o in outs:
            if o.shape != t.shape or o.dtype != t.dtype:
                raise NotImplementedError(
                    "ringreduce: allgather of tensors of different shapes or types (all_gather with "
                    "uneven sizes) is not supported"
                )
        si = _Staged(t)

        def run(eng):
            # made on the worker (on its stream when on a GPU)
            x = _movable(si.host)
            n = x.numel()
            flat = torch.empty((self._size * n,), dtype=x.dtype, device=x.device)
            eng.all_gather([x], [flat])
            for r, o in enumerate(outs):
                _movable(o).copy_(flat[r * n:(r + 1) * n])

        return self._submit(opts, output_tensors, [si], run)

    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        s = _Staged(t)
        return self._submit(opts, tensors, [s], lambda eng: eng.broadcast([_movable(s.host)], root=root), _nbytes(t))

    def barrier(self, opts=None):
        return self._submit(opts, None, [], lambda eng: eng.barrier())

    # -- collectives built on the four (reduce, gather, scatter, all-to-all) ----
    #
    # Each runs the engine's own collectives on the worker, in call order,
    # with temporaries on the tensors' device (on the worker's stream when
    # it is a GPU): correct everywhere the four are, not tuned (reduce is an
    # all-reduce of which the root keeps the result; gather an all-gather;
    # scatter a broadcast of the root's tensors; all-to-all an all-gather of
    # every rank's input, each rank keeping what was meant for it).

    def _op(self, opts):
        return _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)

    def _root(self, opts, what):
        root = opts.rootRank if opts is not None else 0
        if not 0 <= root < self._size:
            raise ValueError(f"ringreduce: {what}: root {root} is not a rank of this group of {self._size}")
        return root

    @staticmethod
    def _alike(tensors, like, what):
        for i, x in enumerate(tensors):
            if x.numel() != like.numel() or x.dtype != like.dtype:
                raise ValueError(
                    f"ringreduce: {what}: tensor {i} is {x.dtype} of {x.numel()} elements but the input "
                    f"is {like.dtype} of {like.numel()}: they must match"
                )

    def reduce(self, tensors, opts=None):
        t = self._one(tensors, "reduce")
        root, op = self._root(opts, "reduce"), self._op(opts)
        s = _Staged(t)

        def run(eng):
            x = s.host.reshape(-1)
            tmp = torch.empty_like(x)
            eng.all_reduce([x], [tmp], op=op)
            if self._rank == root:
                x.copy_(tmp)

        return self._submit(opts, tensors, [s], run, _nbytes(t))

    def gather(self, output_tensors, input_tensors, opts=None):
        t = self._one(input_tensors, "gather")
        root = self._root(opts, "gather")
        outs = None
        if self._rank == root:
            outs = self._one(output_tensors, "gather")
            if len(outs) != self._size:
                raise ValueError(f"ringreduce: gather needs {self._size} output tensors on the root (got {len(outs)})")
            self._alike(outs, t, "gather")
        s = _Staged(t)

        def run(eng):
            x = _movable(s.host)
            n = x.numel()
            flat = torch.empty((self._size * n,), dtype=x.dtype, device=x.device)
            eng.all_gather([x], [flat])
            if outs is not None:
                for r, o in enumerate(outs):
                    _movable(o).copy_(flat[r * n:(r + 1) * n])

        return self._submit(opts, output_tensors, [s], run)

    def scatter(self, output_tensors, input_tensors, opts=None):
        t = self._one(output_tensors, "scatter")
        root = self._root(opts, "scatter")
        ins = None
        if self._rank == root:
            ins = self._one(input_tensors, "scatter")
            if len(ins) != self._size:
                raise ValueError(f"ringreduce: scatter needs {self._size} input tensors on the root (got {len(ins)})")
            self._alike(ins, t, "scatter")
        s = _Staged(t, copy_in=False)

        def run(eng):
            x = _movable(s.host)
            n = x.numel()
            flat = torch.empty((self._size * n,), dtype=x.dtype, device=x.device)
            if ins is not None:
                for r, i in enumerate(ins):
                    flat[r * n:(r + 1) * n].copy_(_movable(i.contiguous()))
            eng.broadcast([flat], root=root)
            x.copy_(flat[self._rank * n:(self._rank + 1) * n])

        return self._submit(opts, output_tensors, [s], run)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        t = self._one(output_tensors, "reduce_scatter")
        ins = self._one(input_tensors, "reduce_scatter")
        if len(ins) != self._size:
            raise ValueError(f"ringreduce: reduce_scatter needs {self._size} input tensors (got {len(ins)})")
        self._alike(ins, t, "reduce_scatter")
        op = self._op(opts)
        s = _Staged(t, copy_in=False)

        def run(eng):
            x = s.host.reshape(-1)
            flat = torch.cat([i.reshape(-1) for i in ins]).to(x.device)
            eng.reduce_scatter([flat], [x], op=op)

        return self._submit(opts, output_tensors, [s], run)

    def _all_to_all(self, eng, x, sends, out, recvs):
        """Flat ``x`` holds this rank's chunk for each rank (``sends``: the
        element counts, in rank order); ``out`` receives each rank's chunk
        for this one (``recvs``). One all-gather of every rank's counts and
        size, one of the inputs (each padded to the largest)."""
        N, me = self._size, self._rank
        meta = torch.tensor([x.numel()] + list(sends), dtype=torch.int64, device=x.device)
        every = torch.empty((N * (N + 1),), dtype=torch.int64, device=x.device)
        eng.all_gather([meta], [every])
        every = every.view(N, N + 1).tolist()
        for src in range(N):
            if every[src][1 + me] != recvs[src]:
                raise ValueError(
                    f"ringreduce: all_to_all: rank {src} sends rank {me} {every[src][1 + me]} elements "
                    f"but rank {me} expects {recvs[src]}"
                )
        most = max(row[0] for row in every)
        padded = x
        if x.numel() < most:
            padded = torch.zeros((most,), dtype=x.dtype, device=x.device)
            padded[: x.numel()].copy_(x)
        gathered = torch.empty((N * most,), dtype=x.dtype, device=x.device)
        eng.all_gather([padded], [gathered])
        at = 0
        for src in range(N):
            offset = src * most + sum(every[src][1:1 + me])
            out[at:at + recvs[src]].copy_(gathered[offset:offset + recvs[src]])
            at += recvs[src]

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        si, so = _Staged(input), _Staged(output, copy_in=False)
        N = self._size

        def splits(t, sizes, what):
            if not sizes:
                if t.numel() % N:
                    raise ValueError(
                        f"ringreduce: all_to_all_single: the {what} has {t.numel()} elements, not a "
                        f"multiple of the group's {N} ranks; pass split sizes"
                    )
                return [t.numel() // N] * N
            if len(sizes) != N:
                raise ValueError(f"ringreduce: all_to_all_single: {len(sizes)} {what} split sizes for {N} ranks")
            row = t.numel() // t.shape[0] if t.dim() > 0 and t.shape[0] else 1
            if sum(sizes) * row != t.numel():
                raise ValueError(
                    f"ringreduce: all_to_all_single: the {what} split sizes {list(sizes)} do not add up to "
                    f"its first dimension ({t.shape[0] if t.dim() else 1})"
                )
            return [int(k) * row for k in sizes]

        sends = splits(input, input_split_sizes, "input")
        recvs = splits(output, output_split_sizes, "output")
        if input.dtype != output.dtype:
            raise ValueError(f"ringreduce: all_to_all_single: input {input.dtype}, output {output.dtype}")

        def run(eng):
            self._all_to_all(eng, _movable(si.host), _scaled(sends, si.host), _movable(so.host), _scaled(recvs, so.host))

        return self._submit(opts, [output], [si, so], run)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        N = self._size
        if len(input_tensors) != N or len(output_tensors) != N:
            raise ValueError(
                f"ringreduce: all_to_all needs {N} input and {N} output tensors "
                f"(got {len(input_tensors)} and {len(output_tensors)})"
            )
        dtypes = {t.dtype for t in list(input_tensors) + list(output_tensors)}
        if len(dtypes) != 1:
            raise ValueError(f"ringreduce: all_to_all: tensors of different types {sorted(map(str, dtypes))}")
        stage = [_Staged(t) for t in input_tensors]

        def run(eng):
            # The inputs as the engine sees them: the tensors themselves, or
            # with RINGREDUCE_TORCH_CUDA=stage their host copies (the
            # outputs are copied into whatever device they are on).
            device = stage[0].host.device
            x = torch.cat([_movable(s.host) for s in stage])
            out = torch.empty((sum(_movable(o).numel() for o in output_tensors),), dtype=x.dtype, device=device)
            self._all_to_all(eng, x, [_movable(t).numel() for t in input_tensors], out,
                             [_movable(o).numel() for o in output_tensors])
            at = 0
            for o in output_tensors:
                k = _movable(o).numel()
                _movable(o).copy_(out[at:at + k])
                at += k

        return self._submit(opts, output_tensors, stage, run)

    # -- the coalesced variants (one call on the worker for the whole list) ---

    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            return self._submit(opts, [], [], lambda eng: None)
        if len({(t.dtype, t.device) for t in tensors}) != 1:
            raise ValueError("ringreduce: allreduce_coalesced: the tensors must have one type and one device")
        op = self._op(opts)
        staged = [_Staged(t) for t in tensors]

        def run(eng):
            flat = torch.cat([x.host.reshape(-1) for x in staged])
            eng.all_reduce([flat], op=op)
            at = 0
            for x in staged:
                k = x.host.numel()
                x.host.reshape(-1).copy_(flat[at:at + k])
                at += k

        return self._submit(opts, tensors, staged, run)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        if len(output_lists) != self._size:
            raise ValueError(f"ringreduce: allgather_coalesced needs {self._size} output lists")
        for outs in output_lists:
            if len(outs) != len(input_list):
                raise ValueError("ringreduce: allgather_coalesced: an output list's length is not the input list's")
            self._alike_each(outs, input_list)
        staged = [_Staged(t) for t in input_list]

        def run(eng):
            for i, x in enumerate(staged):
                v = _movable(x.host)
                n = v.numel()
                flat = torch.empty((self._size * n,), dtype=v.dtype, device=v.device)
                eng.all_gather([v], [flat])
                for r in range(self._size):
                    _movable(output_lists[r][i]).copy_(flat[r * n:(r + 1) * n])

        return self._submit(opts, output_lists, staged, run)

    @staticmethod
    def _alike_each(outs, ins):
        for i, (o, x) in enumerate(zip(outs, ins)):
            if o.numel() != x.numel() or o.dtype != x.dtype:
                raise ValueError(f"ringreduce: allgather_coalesced: output {i} does not match input {i}")

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        pairs = [(_Staged(i), _Staged(o, copy_in=False)) for o, i in zip(outputs, inputs)]

        def run(eng):
            for si, so in pairs:
                eng.all_gather([_movable(si.host)], [_movable(so.host)])

        return self._submit(opts, outputs, [x for p in pairs for x in p], run)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op = self._op(opts)
        pairs = [(_Staged(i), _Staged(o, copy_in=False)) for o, i in zip(outputs, inputs)]

        def run(eng):
            for si, so in pairs:
                eng.reduce_scatter([si.host.reshape(-1)], [so.host.reshape(-1)], op=op)

        return self._submit(opts, outputs, [x for p in pairs for x in p], run)

    # -- point to point, through torch's Store ----------------------------------
    #
    # A send puts the tensor's bytes under a key of this group's store
    # (sender, receiver, tag and a sequence number per such triple, so
    # messages of one tag arrive in order); a receive waits for its key,
    # copies the bytes in and deletes the key. Correct for any pair of
    # ranks and any tag, and as fast as the store (not the ring).

    def _next(self, kind, peer, tag):
        with self._p2p_lock:
            k = (kind, peer, tag)
            n = self._p2p_seq.get(k, 0)
            self._p2p_seq[k] = n + 1
            return n

    def _p2p_key(self, src, dst, tag, seq):
        return f"ringreduce-p2p/{src}/{dst}/{tag}/{seq}"

    def _peer(self, rank, what):
        if not 0 <= rank < self._size:
            raise ValueError(f"ringreduce: {what}: rank {rank} is not in this group of {self._size}")
        if rank == self._rank:
            raise ValueError(f"ringreduce: {what}: rank {rank} is this rank")
        return rank

    def send(self, tensors, dstRank, tag=0):
        t = self._one(tensors, "send")
        dst = self._peer(dstRank, "send")
        key = self._p2p_key(self._rank, dst, tag, self._next("send", dst, tag))
        # The bytes as they are now (a CUDA tensor: after its producer).
        data = _movable(t.detach().contiguous()).cpu().numpy().tobytes()
        self._store.set(key, data)
        work = _Work(tensors)
        work._finish(None)
        return work

    def _receive(self, t, keys_of, work, claim=lambda src, key: True):
        """On a thread of its own: wait for one of the keys (``keys_of()``:
        (source, key) pairs) that ``claim`` lets this receive take, copy it
        into ``t``."""
        import time

        deadline = time.monotonic() + self._timeout
        try:
            while True:
                for src, key in keys_of():
                    if self._store.check([key]) and claim(src, key):
                        data = self._store.get(key)
                        dst = _movable(t)
                        if len(data) != dst.numel() * dst.element_size():
                            raise ValueError(
                                f"ringreduce: recv: rank {src} sent {len(data)} bytes but the tensor "
                                f"holds {dst.numel() * dst.element_size()}"
                            )
                        got = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dst.dtype)
                        dst.copy_(got)
                        if t.device.type == "cuda":
                            torch.cuda.current_stream(t.device).synchronize()
                        try:
                            self._store.delete_key(key)
                        except Exception:
                            pass
                        work._src = src
                        work._finish(None)
                        return
                if time.monotonic() > deadline:
                    raise _rr.TimeoutError(
                        f"ringreduce: recv on rank {self._rank} waited {self._timeout:g} s for a message "
                        f"(tag {work._tag}) that never came"
                    )
                time.sleep(0.0005)
        except Exception as e:
            work._finish(e)

    def recv(self, tensors, srcRank, tag=0):
        t = self._one(tensors, "recv")
        if not t.is_contiguous():
            raise ValueError("ringreduce: recv needs a contiguous tensor")
        src = self._peer(srcRank, "recv")
        key = self._p2p_key(src, self._rank, tag, self._next("recv", src, tag))
        work = _Work(tensors, [t.device] if t.device.type == "cuda" else None)
        work._tag = tag
        threading.Thread(target=self._receive, args=(t, lambda: [(src, key)], work), daemon=True).start()
        return work

    def recv_anysource(self, tensors, tag=0):
        t = self._one(tensors, "recv")
        if not t.is_contiguous():
            raise ValueError("ringreduce: recv needs a contiguous tensor")
        work = _Work(tensors, [t.device] if t.device.type == "cuda" else None)
        work._tag = tag
        peers = [r for r in range(self._size) if r != self._rank]

        def keys():
            # The next message of each peer, as of now.
            with self._p2p_lock:
                return [(r, self._p2p_key(r, self._rank, tag, self._p2p_seq.get(("recv", r, tag), 0)))
                        for r in peers]

        def claim(src, key):
            # Take the message: advance that peer's sequence number before
            # the work completes (the caller's next receive looks for the
            # next one), unless another receive took it first.
            with self._p2p_lock:
                k = ("recv", src, tag)
                n = self._p2p_seq.get(k, 0)
                if self._p2p_key(src, self._rank, tag, n) != key:
                    return False
                self._p2p_seq[k] = n + 1
                return True

        threading.Thread(target=self._receive, args=(t, keys, work, claim), daemon=True).start()
        return work

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """Gloo's monitored barrier: every rank reports to rank 0, which names
        the ranks that did not within ``timeout`` (the first, or with
        ``wait_all_ranks`` all of them); then rank 0 lets the others go."""
        import time

        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else (timeout or self._timeout)
        n = self._next("barrier", -1, 0)
        here = f"ringreduce-mb/{n}/"
        if self._rank != 0:
            self._store.set(here + str(self._rank), b"1")
            try:
                self._store.wait([here + "go"], timedelta(seconds=seconds))
            except Exception:
                raise RuntimeError(
                    f"Rank {self._rank} timed out in monitoredBarrier after {int(seconds * 1000)} ms "
                    f"(rank 0 did not release it)"
                ) from None
            return None
        deadline = time.monotonic() + seconds
        missing = []
        for r in range(1, self._size):
            left = max(0.0, deadline - time.monotonic())
            try:
                self._store.wait([here + str(r)], timedelta(seconds=max(left, 0.001)))
            except Exception:
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing:
            ms = int(seconds * 1000)
            if wait_all_ranks:
                raise RuntimeError(
                    f"Ranks {', '.join(map(str, missing))} failed to pass monitoredBarrier in {ms} ms"
                )
            raise RuntimeError(f"Rank {missing[0]} failed to pass monitoredBarrier in {ms} ms")
        self._store.set(here + "go", b"1")
        return None

    # -- lifetime --------------------------------------------------------------

    def shutdown(self):
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(self._timeout)
            self._worker = None
            self._engine.close()
            if self._cuda_engine is not None:
                self._cuda_engine.close()

    def abort(self):
        self._engine.abort()
        if self._cuda_engine is not None:
            self._cuda_engine.abort()
        self.shutdown()


def create(store, rank, size, timeout):
    """The creator ``Backend.register_backend`` calls (store, rank, size,
    timeout)."""
    return ProcessGroupRingreduce(store, rank, size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return  # registered by an earlier import (or a reload)
    dist.Backend.register_backend(BACKEND_NAME, create, devices=["cpu", "cuda"])


_register()
