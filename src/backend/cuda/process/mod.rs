//! The CUDA backend with one rank per process.
//!
//! The process owns one rank and one host thread bound to its GPU, running
//! the same [`Rank`] code as the single-process backend; only how the rank
//! reaches the others changes:
//!
//! * peer buffers and the exchange kernel's flags: CUDA IPC memory handles
//!   ([`Rank::export_buf`]), all-gathered through the job's control segment
//!   and opened in every peer ([`Rank::open_buf`], peer access enabled
//!   lazily); the opened [`PeerBuf`](crate::cuda::PeerBuf)s are what the
//!   issue path already takes;
//! * peer events: interprocess events (`CU_EVENT_INTERPROCESS |
//!   CU_EVENT_DISABLE_TIMING`), opened in every peer as
//!   [`RemoteEvent`]s;
//! * host ordering (a consumer issues `cuStreamWaitEvent` only after the
//!   producer issued its record): the job's shared [`SignalBoard`] (atomic
//!   counters in shared memory, the same cost as between threads).
//!
//! A reserve that grows a buffer is collective: every rank drains, the
//! ranks whose buffer is replaced say so, every peer closes its mapping of
//! those, then the owners free and allocate, export, and every peer opens
//! the new handles (an exported allocation must not be freed while another
//! process has it open).
//!
//! NCCL per process: rank 0's `ncclGetUniqueId` goes through the store and
//! every process calls `ncclCommInitRank` for its rank, as NCCL is deployed.

use super::front::{admit, device_memory, LaunchLog};
use super::ipc::Exported;
use super::rank::Rank;
use super::{
    erase, exchange_gave_up, serve_rank, unerase, Cmd, CudaOptions, HeldCalls, IssueCmd, Peers,
    Reply, Work,
};
use crate::backend::{
    Backend, BackendInfo, BackendKind, BufId, Call, DeviceMemory, GraphBackend, NcclBackend,
    NcclCall, Profiling, SetupBreakdown,
};
use crate::cuda::{self, HostMapped, IpcEventHandle, RemoteEvent};
use crate::error::{Error, Result};
use crate::fault::Fault;
use crate::pool::{Inbox, RankThreads};
use crate::process::reads::PeerReads;
use crate::process::Job as ProcessJob;
use crate::sync::{AbortHandle, SignalBoard};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

mod caps;

/// The CUDA backend of one rank of a multi-process job.
pub struct CudaProcessBackend {
    job: Arc<ProcessJob>,
    me: usize,
    device: usize,
    threads: RankThreads<Cmd, Reply>,
    held: HeldCalls<Call>,
    held_nccl: HeldCalls<NcclCall>,
    info: BackendInfo,
    board: Arc<SignalBoard>,
    events: usize,
    /// Every rank's event tokens (this rank's own, the peers' opened).
    remote: Vec<Vec<RemoteEvent>>,
    gen: u64,
    abort: AbortHandle,
    timeout: Duration,
    peers: Peers,
    /// Calls after whose issue this process kills itself (fault injection).
    kill_at: Vec<u64>,
    nccl_inits: u64,
    /// The timed calls' names and launch times, against this process's
    /// host clock zero.
    log: LaunchLog,
    /// Peers reading this rank's send buffers (see [`crate::process::reads`]).
    reads: PeerReads,
}

