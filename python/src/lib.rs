//! `ringreduce._ringreduce`: the Rust side of the Python package.
//!
//! Small on purpose: the Python package (`ringreduce/__init__.py`) reads
//! arrays and tensors (numpy, torch, DLPack, `__array_interface__`),
//! checks their type, device, shape and contiguity, and hands this module
//! one `(address, bytes)` pair per rank; this module runs the
//! [`Communicator`] call with the interpreter lock released, and turns
//! every [`ringreduce::Error`] into a `ringreduce.Error` subclass. No panic
//! crosses into Python: each call runs under `catch_unwind`. One shortcut:
//! a plain call on plain numpy arrays is read here instead, in one step per
//! array (`ndarray.rs`, `collective_ndarrays`), taking only what the
//! Python reader accepts and handing everything else back to it.
//!
//! `unsafe`: three blocks. Two are each one call of a library function
//! whose contract is the Python caller's promise that an address is live
//! memory it holds for the call (`ringreduce::foreign::host_slices` for
//! host arrays, `ringreduce::cuda::device_args` for CUDA tensors and
//! streams). They must stay: an address arriving from Python as an integer
//! cannot be vouched for by any safe Rust function; every check that can be
//! made (null, wrapping, overlap; the driver's allocation of a device
//! address) is made inside those library functions. The third
//! (`ndarray.rs`) reads the head of numpy's array object (numpy's C ABI),
//! which no safe API reads under the abi3 wheel's limited API (the buffer
//! protocol is in it from Python 3.11 only).

mod errors;
mod kv;
mod ndarray;
mod plans;

use errors::{guarded, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyType};
use ringreduce::foreign::HostSpan;
use ringreduce::{
    AbortHandle, AlgoChoice, BackendChoice, CallInfo, CallShape, Collective, Communicator,
    DataType, Element, EngineConfig, Error, EveryRank, JobSpec, RecvBufs, ReduceOp, SendBufs,
};
use std::sync::Mutex;
use std::time::Duration;

/// The communicator of an engine: every rank from this caller, or this
/// process's rank of a job (whose calls take that rank's buffer alone).
enum Comm {
    Every(Communicator<EveryRank>),
    One(Communicator),
}

/// `$body` with `$c` the communicator, whichever it is.
macro_rules! on_comm {
    ($comm:expr, $c:ident => $body:expr) => {
        match $comm {
            Comm::Every($c) => $body,
            Comm::One($c) => $body,
        }
    };
}

impl Comm {
    /// A host-slice call with one buffer per local rank (`send` empty: in
    /// place).
    fn host<T: Element>(
        &mut self,
        c: Call,
        send: &[&[T]],
        recv: &mut [&mut [T]],
    ) -> ringreduce::Result<CallInfo> {
        match self {
            Comm::Every(comm) => host_on(comm, c, send, recv),
            Comm::One(comm) => {
                if recv.len() != 1 || !(c.in_place || send.len() == 1) {
                    return Err(Error::WrongBufferCount {
                        ranks: 1,
                        buffers: recv.len(),
                    });
                }
                let send = send.first().copied().unwrap_or(&[]);
                host_on(comm, c, send, &mut *recv[0])
            }
        }
    }
}

/// A host-slice call on a communicator of either shape.
fn host_on<S: CallShape, T: Element>(
    comm: &mut Communicator<S>,
    c: Call,
    send: &(impl SendBufs<S, T> + ?Sized),
    recv: &mut (impl RecvBufs<S, T> + ?Sized),
) -> ringreduce::Result<CallInfo> {
    let op = c.op;
    match (c.collective, c.in_place) {
        (Collective::AllReduce, false) => comm.all_reduce(send, recv, op),
        (Collective::AllReduce, true) => comm.all_reduce_in_place(recv, op),
        (Collective::ReduceScatter, false) => comm.reduce_scatter(send, recv, op),
        (Collective::ReduceScatter, true) => comm.reduce_scatter_in_place(recv, op),
        (Collective::AllGather, false) => comm.all_gather(send, recv),
        (Collective::AllGather, true) => comm.all_gather_in_place(recv),
        (Collective::Broadcast { root }, false) => comm.broadcast(send, recv, root),
        (Collective::Broadcast { root }, true) => comm.broadcast_in_place(recv, root),
    }
}

