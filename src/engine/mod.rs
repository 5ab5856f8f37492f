//! The engine: created once for N ranks on a backend, then reused.
//!
//! [`Engine`] holds a backend, the plan cache (one [`Path`] per algorithm
//! and shape), the buffers, and dispatch. It knows no algorithm by name: it
//! asks the [`AlgoChoice`] for the algorithm of a shape, asks that
//! algorithm's path for the plan of the next call (telling it whether the
//! call continues the previous one), and hands the plan to the backend. It
//! is untyped: a call's element type is the type parameter of the method
//! (or a [`DataType`] argument), so one engine runs calls of any type with
//! no conversion in between. Beside the calls on bound buffers it has the
//! engine's own buffers, loaded once and run many times (what a benchmark
//! times), device buffers, stream-ordered calls and NCCL. The collectives
//! on the caller's slices are the [`Communicator`](crate::Communicator)'s
//! (`HostCall`: the one set of rules for their buffers).
//!
//! ```
//! use ringreduce::{Collective, Engine, EngineConfig, ReduceOp};
//! let mut e = Engine::new(EngineConfig::cpu(3)).unwrap();
//! let inputs = vec![vec![1.0f32; 10], vec![2.0; 10], vec![3.0; 10]];
//! let shape = e.load(Collective::AllReduce, &inputs, false).unwrap();
//! for _ in 0..3 {
//!     e.run::<f32>(None, &shape, ReduceOp::Sum).unwrap(); // the same inputs each time
//! }
//! let out: Vec<Vec<f32>> = e.read_output(&shape).unwrap();
//! assert!(out.iter().all(|b| b.iter().all(|&x| x == 6.0)));
//! ```

mod buffers;
mod capabilities;
mod device;
#[cfg(feature = "cuda")]
mod foreign;
mod host;
mod launch;
mod ordered;

pub use crate::pool::threads_left_stuck;
pub use buffers::TypedShape;
pub use device::DeviceBuffers;
pub(crate) use host::HostCall;
pub use launch::{CallInfo, CallPath};

use crate::algo::{AlgoChoice, Algorithm, Path};
use crate::backend::cpu::CpuBackend;
#[cfg(feature = "cuda")]
use crate::backend::cuda::{self as cuda_backend, CudaBackend};
use crate::backend::NcclCall;
use crate::backend::{
    Backend, BackendChoice, BackendInfo, BackendKind, Binding, BufId, Call, CallTimeline,
    IssueProfile,
};
use crate::element::{DataType, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::fault::FaultPlan;
use crate::plan::{Collective, Plan, Shape, Traffic};
use crate::sync::AbortHandle;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::plan::MAX_RANKS;

/// All-reduces per captured CUDA graph: the chained paths alternate scratch
/// halves inside a graph, and every replay continues where the previous one
/// left off.
pub const GRAPH_CALLS: usize = 2;

/// The most plans of timed calls the engine keeps untaken
/// ([`Engine::take_timed_calls`]); older ones are dropped in halves.
pub(crate) const MAX_TIMED_PLANS: usize = 1 << 16;

/// How to build a communicator: start from [`EngineConfig::cpu`],
/// [`EngineConfig::cuda`], [`EngineConfig::new`] or [`EngineConfig::job`],
/// then set what differs from the defaults, with the fields or the
/// builder methods:
///
/// ```
/// use ringreduce::{EngineConfig, Communicator};
/// use std::time::Duration;
/// let cfg = EngineConfig::cpu(4)
///     .timeout(Duration::from_secs(5))
///     .algo("ring".parse().map_err(ringreduce::Error::BadArgument)?);
/// let comm = Communicator::new(cfg)?;
/// # Ok::<(), ringreduce::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Ranks.
    pub ranks: usize,
    /// Which backend.
    pub backend: BackendChoice,
    /// The algorithm of every call that does not name one (`auto` by
    /// default).
    pub algo: AlgoChoice,
    /// GPUs to use (default: all); ranks map onto them by
    /// [`crate::backend::placement`] (more ranks than GPUs: in blocks).
    pub devices: Option<Vec<usize>>,
    /// The longest any wait may take, on the host and on the GPU, before the
    /// call fails with a timeout (default `RINGREDUCE_TIMEOUT` or 60 s; a
    /// malformed `RINGREDUCE_TIMEOUT` makes [`Engine::new`] fail naming it).
    /// A wait looks at its deadline once it sleeps between polls (after a
    /// few hundred spins and yields), so a wait shorter than that never
    /// times out, however small the timeout.
    /// At most 10^7 s.
    pub timeout: Duration,
    /// Injected faults, for tests of the error paths: set with
    /// [`EngineConfig::with_faults`].
    pub(crate) faults: FaultPlan,
    /// Run one rank of a multi-process job (`ranks` must be the job's size):
    /// this process runs only that rank; see [`EngineConfig::job`],
    /// [`EngineConfig::job_from_env`] and [`crate::Communicator`].
    pub process: Option<crate::process::JobSpec>,
    /// Whether a [`Communicator`](crate::Communicator) of one rank per
    /// process makes every rank's call agree (collective, element type, op,
    /// count, root, place) before data moves (default: yes). Turning it off
    /// saves one small exchange through the job's control segment per
    /// call: about 1.5 us (up to 4 us under load) on the CPU backend with 2
    /// rank processes, where a 4-byte all-reduce takes 2.1 us without it
    /// and a 64 KiB one 24-58 us (docs/lab/perf-notes.md, "The agreement
    /// check"); ranks that then disagree get wrong results or hang until
    /// the timeout instead of an [`Error::Mismatch`].
    /// Every rank of a job must set it alike. The per-rank style always
    /// compares (where its ranks meet anyway, under a lock it holds); one
    /// caller of every rank has nothing to compare.
    pub check_calls: bool,
}

