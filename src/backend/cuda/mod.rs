//! CUDA backend: one host thread per rank this process runs, each bound
//! once to its GPU. Public here is only [`probe`] (with the `cuda`
//! feature); the engine makes the backend ([`crate::BackendChoice`]).
//!
//! One backend type, `CudaBackend`: its front end (`Front`: the rank
//! threads this process runs and what they share) beside the peer exchange
//! it holds (a `Box<dyn PeerExchange>`, the private `exchange` module): how
//! a rank reaches its peers' buffers, flags and events, the host board, and
//! the peers' health. Two exchanges: `InProcess` (every rank a thread of
//! this process: device pointers and event tokens handed between threads)
//! and `Ipc` (one rank per process: CUDA IPC handles all-gathered through
//! the job). The capabilities (this file, `front.rs`, `capabilities.rs`,
//! `work.rs`) are written once, for either; what an exchange cannot do it
//! refuses with the reason (stream-ordered calls and joint graphs between
//! processes).
//!
//! Per rank (`rank`): two streams (the plan's compute and copy lanes),
//! buffers, one event per plan signal, the kernels of each data type (a
//! prebuilt cubin on sm_90, else the PTX JIT), and the exchange kernel's
//! flags and control block. Ranks map onto devices by
//! [`crate::backend::placement`] (more ranks than GPUs go in contiguous
//! blocks), so more ranks than GPUs is fine: a same-device "peer" copy is an
//! ordinary device-to-device copy.
//!
//! A collective fans out to every rank thread as an `IssueCmd` (the hot
//! path: the rank keeps each call it was sent, so a repeated call sends only
//! its key and touches no allocation or shared reference count); any other
//! work goes as a typed closure. Each thread *issues* its ops (no host
//! synchronize between steps) and returns.
//! Cross-rank order on the GPU comes from the plan's signals: events for
//! [`SignalKind::Event`](crate::plan::SignalKind) (the producer records on
//! its stream, the consumer's stream waits; on the host the consumer issues
//! the wait only after the producer issued the record, through a
//! `SignalBoard`), flags inside the exchange kernel for
//! [`SignalKind::Flag`](crate::plan::SignalKind).
//!
//! Lifecycle: memory is freed only after every rank drained its streams
//! (reserve, release, drop); a drop whose drain fails even after an abort
//! leaks the memory rather than free it under a running kernel. Waits are
//! bounded by the engine's timeout on the host and (through the control
//! block) in the exchange kernel. Nothing in this file is `unsafe`: that
//! all lives in [`crate::cuda`].

mod calls;
mod capabilities;
pub(crate) mod exchange;
mod front;
mod ipc;
#[cfg(feature = "nccl")]
mod nccl;
mod net;
mod peers;
mod rank;
mod work;

use exchange::PeerExchange;

#[cfg(feature = "nccl")]
use super::NcclCall;
use super::{
    check_call, BackendInfo, BufId, Call, CallTimeline, GraphBackend, IssueProfile, Profiling,
};
use crate::cuda::{self, CudaError, DriverInfo, PeerBuf, RemoteEvent};
use crate::error::{Error, Result, WaitKind};
use crate::fault::FaultPlan;
use crate::pool::{Inbox, RankThreads};
use crate::sync::{AbortHandle, SignalBoard};
use calls::{both, erase, gather, unerase, HeldCalls};
use rank::Rank;
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options for the CUDA backend.
#[derive(Debug, Clone)]
pub(crate) struct CudaOptions {
    pub ranks: usize,
    /// Devices to use (default: all).
    pub devices: Option<Vec<usize>>,
    pub timeout: Duration,
    pub faults: FaultPlan,
}

/// Is there a usable driver with at least one GPU? The error says why not.
pub fn probe() -> std::result::Result<&'static DriverInfo, String> {
    let info = cuda::driver().map_err(|e| e.to_string())?;
    if info.devices.is_empty() {
        return Err("the CUDA driver reports no GPU".into());
    }
    Ok(info)
}

pub(crate) fn cuda_err(rank: usize, device: usize) -> impl Fn(CudaError) -> Error {
    move |e| e.at(rank, device)
}

/// Every rank's exported buffers and exchange flags.
#[derive(Debug, Default, Clone)]
pub(crate) struct Peers {
    pub bufs: Vec<HashMap<BufId, PeerBuf>>,
    pub flags: Vec<PeerBuf>,
    /// Each rank's hand-over event (joint graphs).
    pub handoff: Vec<RemoteEvent>,
}

/// A closure a rank thread runs, with its typed result.
type RankFn<R> = Box<dyn for<'id> FnOnce(&mut Rank<'id>) -> Result<R> + Send>;
type Reply = Box<dyn Any + Send>;