/// The engine: every rank of a call from this caller (`Engine(ranks=N)`),
/// or this process's rank of a job (`_Engine.job`).
#[pyclass(module = "ringreduce._ringreduce", name = "_Engine")]
struct PyEngine {
    comm: Mutex<Option<Comm>>,
    abort: AbortHandle,
    size: usize,
    rank: usize,
    local: (usize, usize),
    describe: String,
    backend: &'static str,
}

fn parse<T: std::str::FromStr<Err = String>>(s: &str) -> PyResult<T> {
    s.parse::<T>().map_err(ArgumentError::new_err)
}

fn configure(cfg: &mut EngineConfig, timeout: Option<f64>, algo: Option<&str>) -> PyResult<()> {
    if let Some(t) = timeout {
        if !(t.is_finite() && t > 0.0 && t <= 1e7) {
            return Err(ArgumentError::new_err(format!(
                "timeout must be a number of seconds above 0 and at most 1e7 (got {t})"
            )));
        }
        cfg.timeout = Duration::from_secs_f64(t);
    }
    if let Some(a) = algo {
        cfg.algo = parse::<AlgoChoice>(a)?;
    }
    Ok(())
}

impl PyEngine {
    fn build(py: Python<'_>, cfg: EngineConfig) -> PyResult<PyEngine> {
        let comm = guarded(py, move || match cfg.process {
            Some(_) => Communicator::join(cfg).map(Comm::One),
            None => Communicator::new(cfg).map(Comm::Every),
        })?;
        let local = on_comm!(&comm, c => c.local_ranks());
        let (abort, size, describe, backend) = on_comm!(&comm, c => (
            c.abort_handle(),
            c.size(),
            c.describe().to_string(),
            c.backend_kind().name(),
        ));
        Ok(PyEngine {
            abort,
            size,
            rank: local.start,
            local: (local.start, local.end),
            describe,
            backend,
            comm: Mutex::new(Some(comm)),
        })
    }

    /// Run `f` on the communicator, the interpreter lock released.
    fn with_comm<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Comm) -> ringreduce::Result<R> + Send,
    ) -> PyResult<R> {
        let comm = &self.comm;
        guarded(py, move || {
            let mut guard = comm.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(c) => f(c),
                None => Err(Error::BadArgument("this engine was closed".into())),
            }
        })
    }
}

/// What a call asks for, parsed.
#[derive(Clone, Copy)]
struct Call {
    collective: Collective,
    op: ReduceOp,
    in_place: bool,
}

fn run_typed<T: Element>(
    comm: &mut Comm,
    c: Call,
    sends: &[HostSpan],
    recvs: &[HostSpan],
) -> ringreduce::Result<CallInfo> {
    let size = std::mem::size_of::<T>();
    for list in [sends, recvs] {
        for (r, b) in list.iter().enumerate() {
            if b.bytes % size != 0 {
                return Err(Error::BadArgument(format!(
                    "rank {r}: a buffer of {} bytes is not a whole number of {size}-byte elements",
                    b.bytes
                )));
            }
        }
    }
    // The one `unsafe` of this crate's own for host memory (the other is
    // `device_args` below): the addresses come from Python objects, and
    // only the Python caller can vouch for them. `host_slices` checks what
    // can be checked (null, wrapping, overlap between the call's buffers);
    // the rest is the contract below, which no safe wrapper could make
    // true for an integer handed over from Python.
    // SAFETY: `Engine._run` (ringreduce/__init__.py) read each span from a
    // live, C-contiguous host array of exactly that many bytes, holds every
    // array (they are arguments of the running call) until this returns,
    // and refused read-only outputs; nothing else runs on them meanwhile.
    // The fast path (`collective_ndarrays`) read them from numpy's own
    // description of each array (`ndarray.rs`) under the same checks, and
    // holds the array objects themselves (`Arrays::_held`), not only the
    // caller's list, until this returns.
    // A prepared call (`PyPrepared`) read them the same way once and holds
    // the arrays for its whole life: numpy arrays only (`Engine.prepare`),
    // which numpy refuses to resize while referenced, so the spans stay
    // where they were read.
    let (send_bytes, recv_bytes) = unsafe { ringreduce::foreign::host_slices(sends, recvs) }?;
    let misaligned = |r: usize| {
        Error::BadArgument(format!(
            "rank {r}: the buffer is not aligned to its {size}-byte elements"
        ))
    };
    let send: Vec<&[T]> = send_bytes
        .into_iter()
        .enumerate()
        // An empty array may carry any address (numpy's of size 0 need not
        // be aligned): it is an empty slice, not a misaligned one.
        .map(|(r, b)| match b.is_empty() {
            true => Ok(Default::default()),
            false => bytemuck::try_cast_slice(b).map_err(|_| misaligned(r)),
        })
        .collect::<ringreduce::Result<_>>()?;
    let mut recv: Vec<&mut [T]> = recv_bytes
        .into_iter()
        .enumerate()
        .map(|(r, b)| match b.is_empty() {
            true => Ok(Default::default()),
            false => bytemuck::try_cast_slice_mut(b).map_err(|_| misaligned(r)),
        })
        .collect::<ringreduce::Result<_>>()?;
    comm.host(c, &send, &mut recv)
}