impl EngineConfig {
    /// A configuration of `ranks` ranks on `backend`, every other setting at its default.
    pub fn new(ranks: usize, backend: BackendChoice) -> Self {
        EngineConfig {
            ranks,
            backend,
            algo: AlgoChoice::Auto,
            devices: None,
            timeout: crate::sync::default_timeout(),
            faults: FaultPlan::none(),
            process: None,
            check_calls: true,
        }
    }

    /// Rank `spec.rank` of the job `spec` on `backend` (the rank count is
    /// the job's), for [`Communicator::new`](crate::Communicator::new).
    pub fn job(spec: crate::process::JobSpec, backend: BackendChoice) -> Self {
        let mut cfg = Self::new(spec.size, backend);
        cfg.process = Some(spec);
        cfg
    }

    /// This process's rank of the job it was started in (`ringreduce
    /// launch`, `mpirun`, PMI: [`JobSpec::from_env`](crate::process::JobSpec::from_env)),
    /// on `backend`; an error outside a job.
    pub fn job_from_env(backend: BackendChoice) -> Result<Self> {
        let spec = crate::process::JobSpec::from_env()?.ok_or_else(|| {
            Error::BadArgument(
                "not started as a rank of a job (no RINGREDUCE_RANK, OMPI_COMM_WORLD_RANK or PMI_RANK); start it with `ringreduce launch -n N -- <program>` or mpirun".into(),
            )
        })?;
        Ok(Self::job(spec, backend))
    }

    /// `ranks` ranks on the CPU backend.
    pub fn cpu(ranks: usize) -> Self {
        Self::new(ranks, BackendChoice::Cpu)
    }

    /// `ranks` ranks on the CUDA backend.
    pub fn cuda(ranks: usize) -> Self {
        Self::new(ranks, BackendChoice::Cuda)
    }

    /// The same, with every call that names no algorithm taking `algo`.
    pub fn algo(mut self, algo: AlgoChoice) -> Self {
        self.algo = algo;
        self
    }

