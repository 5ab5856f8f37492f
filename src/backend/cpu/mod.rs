//! The CPU backend: every rank is a host thread with its own buffers, over
//! a [`Transport`] that says where the peers are.
//!
//! * [`Threads`] (one process, every rank a thread of it): a peer's buffer
//!   is a heap allocation of this process, the board is this process's.
//! * [`Shm`] (one rank per process, [`crate::process`]): a rank's buffers
//!   are shared segments that the peers' processes map, the board's
//!   counters are the job's; this is the CI stand-in for CUDA IPC.
//!
//! Everything else exists once: each local rank's thread runs its ops in
//! list order through the plan interpreter ([`mem::execute`]), waiting on
//! the same signals as on the GPU, so a rank reduces a chunk only after its
//! neighbour's copy of it is complete; a reserve is the transports'
//! collective protocol (every rank idle, each allocates what grew, the
//! records are all-gathered, every process opens its peers' new buffers,
//! a barrier, then the handles close: [`crate::transport::all_records`]);
//! profiling, the timelines, stream-ordered calls ([`super::ordered`]) and
//! traffic counting work on every transport. A call returns when the local
//! ranks finished it; other processes' ranks may still be in it (as GPU
//! streams may be): the plans' fences make that safe.

pub(crate) mod mem;

use crate::transport::Storage;

use super::{
    check_call, Backend, BackendInfo, BackendKind, BufId, Call, CallTimeline, DeviceMemory,
    HostRead, HostWrite, IssueProfile, OpTime, Profiling,
};
use crate::error::{Error, Result};
use crate::fault::FaultPlan;
use crate::pool::RankThreads;
use crate::sync::{AbortHandle, SignalBoard};
use crate::transport::{
    all_records, to_open, unique_name, Names, Record, Shm, Threads, Transport, FAILED_RECORD,
};
use mem::{execute, lock, CpuMem, Run};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the caller asks of a rank thread.
enum Cmd {
    Run(Arc<Run>),
    Ping,
}

/// Run rank `rank`'s ops of `run`: a panic is this rank's error, and an
/// error is told to the other ranks at once (they may wait for this one).
fn run_rank(mem: &CpuMem, rank: usize, run: &Run) -> Result<Vec<OpTime>> {
    catch_unwind(AssertUnwindSafe(|| execute(mem, rank, run)))
        .unwrap_or_else(|p| {
            Err(Error::Worker {
                rank,
                message: crate::pool::panic_message(p.as_ref()),
            })
        })
        .inspect_err(|e| run.board.fail_with(run.gen, rank, e))
}

/// The CPU backend over transport `T`.
pub(crate) struct CpuBackend<T: Transport<Mem = Storage> = Threads> {
    t: T,
    mem: Arc<CpuMem>,
    /// Which allocation this process holds for each rank's buffer.
    names: Names,
    /// The threads of the local ranks after the first (thread `i` runs
    /// rank `local.start + 1 + i`); the caller's thread runs the first
    /// itself, so a rank process (one local rank) has none and a call hands
    /// nothing over. A hand-off per rank made two threads poll for each
    /// rank's part of a call, the caller and the rank's thread, and where
    /// the ranks outnumber the cores (rank processes on a small machine, or
    /// rank threads of one process) they took the cores the other ranks
    /// need.
    threads: RankThreads<Cmd, Vec<OpTime>>,
    board: Arc<SignalBoard>,
    gen: u64,
    faults: FaultPlan,
    info: BackendInfo,
    epoch: Instant,
    timelines: Vec<CallTimeline>,
    profile: Vec<IssueProfile>,
    /// Stream-ordered calls' spans ([`super::ordered`]).
    pub(super) order: super::ordered::CpuOrder,
    /// Whether this process's cores are too few to split a rank's large
    /// copies and reductions across its pool while its peers work too: each
    /// rank a process of its own, fewer than two cores each on this machine.
    crowded: bool,
    /// What this backend reads from a plan once, on its first call
    /// ([`PlanFacts`]), keyed by the plan's address: the entry holds the
    /// plan, so that no other plan can take the address while it lives (a
    /// freed probe plan once gave its address to `bench`'s first call, which
    /// then ran with the probe's forwarding and hung between nodes).
    plans: std::collections::HashMap<usize, (Arc<crate::plan::Plan>, PlanFacts)>,
}

