//! `ringreduce._ringreduce`: the Rust side of the Python package.
//!
//! Small on purpose: the Python package (`ringreduce/__init__.py`) turns
//! every host array it is given (torch CPU tensors, DLPack and
//! `__array_interface__` objects) into a numpy array, numpy keeping the
//! exporter alive; this module borrows each numpy array for the call
//! through rust-numpy (`ndarray.rs`: inputs read-only, outputs read-write,
//! with its dynamic borrow checking), runs the [`Communicator`] call with
//! the interpreter lock released, and turns every [`ringreduce::Error`]
//! into a `ringreduce.Error` subclass. No panic crosses into Python: each
//! call runs under `catch_unwind`. No host address is read out of a Python
//! object here.
//!
//! `unsafe`: one block, one call of `ringreduce::cuda::device_args` for
//! CUDA tensors and streams, whose contract is the Python caller's promise
//! that a device address is live memory it holds for the call: an address
//! arriving from Python as an integer cannot be vouched for by any safe
//! Rust function; every check that can be made (the driver's allocation of
//! the address, the stream's context) is made inside it.

mod errors;
mod kv;
mod ndarray;
mod plans;

use errors::{guarded, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
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
        if FORKED.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(errors::UnavailableError::new_err(
                "this engine was made in the parent of this process, which is a fork() of it: an engine's threads, memory and job do not survive fork(); make a new engine in this process (or start it with the spawn method)",
            ));
        }
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

/// A host call on numpy arrays (`inputs` and `outputs`: lists, one array
/// per local rank; `outputs` `None`: in place, the inputs are the
/// buffers), borrowed through rust-numpy for the call (`ndarray.rs`), run
/// with the interpreter lock released.
#[allow(clippy::too_many_arguments)]
fn run_arrays<'py>(
    engine: &PyEngine,
    py: Python<'py>,
    call: Call,
    inputs: &Bound<'py, PyAny>,
    outputs: Option<&Bound<'py, PyAny>>,
    dtype: Option<DataType>,
) -> PyResult<CallInfo> {
    let (n, base) = (engine.local.1 - engine.local.0, engine.local.0);
    let (ins, outs, out_what) = match outputs {
        None => (
            None,
            ndarray::side(inputs, n, base, "buffer", dtype)?,
            "buffer",
        ),
        Some(o) => {
            let ins = ndarray::side(inputs, n, base, "input", dtype)?;
            let outs = ndarray::side(o, n, base, "output", dtype)?;
            if outs.dtype != ins.dtype {
                return Err(errors::ArgumentError::new_err(format!(
                    "the outputs are {} but the inputs are {}: inputs and outputs must have the same element type",
                    outs.dtype.name(),
                    ins.dtype.name()
                )));
            }
            (Some(ins), outs, "output")
        }
    };
    let no_inputs = Vec::new();
    let in_arrays = ins.as_ref().map_or(&no_inputs, |s| &s.arrays);
    ringreduce::with_element!(outs.dtype, T => {
        let mut b = ndarray::Borrowed::<<T as ndarray::Storage>::As>::new(
            in_arrays, &outs.arrays, base, out_what,
        )?;
        let (send, mut recv) = b.slices::<T>().map_err(errors::to_py)?;
        engine.with_comm(py, move |comm| comm.host::<T>(call, &send, &mut recv))
    })
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

fn info_dict<'py>(py: Python<'py>, info: &CallInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(pyo3::intern!(py, "path"), info.path.as_str())?;
    let traffic = PyList::new(py, info.traffic.iter().map(|t| (t.sent, t.received)))?;
    d.set_item(pyo3::intern!(py, "traffic"), traffic)?;
    Ok(d)
}

/// A call's info as a host call returns it (`collective_arrays`):
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

/// A host call prepared once and run many times (`Engine.prepare`): its
/// arrays held for the prepared call's life, and read and borrowed again
/// at every run (an output made read-only since is refused then).
#[pyclass(module = "ringreduce._ringreduce", name = "_Prepared", frozen)]
struct PyPrepared {
    engine: Py<PyEngine>,
    call: Call,
    dtype: Option<DataType>,
    inputs: Py<PyAny>,
    outputs: Option<Py<PyAny>>,
}

#[pymethods]
impl PyPrepared {
    /// Run the call once more, on the same arrays.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let engine = self.engine.borrow(py);
        let outputs = self.outputs.as_ref().map(|o| o.bind(py));
        run_arrays(
            &engine,
            py,
            self.call,
            self.inputs.bind(py),
            outputs,
            self.dtype,
        )
        .map(|_| ())
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