    /// The same, on the GPUs `devices` (ranks map onto them in blocks).
    pub fn devices(mut self, devices: Vec<usize>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// The same, with every wait bounded by `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same, with the ranks' calls of a job compared before data moves
    /// or not ([`EngineConfig::check_calls`]).
    pub fn check_calls(mut self, check: bool) -> Self {
        self.check_calls = check;
        self
    }

    /// The same, with `faults` injected into its calls (for tests of the
    /// error paths: every injected fault must end every rank's call with
    /// an error naming the rank and the step).
    pub fn with_faults(mut self, faults: crate::fault::FaultPlan) -> Self {
        self.faults = faults;
        self
    }
}

/// GPUs named for a run on the CPU backend, which has none: refused, not
/// ignored.
fn no_devices_on_cpu(cfg: &EngineConfig) -> Result<()> {
    match &cfg.devices {
        Some(d) => Err(Error::BadArgument(format!(
            "devices {d:?} name GPUs, but the ranks run on the CPU backend{}: leave the devices out, or run on the cuda backend",
            if cfg.backend == BackendChoice::Auto {
                " (auto found no CUDA)"
            } else {
                ""
            }
        ))),
        None => Ok(()),
    }
}

/// A path: its index in [`Engine`]'s path table.
type PathKey = usize;

/// What a captured ringreduce graph holds.
#[derive(Debug, Clone)]
struct Captured {
    key: PathKey,
    /// The buffer generation it was captured against.
    generation: u64,
}

/// A resolved-cache entry: the fixed algorithm (kept alive so that its
/// address, the key, is not reused) and its path.
type Resolved = (Option<Arc<dyn Algorithm>>, PathKey);

static NEXT_ENGINE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The engine (see the module doc).
pub struct Engine {
    /// Declared first, so dropped first: it waits until no caller stream
    /// still copies from the engine's memory, which goes with `backend`.
    #[cfg(feature = "cuda")]
    staging: foreign::Staging,
    backend: Box<dyn Backend>,
    ranks: usize,
    algo: AlgoChoice,
    /// Every path used so far: (algorithm name, shape, state).
    paths: Vec<(String, Shape, Box<dyn Path>)>,
    /// The path of an (algorithm name, shape).
    path_index: HashMap<(String, Shape), PathKey>,
    /// The path a (choice, shape) resolved to: the hot path of a call does
    /// no allocation and no string work. The entry holds the choice's
    /// algorithm so its address (the key) cannot be reused by another one.
    resolved: HashMap<(usize, Shape), Resolved>,
    /// The previous call, when the next one may continue it.
    last: Option<PathKey>,
    /// Bytes of each engine buffer on each rank.
    caps: HashMap<BufId, Vec<usize>>,
    next_id: u32,
    /// The ranks this process runs (the backend's, fixed for its life).
    local: std::ops::Range<usize>,
    /// This engine's number in the process: its device buffers carry it,
    /// so a buffer of another engine is refused.
    id: u64,
    /// Scratch bytes every rank has.
    scratch_ok: usize,
    /// Bumped whenever a buffer is reallocated: captured graphs hold the old
    /// addresses.
    generation: u64,
    graph: Option<Captured>,
    nccl_graph: Option<u64>,
    nccl_ready: bool,
    timing: bool,
    /// The plans of the calls launched with timing on, oldest first, not
    /// yet taken with their times ([`Engine::take_timed_calls`]).
    timed: Vec<Arc<Plan>>,
    fallback_note: Option<String>,
    abort: AbortHandle,
    timeout: Duration,
    /// Why every call now fails, after a fault the engine cannot undo.
    poisoned: Option<String>,
    /// Collectives this rank of a job started (fault injection counts them).
    calls_started: u64,
    /// The job, when this engine is one rank of a multi-process job.
    job: Option<Arc<crate::process::Job>>,
    /// Where the ranks run, for `auto` ([`AlgoChoice::resolve_in`]): the
    /// layout of a job over nodes, host memory, processes sharing a GPU.
    placement: crate::algo::Placement,
    /// Every rank on its default buffers, made once: the backend knows a
    /// repeated call by this binding's address.
    default_bind: Arc<Vec<crate::backend::Binding>>,
}

/// Where the ranks of an engine on `backend` run (`job`: when it is one
/// rank of a multi-process job). Every rank of a job computes the same
/// value from the same facts (each rank's device, exchanged at setup), so
/// `auto` picks the same path on every rank.
fn placement_of(
    backend: &dyn Backend,
    job: Option<&crate::process::Job>,
) -> crate::algo::Placement {
    let info = backend.info();
    let kind = info.kind.unwrap_or(crate::backend::BackendKind::Cpu);
    placement(
        kind,
        job.is_some(),
        job.and_then(|j| j.per_node()),
        &info.rank_to_device,
        crate::param::CUDA_QUEUES.get().ok().flatten().unwrap_or(8),
    )
}

/// [`placement_of`] from the facts: the backend's kind, whether the ranks
/// are processes of a job, its node size, and each rank's device. One rank
/// per process in a job: two ranks on one device are two processes on one
/// GPU (on one machine: over nodes the ordinals of different nodes say
/// nothing, and `auto` takes its node paths there). `queues`: the
/// hardware queues of a context (`CUDA_DEVICE_MAX_CONNECTIONS`).
fn placement(
    kind: crate::backend::BackendKind,
    processes: bool,
    per_node: Option<usize>,
    devices: &[usize],
    queues: usize,
) -> crate::algo::Placement {
    let host = kind == crate::backend::BackendKind::Cpu;
    let shared = (0..devices.len()).any(|r| devices[r + 1..].contains(&devices[r]));
    // The most rank threads of this process on one GPU.
    let threads = if processes || host {
        1
    } else {
        devices
            .iter()
            .map(|d| devices.iter().filter(|x| *x == d).count())
            .max()
            .unwrap_or(1)
    };
    crate::algo::Placement {
        per_node,
        host,
        time_sliced: processes && !host && per_node.is_none() && shared,
        short_queues: crate::algo::ShortQueues::of(threads, queues),
        processes,
        one_gpu: !processes
            && !host
            && per_node.is_none()
            && devices.len() > 1
            && devices.iter().all(|d| *d == devices[0]),
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({})", self.backend.info().describe)
    }
}

impl Engine {
    /// Create the engine: rank threads, buffers and, on CUDA, contexts,
    /// streams, kernel modules and peer access (what each took:
    /// [`BackendInfo::setup`](crate::backend::BackendInfo::setup)). A malformed environment variable the engine
    /// reads (`RINGREDUCE_TIMEOUT`, `RINGREDUCE_ALGO`, ...; `ringreduce
    /// env` lists them) is an [`Error::Env`] naming it.
    pub fn new(cfg: EngineConfig) -> Result<Engine> {
        if cfg.ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        if cfg.ranks > MAX_RANKS {
            return Err(Error::TooManyRanks {
                ranks: cfg.ranks,
                max: MAX_RANKS,
            });
        }
        // The environment the engine reads (RINGREDUCE_TIMEOUT, _ALGO, ...):
        // a malformed variable is an error here, never ignored.
        crate::settings::check_engine()?;
        crate::param::check_seconds(cfg.timeout.as_secs_f64()).map_err(|why| {
            Error::BadArgument(format!(
                "EngineConfig::timeout must be {} (got {:?}: {why})",
                crate::param::TIMEOUT_RANGE,
                cfg.timeout
            ))
        })?;
        if let Some(spec) = &cfg.process {
            return Engine::new_process(cfg.clone(), spec);
        }
        let mut fallback_note = None;
        let cpu = |cfg: &EngineConfig| -> Result<Box<dyn Backend>> {
            no_devices_on_cpu(cfg)?;
            Ok(Box::new(CpuBackend::new(
                cfg.ranks,
                cfg.timeout,
                cfg.faults.clone(),
            )?))
        };
        #[cfg(feature = "cuda")]
        let cuda = |cfg: &EngineConfig| -> Result<Box<dyn Backend>> {
            Ok(Box::new(CudaBackend::new(&cuda_backend::CudaOptions {
                ranks: cfg.ranks,
                devices: cfg.devices.clone(),
                timeout: cfg.timeout,
                faults: cfg.faults.clone(),
            })?))
        };
        #[cfg(feature = "cuda")]
        let probe = cuda_backend::probe().map(|_| ());
        #[cfg(not(feature = "cuda"))]
        let cuda = |_: &EngineConfig| -> Result<Box<dyn Backend>> {
            Err(Error::NoCuda(crate::backend::NO_CUDA.into()))
        };
        #[cfg(not(feature = "cuda"))]
        let probe = Err::<(), _>(crate::backend::NO_CUDA);
        let backend: Box<dyn Backend> = match cfg.backend {
            BackendChoice::Cpu => cpu(&cfg)?,
            BackendChoice::Cuda => cuda(&cfg)?,
            BackendChoice::Auto => match probe {
                Ok(()) => cuda(&cfg)?,
                Err(why) => {
                    fallback_note = Some(format!("auto: CUDA unavailable ({why}); using cpu"));
                    cpu(&cfg)?
                }
            },
        };
        Ok(Engine::with_backend(backend, &cfg, fallback_note, None))
    }