/// What the CPU backend reads from a plan once, on its first call.
#[derive(Clone)]
struct PlanFacts {
    /// How the plan reaches the ranks of other nodes: its forwarding
    /// tables, when the transport has a wire.
    net: Option<mem::NetRun>,
    /// Whether its large copies and reductions are split across the pool:
    /// always, unless this process is `crowded`; there only for a plan
    /// whose ranks' work is uneven ([`mem::splits`]).
    split: bool,
}

impl CpuBackend<Threads> {
    /// `ranks` ranks in this process: the caller's thread runs the first,
    /// a rank thread each the others.
    pub fn new(ranks: usize, timeout: Duration, faults: FaultPlan) -> Result<Self> {
        CpuBackend::over(Threads::new(ranks, timeout)?, timeout, faults)
    }
}

impl CpuBackend<Shm> {
    /// This process's rank of the multi-process job `job`.
    pub fn process(
        job: Arc<crate::process::Job>,
        timeout: Duration,
        faults: FaultPlan,
    ) -> Result<Self> {
        CpuBackend::over(Shm::new(job, timeout), timeout, faults)
    }
}

#[cfg(feature = "mpi")]
impl CpuBackend<crate::transport::Net> {
    /// This process's rank of the job over nodes `job` (bootstrapped
    /// through MPI as `world`).
    pub fn network(
        job: Arc<crate::process::Job>,
        world: Arc<crate::process::net::World>,
        timeout: Duration,
        faults: FaultPlan,
    ) -> Result<Self> {
        CpuBackend::over(
            crate::transport::Net::new(job, world, timeout),
            timeout,
            faults,
        )
    }
}

impl<T: Transport<Mem = Storage>> CpuBackend<T> {
    /// The backend over transport `t`: the caller runs the first local
    /// rank, one thread each the others.
    pub fn over(mut t: T, timeout: Duration, faults: FaultPlan) -> Result<Self> {
        let (ranks, local) = (t.ranks(), t.local_ranks());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let crowded = t.shared() && cores < 2 * t.machine_ranks();
        let mem = Arc::new(CpuMem::new(ranks)?);
        t.attach(mem.clone())?;
        let m = mem.clone();
        let first = local.start;
        let mut threads = RankThreads::spawn_named(
            local.len().saturating_sub(1),
            &|i| format!("cpu-rank{}", first + 1 + i),
            move |i, inbox| {
                inbox.ready(Ok(()));
                let (mem, rank) = (m.clone(), first + 1 + i);
                inbox.serve(|cmd: Cmd| match cmd {
                    Cmd::Run(run) => run_rank(&mem, rank, &run),
                    Cmd::Ping => Ok(Vec::new()),
                });
            },
        )?;
        // Every wait of a rank thread is bounded by the timeout (the
        // board's waits, the abort); this bounds the caller's wait for the
        // rank threads too, should one be stuck anyway.
        threads.set_deadline(Some(timeout + crate::pool::GRACE));
        let info = BackendInfo {
            kind: Some(BackendKind::Cpu),
            ranks,
            rank_to_device: vec![0; ranks],
            describe: format!(
                "cpu: {}, {} for large slices{}",
                t.describe(),
                crate::words::counted(mem.pool.current_num_threads(), "pool thread"),
                if crowded {
                    format!(
                        " (only where a plan's work is uneven: {} {} of this job share {})",
                        t.machine_ranks(),
                        crate::words::plural(t.machine_ranks(), "rank process", "rank processes"),
                        crate::words::counted(cores, "hardware thread")
                    )
                } else {
                    String::new()
                }
            ),
            hardware: vec![
                format!(
                    "CPU: {} hardware threads",
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ),
                format!("transport: {}", t.name()),
            ],
            setup: None,
        };
        Ok(CpuBackend {
            board: t.board(0, "the CPU backend")?,
            t,
            mem,
            names: Names::default(),
            threads,
            gen: 0,
            faults,
            info,
            epoch: Instant::now(),
            timelines: Vec::new(),
            profile: vec![IssueProfile::default(); ranks],
            order: Default::default(),
            plans: Default::default(),
            crowded,
        })
    }

    /// An error of a collective step: between processes, tell every rank
    /// (they are waiting for this one), then return it.
    fn failed(&self, e: Error) -> Error {
        if self.t.shared() {
            self.board
                .fail_with(self.gen, self.t.local_ranks().start, &e);
        }
        e
    }