impl CudaProcessBackend {
    pub fn new(job: Arc<ProcessJob>, opts: &CudaOptions) -> Result<Self> {
        let (me, n) = (job.rank(), job.size());
        // `ringreduce launch --devices` gives each rank its GPU this way.
        let from_env: Option<Vec<usize>> = crate::param::DEVICES.get()?;
        let (info, devs) = super::setup::devices(opts.devices.as_ref().or(from_env.as_ref()))?;
        // One device given (the launcher's per-rank --devices): that one;
        // otherwise this process's rank on the machine picks: in blocks
        // when the job says how many processes share the machine (as one
        // process's rank threads are placed), else local_rank % GPUs.
        let spec = job.spec();
        let device = crate::backend::process_device(spec.local_rank, spec.local_size, &devs);
        let (timeout, faults) = (opts.timeout, opts.faults.clone());
        let kill_at = faults
            .0
            .iter()
            .filter(|f| f.rank == me && f.fault == Fault::Kill)
            .filter_map(|f| f.call)
            .collect();
        let mut threads =
            RankThreads::spawn(1, "cuda-proc", move |_, inbox: Inbox<Cmd, Reply>| {
                serve_rank(me, device, timeout, &faults, inbox);
            })?;
        threads.set_deadline(Some(timeout + crate::pool::GRACE));
        let abort = AbortHandle::new();
        job.control().watch_abort(abort.clone());
        // While this process waits for its rank thread, which may itself
        // wait on the GPU for work a dead peer will never release (or sit
        // in a driver call behind a full queue), look at the job: a dead or
        // failed peer raises this rank's abort word (the spinning kernels
        // return) and, unless the thread answers soon after, is the error.
        let control = Arc::downgrade(job.control());
        threads.set_watch(Some(Box::new(move || {
            control
                .upgrade()?
                .check(&|| format!("rank {me}'s GPU thread"))
                .err()
                .filter(|e| !matches!(e, Error::Aborted { .. }))
        })));
        let name = info
            .devices
            .get(device)
            .map_or_else(|| "?".to_string(), |d| d.name.clone());
        let mut be = CudaProcessBackend {
            board: Arc::new(job.signal_board(abort.clone(), timeout)),
            me,
            device,
            threads,
            held: HeldCalls::default(),
            held_nccl: HeldCalls::default(),
            info: BackendInfo {
                kind: Some(BackendKind::Cuda),
                ranks: n,
                rank_to_device: vec![device; n],
                describe: String::new(),
                hardware: vec![name.clone(), format!("CUDA driver API {}", info.version)],
                setup: None,
            },
            events: 0,
            remote: vec![Vec::new(); n],
            gen: 0,
            abort,
            timeout,
            peers: Peers::default(),
            kill_at,
            nccl_inits: 0,
            log: LaunchLog::new(),
            reads: PeerReads::default(),
            job,
        };
        be.connect(&name)?;
        let board = be.board.clone();
        be.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.board = Some(board);
            Ok(())
        }))?;
        Ok(be)
    }

    /// Run `f` on the rank thread.
    fn on<R: Send + 'static>(&mut self, f: Work<R>) -> Result<R> {
        let mut v = self.threads.run(vec![erase(f)])?;
        unerase::<R>(
            v.pop()
                .ok_or_else(|| Error::internal("no reply from the rank thread"))?,
        )
    }

    /// Record the failure for the whole job (the other ranks may be waiting
    /// for this one in a collective step) and return it.
    fn failed(&self, e: Error) -> Error {
        self.board.fail_with(self.gen, self.me, &e);
        e
    }

    /// Setup after the thread is up: every rank's device, the exchange
    /// flags through IPC, the abort hook, the setup breakdown.
    fn connect(&mut self, name: &str) -> Result<()> {
        let (flags, ctrl, setup): (Exported, Weak<HostMapped>, (f64, f64, &'static str)) = self
            .on(Box::new(|rk: &mut Rank<'_>| {
                Ok((rk.export_flags()?, Arc::downgrade(&rk.ctrl), rk.setup_ms))
            }))
            .map_err(|e| self.failed(e))?;
        self.abort.on_halt(move || {
            if let Some(c) = ctrl.upgrade() {
                c.store_u32(0, 1);
            }
        });
        let t_peer = Instant::now();
        let all = self
            .job
            .allgather(&flags.encode(), "exchanging the exchange kernels' flags")?;
        let all: Vec<Exported> = all
            .iter()
            .map(|b| Exported::decode(b))
            .collect::<Result<_>>()?;
        self.info.rank_to_device = all.iter().map(|x| x.device).collect();
        for x in &all {
            if x.device != self.device
                && !cuda::can_access_peer(self.device, x.device).unwrap_or(false)
            {
                return Err(self.failed(Error::CudaSetup {
                    call: "cuDeviceCanAccessPeer",
                    message: format!(
                        "GPU {} cannot access GPU {} directly; peer copies would go through host memory, which this engine refuses to do silently",
                        self.device, x.device
                    ),
                }));
            }
        }
        let me = self.me;
        let flags: Vec<_> = self
            .on(Box::new(move |rk: &mut Rank<'_>| {
                all.iter()
                    .enumerate()
                    .map(|(r, x)| {
                        if r == me {
                            Ok(rk.flags_token())
                        } else {
                            rk.open_buf(x)
                        }
                    })
                    .collect::<Result<Vec<_>>>()
            }))
            .map_err(|e| self.failed(e))?;
        self.peers.flags = flags;
        self.peers.bufs = vec![HashMap::new(); self.job.size()];
        self.share_peers()?;
        let b = SetupBreakdown {
            driver_ms: cuda::driver_init_ms(),
            context_ms: setup.0,
            kernels_ms: setup.1,
            peer_ms: t_peer.elapsed().as_secs_f64() * 1e3,
        };
        self.info.hardware.push(format!(
            "setup: driver load+cuInit {:.1} ms, context bind {:.1} ms, kernel modules {:.1} ms from {}, IPC exchange of the flags {:.1} ms",
            b.driver_ms, b.context_ms, b.kernels_ms, setup.2, b.peer_ms
        ));
        self.info.setup = Some(b);
        let map = &self.info.rank_to_device;
        self.info.describe = format!(
            "cuda: rank {me} of {} processes ({}) on GPU{} {name}; ranks on GPUs {}; peers through CUDA IPC",
            self.job.size(),
            self.job.spec().origin.name(),
            self.device,
            map.iter()
                .enumerate()
                .map(|(r, g)| format!("{r}->GPU{g}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        Ok(())
    }

    fn share_peers(&mut self) -> Result<()> {
        let p = Arc::new(self.peers.clone());
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.peers = p;
            Ok(())
        }))
    }

    /// Wait (bounded) until this rank's streams are idle. An exchange
    /// kernel that gave up poisons the job (its peer in another process may
    /// still run; the call numbering cannot be restarted in step).
    fn drain(&mut self) -> Result<()> {
        // Wait in short tries, looking at the job's health between them: a
        // stream waiting on a dead peer's event would otherwise hold this
        // rank for the whole timeout.
        let start = Instant::now();
        let limit = self.timeout + Duration::from_secs(5);
        loop {
            let idle = self.on(Box::new(|rk: &mut Rank<'_>| {
                rk.idle_within(Duration::from_millis(20))
            }))?;
            if idle || start.elapsed() > limit {
                break;
            }
            if let Some(f) = self.job.health() {
                // Whatever spins on this GPU waiting for the failed peer
                // (an exchange kernel on its flags) stops now, not at its
                // deadline.
                self.abort.halt_device();
                return Err(self.failed(f.error(self.me, "this rank's GPU work")));
            }
        }
        let r = self.on(Box::new(|rk: &mut Rank<'_>| rk.sync()));
        if r.is_ok() {
            // Every call so far is complete on this GPU: it reads no peer's
            // input any more.
            self.job.control().publish_drained(self.gen);
        }
        if let Err(e) = &r {
            if exchange_gave_up(e) {
                return Err(self.failed(Error::Poisoned {
                    reason: format!("an exchange kernel gave up waiting for its peer process: {e}"),
                }));
            }
        }
        r
    }

    /// Grow this rank's interprocess events to cover `n` signals, and open
    /// every peer's new ones (collective: every rank launches the same
    /// plans, so every rank grows at the same call).
    fn ensure_events(&mut self, n: usize) -> Result<()> {
        let Some(want) = super::peers::events_to_grow(n, self.events, Some(self.board.len()))?
        else {
            return Ok(());
        };
        let from = self.events;
        let mine: Vec<IpcEventHandle> = self
            .on(Box::new(move |rk: &mut Rank<'_>| {
                rk.grow_ipc_events(want, from)
            }))
            .map_err(|e| self.failed(e))?;
        let bytes = super::peers::encode_events(&mine);
        let all = self
            .job
            .allgather(&bytes, "exchanging interprocess events")?;
        let me = self.me;
        let opened: Vec<Vec<RemoteEvent>> = self
            .on(Box::new(move |rk: &mut Rank<'_>| {
                all.iter()
                    .enumerate()
                    .map(|(r, b)| {
                        if r == me {
                            return Ok(rk.own_events(from));
                        }
                        rk.open_events(&super::peers::decode_events(b))
                    })
                    .collect::<Result<Vec<_>>>()
            }))
            .map_err(|e| self.failed(e))?;
        for (r, v) in opened.into_iter().enumerate() {
            self.remote[r].extend(v);
        }
        let remote = Arc::new(self.remote.clone());
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.remote = remote;
            Ok(())
        }))?;
        self.events = want;
        Ok(())
    }

    /// Drop every rank's tokens of `id` whose owner says `replaced[r]`
    /// (closing this process's mappings of them).
    fn close_peers(&mut self, id: BufId, replaced: &[bool]) -> Result<()> {
        for r in super::peers::to_reopen(self.peers.bufs.len(), replaced, |_| true) {
            self.peers.bufs[r].remove(&id);
        }
        self.share_peers()
    }

    fn reserve_inner(&mut self, id: BufId, want: usize) -> Result<()> {
        let me = self.me;
        let have: Option<usize> = self.on(Box::new(move |rk: &mut Rank<'_>| {
            Ok(rk.bufs.get(&id).map(|b| b.len()))
        }))?;
        let grows = have.is_none_or(|h| h < want);
        let flags = self.job.allgather(
            &[u8::from(grows)],
            &format!("reserve of buffer {} (every rank idle)", id.0),
        )?;
        let replaced: Vec<bool> = flags.iter().map(|b| b.first() == Some(&1)).collect();
        self.close_peers(id, &replaced)?;
        self.job.barrier(&format!(
            "reserve of buffer {} (every peer closed its old mapping)",
            id.0
        ))?;
        let x: Exported = self
            .on(Box::new(move |rk: &mut Rank<'_>| {
                let own = rk.reserve(id, want)?;
                drop(own);
                rk.export_buf(id)
            }))
            .map_err(|e| self.failed(e))?;
        let all = self.job.allgather(
            &x.encode(),
            &format!("reserve of buffer {} (exchanging handles)", id.0),
        )?;
        let all: Vec<Exported> = all
            .iter()
            .map(|b| Exported::decode(b))
            .collect::<Result<_>>()?;
        let reopen = super::peers::to_reopen(all.len(), &replaced, |r| {
            self.peers.bufs.get(r).is_some_and(|m| m.contains_key(&id))
        });
        let todo: Vec<(usize, Exported)> = all
            .into_iter()
            .enumerate()
            .filter(|(r, _)| reopen.contains(r))
            .collect();
        let opened: Vec<(usize, crate::cuda::PeerBuf)> = self
            .on(Box::new(move |rk: &mut Rank<'_>| {
                todo.iter()
                    .map(|(r, x)| {
                        let t = if *r == me {
                            rk.own_token(id)?
                        } else {
                            rk.open_buf(x)?
                        };
                        Ok((*r, t))
                    })
                    .collect::<Result<Vec<_>>>()
            }))
            .map_err(|e| self.failed(e))?;
        for (r, t) in opened {
            self.peers.bufs[r].insert(id, t);
        }
        self.share_peers()
    }
}