    /// One rank of a multi-process job: join the job, then the backend of
    /// that one rank (every rank must pick the same kind).
    fn new_process(cfg: EngineConfig, spec: &crate::process::JobSpec) -> Result<Engine> {
        if cfg.ranks != spec.size {
            return Err(Error::BadArgument(format!(
                "{} ranks asked for, but this process is rank {} of a job of {} (leave the rank count out, or match it)",
                cfg.ranks, spec.rank, spec.size
            )));
        }
        let kind = match cfg.backend.cpu_reason() {
            Some(_) => BackendKind::Cpu,
            None => BackendKind::Cuda,
        };
        let job = crate::process::Job::join(spec, cfg.timeout)?;
        let kinds = job.allgather(kind.name().as_bytes(), "choosing the backend")?;
        if let Some((r, k)) = kinds
            .iter()
            .enumerate()
            .find(|(_, k)| k.as_slice() != kind.name().as_bytes())
        {
            let e = Error::BadArgument(format!(
                "rank {} chose the {} backend but rank {r} chose {}; every rank of a job must use the same (pass --backend)",
                spec.rank,
                kind.name(),
                String::from_utf8_lossy(k)
            ));
            job.fail(&e.to_string());
            return Err(e);
        }
        if kind == BackendKind::Cpu {
            no_devices_on_cpu(&cfg).inspect_err(|e| job.fail(&e.to_string()))?;
        }
        let mut faults = cfg.faults.clone();
        faults.0.extend(crate::process::env_faults(spec.rank)?.0);
        let fallback_note = (cfg.backend == BackendChoice::Auto && kind == BackendKind::Cpu)
            .then(|| "auto: CUDA unavailable; using cpu".to_string());
        let backend: Result<Box<dyn Backend>> = match kind {
            #[cfg(feature = "mpi")]
            // Several nodes: the network transport; one node (mpirun on one
            // machine): the shm transport, as without MPI.
            BackendKind::Cpu if job.world().is_some_and(|w| w.nodes() > 1) => CpuBackend::network(
                job.clone(),
                job.world()
                    .cloned()
                    .ok_or_else(|| Error::internal("no world"))?,
                cfg.timeout,
                faults,
            )
            .map(|b| Box::new(b) as Box<dyn Backend>),
            BackendKind::Cpu => CpuBackend::process(job.clone(), cfg.timeout, faults)
                .map(|b| Box::new(b) as Box<dyn Backend>),
            #[cfg(not(feature = "cuda"))]
            BackendKind::Cuda => Err(Error::NoCuda(crate::backend::NO_CUDA.into())),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => CudaBackend::process(
                job.clone(),
                &cuda_backend::CudaOptions {
                    ranks: cfg.ranks,
                    devices: cfg.devices.clone(),
                    timeout: cfg.timeout,
                    faults,
                },
            )
            .map(|b| Box::new(b) as Box<dyn Backend>),
        };
        let backend = backend.inspect_err(|e| job.fail(&format!("setup failed: {e}")))?;
        // Every wait of the job's control segment (barriers, the buffer
        // reservation's steps, the peer-read waits) ends once this rank's
        // engine is aborted, and the peers are told at once: they may be
        // waiting for this rank.
        let abort = backend.abort_handle();
        job.control().watch_abort(abort.clone()); // the backend's own, set once
        let control = Arc::downgrade(job.control());
        let me = spec.rank;
        abort.on_abort(move || {
            if let Some(c) = control.upgrade() {
                c.record_failure(0, me, "its engine was aborted (AbortHandle::abort)");
            }
        });
        Ok(Engine::with_backend(
            backend,
            &cfg,
            fallback_note,
            Some(job),
        ))
    }