/// The body of a rank's host thread (either exchange): bind `device`,
/// build the rank, say ready (or why not), serve jobs until shut down, then
/// drain and drop what refers to other ranks' memory.
fn serve_rank(
    rank: usize,
    device: usize,
    timeout: Duration,
    faults: &FaultPlan,
    inbox: Inbox<Cmd, Reply>,
) {
    let slot = std::cell::Cell::new(Some(inbox));
    let t0 = Instant::now();
    let r = cuda::with_device(device, |ctx| {
        let bind_ms = t0.elapsed().as_secs_f64() * 1e3;
        let Some(inbox) = slot.take() else { return };
        match Rank::new(rank, device, ctx, bind_ms, timeout, faults.clone()) {
            Err(e) => inbox.ready(Err(e)),
            Ok(mut st) => {
                inbox.ready(Ok(()));
                inbox.serve(|cmd: Cmd| match cmd {
                    Cmd::Issue(c) => st.issue_held(c).map(|()| Box::new(()) as Reply),
                    #[cfg(feature = "nccl")]
                    Cmd::Nccl(c) => st.nccl_held(c).map(|()| Box::new(()) as Reply),
                    Cmd::Run(job) => job(&mut st),
                });
                // The backend drained every rank before shutting the
                // threads down; drain this one again before its memory goes.
                // A rank the backend leaked (its GPU did not drain: it
                // waits on a peer that died) frees nothing: pinned host
                // memory, device memory and the context are each released
                // with a synchronization that would wait for that GPU
                // forever; the process's end reclaims them.
                let idle = !st.leaked && st.sync().is_ok();
                if idle {
                    st.teardown();
                } else {
                    cuda::keep_context_retained();
                    std::mem::forget(st);
                }
            }
        }
    });
    if let (Err(e), Some(inbox)) = (r, slot.take()) {
        inbox.ready(Err(cuda_err(rank, device)(e)));
    }
}
type ErasedFn = Box<dyn for<'id> FnOnce(&mut Rank<'id>) -> Result<Reply> + Send>;

/// What a rank thread is sent.
enum Cmd {
    /// Issue one collective call.
    Issue(IssueCmd),
    /// One NCCL call on the same buffers.
    #[cfg(feature = "nccl")]
    Nccl(NcclCmd),
    /// Any other work, typed.
    Run(ErasedFn),
}

/// What a call posted without waiting was (its pool phases are counted
/// apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deferred {
    Collective,
    #[cfg(feature = "nccl")]
    Nccl,
}

/// One collective call for a rank: the call itself the first time (the rank
/// keeps it under `key`), later only the key.
struct IssueCmd {
    pub key: usize,
    pub call: Option<Arc<Call>>,
    pub gen: u64,
    pub call_no: u64,
}

/// One NCCL call for a rank, kept like [`IssueCmd`]'s; `timed` brackets it
/// with timing events.
#[cfg(feature = "nccl")]
struct NcclCmd {
    pub key: usize,
    pub call: Option<Arc<NcclCall>>,
    pub timed: bool,
}

/// The CUDA backend: its [`Front`] (the rank threads this process runs and
/// what they share) beside its peer exchange, how a rank reaches its peers
/// ([`exchange`]: rank threads of one process, or one rank per process
/// over CUDA IPC). Every capability is written once, on this type.
pub(crate) struct CudaBackend {
    front: Front,
    /// How the ranks reach each other, and its own state. Last: it is
    /// dropped after the rank threads.
    link: Box<dyn PeerExchange>,
}

/// The rank threads this process runs and what they share: the calls they
/// keep, the host board, the peers' tokens, the launch log. What the
/// exchange does with the ranks it does through this.
pub(crate) struct Front {
    threads: RankThreads<Cmd, Reply>,
    info: BackendInfo,
    /// The ranks this process runs (its rank threads, in order).
    local: std::ops::Range<usize>,
    board: Arc<SignalBoard>,
    events: usize,
    gen: u64,
    calls: u64,
    abort: AbortHandle,
    timeout: Duration,
    peers: Peers,
    /// The timed calls' names and launch times, against the host clock's
    /// zero for timelines.
    log: front::LaunchLog,
    /// Nanoseconds the calling thread spent in `launch` since the last
    /// profile take.
    caller_ns: u64,
    /// The pool's phases of the launches since the last profile take.
    launch_phases: crate::pool::PoolPhases,
    /// The same for the NCCL launches.
    nccl_phases: crate::pool::PoolPhases,
    held: HeldCalls<Call>,
    #[cfg(feature = "nccl")]
    held_nccl: HeldCalls<NcclCall>,
    /// Whether the captured graph is a joint one (on rank 0).
    joint: bool,
    /// The kind of the call posted and not yet settled, if any.
    pending: Option<Deferred>,
    /// Orders the hand-overs of joint captures and replays (signal 0: rank
    /// 0; signal 1 + r: rank r).
    joint_board: Arc<SignalBoard>,
    joint_gen: u64,
    /// Whether calls are posted to the rank threads without waiting for
    /// them to be issued (their outcome comes with the next command), and
    /// the caller's time and the pool's phases are profiled: rank threads
    /// of one process.
    deferred: bool,
    /// One rank per process: this rank, whose failures are recorded on the
    /// job's board, where peers waiting for it see them.
    reports_as: Option<usize>,
    /// Whether every local rank is known to be drained: set by a drain that
    /// succeeded, cleared by anything handed to the rank threads since
    /// (except host copies, which complete what they issue). A drain of
    /// drained ranks is skipped.
    idle: bool,
}