impl Drop for CudaProcessBackend {
    fn drop(&mut self) {
        // Drain this rank; then, unless the job already failed, wait until
        // every rank is idle and close the peers' mappings before this
        // process's memory goes (an exported allocation must not be freed
        // while another process has it open).
        let drained = self.drain().is_ok() || {
            self.abort.abort();
            self.drain().is_ok()
        };
        if !drained {
            let _ = self.on(Box::new(|rk: &mut Rank<'_>| {
                rk.leak();
                Ok(())
            }));
            if self.threads.broken().is_some() {
                // The rank thread is stuck in a driver call and keeps its
                // context: nothing of the driver's may be released from
                // this thread (it would wait on the driver's lock behind
                // the stuck one). Leak this side's handles too.
                std::mem::forget(std::mem::take(&mut self.peers));
                std::mem::forget(std::mem::take(&mut self.remote));
                std::mem::forget(std::mem::take(&mut self.held));
                std::mem::forget(std::mem::take(&mut self.held_nccl));
            }
            return;
        }
        if self.job.health().is_none() && self.job.barrier("teardown (every rank idle)").is_ok() {
            self.peers = Peers::default();
            self.remote = Vec::new();
            let _ = self.share_peers();
            let _ = self.on(Box::new(|rk: &mut Rank<'_>| {
                rk.remote = Arc::new(Vec::new());
                Ok(())
            }));
            let _ = self
                .job
                .barrier("teardown (every peer closed its mappings)");
        }
    }
}