fn collective_of(kind: &str, root: usize) -> PyResult<Collective> {
    match kind {
        "all_reduce" => Ok(Collective::AllReduce),
        "reduce_scatter" => Ok(Collective::ReduceScatter),
        "all_gather" => Ok(Collective::AllGather),
        "broadcast" => Ok(Collective::Broadcast { root }),
        other => Err(ArgumentError::new_err(format!(
            "unknown collective {other:?} (all_reduce, reduce_scatter, all_gather, broadcast)"
        ))),
    }
}

/// A host call's arguments from Python, parsed: the element type, the
/// call, and the `(address, bytes)` spans (an empty `sends`: in place).
fn host_call(
    kind: &str,
    dtype: &str,
    op: &str,
    sends: Vec<HostSpan>,
    recvs: Vec<HostSpan>,
    root: usize,
) -> PyResult<(DataType, Call, Vec<HostSpan>, Vec<HostSpan>)> {
    let call = Call {
        collective: collective_of(kind, root)?,
        op: parse::<ReduceOp>(op)?,
        in_place: sends.is_empty(),
    };
    Ok((parse::<DataType>(dtype)?, call, sends, recvs))
}

/// `(address, bytes)` pairs from Python as spans.
fn spans(v: Vec<(usize, usize)>) -> Vec<HostSpan> {
    v.into_iter()
        .map(|(addr, bytes)| HostSpan { addr, bytes })
        .collect()
}

fn info_dict<'py>(py: Python<'py>, info: &CallInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(pyo3::intern!(py, "path"), info.path.as_str())?;
    let traffic = PyList::new(py, info.traffic.iter().map(|t| (t.sent, t.received)))?;
    d.set_item(pyo3::intern!(py, "traffic"), traffic)?;
    Ok(d)
}

/// A call's info as the fast path returns it (`collective_ndarrays`):
/// made into the `last_call` dict only when that is read
/// (`Engine.last_call`), not on every call.
#[pyclass(module = "ringreduce._ringreduce", name = "_CallInfo", frozen)]
struct PyCallInfo {
    info: CallInfo,
}

#[pymethods]
impl PyCallInfo {
    /// The call's info as `collective` returns it.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.info)
    }
}

/// A host-memory call prepared once and run many times
/// (`Engine.prepare`): its arrays read and checked once, held for the
/// prepared call's life; each run is the communicator call alone.
#[pyclass(module = "ringreduce._ringreduce", name = "_Prepared", frozen)]
struct PyPrepared {
    engine: Py<PyEngine>,
    dtype: DataType,
    call: Call,
    sends: Vec<HostSpan>,
    recvs: Vec<HostSpan>,
    /// The arrays, held so that their memory stays where it was read
    /// (numpy refuses to resize an array someone else references).
    _keep: Py<PyAny>,
}

