//! What one CUDA rank thread owns and does: its context, two streams (the
//! plan's lanes), its buffers, events, kernels, the exchange kernel's flags
//! and control block, and its NCCL communicator. Everything here is branded
//! with the device's `'id` and never leaves the thread.

use super::{cuda_err, Peers};
#[cfg(feature = "nccl")]
use crate::backend::NcclCall;
use crate::backend::{op_desc, signal_desc, BufId, Call, IssueProfile, OpTime};
use crate::cuda::kernels::{self, Exchange as XLaunch, Operand, Reduce as RLaunch};
#[cfg(feature = "nccl")]
use crate::cuda::nccl;
use crate::cuda::{
    Ctx, CudaError, DevBuf, Event, Graph, HostMapped, Kernel, PeerBuf, PeerCopy, RemoteEvent,
    Stream, TimingEvent, EXCHANGE_MAX_BLOCKS,
};
use crate::element::{DataType, DevOp};
use crate::error::{Error, Result, WaitKind};
use crate::fault::FaultPlan;
use crate::plan::{Plan, Traffic};
use crate::sync::SignalBoard;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) mod activity;
mod graphs;
mod hooks;
mod issue;
mod lower;
#[cfg(feature = "nccl")]
mod nccl_calls;
mod network;
mod timing;

/// Control block words (32-bit): abort, status; 64-bit word 1: timeout;
/// 32-bit words 4 on: per block of an LL ring kernel that gave up, the step
/// it waited in plus one (0: none).
const ABORT: usize = 0;
const STATUS: usize = 1;
const TIMEOUT_WORD: usize = 1;
const LL_STEPS: usize = 4;
/// Bytes of the control block.
const CTRL_BYTES: usize = 4 * (LL_STEPS + kernels::LL_MAX_BLOCKS);

/// Byte offset of the LL kernel's call counts in `calls` (after the
/// exchange's).
pub(super) const LL_CALLS: usize = 8 * EXCHANGE_MAX_BLOCKS;

/// Byte offset of the Simple ring kernel's tile flags in `flags` (after
/// the exchange's).
pub(super) const SIMPLE_FLAGS: usize = 8 * EXCHANGE_MAX_BLOCKS;

/// Clock anchors per take (the tightest bracket is kept).
const ANCHOR_TRIES: usize = 10;

/// A timed op: (op index, parts, start, end). The start is the latest of
/// the events `starts[start.0..start.1]`, the end one event; all are indices
/// into the call's [`TimedCall::events`].
type Span = (usize, usize, (usize, usize), usize);

/// The timing events of one timed call: `events[0]` is the base, recorded
/// first on lane 0; every span points into `events` through `starts`.
pub(super) struct TimedCall<'id> {
    events: Vec<TimingEvent<'id>>,
    starts: Vec<usize>,
    spans: Vec<Span>,
}

/// One timed call, by its source: timing events between the ops, or the
/// external correlation ids its ops were tagged with for CUPTI.
enum Timed<'id> {
    Events(TimedCall<'id>, activity::TimingSource),
    #[cfg(feature = "profiling")]
    Cupti(
        activity::CuptiCall,
        &'static crate::cuda::cupti::Cupti,
        Instant,
    ),
}

/// A data type's kernels for one op.
struct Kernels<'id> {
    reduce: Kernel<'id>,
    exchange: Kernel<'id>,
    ring_ll: Kernel<'id>,
    ring_simple: Kernel<'id>,
}

/// What a rank's instrumentation layers recorded since the last take
/// (`rank/hooks/` and `rank/nccl_calls.rs` record, `rank/timing.rs`
/// takes).
#[derive(Default)]
struct Instruments<'id> {
    /// The timed calls' timing events or CUPTI ids, each with the step
    /// times its LL kernels wrote.
    timing: Vec<(Timed<'id>, Vec<timing::StepTimes>)>,
    /// Step-time buffers already read, for reuse.
    spare_stamps: Vec<HostMapped>,
    /// Timing events already created and read, for reuse: creating an event
    /// per op and call was most of the timeline's measurement overhead.
    spare_events: Vec<TimingEvent<'id>>,
    /// The timed NCCL calls, each one op: CUPTI's records of its kernels
    /// and copies, or an event pair around it.
    #[cfg(feature = "nccl")]
    nccl_timing: Vec<Timed<'id>>,
    /// Bytes moved between ranks by what this rank issued, per rank (sent,
    /// received).
    traffic: Vec<Traffic>,
    /// CUPTI's ids of the lane streams (the order tie; looked up once).
    #[cfg(feature = "profiling")]
    cupti_lanes: Option<[u32; 2]>,
    /// The order tie: each lane's issued count up to which the pending
    /// CUPTI-timed calls filed its calls.
    #[cfg(feature = "profiling")]
    cupti_mark: [u64; 2],
    /// Whether this rank holds CUPTI's collection on while timing is on
    /// (`Rank::prepare_timing`).
    #[cfg(feature = "profiling")]
    held: bool,
    /// A few bytes set on each lane to prime CUPTI's collection.
    #[cfg(feature = "profiling")]
    primer: Option<DevBuf<'id>>,
}