impl CudaBackend {
    /// The backend of `front` and its exchange `link`. A constructor that
    /// failed half-way (`connected`) still hands its parts here, so that
    /// dropping them tears them down as any backend's.
    fn join(front: Front, link: Box<dyn PeerExchange>, connected: Result<()>) -> Result<Self> {
        let be = CudaBackend { front, link };
        connected.map(|()| be)
    }

    /// Drain the local ranks (bounded), as the exchange does it; nothing
    /// to do when nothing was handed to them since the last drain.
    fn drain(&mut self) -> Result<()> {
        if self.front.idle {
            return Ok(());
        }
        self.link.drain(&mut self.front)?;
        self.front.idle = true;
        Ok(())
    }

    /// Cover `n` signals with events on every rank, as the exchange does it.
    fn ensure_events(&mut self, n: usize) -> Result<()> {
        self.link.ensure_events(&mut self.front, n)
    }
}

impl Front {
    /// The front end over rank threads `threads` (one per rank of `local`),
    /// with the host board `board`; no call made yet. `process_rank`: the
    /// one rank of this process when the job's ranks are processes (calls
    /// are then issued before `launch` returns, and failures recorded on
    /// the job's board); `None` for rank threads of one process (calls
    /// posted without waiting). Each exchange's constructor connects it.
    fn assemble(
        threads: RankThreads<Cmd, Reply>,
        info: BackendInfo,
        local: std::ops::Range<usize>,
        board: Arc<SignalBoard>,
        abort: AbortHandle,
        timeout: Duration,
        process_rank: Option<usize>,
    ) -> Self {
        let joint_board = Arc::new(SignalBoard::new(
            2 * local.len() + 2,
            abort.clone(),
            timeout,
        ));
        Front {
            threads,
            info,
            local,
            board,
            joint_board,
            events: 0,
            gen: 0,
            calls: 0,
            abort,
            timeout,
            peers: Peers::default(),
            log: front::LaunchLog::new(),
            joint: false,
            pending: None,
            joint_gen: 0,
            caller_ns: 0,
            launch_phases: Default::default(),
            nccl_phases: Default::default(),
            held: HeldCalls::default(),
            #[cfg(feature = "nccl")]
            held_nccl: HeldCalls::default(),
            deferred: process_rank.is_none(),
            reports_as: process_rank,
            idle: false,
        }
    }

    /// Post a collective or NCCL call to every rank thread without waiting
    /// for it to be issued: the rank threads issue it while the caller
    /// returns (and posts the next call, which waits in each rank's mailbox).
    /// What comes back is the outcome of the call posted before, so a rank's
    /// failure to issue a call is reported by the next launch, or by
    /// whatever the engine does next (see [`Front::settle`]).
    fn post_deferred(&mut self, cmds: Vec<Cmd>, kind: Deferred) -> Result<()> {
        let before = self.threads.run_deferred(cmds);
        let earlier = self.pending.replace(kind);
        match before? {
            Some(replies) => self.account_deferred(earlier, replies),
            None => Ok(()),
        }
    }

    /// Hand a collective or NCCL call to the rank threads: deferred
    /// ([`Front::post_deferred`]) for rank threads of one process, else
    /// issued before this returns.
    fn post(&mut self, cmds: Vec<Cmd>, kind: Deferred) -> Result<()> {
        self.idle = false;
        if self.deferred {
            self.post_deferred(cmds, kind)
        } else {
            self.threads.run(cmds).map(|_| ())
        }
    }

    /// The outcome of the call [`Front::post_deferred`] left pending,
    /// if any: every rank has issued it (or failed) when this returns.
    fn settle(&mut self) -> Result<()> {
        // Taken first, like the pool's own record: the two stay in step even
        // when collecting fails.
        let kind = self.pending.take();
        let replies = self.threads.settle()?;
        match replies {
            Some(r) => self.account_deferred(kind, r),
            None => Ok(()),
        }
    }

