//! One process per rank: the job, its bootstrap and the per-process
//! communicator.
//!
//! A *job* is `size` processes, each one rank. They find each other through
//! a store (a private directory, no network listener), then share one
//! control segment (signals, barriers, small all-gathers, the failure
//! record, who is alive). A process runs only its own rank's ops of the same
//! plans as the single-process engine; how a rank reaches the others is a
//! transport's business: shared-memory buffers on the CPU (the `Shm`
//! transport of the private `transport` module), CUDA IPC on the GPU
//! (the CUDA backend's `Ipc` peer exchange, `backend::cuda::exchange`).
//!
//! Who starts the processes:
//!
//! * `ringreduce launch -n N -- <command>` creates
//!   the store and sets `RINGREDUCE_RANK`, `RINGREDUCE_SIZE`,
//!   `RINGREDUCE_LOCAL_RANK`, `RINGREDUCE_LOCAL_SIZE`, `RINGREDUCE_STORE`
//!   and `RINGREDUCE_RUN_ID`;
//! * `mpirun -np N` (Open MPI: `OMPI_COMM_WORLD_RANK`/`_SIZE`; MPICH, Intel
//!   MPI, Slurm: `PMI_RANK`/`PMI_SIZE`): rank 0 creates the store, named
//!   after the job (no MPI library is linked or loaded);
//! * a program: [`JobSpec::new`] and
//!   [`EngineConfig::job`](crate::EngineConfig::job).
//!
//! The ranks of a job run on one host, as one user, in one PID namespace:
//! shared segments pass between them as `/proc/<pid>/fd/<n>` handles
//! (`sys::shm`), so ranks in separate containers cannot join one
//! job (the error says so).
//!
//! The library's entry point is [`Communicator`](crate::Communicator)
//! ([`Communicator::from_env`](crate::Communicator::from_env) in a rank
//! process).

pub(crate) mod control;
pub mod launch;
#[cfg(feature = "mpi")]
pub(crate) mod net;
pub(crate) mod reads;
pub mod rendezvous;
mod spec;
pub(crate) mod store;

pub(crate) use control::Control;
#[cfg(test)]
pub(crate) use rendezvous::LocalKeyValue;
pub use rendezvous::{KeyValue, SharedKeyValue};
pub use spec::{JobSpec, Origin};
pub(crate) use store::Store;

use crate::error::{Error, Result};
use std::io::Write as _;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A number that differs between calls of this process (for temporary file
/// names, and a launcher's run id).
pub fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (N.fetch_add(1, Ordering::Relaxed) << 32) ^ t
}

/// A process, told apart from a later process with the same pid by its
/// start time (`/proc/<pid>/stat`, clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcId {
    pub pid: u32,
    pub start: u64,
}

/// (state, start time) of `pid` from `/proc/<pid>/stat`.
pub(crate) fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 22 of the whole line is the start time; `fields[0]` is field 3.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

impl ProcId {
    pub fn me() -> ProcId {
        let pid = std::process::id();
        ProcId {
            pid,
            start: proc_stat(pid).map_or(0, |s| s.1),
        }
    }

    /// Whether the process still runs (a zombie, whose parent has not
    /// reaped it yet, does not).
    pub fn alive(&self) -> bool {
        match proc_stat(self.pid) {
            Some((state, start)) => {
                (self.start == 0 || start == self.start) && !matches!(state, 'Z' | 'X' | 'x')
            }
            None => false,
        }
    }

    pub fn encode(&self) -> String {
        format!("{} {}", self.pid, self.start)
    }

    pub fn parse(s: &str) -> Option<ProcId> {
        let mut it = s.split_whitespace();
        Some(ProcId {
            pid: it.next()?.parse().ok()?,
            start: it.next()?.parse().ok()?,
        })
    }
}

/// The store key under which rank 0 publishes the control segment's handle
/// (`/proc/<pid>/fd/<n>`, open until every rank mapped it).
const CONTROL_KEY: &str = "control-ready";

/// One process's membership of a job: its store and the shared control
/// segment. Made by [`Job::join`]; the backends and the communicator hold
/// it.
#[derive(Debug)]
pub(crate) struct Job {
    spec: JobSpec,
    /// The store directory; `None` for a job that met through the caller's
    /// key-value store.
    store: Option<Store>,
    control: Arc<Control>,
    /// Rank 0 of a job without a launcher removes the store at the end.
    owns_store: bool,
    /// The job over nodes, when it bootstrapped through MPI (the `mpi`
    /// feature): `spec` is then the world's rank and size, while the store
    /// and the control segment are this node's.
    #[cfg(feature = "mpi")]
    world: Option<Arc<crate::process::net::World>>,
}