/// A rank's CUDA graphs and the capture in progress (`rank/graphs.rs`).
/// (Fields in the drop order the rank had before they were grouped.)
struct Graphs<'id> {
    /// The graph of NCCL calls.
    nccl: Option<Graph<'id>>,
    /// This rank's own graph of plain calls.
    graph: Option<Graph<'id>>,
    /// Rank 0 only: the graph of every rank's work (see [`Rank::capture_joint`]).
    joint: Option<Graph<'id>>,
    capturing: Capturing,
    /// Recorded on one lane for the other to wait on (fork / join).
    lane_ev: [Event<'id>; 2],
    /// Recorded for other ranks when a joint capture or replay hands over.
    handoff: Event<'id>,
}

/// The rank thread's state.
pub(super) struct Rank<'id> {
    pub rank: usize,
    pub device: usize,
    pub ctx: Ctx<'id>,
    pub(super) lanes: [Stream<'id>; 2],
    kernels: HashMap<(DataType, DevOp), Kernels<'id>>,
    pub(super) flags: DevBuf<'id>,
    calls: DevBuf<'id>,
    pub ctrl: Arc<HostMapped>,
    pub(super) bufs: HashMap<BufId, DevBuf<'id>>,
    pub peers: Arc<Peers>,
    pub(super) events: Vec<Event<'id>>,
    /// One process per GPU: ordinary events for the signals no other rank
    /// waits on (`events` are then interprocess events, slower to record
    /// and wait on); `None` with every rank in one process.
    pub(super) local_events: Option<Vec<Event<'id>>>,
    pub remote: Arc<Vec<Vec<RemoteEvent>>>,
    /// The ranks that take turns with this one on its GPU, by rank: other
    /// processes on the same GPU (set by the IPC exchange; see
    /// `Lowering::taking_turns`).
    pub turns: Arc<Vec<bool>>,
    /// What the instrumentation layers recorded (timing events, traffic).
    instr: Instruments<'id>,
    #[cfg(feature = "nccl")]
    nccl: Option<(nccl::Nccl, nccl::Comm)>,
    /// The buffers registered with the communicator, each undone before its
    /// buffer moves or goes and before the communicator goes
    /// (`rank/nccl_calls.rs`).
    #[cfg(feature = "nccl")]
    nccl_regs: Vec<(BufId, crate::cuda::NcclRegistration)>,
    /// Allocate buffers with NCCL's allocator (symmetric windows need it).
    #[cfg(feature = "nccl")]
    pub(super) nccl_memory: Option<nccl::Nccl>,
    /// The CUDA graphs and the capture in progress.
    graphs: Graphs<'id>,
    /// The profiling layer's host-side totals.
    pub profile: IssueProfile,
    faults: FaultPlan,
    pub timeout: Duration,
    /// (context bind, kernel load) milliseconds at setup.
    pub setup_ms: (f64, f64, &'static str),
    /// The work stream and stream-ordered calls' state, made on first use
    /// (`work.rs`).
    pub(super) work: Option<super::work::WorkState<'id>>,
    /// The calls the backend sent, by key (see [`super::HeldCalls`]).
    held: Vec<Option<Arc<Call>>>,
    /// The NCCL calls the backend sent, by key.
    #[cfg(feature = "nccl")]
    held_nccl: Vec<Option<Arc<NcclCall>>>,
    /// The signal board of the collective calls (set by the backend).
    pub board: Option<Arc<SignalBoard>>,
    /// The way to ranks of other nodes, in a job over nodes (set by the
    /// backend; see `net.rs`).
    pub net: Option<Arc<super::net::NetPort>>,
    /// Set by [`Rank::leak`]: the GPU did not drain, so nothing of this
    /// rank may be freed (see `serve_rank`).
    pub(super) leaked: bool,
    /// The last kernel issued that waits for another rank's kernel: its
    /// plan, op and the rank it waits for, so that a timeout or an abort
    /// names it ("rank 2's lines in rank 1's ring:ll op 1 (LL ring
    /// kernel)"); formatted only then.
    waited_for: std::cell::RefCell<Option<(Arc<Plan>, usize, usize)>>,
}

impl<'id> Rank<'id> {
    /// Set up: streams, flags, control block, the f32 kernels (so setup time
    /// includes a module load, as before).
    pub fn new(
        rank: usize,
        device: usize,
        ctx: Ctx<'id>,
        bind_ms: f64,
        timeout: Duration,
        faults: FaultPlan,
    ) -> Result<Rank<'id>> {
        let e = cuda_err(rank, device);
        let lanes = [ctx.stream().map_err(&e)?, ctx.stream().map_err(&e)?];
        // The exchange's flags, then the Simple ring's tile flags.
        let flags = ctx
            .alloc(SIMPLE_FLAGS + 8 * crate::cuda::SIMPLE_MAX_TILES)
            .map_err(&e)?;
        // The exchange's per-block counts, then the LL kernel's (LL_CALLS).
        let calls = ctx
            .alloc(8 * (EXCHANGE_MAX_BLOCKS + kernels::LL_MAX_BLOCKS))
            .map_err(&e)?;
        // Zeroed before any peer can learn the flags' address.
        lanes[0].memset(&flags, 0, flags.len(), 0).map_err(&e)?;
        lanes[0].memset(&calls, 0, calls.len(), 0).map_err(&e)?;
        lanes[0].synchronize().map_err(&e)?;
        let ctrl = Arc::new(ctx.host_mapped(CTRL_BYTES).map_err(&e)?);
        ctrl.store_u64(
            TIMEOUT_WORD,
            timeout.as_nanos().min(u64::MAX as u128) as u64,
        );
        let lane_ev = [ctx.event().map_err(&e)?, ctx.event().map_err(&e)?];
        let handoff = ctx.event().map_err(&e)?;
        let mut me = Rank {
            rank,
            device,
            ctx,
            lanes,
            kernels: HashMap::new(),
            flags,
            calls,
            ctrl,
            bufs: HashMap::new(),
            peers: Arc::new(Peers::default()),
            events: Vec::new(),
            local_events: None,
            remote: Arc::new(Vec::new()),
            turns: Arc::new(Vec::new()),
            instr: Instruments::default(),
            #[cfg(feature = "nccl")]
            nccl: None,
            #[cfg(feature = "nccl")]
            nccl_regs: Vec::new(),
            #[cfg(feature = "nccl")]
            nccl_memory: None,
            graphs: Graphs {
                nccl: None,
                graph: None,
                joint: None,
                capturing: Capturing::No,
                lane_ev,
                handoff,
            },
            profile: IssueProfile::default(),
            faults,
            timeout,
            setup_ms: (bind_ms, 0.0, ""),
            work: None,
            held: Vec::new(),
            #[cfg(feature = "nccl")]
            held_nccl: Vec::new(),
            board: None,
            net: None,
            leaked: false,
            waited_for: std::cell::RefCell::new(None),
        };
        let t = Instant::now();
        let source = me.kernels_for(DataType::Float, DevOp::Sum)?.reduce.source();
        me.setup_ms = (bind_ms, t.elapsed().as_secs_f64() * 1e3, source);
        Ok(me)
    }

    pub(super) fn err(&self) -> impl Fn(CudaError) -> Error {
        cuda_err(self.rank, self.device)
    }

    /// Issue a call the backend sent (or sent before, by key) on the board
    /// it shared. On failure the other ranks waiting on this call are
    /// released at once, a panic included.
    pub fn issue_held(&mut self, c: super::IssueCmd) -> Result<()> {
        let rank = self.rank;
        let call = take_held(&mut self.held, c.key, c.call, rank)?;
        let Some(board) = self.board.take() else {
            self.held[c.key] = Some(call);
            return Err(Error::internal(format!("rank {rank} has no signal board")));
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.issue(&call, &board, c.gen, c.call_no)
        }))
        .unwrap_or_else(|p| {
            Err(Error::Worker {
                rank,
                message: crate::pool::panic_message(p.as_ref()),
            })
        });
        if let Err(e) = &r {
            board.fail_with(c.gen, rank, e);
            // The other ranks' kernels that wait inside the GPU for this
            // rank's (an exchange, an LL ring) would spin to their
            // deadline. A fatal error ends the engine's calls, so they are
            // stopped now rather than left to time out.
            if e.is_fatal() && call.plan.has_kernels() {
                board.halt_device();
            }
        }
        self.held[c.key] = Some(call);
        self.board = Some(board);
        r
    }

    /// The event that realises this rank's signal `s` of `plan`: an ordinary
    /// event when only this rank waits on it and one exists, else the
    /// signal's shared one (interprocess with one process per GPU).
    fn event_of(&self, plan: &crate::plan::Plan, s: usize) -> Option<&Event<'id>> {
        match (&self.local_events, plan.signals.get(s)) {
            (Some(local), Some(sig)) if !sig.remote => local.get(s),
            _ => self.events.get(s),
        }
    }

    /// The kernels of `dtype` for `op` (loaded once).
    fn kernels_for(&mut self, dtype: DataType, op: DevOp) -> Result<&Kernels<'id>> {
        if !self.kernels.contains_key(&(dtype, op)) {
            let m = kernels::module(dtype);
            let e = self.err();
            let name = |family: &str| format!("rr_{family}_{}_{}", op.name(), dtype.ptx());
            let k = Kernels {
                reduce: self.ctx.kernel(&m, &name("reduce")).map_err(&e)?,
                exchange: self.ctx.kernel(&m, &name("exchange")).map_err(&e)?,
                ring_ll: self.ctx.kernel(&m, &name("ringll")).map_err(&e)?,
                ring_simple: self.ctx.kernel(&m, &name("ringsimple")).map_err(&e)?,
            };
            self.kernels.insert((dtype, op), k);
        }
        self.kernels
            .get(&(dtype, op))
            .ok_or_else(|| Error::internal("kernel cache"))
    }

    /// The exported flag array.
    pub fn flags_token(&self) -> PeerBuf {
        self.flags.export()
    }

    /// Wait on the host (bounded by `limit`) until `s` is idle, polling it
    /// (`cuStreamQuery`, never `cuStreamSynchronize`) and, in a
    /// multi-process job, the job's health: a dead or failed peer ends the
    /// wait at once with [`Error::PeerFailed`], after raising this rank's
    /// abort word so that a kernel spinning on the peer's flags returns
    /// ([`SignalBoard::job_fault`]). An abort of this engine does not end
    /// it: a drain after an abort waits for the kernels to see the word.
    pub(super) fn wait_stream(
        &self,
        s: &Stream<'id>,
        limit: Duration,
        e: impl Fn(CudaError) -> Error,
    ) -> Result<()> {
        let mut fault = None;
        let rank = self.rank;
        let r = s.wait_idle_or(limit, &mut || match &self.board {
            Some(b) => match b.job_fault(rank, &|| format!("rank {rank}'s GPU work")) {
                Ok(()) => false,
                Err(x) => {
                    fault = Some(x);
                    true
                }
            },
            None => false,
        });
        match fault {
            Some(f) => Err(f),
            None => r.map_err(e),
        }
    }

    /// Wait (bounded, watching a job's health, [`Rank::wait_stream`]) until
    /// both lanes are idle; then report an exchange kernel that gave up,
    /// and clear its status.
    pub fn sync(&self) -> Result<()> {
        let e = self.err();
        let limit = self.timeout + Duration::from_secs(5);
        for s in &self.lanes {
            self.wait_stream(s, limit, &e)?;
        }
        self.sync_work(limit)?;
        match self.ctrl.load_u32(STATUS) {
            0 => Ok(()),
            status => {
                self.ctrl.store_u32(STATUS, 0);
                // The blocks of an LL ring kernel that gave up each say
                // the step they waited in: the first is what is missing.
                let step = (LL_STEPS..LL_STEPS + kernels::LL_MAX_BLOCKS)
                    .map(|w| {
                        let s = self.ctrl.load_u32(w);
                        self.ctrl.store_u32(w, 0);
                        s
                    })
                    .filter(|&s| s > 0)
                    .min()
                    .map(|s| s as usize - 1);
                let what = match &*self.waited_for.borrow() {
                    Some((plan, i, from)) => waited_desc(plan, self.rank, *i, *from, step),
                    None => "the other rank's push in an exchange kernel".to_string(),
                };
                Err(if status == 2 {
                    Error::Aborted {
                        rank: self.rank,
                        what: format!("waiting for {what}"),
                        wait: WaitKind::ExchangeKernel,
                    }
                } else {
                    Error::Timeout {
                        rank: self.rank,
                        what,
                        seconds: self.timeout.as_secs_f64(),
                        wait: WaitKind::ExchangeKernel,
                    }
                })
            }
        }
    }

    /// Zero the exchange flags, the LL lines and the call counts (every
    /// rank, after every rank drained): the numbering starts again in step,
    /// and no word of an earlier call can carry a number again.
    pub fn reset_exchange(&self) -> Result<()> {
        let e = self.err();
        self.lanes[0]
            .memset(&self.flags, 0, self.flags.len(), 0)
            .map_err(&e)?;
        if let Some(ll) = self.bufs.get(&BufId::LL) {
            self.lanes[0].memset(ll, 0, ll.len(), 0).map_err(&e)?;
        }
        self.lanes[0]
            .memset(&self.calls, 0, self.calls.len(), 0)
            .map_err(&e)?;
        self.wait_stream(&self.lanes[0], self.timeout, &e)
    }

    /// Make buffer `id` at least `bytes` bytes (the caller drained every
    /// rank); returns its token.
    /// Also says whether the buffer moved (graphs of every rank hold its
    /// old address then).
    pub fn reserve(&mut self, id: BufId, bytes: usize) -> Result<(PeerBuf, bool)> {
        let e = self.err();
        // Every rank reserves alike: a symmetric registration, collective,
        // is made again on every rank or on none.
        #[cfg(feature = "nccl")]
        self.nccl_deregister(Some(id))?;
        let moved = self.bufs.get(&id).is_none_or(|b| b.len() < bytes);
        if moved {
            if self.faults.alloc_fails(self.rank) {
                return Err(Error::Cuda {
                    rank: self.rank,
                    device: self.device,
                    call: "cuMemAlloc",
                    message: format!("injected allocation failure of {bytes} bytes"),
                    step: None,
                });
            }
            // Graphs hold the old addresses.
            self.graphs.graph = None;
            self.graphs.nccl = None;
            self.bufs.remove(&id);
            let (free, _) = self.ctx.mem_info().map_err(&e)?;
            if bytes > free {
                return Err(Error::OutOfMemory {
                    what: format!("rank {}'s buffer", self.rank),
                    memory: format!("GPU {} memory", self.device),
                    need: bytes as u64,
                    available: free as u64,
                    is_free: true,
                    hint: "use a smaller size or fewer ranks per GPU".into(),
                });
            }
            let b = self.alloc(bytes)?;
            if id == BufId::LL {
                // An LL kernel accepts a word whose flag equals its call
                // number: none may be left from earlier use of the memory.
                self.lanes[0].memset(&b, 0, b.len(), 0).map_err(&e)?;
                self.wait_stream(&self.lanes[0], self.timeout, &e)?;
            }
            self.bufs.insert(id, b);
        }
        self.bufs
            .get(&id)
            .map(|b| (b.export(), moved))
            .ok_or_else(|| Error::internal("buffer vanished"))
    }

    pub fn release(&mut self, id: BufId) -> Result<()> {
        self.graphs.graph = None;
        self.graphs.nccl = None;
        #[cfg(feature = "nccl")]
        self.nccl_deregister(Some(id))?;
        self.bufs.remove(&id);
        Ok(())
    }

    /// `bytes` of device memory: the driver's, or NCCL's allocator's where
    /// the engine asked for it.
    fn alloc(&self, bytes: usize) -> Result<DevBuf<'id>> {
        #[cfg(feature = "nccl")]
        if let (Some(lib), true) = (&self.nccl_memory, bytes > 0) {
            return self
                .ctx
                .alloc_nccl(lib, bytes)
                .map_err(|err| Error::NcclRank {
                    rank: self.rank,
                    message: err.to_string(),
                });
        }
        self.ctx.alloc(bytes).map_err(self.err())
    }

    fn buf(&self, id: BufId) -> Result<&DevBuf<'id>> {
        self.bufs
            .get(&id)
            .ok_or_else(|| Error::Plan(format!("rank {} has no buffer {}", self.rank, id.0)))
    }

    fn peer(&self, rank: usize, id: BufId) -> Result<&PeerBuf> {
        self.peers
            .bufs
            .get(rank)
            .and_then(|m| m.get(&id))
            .ok_or_else(|| Error::Plan(format!("no buffer {} of rank {rank}", id.0)))
    }

    pub fn write(&mut self, id: BufId, off: usize, data: &[u8]) -> Result<()> {
        let e = self.err();
        self.bufs
            .get_mut(&id)
            .ok_or_else(|| Error::Plan(format!("no buffer {}", id.0)))?
            .write(off, data)
            .map_err(&e)
    }

    pub fn read(&self, id: BufId, off: usize, len: usize) -> Result<Vec<u8>> {
        let mut out =
            crate::sys::proc::zeroed::<u8>(len, &format!("a copy of {len} bytes from the GPU"))?;
        self.read_into(id, off, &mut out)?;
        Ok(out)
    }

    /// [`Rank::read`] into `out` (its length is what is read).
    pub fn read_into(&self, id: BufId, off: usize, out: &mut [u8]) -> Result<()> {
        self.buf(id)?.read(off, out).map_err(self.err())
    }

    /// Make at least `n` events; returns their tokens.
    pub fn grow_events(&mut self, n: usize) -> Result<Vec<RemoteEvent>> {
        let e = self.err();
        while self.events.len() < n {
            self.events.push(self.ctx.event().map_err(&e)?);
        }
        Ok(self.events.iter().map(Event::export).collect())
    }
}