    /// The reserve protocol past its first barrier: allocate what grew on
    /// the local ranks, all-gather the records, open the peers' new
    /// buffers, barrier, close the handles.
    ///
    /// Memory that cannot be had on one rank fails the reserve on every
    /// rank alike, and leaves the communicator usable: the failure travels
    /// in that rank's record, every rank drops what it allocated for this
    /// reserve (its buffers are as they were), and the rank gets its
    /// [`Error::OutOfMemory`] while the others get [`Error::PeerArgument`]
    /// naming it. No failure is recorded for the job.
    fn grow(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        let mut exports = Vec::new();
        let mut mine = Vec::new();
        let mut kept = Vec::new();
        let mut own: Option<Error> = None;
        for r in self.t.local_ranks() {
            let want = bytes.get(r).copied().unwrap_or(0);
            let mut handle = String::new();
            if own.is_none() && self.names.bytes(r, id).is_none_or(|h| h < want) {
                let got = if self.faults.alloc_fails(r) {
                    Err(Error::OutOfMemory {
                        what: format!(
                            "rank {r}'s buffer of {want} bytes (an injected allocation failure)"
                        ),
                        memory: "host memory".into(),
                        need: want as u64,
                        available: 0,
                        is_free: true,
                        hint: "the fault plan makes this rank's allocations fail".into(),
                    })
                } else {
                    let name = unique_name(r, id);
                    self.t.alloc(r, &name, want).map(|a| (name, a))
                };
                match got {
                    Ok((name, (m, export))) => {
                        kept.push((r, self.mem.get(r, id).ok(), self.names.get(r, id)));
                        self.mem.insert(r, id, m, want);
                        self.names.insert(r, id, name, want);
                        if let Some((h, e)) = export {
                            handle = h;
                            exports.push(e);
                        }
                    }
                    Err(e @ (Error::OutOfMemory { .. } | Error::Io { .. })) => own = Some(e),
                    Err(e) => return Err(e),
                }
            }
            let (name, bytes) = match &own {
                Some(e) => (FAILED_RECORD.to_string(), e.to_string()),
                None => {
                    let (n, b) = self.names.get(r, id).unwrap_or_default();
                    (n, b.to_string())
                }
            };
            mine.push(Record {
                name,
                bytes: bytes.parse().unwrap_or(0),
                handle: if own.is_some() { bytes } else { handle },
            });
        }
        let records = all_records(&self.t, id, &mine)?;
        if let Some((q, why)) = records
            .iter()
            .enumerate()
            .find(|(_, rec)| rec.name == FAILED_RECORD)
            .map(|(q, rec)| (q, rec.handle.clone()))
        {
            // Every rank saw the same records: each puts its buffers back
            // as they were, and the call fails the same way everywhere.
            for (r, mem, name) in kept.into_iter().rev() {
                match (mem, name) {
                    (Some((w, len)), Some((n, b))) => {
                        self.mem.insert_words(r, id, w, len);
                        self.names.insert(r, id, n, b);
                    }
                    _ => {
                        self.mem.remove(r, id);
                        self.names.remove(r, id);
                    }
                }
            }
            drop(exports);
            return Err(match own {
                Some(e) if self.t.local_ranks().contains(&q) => e,
                _ => Error::PeerArgument {
                    rank: q,
                    reason: format!("it could not allocate its buffer {}: {why}", id.0),
                },
            });
        }
        for (r, rec) in to_open(&self.t, &self.names, id, records)? {
            if !self.t.reachable(r) {
                // Another node's rank: reached by messages, never mapped;
                // its name is kept so a later reserve in which it did not
                // grow (no handle) is not taken for one never opened.
                self.names.insert(r, id, rec.name, rec.bytes);
                continue;
            }
            let m = self.t.open(r, &rec.handle, rec.bytes)?;
            self.mem.insert(r, id, m, rec.bytes);
            self.names.insert(r, id, rec.name, rec.bytes);
        }
        self.t.barrier(&format!(
            "reserve of buffer {} (every rank mapped it)",
            id.0
        ))?;
        // Every peer opened them: the handles can go, the memory stays.
        drop(exports);
        Ok(())
    }