    fn with_backend(
        backend: Box<dyn Backend>,
        cfg: &EngineConfig,
        fallback_note: Option<String>,
        job: Option<Arc<crate::process::Job>>,
    ) -> Engine {
        let abort = backend.abort_handle();
        let placement = placement_of(backend.as_ref(), job.as_deref());
        let local = backend.local_ranks();
        Engine {
            local,
            #[cfg(feature = "cuda")]
            staging: foreign::Staging::default(),
            placement,
            backend,
            ranks: cfg.ranks,
            algo: cfg.algo.clone(),
            paths: Vec::new(),
            path_index: HashMap::new(),
            resolved: HashMap::new(),
            last: None,
            caps: HashMap::new(),
            next_id: 4,
            id: NEXT_ENGINE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            scratch_ok: 0,
            generation: 0,
            graph: None,
            nccl_graph: None,
            nccl_ready: false,
            timing: false,
            timed: Vec::new(),
            fallback_note,
            abort,
            timeout: cfg.timeout,
            poisoned: None,
            calls_started: 0,
            job,
            default_bind: Arc::new(vec![crate::backend::Binding::DEFAULT; cfg.ranks]),
        }
    }

    /// Every rank on the engine's default buffers.
    pub(crate) fn default_bind(&self) -> Arc<Vec<crate::backend::Binding>> {
        self.default_bind.clone()
    }