impl<'id> Rank<'id> {
    /// Drop everything that refers to other ranks' memory, after every rank
    /// drained (teardown).
    pub fn teardown(&mut self) {
        #[cfg(feature = "profiling")]
        self.end_cupti();
        self.graphs.graph = None;
        self.graphs.joint = None;
        self.graphs.nccl = None;
        #[cfg(feature = "nccl")]
        {
            // Every rank drained: the registrations go (errors ignored: the
            // communicator's end undoes them too), then the communicator.
            let _ = self.nccl_deregister(None);
            self.nccl_regs.clear();
            self.nccl = None;
        }
    }
}

/// Keep `sent` (when the backend sent it) under `key` in `held`, then take
/// the call under `key` out for one use: the caller puts it back after, so
/// the hot path changes no reference count.
pub(super) fn take_held<T>(
    held: &mut Vec<Option<Arc<T>>>,
    key: usize,
    sent: Option<Arc<T>>,
    rank: usize,
) -> Result<Arc<T>> {
    if let Some(call) = sent {
        if held.len() <= key {
            held.resize_with(key + 1, || None);
        }
        held[key] = Some(call);
    }
    held.get_mut(key)
        .and_then(Option::take)
        .ok_or_else(|| Error::internal(format!("rank {rank} does not hold call {key}")))
}

