"""A ``torch.distributed`` backend on ringreduce's ring.

    import torch.distributed as dist
    import ringreduce.torch          # registers the backend "ringreduce"
    dist.init_process_group("ringreduce")   # under torchrun: one process per rank

What it runs: ``all_reduce`` (sum, prod, min, max, avg; any other op is
refused by name), ``reduce_scatter_tensor``, ``all_gather_into_tensor``,
``all_gather`` (equal sizes; DDP checks parameter shapes with it),
``broadcast`` and ``barrier``; every other collective raises
``NotImplementedError`` naming it.

How: each process is one rank of a ringreduce job (``Engine.job``). CPU
tensors run on a job on the CPU backend, its ranks meeting through shared
memory on this machine, reduced where they are (zero-copy). CUDA tensors run
on a second job on the CUDA backend (made at the first CUDA call; ranks
reach each other's device buffers through CUDA IPC), with no host staging:
the worker's own CUDA stream waits (on the GPU) for an event recorded on the
caller's current stream, the tensor is copied device to device into the
engine's buffer on that stream, the worker thread waits for that stream (the
producer and the copy: a stream synchronize, never a device one; the IPC
exchange has no stream-ordered calls), runs the collective, and queues the
copy back on its stream; the ``Work``'s CUDA future is completed on that
stream, so waiters' streams wait for the copy back on the GPU
(``RINGREDUCE_TORCH_CUDA=stage`` stages through host memory instead, as
before). Both jobs meet through the ``Store`` that ``init_process_group``
hands the backend: rank 0 sets one key per job (its control segment's
handle), the others read it; no directory of ringreduce's is made. Calls run in order on one worker thread
per process group and return at once with a ``Work`` whose future completes
when the call did; errors and timeouts (``timeout`` of
``init_process_group``) surface from ``wait()``. Single machine only: the
ranks share memory.
"""

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

    # called on the worker thread
    def _finish(self, error):
        self._error = error
        if error is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(error)

    def wait(self, timeout=None):
        self._future.wait()
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


def _stage_cuda():
    return os.environ.get("RINGREDUCE_TORCH_CUDA", "") == "stage"


class _Staged:
    """A tensor as the engine sees it: the tensor itself (on the CPU, or on
    a GPU for the CUDA job), or with ``RINGREDUCE_TORCH_CUDA=stage`` a host
    copy of a CUDA tensor that is copied back after the call."""

    def __init__(self, t, copy_in=True):
        self.tensor = t
        self.cuda = t.device.type == "cuda"
        self.staged = self.cuda and _stage_cuda()
        if not self.staged:
            self.host = t if t.is_contiguous() else None
            if self.host is None:
                raise ValueError(
                    f"ringreduce: a non-contiguous tensor (shape {tuple(t.shape)}, strides "
                    f"{tuple(t.stride())}); pass .contiguous()"
                )
        else:
            if not t.is_contiguous():
                raise ValueError(
                    f"ringreduce: a non-contiguous tensor (shape {tuple(t.shape)}, strides "
                    f"{tuple(t.stride())}); pass .contiguous()"
                )
            self.host = None
            self.copy_in = copy_in

    def before(self):
        """On the worker: the host copy of a CUDA tensor (its producer, on
        the caller's stream, finished: the caller recorded an event)."""
        if self.staged:
            self.host = self.tensor.to("cpu") if self.copy_in else torch.empty(
                self.tensor.shape, dtype=self.tensor.dtype
            )

    def after(self):
        if self.staged:
            self.tensor.copy_(self.host)


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
        self._queue = queue.Queue()
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

    # -- the worker ------------------------------------------------------------

    def _serve(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, fn, staged, event = item
            try:
                cuda = [x for x in staged if x.cuda]
                if cuda and not cuda[0].staged:
                    self._run_on_device(work, fn, cuda, event)
                    continue
                if event is not None:
                    event.synchronize()
                for x in staged:
                    x.before()
                fn(self._engine)
                for x in staged:
                    x.after()
                if cuda:
                    # the copies back are done before the future completes
                    torch.cuda.current_stream(cuda[0].tensor.device).synchronize()
                work._finish(None)
            except Exception as e:  # every error reaches the caller's wait()
                work._finish(e)

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

    def _submit(self, result, staged, fn):
        """Queue ``fn(engine)`` on the worker; the ``Work`` completes when it
        ran. With CUDA tensors, an event on the caller's current stream
        marks the producer, which the worker's call waits for (on the GPU,
        or, staged, on the host)."""
        event, devices = None, None
        if any(s.cuda for s in staged):
            dev = next(s.tensor.device for s in staged if s.cuda)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(dev))
            devices = [dev]
        work = _Work(result, devices)
        self._queue.put((work, fn, staged, event))
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
        return self._submit(tensors, [s], lambda eng: eng.all_reduce([s.host], op=op))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        si, so = _Staged(input), _Staged(output, copy_in=False)
        return self._submit(
            [output], [si, so], lambda eng: eng.reduce_scatter([si.host.reshape(-1)], [so.host.reshape(-1)], op=op)
        )

    def _allgather_base(self, output, input, opts=None):
        si, so = _Staged(input), _Staged(output, copy_in=False)
        return self._submit(
            [output], [si, so], lambda eng: eng.all_gather([si.host.reshape(-1)], [so.host.reshape(-1)])
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
        flat_device = t.device if si.cuda and not si.staged else "cpu"

        def run(eng):
            # made on the worker (on its stream when on a GPU)
            flat = torch.empty((self._size * t.numel(),), dtype=t.dtype, device=flat_device)
            eng.all_gather([si.host.reshape(-1)], [flat])
            for r, o in enumerate(outs):
                o.copy_(flat[r * t.numel():(r + 1) * t.numel()].view(t.shape))

        return self._submit(output_tensors, [si], run)

    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        s = _Staged(t)
        return self._submit(tensors, [s], lambda eng: eng.broadcast([s.host.reshape(-1)], root=root))

    def barrier(self, opts=None):
        return self._submit(None, [], lambda eng: eng.barrier())

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


def _refuse(name):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(
            f"ringreduce: {name} is not implemented by the ringreduce backend "
            f"(all_reduce, reduce_scatter_tensor, all_gather_into_tensor, all_gather, "
            f"broadcast and barrier are)"
        )

    refuse.__name__ = name
    return refuse


# Everything else a ProcessGroup may be asked for is refused by name.
for _name in [
    "reduce",
    "gather",
    "scatter",
    "reduce_scatter",
    "alltoall",
    "alltoall_base",
    "send",
    "recv",
    "recv_anysource",
    "allreduce_coalesced",
    "allgather_coalesced",
    "allgather_into_tensor_coalesced",
    "reduce_scatter_tensor_coalesced",
    "monitored_barrier",
]:
    setattr(ProcessGroupRingreduce, _name, _refuse(_name))
del _name


def create(store, rank, size, timeout):
    """The creator ``Backend.register_backend`` calls (store, rank, size,
    timeout)."""
    return ProcessGroupRingreduce(store, rank, size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return  # registered by an earlier import (or a reload)
    dist.Backend.register_backend(BACKEND_NAME, create, devices=["cpu", "cuda"])


_register()