impl Backend for CudaProcessBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// Collective: every rank of the job calls it with the same `bytes`.
    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        self.drain()?;
        self.reads.forget(id);
        let want = bytes.get(self.me).copied().unwrap_or(0);
        self.reserve_inner(id, want).map_err(|e| self.failed(e))
    }

    /// Collective, like [`Backend::reserve`].
    fn release(&mut self, id: BufId) -> Result<()> {
        self.drain()?;
        self.job
            .barrier(&format!("release of buffer {} (every rank idle)", id.0))?;
        let n = self.job.size();
        self.close_peers(id, &vec![true; n])?;
        self.reads.forget(id);
        self.job.barrier(&format!(
            "release of buffer {} (every peer closed its mapping)",
            id.0
        ))?;
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.release(id);
            Ok(())
        }))
    }

    fn write(&mut self, rank: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()> {
        crate::backend::check_local(rank, self.local_ranks(), "write into")?;
        // This rank's previous calls are done once its streams are idle
        // (the plans order every peer access to its memory before its End,
        // except peer reads of a send buffer, waited for here).
        self.drain()?;
        self.reads.before_write(id, self.job.control())?;
        let data = data.to_vec();
        // Peers in other processes read this rank's send buffer as soon as
        // it says it began its next call: the bytes must have landed.
        self.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.write_landed(id, offset, &data)
        }))
    }

    fn read(&mut self, rank: usize, id: BufId, offset: usize, out: &mut [u8]) -> Result<()> {
        crate::backend::check_local(rank, self.local_ranks(), "read")?;
        self.drain()?;
        let len = out.len();
        let data: Vec<u8> = self.on(Box::new(move |rk: &mut Rank<'_>| rk.read(id, offset, len)))?;
        out.copy_from_slice(&data);
        Ok(())
    }

    fn launch(&mut self, call: &Call) -> Result<()> {
        admit(call, self.info.ranks, &self.abort)?;
        self.ensure_events(call.plan.signal_count())?;
        self.gen += 1;
        if let Err(e) = self
            .reads
            .begin(call, self.me, self.gen, self.job.control())
        {
            return Err(self.failed(e));
        }
        let gen = self.gen;
        self.log.collective(call);
        let (key, sent) = self.held.key(call);
        let r = self
            .threads
            .run(vec![Cmd::Issue(IssueCmd {
                key,
                call: sent,
                gen,
                call_no: gen,
            })])
            .map(|_| ());
        if self.kill_at.contains(&gen) {
            // Issued, not complete: the peers are inside the call.
            crate::sys::proc::kill_self();
        }
        r
    }

    fn synchronize(&mut self) -> Result<()> {
        self.drain()
    }

    fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        let mine = device_memory(self.device)?;
        // Only this rank's device is known (and checked) here.
        Ok((0..self.info.ranks)
            .map(|r| (r == self.me).then_some(mine))
            .collect())
    }

    fn ping(&mut self) -> Result<()> {
        self.on(Box::new(|_: &mut Rank<'_>| Ok(())))
    }

    fn local_ranks(&self) -> std::ops::Range<usize> {
        self.me..self.me + 1
    }

    fn nccl(&mut self) -> Option<&mut dyn NcclBackend> {
        Some(self)
    }

    fn graphs(&mut self) -> Option<&mut dyn GraphBackend> {
        Some(self)
    }

    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        Some(self)
    }

    /// Refused, with the reason
    /// (`backend::ordered::refused_with_one_rank_per_process`).
    fn ordered(&mut self) -> Result<&mut dyn crate::backend::ordered::StreamOrdered> {
        Err(crate::backend::ordered::refused_with_one_rank_per_process(
            "cuda",
        ))
    }
}