impl Job {
    /// Join the job `spec` describes: create the store (rank 0 of a job
    /// without a launcher) or wait for it, record this process, create or
    /// map the control segment, and wait until every rank did (bounded by
    /// `timeout`).
    pub fn join(spec: &JobSpec, timeout: Duration) -> Result<Arc<Job>> {
        if spec.size == 0 || spec.rank >= spec.size {
            return Err(Error::BadArgument(format!(
                "rank {} of a job of {} ranks",
                spec.rank, spec.size
            )));
        }
        let faults = crate::param::env_faults()?;
        if let Some(f) = faults.iter().find(|f| f.rank >= spec.size) {
            return Err(Error::Env {
                var: crate::param::FAULT_NAME,
                value: f.to_string(),
                reason: format!(
                    "it names rank {}, which is not a rank of this job of {} (nothing would be injected)",
                    f.rank,
                    crate::words::counted(spec.size, "rank")
                ),
                expected: format!("ranks 0 to {}", spec.size - 1),
            });
        }
        if faults
            .iter()
            .any(|f| f.rank == spec.rank && f.kind == crate::fault::EnvFaultKind::NoStart)
        {
            return Err(Error::Worker {
                rank: spec.rank,
                message: "injected failure before joining the job (RINGREDUCE_FAULT=nostart)"
                    .into(),
            });
        }
        #[cfg(feature = "mpi")]
        if crate::process::net::wanted(spec)? {
            // The world through MPI, then this node's own job, as on one
            // machine; the job answers with the world's rank and size.
            let world = crate::process::net::World::join(spec, timeout)?;
            let node = world.node_spec(spec);
            // A node holding every rank is a job of one machine: its
            // segment's ranks are the job's (Control's names).
            let names = if world.members.len() == spec.size {
                Vec::new()
            } else {
                world.members.clone()
            };
            let mut job = Self::join_node(&node, timeout, names)?;
            job.spec = spec.clone();
            job.world = Some(Arc::new(world));
            return Ok(Arc::new(job));
        }
        Self::join_node(spec, timeout, Vec::new()).map(Arc::new)
    }

    /// [`Job::join`] of the ranks that share this machine (all of them, or
    /// one node's, whose job ranks are `names`).
    fn join_node(spec: &JobSpec, timeout: Duration, names: Vec<usize>) -> Result<Job> {
        if let Some(kv) = &spec.key_value {
            return Self::join_key_value(spec, kv.0.as_ref(), timeout, names);
        }
        let owns_store = spec.run_id.is_none() && spec.rank == 0;
        if spec.rank == 0 {
            // Stores of earlier jobs whose creator and ranks are all gone
            // (killed, or whose peer never came; under mpirun, a node whose
            // every rank was killed): nobody else removes them.
            for d in store::sweep_stale(&store::default_base()) {
                say(&format!(
                    "ringreduce: removed the stale store {} (its ranks are gone)",
                    d.display()
                ));
            }
        }
        if owns_store {
            let name = spec
                .store
                .file_name()
                .map_or_else(|| "job".into(), |s| s.to_string_lossy().into_owned());
            let run = format!("{name}-{}-{:x}", std::process::id(), unique_suffix());
            Store::create(&spec.store, &run, spec.size, timeout)?;
        }
        // Under a launcher the run id is known; otherwise the store's own is
        // taken, and a store whose creator is gone is stale.
        let joined = Self::join_store(spec, owns_store, timeout, names);
        if joined.is_err() && owns_store {
            // This rank made the store for a job that never formed: take it
            // away again (a peer that never came would leave it forever).
            let _ = std::fs::remove_dir_all(&spec.store);
        }
        joined.map_err(|e| match (e, spec.store_from_parent) {
            (
                Error::Timeout {
                    rank,
                    what,
                    seconds,
                    wait,
                },
                Some(ppid),
            ) => Error::Timeout {
                rank,
                what: format!(
                    "{what}; without a launcher's job id the ranks find each other by their parent process (pid {ppid}, store {}), so ranks started under different parents never meet: give every rank the same RINGREDUCE_STORE=<directory>, or start them with `ringreduce launch` or mpirun",
                    spec.store.display()
                ),
                seconds,
                wait,
            },
            (e, _) => e,
        })
    }