/// What an issue is captured into, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capturing {
    No,
    /// This rank's own graph: only compute-lane work without events.
    PerGpu,
    /// One graph across every rank and lane.
    Joint,
}

#[allow(dead_code)]
const _: usize = ABORT;

impl Rank<'_> {
    /// Forget (never free) every buffer: the teardown of a rank whose GPU
    /// could not be drained.
    pub fn leak(&mut self) {
        self.leaked = true;
        // Not dropped either: destroying a graph or an NCCL communicator
        // may wait for the GPU work that does not end.
        std::mem::forget(self.graphs.graph.take());
        std::mem::forget(self.graphs.joint.take());
        std::mem::forget(self.graphs.nccl.take());
        #[cfg(feature = "nccl")]
        {
            for r in self.nccl_regs.drain(..) {
                std::mem::forget(r);
            }
            std::mem::forget(self.nccl.take());
        }
        for (_, b) in self.bufs.drain() {
            std::mem::forget(b);
        }
    }
}

/// What rank `rank`'s kernel op `i` of `plan` waited for from rank `from`
/// when it gave up: an LL ring kernel names the first step a block of it
/// waited in (`step`, from the control block: that step's receive, its
/// part `2 * step + 1`), an exchange kernel the op.
fn waited_desc(plan: &Plan, rank: usize, i: usize, from: usize, step: Option<usize>) -> String {
    match (
        plan.ops.get(rank).and_then(|o| o.get(i)).map(|o| &o.kind),
        step,
    ) {
        (Some(crate::plan::OpKind::Kernel(k)), Some(step)) if k.kind.uses_lines() => {
            let desc = crate::backend::part_desc(plan, rank, i, 2 * step + 1);
            format!("rank {from}'s lines for {desc}")
        }
        (Some(crate::plan::OpKind::Kernel(k)), None) if k.kind.uses_lines() => {
            format!("rank {from}'s lines in {}", op_desc(plan, rank, i))
        }
        _ => format!("rank {from}'s push in {}", op_desc(plan, rank, i)),
    }
}

#[cfg(test)]
mod tests;