    /// `call`'s plan's facts, read on its first call.
    fn facts(&mut self, call: &Call) -> PlanFacts {
        let key = Arc::as_ptr(&call.plan) as usize;
        if self.plans.len() > 4096 {
            self.plans.clear();
        }
        let (t, crowded) = (&self.t, self.crowded);
        self.plans
            .entry(key)
            .or_insert_with(|| {
                let plan = &call.plan;
                let facts = PlanFacts {
                    net: t
                        .wire()
                        .map(|wire| mem::NetRun::new(wire, plan, t.local_ranks())),
                    split: !crowded || mem::splits(plan),
                };
                (plan.clone(), facts)
            })
            .1
            .clone()
    }

    /// Record the profile and the timeline of a finished call.
    fn finish(
        &mut self,
        call: &Call,
        t0: Instant,
        results: Vec<Result<Vec<OpTime>>>,
    ) -> Result<()> {
        let total = t0.elapsed().as_nanos() as u64;
        let phases = self.threads.last_phases();
        for r in self.t.local_ranks() {
            let p = &mut self.profile[r];
            p.calls += 1;
            p.total_ns += total;
            p.pool.add(&phases);
        }
        let mut errors = Vec::new();
        let mut ops = Vec::new();
        for r in results {
            match r {
                Ok(t) => ops.extend(t),
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => {
                // The local ranks' ops are done: they read no peer's input
                // any more.
                self.t.drained(self.gen);
                if call.timing {
                    self.timelines.push(CallTimeline {
                        plan: call.plan.name.clone(),
                        clock: self.t.clock(),
                        launch_ns: t0.duration_since(self.epoch).as_secs_f64() * 1e9,
                        skew_ns: 0.0,
                        ops,
                    });
                }
                Ok(())
            }
            _ => Err(Error::of_ranks(errors)),
        }
    }
}

/// A host access to rank `rank`'s buffer of `len` bytes that ends at byte
/// `end`: refused past the end.
fn within(rank: usize, len: usize, end: usize) -> Result<()> {
    if end > len {
        return Err(Error::BufferSize {
            rank,
            what: "buffer",
            expected: len,
            found: end,
        });
    }
    Ok(())
}

impl<T: Transport<Mem = Storage>> Backend for CpuBackend<T> {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// Collective: every process of the job calls it with the same `bytes`.
    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        self.t
            .barrier(&format!("reserve of buffer {} (every rank idle)", id.0))?;
        self.t.forget(id);
        self.grow(id, bytes).map_err(|e| match e.is_fatal() {
            true => self.failed(e),
            // Memory that could not be had, failed on every rank alike.
            false => e,
        })
    }

    /// Collective, like [`Backend::reserve`].
    fn release(&mut self, id: BufId) -> Result<()> {
        self.t
            .barrier(&format!("release of buffer {} (every rank idle)", id.0))?;
        for r in 0..self.info.ranks {
            self.mem.remove(r, id);
            self.names.remove(r, id);
        }
        self.t.forget(id);
        Ok(())
    }