    /// Seconds `iters` readings of `buffers` take at the boundary (checked,
    /// borrowed read-write and seen as slices, as an in-place host call
    /// reads them) without running the call: the boundary's share of a
    /// call (`scripts/python-overhead.py`).
    fn _time_boundary(&self, buffers: &Bound<'_, PyAny>, iters: usize) -> PyResult<f64> {
        let (n, base) = (self.local.1 - self.local.0, self.local.0);
        let t = std::time::Instant::now();
        for _ in 0..iters {
            let side = ndarray::side(buffers, n, base, "buffer", None)?;
            ringreduce::with_element!(side.dtype, T => {
                let mut b = ndarray::Borrowed::<<T as ndarray::Storage>::As>::new(
                    &[], &side.arrays, base, "buffer",
                )?;
                let (_s, r) = b.slices::<T>().map_err(errors::to_py)?;
                std::hint::black_box(r.len());
            });
        }
        Ok(t.elapsed().as_secs_f64())
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

    /// One collective on host arrays (`Engine.all_reduce` and the other
    /// three): `inputs` and `outputs` (`None`: in place) lists of numpy
    /// arrays, one per local rank (the package turns every other host
    /// array into one first), `dtype` the engine's name of their elements
    /// when the arrays hold them under another type of that width (torch's
    /// bfloat16 as uint16). Returns the call's info ([`PyCallInfo`]).
    #[pyo3(signature = (kind, op, inputs, outputs, root, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    fn collective_arrays<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        op: &str,
        inputs: &Bound<'py, PyAny>,
        outputs: Option<&Bound<'py, PyAny>>,
        root: usize,
        dtype: Option<&str>,
    ) -> PyResult<PyCallInfo> {
        let call = Call {
            collective: collective_of(kind, root)?,
            op: parse::<ReduceOp>(op)?,
            in_place: outputs.is_none(),
        };
        let dtype = dtype.map(parse::<DataType>).transpose()?;
        let info = run_arrays(self, py, call, inputs, outputs, dtype)?;
        Ok(PyCallInfo { info })
    }

    /// A host call prepared once ([`PyPrepared`]): the arguments of
    /// `collective_arrays`, checked now and again at every run.
    #[pyo3(signature = (kind, op, inputs, outputs, root, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        slf: Py<Self>,
        py: Python<'_>,
        kind: &str,
        op: &str,
        inputs: Py<PyAny>,
        outputs: Option<Py<PyAny>>,
        root: usize,
        dtype: Option<&str>,
    ) -> PyResult<PyPrepared> {
        let call = Call {
            collective: collective_of(kind, root)?,
            op: parse::<ReduceOp>(op)?,
            in_place: outputs.is_none(),
        };
        let dtype = dtype.map(parse::<DataType>).transpose()?;
        // Read once now, so that a wrong call fails at prepare.
        {
            let e = slf.borrow(py);
            let (n, base) = (e.local.1 - e.local.0, e.local.0);
            ndarray::side(inputs.bind(py), n, base, "input", dtype)?;
            if let Some(o) = &outputs {
                ndarray::side(o.bind(py), n, base, "output", dtype)?;
            }
        }
        Ok(PyPrepared {
            engine: slf,
            call,
            dtype,
            inputs,
            outputs,
        })
    }

    /// One collective over CUDA device memory: `sends` and `recvs` are
    /// `(address, bytes, device)` per rank (an empty `sends`: in place),
    /// `streams` `(CUstream handle, device)` per rank, the stream whose
    /// work produces the input and consumes the output. Returns once the
    /// call is queued on the GPU (see `Engine::collective_on_device`).
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

/// Set in the child of a `fork()` (the package's at-fork hook): every
/// engine inherited from the parent refuses at once, and is never torn
/// down there (its threads stayed with the parent).
static FORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called in the child of a `fork()` (`os.register_at_fork`).
#[pyfunction]
fn _forked() {
    FORKED.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Drop for PyEngine {
    fn drop(&mut self) {
        if FORKED.load(std::sync::atomic::Ordering::Relaxed) {
            // The parent's engine: its rank threads do not exist here, and
            // a teardown would wait for them.
            let comm = self
                .comm
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            std::mem::forget(comm);
        }
    }
}

/// The Rust extension of the `ringreduce` package.
#[pymodule]
fn _ringreduce(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_class::<PyPrepared>()?;
    m.add_class::<PyCallInfo>()?;
    m.add_function(wrap_pyfunction!(_forked, m)?)?;
    errors::register(m)?;
    plans::register(m)?;
    let names: Vec<&str> = DataType::ALL.iter().map(|d| d.name()).collect();
    m.add("DTYPES", names)?;
    m.add("OPS", vec!["sum", "prod", "max", "min", "avg"])?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