#[pymethods]
impl PyPrepared {
    /// Run the call once more, on the same arrays.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let (dtype, call) = (self.dtype, self.call);
        let (sends, recvs) = (&self.sends, &self.recvs);
        self.engine.borrow(py).with_comm(py, move |comm| {
            ringreduce::with_element!(dtype, T => run_typed::<T>(comm, call, sends, recvs))
                .map(|_| ())
        })
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (backend="auto", ranks=2, devices=None, timeout=None, algo=None))]
    fn new(
        py: Python<'_>,
        backend: &str,
        ranks: usize,
        devices: Option<Vec<usize>>,
        timeout: Option<f64>,
        algo: Option<&str>,
    ) -> PyResult<Self> {
        let mut cfg = EngineConfig::new(ranks, parse::<BackendChoice>(backend)?);
        cfg.devices = devices;
        configure(&mut cfg, timeout, algo)?;
        PyEngine::build(py, cfg)
    }

    /// Rank `rank` of a job of `size` processes meeting at the store
    /// directory `store` (rank 0 creates it; it must not exist yet), or
    /// through `store`, a key-value object with `set(key, value)` and
    /// `get(key, timeout)` (no directory: `kv.rs`).
    #[staticmethod]
    #[pyo3(signature = (rank, size, store, backend="cpu", timeout=None, algo=None))]
    fn job(
        py: Python<'_>,
        rank: usize,
        size: usize,
        store: &Bound<'_, PyAny>,
        backend: &str,
        timeout: Option<f64>,
        algo: Option<&str>,
    ) -> PyResult<Self> {
        let spec = match store.extract::<std::path::PathBuf>() {
            Ok(dir) => JobSpec::new(rank, size, dir),
            Err(_) => JobSpec::with_key_value(
                rank,
                size,
                std::sync::Arc::new(kv::PyKeyValue::new(store)?),
            ),
        };
        let mut cfg = EngineConfig::job(spec, parse::<BackendChoice>(backend)?);
        configure(&mut cfg, timeout, algo)?;
        PyEngine::build(py, cfg)
    }

    /// The Rust side alone, for the Python layer's cost: `iters` in-place
    /// all-reduces of `count` float32 per local rank on host vectors of its
    /// own, called from Rust in a loop, the interpreter lock released;
    /// returns the seconds they took (`scripts/python-overhead.py` sets it
    /// against the same calls through `Engine.all_reduce`).
    fn _time_rust_calls(&self, py: Python<'_>, iters: usize, count: usize) -> PyResult<f64> {
        let n = self.local.1 - self.local.0;
        self.with_comm(py, move |c| {
            let mut bufs = vec![vec![1.0f32; count]; n];
            let t = std::time::Instant::now();
            let call = Call {
                collective: Collective::AllReduce,
                op: ReduceOp::Sum,
                in_place: true,
            };
            for _ in 0..iters {
                let mut views: Vec<&mut [f32]> =
                    bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
                c.host(call, &[], &mut views)?;
            }
            Ok(t.elapsed().as_secs_f64())
        })
    }

    /// Time every op of the calls that follow (`on`), or stop.
    fn set_timing(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.with_comm(py, move |c| on_comm!(c, c => c.set_timing(on)))
    }

    /// The calls timed since the last take, oldest first: one dict per call
    /// (`plan`: the plan as `ringreduce.plan` gives it; `clock`; `launch_ns`;
    /// `skew_ns`; `times`: `(rank, op, part, start_ns, end_ns)` per op part
    /// of this handle's ranks).
    fn take_timed_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let calls = self.with_comm(py, |c| on_comm!(c, c => c.take_timed_calls()))?;
        let out = PyList::empty(py);
        for (plan, t) in &calls {
            let d = PyDict::new(py);
            d.set_item("plan", plans::plan_dict(py, plan)?)?;
            d.set_item("clock", &t.clock)?;
            d.set_item("launch_ns", t.launch_ns)?;
            d.set_item("skew_ns", t.skew_ns)?;
            let times: Vec<(usize, usize, usize, f64, f64)> = t
                .ops
                .iter()
                .map(|o| (o.rank, o.op, o.part, o.start_ns, o.end_ns))
                .collect();
            d.set_item("times", times)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The ranks in the job or engine.
    #[getter]
    fn size(&self) -> usize {
        self.size
    }

    /// This handle's first rank (0 when every rank runs from here).
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The ranks this handle calls for: `range(start, end)`.
    #[getter]
    fn local_ranks(&self) -> (usize, usize) {
        self.local
    }

    /// The backend the ranks run on: `"cpu"` or `"cuda"`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// The backend, its devices and how ranks run, in words.
    #[getter]
    fn describe(&self) -> &str {
        &self.describe
    }

    /// One collective over host buffers: `sends` and `recvs` are
    /// `(address, bytes)` per local rank; an empty `sends` means in place.
    #[pyo3(signature = (kind, dtype, op, sends, recvs, root=0))]
    #[allow(clippy::too_many_arguments)]
    fn collective<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        dtype: &str,
        op: &str,
        sends: Vec<(usize, usize)>,
        recvs: Vec<(usize, usize)>,
        root: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (dtype, call, sends, recvs) =
            host_call(kind, dtype, op, spans(sends), spans(recvs), root)?;
        let info = self.with_comm(py, move |comm| {
            ringreduce::with_element!(dtype, T => run_typed::<T>(comm, call, &sends, &recvs))
        })?;
        info_dict(py, &info)
    }

    /// The plain host call's fast path (`Engine.all_reduce` and the other
    /// three collectives): `inputs` and
    /// `outputs` (`None`: in place) as the caller passed them, read here
    /// in one step if they are plain numpy arrays (`ndarray.rs`), checked
    /// as `Engine._run` checks them, and run as `collective` runs them.
    /// Returns the call's info ([`PyCallInfo`]), or `None` without running
    /// anything when any argument is not the fast path's (the caller then
    /// reads them the general way, which raises where it must).
    #[pyo3(signature = (kind, op, inputs, outputs, root, ndarray))]
    #[allow(clippy::too_many_arguments)]
    fn collective_ndarrays<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        op: &Bound<'py, PyAny>,
        inputs: &Bound<'py, PyAny>,
        outputs: Option<&Bound<'py, PyAny>>,
        root: &Bound<'py, PyAny>,
        ndarray: Option<&Bound<'py, PyType>>,
    ) -> PyResult<Option<PyCallInfo>> {
        let Some(ndarray) = ndarray else {
            return Ok(None);
        };
        let n = self.local.1 - self.local.0;
        let Some(mut ins) = ndarray::read_all(inputs, n, ndarray) else {
            return Ok(None);
        };
        let (sends, recvs, dtype, outs) = match outputs {
            None => {
                if !ins.writable {
                    return Ok(None);
                }
                let recvs = std::mem::take(&mut ins.spans);
                (Vec::new(), recvs, ins.dtype, None)
            }
            Some(outputs) => {
                let Some(mut outs) = ndarray::read_all(outputs, n, ndarray) else {
                    return Ok(None);
                };
                if outs.dtype != ins.dtype || !outs.writable {
                    return Ok(None);
                }
                let (sends, recvs) = (
                    std::mem::take(&mut ins.spans),
                    std::mem::take(&mut outs.spans),
                );
                (sends, recvs, ins.dtype, Some(outs))
            }
        };
        // A root that is not a plain int (a bool, a string, a negative
        // number) or an op that is not a string: `_run` says what is wrong.
        if root.is_instance_of::<PyBool>() {
            return Ok(None);
        }
        let Ok(root) = root.extract::<usize>() else {
            return Ok(None);
        };
        let Some(op) = op.cast::<PyString>().ok().and_then(|s| s.to_cow().ok()) else {
            return Ok(None);
        };
        // Only the names `_run` takes, exactly (`_OPS`; the engine's parser
        // also takes "SUM"); an unknown kind or op: `_run` raises it, with
        // its message.
        let Some(op) = ReduceOp::ALL.into_iter().find(|o| o.name() == &*op) else {
            return Ok(None);
        };
        let Ok(collective) = collective_of(kind, root) else {
            return Ok(None);
        };
        let call = Call {
            collective,
            op,
            in_place: sends.is_empty(),
        };
        let info = self.with_comm(py, move |comm| {
            ringreduce::with_element!(dtype, T => run_typed::<T>(comm, call, &sends, &recvs))
        })?;
        // The arrays were held (`Arrays::_held`) until the call returned.
        drop((ins, outs));
        Ok(Some(PyCallInfo { info }))
    }

    /// A host-memory call prepared once ([`PyPrepared`]): the arguments
    /// of `collective`, plus `keep`, the arrays to hold.
    #[pyo3(signature = (kind, dtype, op, sends, recvs, root, keep))]
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        slf: Py<Self>,
        kind: &str,
        dtype: &str,
        op: &str,
        sends: Vec<(usize, usize)>,
        recvs: Vec<(usize, usize)>,
        root: usize,
        keep: Py<PyAny>,
    ) -> PyResult<PyPrepared> {
        let (dtype, call, sends, recvs) =
            host_call(kind, dtype, op, spans(sends), spans(recvs), root)?;
        Ok(PyPrepared {
            engine: slf,
            dtype,
            call,
            sends,
            recvs,
            _keep: keep,
        })
    }

    /// One collective over CUDA device memory: `sends` and `recvs` are
    /// `(address, bytes, device)` per rank (an empty `sends`: in place),
    /// `streams` `(CUstream handle, device)` per rank, the stream whose
    /// work produces the input and consumes the output. Returns once the
    /// call is queued on the GPU (see `Core::collective_on_device`).
    #[pyo3(signature = (kind, dtype, op, sends, recvs, streams, root=0))]
    #[allow(clippy::too_many_arguments)]
    fn collective_cuda<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        dtype: &str,
        op: &str,
        sends: Vec<(u64, usize, usize)>,
        recvs: Vec<(u64, usize, usize)>,
        streams: Vec<(usize, usize)>,
        root: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dtype = parse::<DataType>(dtype)?;
        let collective = collective_of(kind, root)?;
        let op = parse::<ReduceOp>(op)?;
        let info = self.with_comm(py, move |comm| {
            // The second `unsafe` of this crate's own, for the same reason
            // as `host_slices`: device addresses and stream handles are
            // integers from Python. `device_args` checks each address with
            // the driver (inside one device allocation of that GPU) and each
            // stream (its context); liveness it cannot check.
            // SAFETY: `Engine._run` read each span from a live, contiguous
            // CUDA tensor (or `__cuda_array_interface__` object) of exactly
            // that many bytes on that device, and each stream from torch's
            // current stream of that device (or the object's own stream);
            // the Python caller holds the tensors for the call, and
            // torch's allocator reuses their memory only in order with the
            // work of that stream, which the copies are part of.
            let a = unsafe { ringreduce::cuda::device_args(&sends, &recvs, &streams) }?;
            ringreduce::with_element!(dtype, T => on_comm!(comm, c => c.collective_on_device::<T>(
                collective, op, &a.sends, &a.recvs, &a.streams
            )))
        })?;
        info_dict(py, &info)
    }

    /// Every rank reaches this point before any goes on.
    fn barrier<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.with_comm(py, |comm| on_comm!(comm, c => c.barrier()))?;
        info_dict(py, &info)
    }

    /// End every wait of this engine now, from any thread (its calls fail
    /// with an abort error; the engine must then be closed).
    fn abort(&self) {
        self.abort.abort();
    }

    /// Release the engine (its threads, memory, and in a job its share of
    /// the store). Later calls raise.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let comm = &self.comm;
        guarded(py, move || {
            let taken = comm.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(taken);
            Ok(())
        })
    }
}

/// The Rust extension of the `ringreduce` package.
#[pymodule]
fn _ringreduce(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_class::<PyPrepared>()?;
    m.add_class::<PyCallInfo>()?;
    errors::register(m)?;
    plans::register(m)?;
    let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
    m.add("DTYPES", names)?;
    m.add("OPS", vec!["sum", "prod", "max", "min", "avg"])?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