    fn write(&mut self, writes: &[HostWrite<'_>]) -> Result<()> {
        for w in writes {
            super::check_local(w.rank, self.t.local_ranks(), "write into")?;
            let (buf, len) = self.mem.get(w.rank, w.id)?;
            self.t.before_write(w.id)?;
            within(w.rank, len, w.offset + w.data.len())?;
            let mut g = lock(&buf);
            self.mem
                .copy(&mut g.bytes()?[w.offset..w.offset + w.data.len()], w.data);
        }
        Ok(())
    }

    fn read(&mut self, reads: &mut [HostRead<'_>]) -> Result<()> {
        for r in reads.iter_mut() {
            super::check_local(r.rank, self.t.local_ranks(), "read")?;
            let (buf, len) = self.mem.get(r.rank, r.id)?;
            within(r.rank, len, r.offset + r.out.len())?;
            let mut g = lock(&buf);
            let n = r.out.len();
            self.mem.copy(r.out, &g.bytes()?[r.offset..r.offset + n]);
        }
        Ok(())
    }

    fn launch(&mut self, call: &Call) -> Result<()> {
        let t0 = Instant::now();
        check_call(call, self.info.ranks)?;
        if self.t.abort().is_aborted() {
            return Err(Error::Poisoned {
                reason: "the engine was aborted".into(),
            });
        }
        self.board = self.t.board(call.plan.signal_count(), &call.plan.name)?;
        self.gen += 1;
        let facts = self.facts(call);
        let run = Arc::new(Run {
            call: call.clone(),
            board: self.board.clone(),
            gen: self.gen,
            call_no: self.gen,
            faults: self.faults.clone(),
            epoch: self.epoch,
            net: facts.net,
            split: facts.split,
        });
        if let Err(e) = self.t.begin(call, self.gen) {
            return Err(self.failed(e));
        }
        if let Some(net) = &run.net {
            net.wire.expect_messages(net.incoming);
        }
        let cmds = (0..self.threads.len()).map(|_| Cmd::Run(run.clone()));
        let first = self.t.local_ranks().start;
        let results = self
            .threads
            .run_all_with(cmds.collect(), || run_rank(&self.mem, first, &run))?;
        self.finish(call, t0, results)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    fn abort_handle(&self) -> AbortHandle {
        self.t.abort().clone()
    }

    /// The host's memory, for the ranks this process runs.
    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        let (free, total) = crate::sys::proc::host_memory().unwrap_or((0, 0));
        let local = self.t.local_ranks();
        Ok((0..self.info.ranks)
            .map(|r| {
                local.contains(&r).then_some(DeviceMemory {
                    device: 0,
                    free,
                    total,
                })
            })
            .collect())
    }

    fn ping(&mut self) -> Result<()> {
        let cmds = (0..self.threads.len()).map(|_| Cmd::Ping);
        self.threads.run(cmds.collect()).map(|_| ())
    }

    fn local_ranks(&self) -> std::ops::Range<usize> {
        self.t.local_ranks()
    }

    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        Some(self)
    }

    /// Only where the transport can lend the caller's slices to every rank
    /// ([`Transport::lend`]); the engine copies otherwise.
    fn host_slices(&mut self) -> Option<&mut dyn super::HostSlices> {
        match self.t.lend() {
            Ok(()) => Some(self),
            Err(_) => None,
        }
    }

    fn ordered(&mut self) -> Result<&mut dyn super::ordered::StreamOrdered> {
        Ok(self)
    }
}

impl<T: Transport<Mem = Storage>> Profiling for CpuBackend<T> {
    /// The local ranks' profiles (zero for other processes' ranks).
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        Ok(std::mem::replace(
            &mut self.profile,
            vec![IssueProfile::default(); self.info.ranks],
        ))
    }

    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        Ok(std::mem::take(&mut self.timelines))
    }

    /// What the local ranks moved (their own copies and reduces).
    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        Ok(self.mem.take_traffic())
    }
}

/// The buffer ids a lent call binds on rank `r` (its `Send`, its `Recv`):
/// from the top of the id space, never an engine buffer's.
fn lent_ids(r: usize) -> (BufId, BufId) {
    let top = u32::MAX - 2 * u32::try_from(r).unwrap_or(u32::MAX / 2);
    (BufId(top), BufId(top - 1))
}

impl<T: Transport<Mem = Storage>> super::HostSlices for CpuBackend<T> {
    fn run_lent(
        &mut self,
        call: &Call,
        send: &[crate::sys::lend::Loan],
        recv: &[crate::sys::lend::Loan],
    ) -> Result<()> {
        self.t
            .lend()
            .map_err(|why| Error::Unsupported(why.into(), "cpu"))?;
        let n = self.info.ranks;
        if recv.len() != n || !(send.len() == n || call.plan.shape.in_place) {
            return Err(Error::internal(format!(
                "a lent call needs every rank's buffers: {} send and {} receive slices for {n} ranks",
                send.len(),
                recv.len()
            )));
        }
        let mut bind = Vec::with_capacity(n);
        for r in 0..n {
            let (s, d) = lent_ids(r);
            let entry = |l: &crate::sys::lend::Loan| {
                (Arc::new(Mutex::new(Storage::Lent(l.clone()))), l.len())
            };
            let (recv_words, recv_len) = entry(&recv[r]);
            self.mem.insert_words(r, d, recv_words, recv_len);
            if let Some(l) = send.get(r) {
                let (w, len) = entry(l);
                self.mem.insert_words(r, s, w, len);
            }
            let send_id = if send.get(r).is_some() { s } else { d };
            bind.push(super::Binding {
                send: send_id,
                recv: d,
            });
        }
        let lent = Call {
            bind: Arc::new(bind),
            ..call.clone()
        };
        let r = self.launch(&lent).and_then(|()| self.synchronize());
        // The rank maps forget the slices whatever happened (the loans end
        // when the caller's `lend` returns).
        for i in 0..n {
            let (s, d) = lent_ids(i);
            self.mem.remove(i, s);
            self.mem.remove(i, d);
        }
        r
    }
}

#[cfg(test)]
mod tests;