    /// [`Job::join`] past the store's creation: join it, map the control
    /// segment, and meet every rank.
    fn join_store(
        spec: &JobSpec,
        owns_store: bool,
        timeout: Duration,
        names: Vec<usize>,
    ) -> Result<Job> {
        let store = Store::join(
            &spec.store,
            spec.run_id.as_deref(),
            spec.rank,
            spec.size,
            timeout,
        )?;
        let run = store.run().to_string();
        // Rank 0 publishes the segment's handle; it stays open until every
        // rank mapped the segment (the barrier), then only mappings hold it.
        let (mut control, export) = if spec.rank == 0 {
            let (c, export) = Control::create(&run, spec.size, timeout)?;
            store.put(CONTROL_KEY, export.path().as_os_str().as_encoded_bytes())?;
            (c, Some(export))
        } else {
            let handle = store.get(CONTROL_KEY, 0, "the shared control segment")?;
            // The inverse of the bytes rank 0 put (`as_encoded_bytes`).
            let path = PathBuf::from(std::ffi::OsString::from_vec(handle));
            let c = Control::open(&path, &run, spec.size, spec.rank, timeout)?;
            (c, None)
        };
        control.watch_store(store.clone());
        Self::meet(spec, control, export, Some(store), owns_store, names)
    }

    /// [`Job::join`] through the caller's key-value store: rank 0 creates
    /// the control segment and sets [`rendezvous::CONTROL_KEY`], the others
    /// get it and map the segment; then every rank meets.
    fn join_key_value(
        spec: &JobSpec,
        kv: &dyn KeyValue,
        timeout: Duration,
        names: Vec<usize>,
    ) -> Result<Job> {
        let key = rendezvous::CONTROL_KEY;
        let (control, export) = if spec.rank == 0 {
            let run = format!("kv-{}-{:x}", std::process::id(), unique_suffix());
            let (c, export) = Control::create(&run, spec.size, timeout)?;
            kv.set(key, &rendezvous::encode(&run, export.path()))?;
            (c, Some(export))
        } else {
            let Some(v) = kv.get(key, timeout)? else {
                return Err(Error::Timeout {
                    rank: spec.rank,
                    what: format!(
                        "rank 0 to set {key} in {} (the job's control segment)",
                        kv.describe()
                    ),
                    seconds: timeout.as_secs_f64(),
                    wait: crate::error::WaitKind::Host,
                });
            };
            let (run, path) = rendezvous::decode(&v).ok_or_else(|| {
                Error::BadArgument(format!(
                    "rank {}: {key} in {} is not what rank 0 of a ringreduce job sets ({} bytes: `<run id>\\n<segment handle>` expected); is the store shared with another program?",
                    spec.rank,
                    kv.describe(),
                    v.len()
                ))
            })?;
            (
                Control::open(&path, &run, spec.size, spec.rank, timeout)?,
                None,
            )
        };
        Self::meet(spec, control, export, None, false, names)
    }

    /// The end of every join: register this process in the control
    /// segment and wait until every rank did.
    fn meet(
        spec: &JobSpec,
        control: Control,
        export: Option<crate::sys::shm::Export>,
        store: Option<Store>,
        owns_store: bool,
        names: Vec<usize>,
    ) -> Result<Job> {
        #[cfg(feature = "mpi")]
        let control = {
            let mut c = control;
            c.set_names(names);
            c
        };
        #[cfg(not(feature = "mpi"))]
        let _ = names;
        control.register();
        let control = Arc::new(control);
        if let Err(e) = control.barrier("joining the job (every rank mapped the control segment)") {
            // This rank reports its own error and ends: its end is a
            // consequence, not a fault for the others to name (they name
            // the rank that failed first, or the launcher's abort). Without
            // this a rank that saw the abort and exited first was named as
            // "died" by a slower peer (a flaky mp test).
            control.finish();
            return Err(e);
        }
        drop(export);
        Ok(Job {
            spec: spec.clone(),
            store,
            control,
            owns_store,
            #[cfg(feature = "mpi")]
            world: None,
        })
    }

    pub fn rank(&self) -> usize {
        self.spec.rank
    }