    /// The ranks of the engine.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The ranks this process runs (all of them, or in a multi-process job
    /// its own): the ones whose buffers [`Engine::write`] and [`Engine::read`]
    /// reach.
    pub fn local_ranks(&self) -> std::ops::Range<usize> {
        self.local.clone()
    }

    /// The job, when this engine is one rank of a multi-process job.
    pub(crate) fn job(&self) -> Option<&Arc<crate::process::Job>> {
        self.job.as_ref()
    }

    /// When this engine is one rank of a multi-process job, the job as this
    /// process joined it (its rank, the job's size, where they came from);
    /// `None` when the engine runs every rank in this process.
    pub fn job_spec(&self) -> Option<&crate::process::JobSpec> {
        self.job.as_deref().map(|j| j.spec())
    }

    /// The node size of a job over several machines (every G consecutive
    /// ranks a node: MPI's node communicator, or `RINGREDUCE_RANKS_PER_NODE`);
    /// `None` on one machine.
    pub fn per_node(&self) -> Option<usize> {
        self.placement.per_node
    }

    /// Where the ranks run, as `auto` sees it ([`crate::algo::Placement`]).
    pub fn placement(&self) -> crate::algo::Placement {
        self.placement
    }

    /// Every process's `data` in rank order (one process: just `data`).
    /// Collective in a multi-process job.
    pub fn gather(&self, data: &[u8], what: &str) -> Result<Vec<Vec<u8>>> {
        match &self.job {
            Some(j) => j.allgather(data, what),
            None => Ok(vec![data.to_vec()]),
        }
    }