    /// Count a collected deferred call's pool phases where they belong and
    /// gather its replies.
    fn account_deferred(
        &mut self,
        kind: Option<Deferred>,
        replies: Vec<Result<Reply>>,
    ) -> Result<()> {
        let phases = self.threads.last_phases();
        match kind {
            #[cfg(feature = "nccl")]
            Some(Deferred::Nccl) => self.nccl_phases.add(&phases),
            _ => self.launch_phases.add(&phases),
        }
        gather::<()>(replies).map(|_| ())
    }

    /// Run `f(i)` on every rank thread (`i`: its index among the local
    /// ranks); the first error. A pending call is settled first; its error
    /// comes first, after `f` has run.
    fn each<R: Send + 'static>(&mut self, f: impl Fn(usize) -> RankFn<R>) -> Result<Vec<R>> {
        self.idle = false;
        let before = self.settle();
        let jobs = (0..self.local.len()).map(|r| erase(f(r))).collect();
        let r = self.threads.run(jobs);
        before?;
        r?.into_iter().map(unerase::<R>).collect()
    }

    /// Run `f(i)` on every rank thread; every rank's outcome, errors of
    /// several ranks together. A pending call is settled first; its error
    /// comes first, after `f` has run, and `f`'s errors are kept beside it
    /// (a drain's report that an exchange kernel gave up must not be lost
    /// behind the failed call's own error: the flags would stay out of
    /// step).
    fn each_all<R: Send + 'static>(&mut self, f: impl Fn(usize) -> RankFn<R>) -> Result<Vec<R>> {
        self.idle = false;
        let before = self.settle();
        let jobs = (0..self.local.len()).map(|r| erase(f(r))).collect();
        let r = self.threads.run_all(jobs).and_then(gather);
        match (before, r) {
            (Ok(()), r) => r,
            (Err(b), Ok(_)) => Err(b),
            (Err(b), Err(e)) => Err(both(b, e)),
        }
    }

    /// [`Front::each`] for a round of host copies, each of which completes
    /// on its rank's GPU before it returns: drained ranks stay drained.
    fn each_idle<R: Send + 'static>(&mut self, f: impl Fn(usize) -> RankFn<R>) -> Result<Vec<R>> {
        let idle = self.idle;
        let r = self.each(f);
        self.idle = idle && r.is_ok();
        r
    }

    /// Run `f` on the one rank thread of a process that runs one rank.
    fn on<R: Send + 'static>(&mut self, f: RankFn<R>) -> Result<R> {
        self.idle = false;
        let mut v = self.threads.run(vec![erase(f)])?;
        unerase::<R>(
            v.pop()
                .ok_or_else(|| Error::internal("no reply from the rank thread"))?,
        )
    }

    /// Send every rank the current tokens of every rank's buffers.
    fn share_peers(&mut self) -> Result<()> {
        let p = Arc::new(self.peers.clone());
        self.each(|_| {
            let p = p.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                rk.peers = p;
                Ok(())
            })
        })?;
        Ok(())
    }

    /// Give every rank thread the current signal board.
    fn share_board(&mut self) -> Result<()> {
        let board = self.board.clone();
        self.each(|_| {
            let b = board.clone();
            Box::new(move |rk: &mut Rank<'_>| {
                rk.board = Some(b);
                Ok(())
            })
        })
        .map(|_| ())
    }

    /// Drop every rank's graphs (a joint graph on rank 0 holds every rank's
    /// addresses).
    fn drop_graphs(&mut self) -> Result<()> {
        self.joint = false;
        self.each(|_| {
            Box::new(|rk: &mut Rank<'_>| {
                rk.drop_graphs();
                Ok(())
            })
        })
        .map(|_| ())
    }

    /// `e`, recorded where peers waiting for this rank see it (the job's
    /// board, when the ranks are processes).
    fn failed(&self, e: Error) -> Error {
        if let Some(me) = self.reports_as {
            self.board.fail_with(self.gen, me, &e);
        }
        e
    }
}

/// Whether an error says an exchange kernel gave up waiting (its status):
/// by the kind of the wait, never by the text.
fn exchange_gave_up(e: &Error) -> bool {
    match e {
        Error::Timeout { wait, .. } | Error::Aborted { wait, .. } => {
            *wait == WaitKind::ExchangeKernel
        }
        Error::Ranks(v) => v.iter().any(exchange_gave_up),
        _ => false,
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Drain every GPU before freeing; a leaked rank frees nothing (see
        // each exchange's teardown).
        self.link.teardown(&mut self.front);
    }
}

#[cfg(test)]
mod tests;