    pub fn size(&self) -> usize {
        self.spec.size
    }

    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    // The CUDA backend's NCCL set-up.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The store directory; `None` for a job that met through the
    /// caller's key-value store.
    pub(crate) fn store_path(&self) -> Option<&Path> {
        self.store.as_ref().map(Store::dir)
    }

    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// Every rank gets here before any goes on.
    pub fn barrier(&self, what: &str) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let Some(w) = &self.world {
            return w.barrier(what, &|| self.control.check(&|| what.to_string()));
        }
        self.control.barrier(what)
    }

    /// Every rank's `data`, in rank order.
    pub(crate) fn allgather(&self, data: &[u8], what: &str) -> Result<Vec<Vec<u8>>> {
        #[cfg(feature = "mpi")]
        if let Some(w) = &self.world {
            return w.allgather(data, what, &|| self.control.check(&|| what.to_string()));
        }
        self.control.allgather(data, what)
    }

    /// When the job spans several nodes: `Some(G)` when every G
    /// consecutive ranks form a node, `Some(0)` for another layout; `None`
    /// on one machine.
    pub fn per_node(&self) -> Option<usize> {
        #[cfg(feature = "mpi")]
        if let Some(w) = &self.world {
            if w.nodes() < 2 {
                return None;
            }
            let g = w.members.len();
            let blocks = w.node_of.iter().enumerate().all(|(r, &m)| r / g == m);
            return Some(if blocks { g } else { 0 });
        }
        None
    }

    /// The job over nodes, when it bootstrapped through MPI.
    #[cfg(feature = "mpi")]
    pub fn world(&self) -> Option<&Arc<crate::process::net::World>> {
        self.world.as_ref()
    }

    /// The sum over ranks.
    pub(crate) fn sum_u64(&self, v: u64, what: &str) -> Result<u64> {
        Ok(self
            .allgather(&v.to_le_bytes(), what)?
            .iter()
            .map(|b| u64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
            .sum())
    }

    /// The largest value over ranks.
    pub(crate) fn max_f64(&self, v: f64, what: &str) -> Result<f64> {
        Ok(self
            .allgather(&v.to_le_bytes(), what)?
            .iter()
            .map(|b| f64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
            .fold(f64::NEG_INFINITY, f64::max))
    }

    /// Whether any rank says yes.
    pub fn any(&self, v: bool, what: &str) -> Result<bool> {
        Ok(self
            .allgather(&[u8::from(v)], what)?
            .iter()
            .any(|b| b.first() == Some(&1)))
    }

    /// A board for the plans' signals, shared by the job's processes.
    pub(crate) fn signal_board(
        &self,
        abort: crate::sync::AbortHandle,
        timeout: Duration,
    ) -> crate::sync::SignalBoard {
        crate::sync::SignalBoard::shared(self.control.clone(), abort, timeout)
    }

    /// Record a failure of this rank for the whole job.
    pub fn fail(&self, why: &str) {
        self.control.record_failure(0, self.spec.rank, why);
    }

    /// Record the failure behind `e` for the whole job: this rank's, or,
    /// when this rank only noticed another's ([`Error::PeerFailed`]), that
    /// rank's, so every other rank names the one that failed first.
    pub(crate) fn fail_with(&self, e: &Error) {
        match e.root() {
            Error::PeerFailed { rank, reason, .. } => self.control.record_failure(0, *rank, reason),
            // A wait that ended because the run was given up (by the
            // launcher, or another rank's failure) is nobody's failure here.
            Error::Aborted { .. } if self.control.health().is_some() => {}
            // A timeout: every other rank's call times out with this one.
            root @ Error::Timeout { .. } => {
                self.control
                    .record(0, self.spec.rank, &root.to_string(), true)
            }
            root => self.fail(&root.to_string()),
        }
    }

    /// Whether the job can go on (see [`Control::health`]).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn health(&self) -> Option<crate::sync::JobFault> {
        self.control.health()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Unwinding through the communicator: the others name this rank
            // at once, not the launcher's abort that follows its exit.
            self.control
                .record_failure(0, self.spec.rank, "its process panicked");
        }
        self.control.finish();
        if let (true, Some(store)) = (self.owns_store, &self.store) {
            // Rank 0 of an mpirun job removes the store once the others are
            // done with it (bounded: a rank that hangs is not waited for).
            let t0 = std::time::Instant::now();
            while !self.control.others_done() && t0.elapsed() < store.timeout() {
                std::thread::sleep(Duration::from_millis(5));
            }
            store.remove();
        }
        #[cfg(feature = "mpi")]
        if let Some(w) = &self.world {
            // Every thread that makes MPI calls has ended (the network
            // transport's receiver is joined when its backend drops, and
            // the backend holds this job). MPI_Finalize waits for every
            // process: after a failure (a dead rank) it would wait forever
            // (under `mpirun --enable-recovery`), so a failed job leaves
            // MPI as it is and the launcher reports the missing finalize.
            // In a drop: a closed stderr must not panic (an abort here).
            if self.control.failure().is_some() || self.control.health().is_some() {
                say(&format!(
                    "ringreduce: rank {}: the job failed; MPI is not finalised",
                    self.spec.rank
                ));
            } else if let Err(e) = w.mpi.finalize() {
                say(&format!("ringreduce: {e}"));
            }
        }
    }
}

/// The faults `RINGREDUCE_FAULT` injects into rank `rank`'s collectives
/// (see [`crate::fault::EnvFaultKind`]; none when unset). Read only in the
/// multi-process mode.
pub(crate) fn env_faults(rank: usize) -> Result<crate::fault::FaultPlan> {
    Ok(crate::fault::env_fault_plan(
        &crate::param::env_faults()?,
        rank,
    ))
}

/// A line on stderr, written at once (ranks sharing a pipe do not
/// interleave inside it) and never a panic on a closed stderr (`2>&1 |
/// head`; in a drop, a panic would abort).
fn say(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests;
