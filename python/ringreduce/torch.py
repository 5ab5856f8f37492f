"""A ``torch.distributed`` backend on ringreduce's ring.

    import torch.distributed as dist
    import ringreduce.torch          # registers the backend "ringreduce"
    dist.init_process_group("ringreduce")   # under torchrun: one process per rank

What it runs: ``all_reduce`` (sum, prod, min, max, avg; any other op is
refused by name), ``reduce_scatter_tensor``, ``all_gather_into_tensor``,
``all_gather`` (equal sizes; DDP checks parameter shapes with it),
``broadcast`` and ``barrier``; every other collective raises
``NotImplementedError`` naming it.

How: each process is one rank of a ringreduce job (``Engine.job``) on the
CPU backend, its ranks meeting through shared memory on this machine. The
job's store is a private directory that rank 0 creates and names to the
others through the ``Store`` that ``init_process_group`` hands the backend
(nothing to set up). CPU tensors are reduced where they are (zero-copy);
CUDA tensors are staged through host memory (the library has no call yet on
device memory it did not allocate: see docs/PYTORCH.md). Calls run in
order on one worker thread per process group and return at once with a
``Work`` whose future completes when the call did; errors and timeouts
(``timeout`` of ``init_process_group``) surface from ``wait()``.
Single machine only: the ranks share memory.
"""

import os
import queue
import tempfile
import threading
import uuid
from datetime import timedelta

import torch
import torch.distributed as dist

import ringreduce as _rr

__all__ = ["ProcessGroupRingreduce", "BACKEND_NAME", "create"]

BACKEND_NAME = "ringreduce"

_STORE_KEY = "ringreduce/store-dir"

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


def _store_dir_base():
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


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


class _Staged:
    """A tensor as the engine sees it: the tensor itself on the CPU, or a
    host copy of a CUDA tensor that is copied back after the call."""

    def __init__(self, t, copy_in=True):
        self.tensor = t
        self.cuda = t.device.type == "cuda"
        if not self.cuda:
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
        if self.cuda:
            self.host = self.tensor.to("cpu") if self.copy_in else torch.empty(
                self.tensor.shape, dtype=self.tensor.dtype
            )

    def after(self):
        if self.cuda:
            self.tensor.copy_(self.host)


class ProcessGroupRingreduce(dist.ProcessGroup):
    """One rank's process group on ringreduce (see the module doc)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._timeout = max(1.0, min(seconds, 1e7))
        if rank == 0:
            path = os.path.join(_store_dir_base(), f"ringreduce-torch-{os.getpid()}-{uuid.uuid4().hex[:12]}")
            store.set(_STORE_KEY, path)
        else:
            path = store.get(_STORE_KEY).decode()
        self._engine = _rr.Engine.job(rank, size, path, backend="cpu", timeout=self._timeout)
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
                if event is not None:
                    event.synchronize()
                for s in staged:
                    s.before()
                fn()
                for s in staged:
                    s.after()
                if any(s.cuda for s in staged):
                    # the copies back are done before the future completes
                    dev = next(s.tensor.device for s in staged if s.cuda)
                    torch.cuda.current_stream(dev).synchronize()
                work._finish(None)
            except Exception as e:  # every error reaches the caller's wait()
                work._finish(e)

    def _submit(self, result, staged, fn):
        event, devices = None, None
        if any(s.cuda for s in staged):
            # The caller's producer runs on its current stream: the worker
            # reads the tensor once that work is done.
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
        eng = self._engine
        return self._submit(tensors, [s], lambda: eng.all_reduce([s.host], op=op))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        si, so = _Staged(input), _Staged(output, copy_in=False)
        eng = self._engine
        return self._submit(
            [output], [si, so], lambda: eng.reduce_scatter([si.host.reshape(-1)], [so.host.reshape(-1)], op=op)
        )

    def _allgather_base(self, output, input, opts=None):
        si, so = _Staged(input), _Staged(output, copy_in=False)
        eng = self._engine
        return self._submit(
            [output], [si, so], lambda: eng.all_gather([si.host.reshape(-1)], [so.host.reshape(-1)])
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
        flat = torch.empty((self._size * t.numel(),), dtype=t.dtype)
        eng = self._engine

        def run():
            eng.all_gather([si.host.reshape(-1)], [flat])
            for r, o in enumerate(outs):
                o.copy_(flat[r * t.numel():(r + 1) * t.numel()].view(t.shape))

        return self._submit(output_tensors, [si], run)

    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        s = _Staged(t)
        eng = self._engine
        return self._submit(tensors, [s], lambda: eng.broadcast([s.host.reshape(-1)], root=root))

    def barrier(self, opts=None):
        eng = self._engine
        return self._submit(None, [], eng.barrier)

    # -- lifetime --------------------------------------------------------------

    def shutdown(self):
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(self._timeout)
            self._worker = None
            self._engine.close()

    def abort(self):
        self._engine.abort()
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