    /// The largest `v` of every process (collective in a job).
    pub fn max_over_processes(&self, v: f64, what: &str) -> Result<f64> {
        match &self.job {
            Some(j) => j.max_f64(v, what),
            None => Ok(v),
        }
    }

    /// The sum of `v` over processes (collective in a job).
    pub fn sum_over_processes(&self, v: u64, what: &str) -> Result<u64> {
        match &self.job {
            Some(j) => j.sum_u64(v, what),
            None => Ok(v),
        }
    }

    /// Whether any process says yes (collective in a job).
    pub fn any_process(&self, v: bool, what: &str) -> Result<bool> {
        match &self.job {
            Some(j) => j.any(v, what),
            None => Ok(v),
        }
    }

    /// What the backend is and runs on.
    pub fn info(&self) -> &BackendInfo {
        self.backend.info()
    }

    /// Which backend runs the calls.
    pub fn backend_kind(&self) -> BackendKind {
        self.info().kind.unwrap_or(BackendKind::Cpu)
    }

    /// One line for people: the backend, its devices, where the ranks sit.
    pub fn describe(&self) -> String {
        self.info().describe.clone()
    }

    /// Why `auto` fell back to the CPU, if it did.
    pub fn fallback_note(&self) -> Option<&str> {
        self.fallback_note.as_deref()
    }

    /// The engine's default algorithm choice.
    pub fn algo(&self) -> &AlgoChoice {
        &self.algo
    }

    /// The longest any wait may take (the configured timeout).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A handle that aborts every wait of this engine from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    /// Record op timings of the following calls (see [`Engine::take_timeline`]),
    /// and the start and end of the following NCCL calls (see
    /// [`Engine::take_nccl_timeline`]).
    ///
    /// Switching it sets up (or ends) what the backend's timing needs
    /// outside the calls (CUDA with CUPTI: the activity collection, primed
    /// on every rank), so that the first timed call does not pay it; an
    /// error there (or a pending call's) is returned.
    pub fn set_timing(&mut self, on: bool) -> Result<()> {
        let changed = self.timing != on;
        self.timing = on;
        if let Some(n) = self.backend.nccl() {
            n.set_nccl_timing(on);
        }
        match self.backend.profiling() {
            Some(p) if changed => p.prepare_timing(on),
            _ => Ok(()),
        }
    }

    /// Whether calls are timed.
    pub fn timing(&self) -> bool {
        self.timing
    }

    /// [`Error::Poisoned`] if the engine must be rebuilt (a fault it cannot
    /// undo, an abort), before anything is issued.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.usable()
    }

    fn usable(&self) -> Result<()> {
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        if self.abort.is_aborted() {
            return Err(Error::Poisoned {
                reason: "the engine was aborted".into(),
            });
        }
        Ok(())
    }

    /// Keep the outcome of a backend operation: its error becomes the one
    /// error of the call ([`Error::of_ranks`]: the cause, not the ranks
    /// that noticed it), and a fatal one ([`Error::is_fatal`]) poisons the
    /// engine. In a multi-process job a fatal error is also recorded for
    /// the job, which releases the other ranks waiting for this one.
    fn track<R>(&mut self, r: Result<R>) -> Result<R> {
        let r = r.map_err(|e| match e {
            Error::Ranks(v) => Error::of_ranks(v),
            e => e,
        });
        if let Err(e) = &r {
            self.last = None;
            if e.is_fatal() {
                if let Some(job) = &self.job {
                    job.fail_with(e);
                }
                let reason = match e.root() {
                    Error::Poisoned { reason } => reason.clone(),
                    _ => format!("a collective failed: {e}"),
                };
                self.poisoned.get_or_insert(reason);
            }
        }
        r
    }

    /// Wait for all launched work on every rank.
    pub fn synchronize(&mut self) -> Result<()> {
        let r = self.backend.synchronize();
        self.track(r)
    }

    /// A round trip to every rank thread.
    pub fn ping(&mut self) -> Result<()> {
        self.backend.ping()
    }
}

#[cfg(test)]
mod tests;
