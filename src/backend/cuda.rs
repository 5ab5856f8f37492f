//! CUDA backend: one host thread per rank, each bound once to its GPU.
//!
//! Per rank: two streams (compute for the PTX reduce kernel, copy for
//! `cuMemcpyPeerAsync`), send/recv/scratch device buffers, one event per plan
//! signal, and the reduce kernel (PTX JIT-compiled once per device). Ranks map
//! round-robin onto devices, so more ranks than GPUs is fine: a same-device
//! "peer" copy is an ordinary device-to-device copy.
//!
//! A collective fans out to every rank thread; each thread *issues* its ops
//! (no host synchronize between steps) and returns. Cross-rank order on the
//! GPU comes from events: the producer records its event on its stream, the
//! consumer's stream waits on it (`cuStreamWaitEvent`). On the host, a
//! consumer thread issues that wait only after the producer thread has issued
//! the record (a [`SignalBoard`] generation), so it never waits on a stale one.
//! Nothing in this file is `unsafe`: that all lives in [`crate::cuda`].

use super::{Backend, BackendKind, IssueProfile, SetupBreakdown};
use crate::cuda::{
    self, nccl, Ctx, CudaError, DevBuf, Event, Graph, Kernel, PeerBuf, PeerCtx, RemoteEvent, Stream,
};
use crate::element::{DataType, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Buf, FlagExchange, Lane, OpKind, Plan};
use crate::pool::{Inbox, RankThreads};
use crate::sync::SignalBoard;
use std::sync::Arc;
use std::time::Instant;

/// The reduce kernel: the hand-written PTX, embedded at build time, and the
/// same PTX assembled by `ptxas -arch=sm_90` (CI checks the bytes match), so
/// an H100/H200 starts without a JIT compile.
pub const REDUCE: cuda::KernelModule = cuda::KernelModule {
    ptx: include_str!("../../ptx/reduce_f32.ptx"),
    cubin: Some((
        include_bytes!("../../ptx/sm_90/reduce_f32.cubin"),
        (9, 0),
        "cubin sm_90 (ptxas 13.0)",
    )),
};
/// The one-kernel exchange of the flag one-shot (2 ranks), likewise.
pub const EXCHANGE: cuda::KernelModule = cuda::KernelModule {
    ptx: include_str!("../../ptx/exchange_f32.ptx"),
    cubin: Some((
        include_bytes!("../../ptx/sm_90/exchange_f32.cubin"),
        (9, 0),
        "cubin sm_90 (ptxas 13.0)",
    )),
};

/// Options for the CUDA backend.
#[derive(Debug, Clone, Default)]
pub struct CudaOptions {
    /// Devices to use (default: all).
    pub devices: Option<Vec<usize>>,
}

/// Is there a usable driver with at least one GPU? The error says why not.
pub fn probe() -> std::result::Result<&'static cuda::DriverInfo, String> {
    let info = cuda::driver().map_err(|e| e.to_string())?;
    if info.devices.is_empty() {
        return Err("the CUDA driver reports no GPU".into());
    }
    Ok(info)
}

/// (reduce kernel, exchange kernel) for an element type and operation.
fn kernel_name<T: Element>(op: ReduceOp) -> Option<(&'static str, &'static str)> {
    match (T::DTYPE, op) {
        (DataType::Float, ReduceOp::Sum) => Some(("rr_reduce_sum_f32", "rr_exchange_sum_f32")),
        _ => None,
    }
}

enum Cmd<T> {
    Ping,
    Export,
    EnablePeers(Arc<Vec<PeerCtx>>, Arc<Vec<PeerBuf>>),
    Sync,
    Reserve { count: usize, scratch: usize },
    SetPeers(Arc<Vec<[PeerBuf; 3]>>),
    GrowEvents(usize),
    SetEvents(Arc<Vec<Vec<RemoteEvent>>>),
    Write(Buf, Arc<Vec<Vec<T>>>),
    Fill(Buf, usize, u32),
    Read(Buf, usize),
    Run(Arc<Plan>, Arc<SignalBoard>, u64),
    NcclInit(nccl::Nccl, nccl::UniqueId, usize),
    Nccl(usize, bool),
    NcclCapture(usize, bool, usize),
    NcclGraph,
    Capture(Arc<Vec<Arc<Plan>>>),
    Graph,
    TakeProfile,
}

enum Reply<T> {
    Done,
    Ctx(PeerCtx, PeerBuf, (f64, f64, &'static str)),
    Bufs([PeerBuf; 3]),
    Events(Vec<RemoteEvent>),
    Data(Vec<T>),
    Profile(IssueProfile),
}

pub struct CudaBackend<T: Element> {
    threads: RankThreads<Cmd<T>, Reply<T>>,
    devices: Vec<usize>,
    names: Vec<String>,
    driver_version: i32,
    board: Arc<SignalBoard>,
    events: usize,
    gen: u64,
    notes: Vec<String>,
    breakdown: SetupBreakdown,
}

/// What a rank thread owns, all branded with its device's `'id`.
struct Rank<'id, T> {
    rank: usize,
    device: usize,
    ctx: Ctx<'id>,
    compute: Stream<'id>,
    copy: Stream<'id>,
    copy2: Stream<'id>,
    kernel: Kernel<'id>,
    /// The flag one-shot's kernel, its flag array (written by the peer),
    /// its per-block call counts, and every rank's flag array.
    exchange: Kernel<'id>,
    flags: DevBuf<'id, u64>,
    calls: DevBuf<'id, u64>,
    peer_flags: Arc<Vec<PeerBuf>>,
    bufs: [DevBuf<'id, T>; 3],
    peers: Arc<Vec<[PeerBuf; 3]>>,
    events: Vec<Event<'id>>,
    remote: Arc<Vec<Vec<RemoteEvent>>>,
    nccl: Option<(nccl::Nccl, nccl::Comm)>,
    nccl_graph: Option<Graph<'id>>,
    /// ringreduce's own captured calls, and whether a capture is under way
    /// (then issuing an event is an error: a per-rank graph cannot replay
    /// cross-rank event order safely).
    graph: Option<Graph<'id>>,
    capturing: bool,
    profile: IssueProfile,
    /// (context bind, PTX load) milliseconds at setup.
    setup_ms: (f64, f64, &'static str),
}

impl<T: Element> CudaBackend<T> {
    pub fn new(ranks: usize, op: ReduceOp, opts: &CudaOptions) -> Result<Self> {
        if ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        let info = probe().map_err(Error::NoCuda)?;
        let kname = kernel_name::<T>(op).ok_or_else(|| {
            Error::Unsupported(format!("{} {}", T::DTYPE.name(), op.name()), "cuda")
        })?;
        let avail: Vec<usize> = info.devices.iter().map(|d| d.ordinal).collect();
        let devs = match &opts.devices {
            Some(d) if !d.is_empty() => {
                if let Some(bad) = d.iter().find(|x| !avail.contains(x)) {
                    return Err(Error::NoCuda(format!(
                        "device {bad} requested but only {} present",
                        avail.len()
                    )));
                }
                d.clone()
            }
            _ => avail,
        };
        let map: Vec<usize> = (0..ranks).map(|r| devs[r % devs.len()]).collect();
        let names = info.devices.iter().map(|d| d.name.clone()).collect();
        let m = map.clone();
        let threads = RankThreads::spawn(
            ranks,
            "cuda",
            move |rank, inbox: Inbox<Cmd<T>, Reply<T>>| {
                let device = m[rank];
                let slot = std::cell::Cell::new(Some(inbox));
                let t0 = Instant::now();
                let r = cuda::with_device(device, |ctx| {
                    let bind_ms = t0.elapsed().as_secs_f64() * 1e3;
                    if let Some(inbox) = slot.take() {
                        rank_main(rank, device, ctx, kname, inbox, bind_ms);
                    }
                });
                if let (Err(e), Some(inbox)) = (r, slot.take()) {
                    // Binding the device failed before the closure ran.
                    inbox.ready(Err(cuda_err(rank, device)(e)));
                }
            },
        )?;
        let mut be = CudaBackend {
            threads,
            devices: map,
            names,
            driver_version: info.version,
            board: Arc::new(SignalBoard::new(0)),
            events: 0,
            gen: 0,
            notes: Vec::new(),
            breakdown: SetupBreakdown::default(),
        };
        be.enable_peers()?;
        Ok(be)
    }

    /// Enable peer access between every pair of devices the ranks use
    /// (covers ring neighbours, the parameter-server root and one-shot).
    fn enable_peers(&mut self) -> Result<()> {
        let mut bind_ms: f64 = 0.0;
        let mut ptx_ms: f64 = 0.0;
        let mut sources: Vec<&'static str> = Vec::new();
        let ctxs: Vec<(PeerCtx, PeerBuf)> = self
            .threads
            .run_each(|_| Cmd::Export)?
            .into_iter()
            .filter_map(|r| match r {
                Reply::Ctx(c, f, (b, p, src)) => {
                    bind_ms = bind_ms.max(b);
                    ptx_ms = ptx_ms.max(p);
                    if !sources.contains(&src) {
                        sources.push(src);
                    }
                    Some((c, f))
                }
                _ => None,
            })
            .collect();
        let (ctxs, flags): (Vec<PeerCtx>, Vec<PeerBuf>) = ctxs.into_iter().unzip();
        self.breakdown.driver_ms = cuda::driver_init_ms();
        self.breakdown.context_ms = bind_ms;
        self.breakdown.ptx_ms = ptx_ms;
        self.notes.push(format!(
            "setup: driver load+cuInit {:.1} ms (once per process), context bind (slowest rank) {bind_ms:.1} ms, kernel modules (slowest rank) {ptx_ms:.1} ms from {}",
            self.breakdown.driver_ms,
            sources.join(" + ")
        ));
        let t_peer = Instant::now();
        let mut distinct: Vec<usize> = self.devices.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for &a in &distinct {
            for &b in &distinct {
                if a != b && !cuda::can_access_peer(a, b).unwrap_or(false) {
                    return Err(Error::CudaSetup {
                        call: "cuDeviceCanAccessPeer",
                        message: format!(
                            "GPU {a} cannot access GPU {b} directly; peer copies would go through host memory, which this engine refuses to do silently"
                        ),
                    });
                }
            }
        }
        let (all, flags) = (Arc::new(ctxs), Arc::new(flags));
        self.threads
            .run_each(|_| Cmd::EnablePeers(all.clone(), flags.clone()))?;
        self.breakdown.peer_ms = t_peer.elapsed().as_secs_f64() * 1e3;
        self.notes.push(format!(
            "setup: peer access {:.1} ms",
            self.breakdown.peer_ms
        ));
        if distinct.len() > 1 {
            self.notes.push(format!(
                "peer access enabled between GPUs {distinct:?} (cuDeviceCanAccessPeer = 1 for every pair)"
            ));
        }
        Ok(())
    }

    fn ensure_events(&mut self, n: usize) -> Result<()> {
        if n <= self.events {
            return Ok(());
        }
        let want = n.next_power_of_two().max(64);
        let got = self.threads.run_each(|_| Cmd::GrowEvents(want))?;
        let remote: Vec<Vec<RemoteEvent>> = got
            .into_iter()
            .map(|r| match r {
                Reply::Events(e) => e,
                _ => Vec::new(),
            })
            .collect();
        let remote = Arc::new(remote);
        self.threads.run_each(|_| Cmd::SetEvents(remote.clone()))?;
        self.board = Arc::new(SignalBoard::new(want));
        self.gen = 0;
        self.events = want;
        Ok(())
    }
}

fn cuda_err(rank: usize, device: usize) -> impl Fn(CudaError) -> Error {
    move |e| Error::Cuda {
        rank,
        device,
        call: e.call,
        message: e.message,
    }
}

/// The body of a rank thread: set up, then serve commands.
fn rank_main<'id, T: Element>(
    rank: usize,
    device: usize,
    ctx: Ctx<'id>,
    kname: (&'static str, &'static str),
    inbox: Inbox<Cmd<T>, Reply<T>>,
    bind_ms: f64,
) {
    let e = cuda_err(rank, device);
    let setup = (|| -> Result<Rank<'id, T>> {
        let compute = ctx.stream().map_err(&e)?;
        let copy = ctx.stream().map_err(&e)?;
        let copy2 = ctx.stream().map_err(&e)?;
        let t = Instant::now();
        let kernel = ctx.kernel(&REDUCE, kname.0).map_err(&e)?;
        let exchange = ctx.kernel(&EXCHANGE, kname.1).map_err(&e)?;
        let ptx_ms = t.elapsed().as_secs_f64() * 1e3;
        let source = kernel.source();
        // Zeroed before any peer can learn its address (Export comes later).
        let flags = ctx.alloc(cuda::EXCHANGE_MAX_BLOCKS).map_err(&e)?;
        let calls = ctx.alloc(cuda::EXCHANGE_MAX_BLOCKS).map_err(&e)?;
        compute.zero(&flags).map_err(&e)?;
        compute.zero(&calls).map_err(&e)?;
        compute.synchronize().map_err(&e)?;
        let bufs = [
            ctx.alloc(0).map_err(&e)?,
            ctx.alloc(0).map_err(&e)?,
            ctx.alloc(0).map_err(&e)?,
        ];
        Ok(Rank {
            rank,
            device,
            ctx,
            compute,
            copy,
            copy2,
            kernel,
            exchange,
            flags,
            calls,
            peer_flags: Arc::new(Vec::new()),
            bufs,
            peers: Arc::new(Vec::new()),
            events: Vec::new(),
            remote: Arc::new(Vec::new()),
            nccl: None,
            nccl_graph: None,
            graph: None,
            capturing: false,
            profile: IssueProfile::default(),
            setup_ms: (bind_ms, ptx_ms, source),
        })
    })();
    match setup {
        Err(err) => inbox.ready(Err(err)),
        Ok(mut st) => {
            inbox.ready(Ok(()));
            inbox.serve(|cmd| st.handle(cmd));
            // Drain the GPU before the context is released.
            let _ = st.compute.synchronize();
            let _ = st.copy.synchronize();
            let _ = st.copy2.synchronize();
            st.nccl_graph = None;
            st.graph = None;
            st.nccl = None;
        }
    }
}

impl<'id, T: Element> Rank<'id, T> {
    fn err(&self) -> impl Fn(CudaError) -> Error {
        cuda_err(self.rank, self.device)
    }

    fn sync(&self) -> Result<()> {
        self.copy.synchronize().map_err(self.err())?;
        self.copy2.synchronize().map_err(self.err())?;
        self.compute.synchronize().map_err(self.err())
    }

    fn handle(&mut self, cmd: Cmd<T>) -> Result<Reply<T>> {
        let e = self.err();
        match cmd {
            Cmd::Ping => Ok(Reply::Done),
            Cmd::Export => Ok(Reply::Ctx(
                self.ctx.export(),
                self.flags.export(),
                self.setup_ms,
            )),
            Cmd::EnablePeers(all, flags) => {
                for p in all.iter() {
                    self.ctx.enable_peer_access(p).map_err(&e)?;
                }
                self.peer_flags = flags;
                Ok(Reply::Done)
            }
            Cmd::Sync => self.sync().map(|_| Reply::Done),
            Cmd::Reserve { count, scratch } => {
                self.sync()?;
                for (i, want) in [count, count, scratch].into_iter().enumerate() {
                    if self.bufs[i].len() < want {
                        // Replace (the old one is freed here; every rank has
                        // synchronized before Reserve is sent).
                        self.bufs[i] = self.ctx.alloc(0).map_err(&e)?;
                        self.bufs[i] = self.ctx.alloc(want).map_err(&e)?;
                    }
                }
                Ok(Reply::Bufs([
                    self.bufs[0].export(),
                    self.bufs[1].export(),
                    self.bufs[2].export(),
                ]))
            }
            Cmd::SetPeers(p) => {
                self.peers = p;
                Ok(Reply::Done)
            }
            Cmd::GrowEvents(n) => {
                while self.events.len() < n {
                    self.events.push(self.ctx.event().map_err(&e)?);
                }
                Ok(Reply::Events(
                    self.events.iter().map(Event::export).collect(),
                ))
            }
            Cmd::SetEvents(r) => {
                self.remote = r;
                Ok(Reply::Done)
            }
            Cmd::Write(buf, data) => {
                self.sync()?;
                self.bufs[buf.index()]
                    .write(0, &data[self.rank])
                    .map_err(&e)?;
                Ok(Reply::Done)
            }
            Cmd::Fill(buf, n, bits) => {
                self.sync()?;
                self.compute
                    .fill32(&self.bufs[buf.index()], n, bits)
                    .map_err(&e)?;
                self.compute.synchronize().map_err(&e)?;
                Ok(Reply::Done)
            }
            Cmd::Read(buf, n) => {
                self.sync()?;
                let mut out = vec![T::default(); n];
                self.bufs[buf.index()].read(0, &mut out).map_err(&e)?;
                Ok(Reply::Data(out))
            }
            Cmd::Run(plan, board, gen) => {
                // On failure, release the other ranks waiting on this call.
                let r = self.issue(&plan, &board, gen);
                r.inspect_err(|_| board.fail(gen)).map(|_| Reply::Done)
            }
            Cmd::NcclInit(lib, id, n) => {
                self.nccl = None;
                let comm =
                    self.ctx
                        .nccl_comm(&lib, n, &id, self.rank)
                        .map_err(|err| Error::NcclRank {
                            rank: self.rank,
                            message: err.to_string(),
                        })?;
                self.nccl = Some((lib, comm));
                Ok(Reply::Done)
            }
            Cmd::Nccl(count, in_place) => self.nccl_call(count, in_place).map(|_| Reply::Done),
            Cmd::NcclCapture(count, in_place, calls) => {
                self.nccl_graph = None;
                let g =
                    self.capture(|me| (0..calls).try_for_each(|_| me.nccl_call(count, in_place)))?;
                self.nccl_graph = Some(g);
                Ok(Reply::Done)
            }
            Cmd::TakeProfile => Ok(Reply::Profile(std::mem::take(&mut self.profile))),
            Cmd::Capture(plans) => {
                self.graph = None;
                // No other rank waits on anything issued here (checked), so
                // a private board is enough.
                let board = SignalBoard::new(plans.iter().map(|p| p.signals()).max().unwrap_or(0));
                let g = self.capture(|me| {
                    me.capturing = true;
                    let r = plans.iter().try_for_each(|p| me.issue(p, &board, 1));
                    me.capturing = false;
                    r
                })?;
                self.graph = Some(g);
                Ok(Reply::Done)
            }
            Cmd::Graph => {
                let g = self
                    .graph
                    .as_ref()
                    .ok_or_else(|| Error::Plan(format!("rank {}: no graph captured", self.rank)))?;
                self.compute.launch_graph(g).map_err(&e)?;
                Ok(Reply::Done)
            }
            Cmd::NcclGraph => {
                let g = self.nccl_graph.as_ref().ok_or_else(|| Error::NcclRank {
                    rank: self.rank,
                    message: "no NCCL graph captured".into(),
                })?;
                self.compute.launch_graph(g).map_err(&e)?;
                Ok(Reply::Done)
            }
        }
    }

    /// Drain the streams, then capture what `body` issues on the compute
    /// stream into a graph. The capture is always ended, also after an error
    /// inside it.
    fn capture(&mut self, body: impl FnOnce(&mut Self) -> Result<()>) -> Result<Graph<'id>> {
        let e = self.err();
        self.sync()?;
        self.compute.begin_capture().map_err(&e)?;
        let r = body(self);
        let g = self.compute.end_capture().map_err(&e);
        r?;
        g
    }

    /// One NCCL all-reduce (f32 sum) on the compute stream, in a group.
    fn nccl_call(&self, count: usize, in_place: bool) -> Result<()> {
        let (lib, comm) = self.nccl.as_ref().ok_or_else(|| Error::NcclRank {
            rank: self.rank,
            message: "NCCL not initialised".into(),
        })?;
        let ne = |err: cuda::NcclCallError| Error::NcclRank {
            rank: self.rank,
            message: err.to_string(),
        };
        let send = if in_place {
            &self.bufs[1]
        } else {
            &self.bufs[0]
        };
        lib.group_start().map_err(|x| ne(x.into()))?;
        let r = self
            .compute
            .nccl_all_reduce(lib, comm, send, &self.bufs[1], count);
        let g = lib.group_end();
        r.map_err(ne)?;
        g.map_err(|x| ne(x.into()))?;
        Ok(())
    }

    /// The exported buffers (send, recv, scratch) of rank `rank`.
    fn peer(&self, rank: usize) -> Result<&[PeerBuf; 3]> {
        self.peers
            .get(rank)
            .ok_or_else(|| Error::Plan(format!("no buffers for rank {rank}")))
    }

    fn lane(&self, l: Lane) -> &Stream<'id> {
        match l {
            Lane::Compute => &self.compute,
            Lane::Copy => &self.copy,
            Lane::Copy2 => &self.copy2,
        }
    }

    /// Launch the exchange kernel for a flag one-shot pair on the compute stream.
    fn launch_exchange(&self, f: &FlagExchange) -> std::result::Result<(), CudaError> {
        let missing = |what: &str| CudaError {
            call: "cuLaunchKernel(rr_exchange_sum)",
            message: format!("no {what} for rank {}", f.peer),
        };
        let peer = self.peers.get(f.peer).ok_or_else(|| missing("buffers"))?;
        let peer_flags = self
            .peer_flags
            .get(f.peer)
            .ok_or_else(|| missing("flag array"))?;
        let b = &self.bufs;
        self.compute.exchange(
            &self.exchange,
            &cuda::Exchange {
                dst: (&b[f.dst.buf.index()], f.dst.range.start),
                a: (&b[f.input.buf.index()], f.input.range.start),
                peer_slot: (&peer[f.peer_slot.buf.index()], f.peer_slot.range.start),
                my_slot: (&b[f.my_slot.buf.index()], f.my_slot.range.start),
                peer_flags,
                my_flags: &self.flags,
                calls: &self.calls,
                n: f.dst.len(),
            },
        )
    }

    /// Issue this rank's ops of `plan`. No host synchronization with the GPU.
    fn issue(&mut self, plan: &Plan, board: &SignalBoard, gen: u64) -> Result<()> {
        let e = self.err();
        let r = self.rank;
        let t_all = Instant::now();
        let mut p = IssueProfile {
            calls: 1,
            ..IssueProfile::default()
        };
        let ns = |t: Instant| t.elapsed().as_nanos() as u64;
        // The flag one-shot: its push and reduce become one exchange kernel;
        // the peer's push signal becomes the kernel's flag (not an event).
        let fx = plan.flag_exchange(r).map_err(Error::Plan)?;
        let not_capturable = |i: usize, why: &str| {
            Error::Unsupported(
                format!(
                    "CUDA graph capture of {} (rank {r} op {i} {why})",
                    plan.name
                ),
                "cuda",
            )
        };
        for (i, op) in plan.ops[r].iter().enumerate() {
            if self.capturing && op.lane != Lane::Compute {
                return Err(not_capturable(i, "runs on a second stream"));
            }
            let stream = self.lane(op.lane);
            for w in &op.waits {
                if plan.same_lane(w.0, r, op.lane) {
                    continue; // in-lane order already implies it
                }
                if fx.as_ref().is_some_and(|f| f.peer_signal == *w) {
                    continue; // the exchange kernel waits for the flag
                }
                if self.capturing {
                    return Err(not_capturable(i, "waits on an event"));
                }
                let owner = plan.signal_owner[w.0];
                if owner == r {
                    // Recorded earlier by this very thread, on the other lane.
                    let ev = self
                        .events
                        .get(w.0)
                        .ok_or_else(|| Error::Plan("event pool too small".into()))?;
                    let t = Instant::now();
                    stream.wait_local(ev).map_err(&e)?;
                    p.wait_ns += ns(t);
                } else {
                    let t = Instant::now();
                    board.wait(w.0, gen, r)?;
                    p.peer_ns += ns(t);
                    let ev = self
                        .remote
                        .get(owner)
                        .and_then(|v| v.get(w.0))
                        .ok_or_else(|| Error::Plan("remote event missing".into()))?;
                    let t = Instant::now();
                    stream.wait(ev).map_err(&e)?;
                    p.wait_ns += ns(t);
                }
            }
            if let Some(f) = fx.as_ref().filter(|f| f.push == i || f.reduce == i) {
                if f.reduce == i {
                    let t = Instant::now();
                    self.launch_exchange(f).map_err(&e)?;
                    p.kernel_ns += ns(t);
                }
                // The push's signal is the flag: no event, nothing published.
                continue;
            }
            match &op.kind {
                OpKind::Begin | OpKind::End => {}
                OpKind::Copy { from, to, src, dst } => {
                    let t = Instant::now();
                    if *from == r {
                        let peer = self.peer(*to)?;
                        stream
                            .copy_to_peer(
                                &peer[dst.buf.index()],
                                dst.range.start,
                                &self.bufs[src.buf.index()],
                                src.range.start,
                                src.len(),
                            )
                            .map_err(&e)?;
                    } else {
                        let peer = self.peer(*from)?;
                        stream
                            .copy_from_peer(
                                &self.bufs[dst.buf.index()],
                                dst.range.start,
                                &peer[src.buf.index()],
                                src.range.start,
                                src.len(),
                            )
                            .map_err(&e)?;
                    }
                    p.copy_ns += ns(t);
                }
                OpKind::Reduce { dst, a, b } => {
                    let t = Instant::now();
                    stream
                        .reduce(
                            &self.kernel,
                            &self.bufs[dst.buf.index()],
                            dst.range.start,
                            &self.bufs[a.buf.index()],
                            a.range.start,
                            &self.bufs[b.buf.index()],
                            b.range.start,
                            dst.len(),
                        )
                        .map_err(&e)?;
                    p.kernel_ns += ns(t);
                }
                OpKind::ReducePeer { dst, a, from, b } => {
                    let peer = self.peer(*from)?;
                    let t = Instant::now();
                    stream
                        .reduce_peer(
                            &self.kernel,
                            &self.bufs[dst.buf.index()],
                            dst.range.start,
                            &self.bufs[a.buf.index()],
                            a.range.start,
                            &peer[b.buf.index()],
                            b.range.start,
                            dst.len(),
                        )
                        .map_err(&e)?;
                    p.kernel_ns += ns(t);
                }
            }
            if let Some(s) = op.signal.filter(|s| plan.signal_needed[s.0]) {
                if self.capturing {
                    return Err(not_capturable(i, "records an event"));
                }
                let ev = self
                    .events
                    .get(s.0)
                    .ok_or_else(|| Error::Plan("event pool too small".into()))?;
                let t = Instant::now();
                stream.record(ev).map_err(&e)?;
                p.record_ns += ns(t);
                board.publish(s.0, gen);
            }
        }
        p.total_ns = ns(t_all);
        let q = &mut self.profile;
        q.calls += p.calls;
        q.copy_ns += p.copy_ns;
        q.kernel_ns += p.kernel_ns;
        q.record_ns += p.record_ns;
        q.wait_ns += p.wait_ns;
        q.peer_ns += p.peer_ns;
        q.total_ns += p.total_ns;
        Ok(())
    }
}

impl<T: Element> Backend<T> for CudaBackend<T> {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn describe(&self) -> String {
        let mut d: Vec<usize> = self.devices.clone();
        d.sort_unstable();
        d.dedup();
        let names: Vec<String> = d
            .iter()
            .map(|&i| format!("GPU{i} {}", self.names.get(i).map_or("?", String::as_str)))
            .collect();
        let map: Vec<String> = self
            .devices
            .iter()
            .enumerate()
            .map(|(r, g)| format!("{r}->GPU{g}"))
            .collect();
        format!(
            "cuda: {} ({} ranks on {} GPUs: {}); driver API {}",
            names.join(", "),
            self.devices.len(),
            d.len(),
            map.join(" "),
            self.driver_version
        )
    }

    fn ranks(&self) -> usize {
        self.devices.len()
    }

    fn rank_to_device(&self) -> Vec<usize> {
        self.devices.clone()
    }

    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        Ok(self
            .threads
            .run_each(|_| Cmd::TakeProfile)?
            .into_iter()
            .map(|r| match r {
                Reply::Profile(p) => p,
                _ => IssueProfile::default(),
            })
            .collect())
    }

    fn setup_breakdown(&self) -> Option<SetupBreakdown> {
        Some(self.breakdown)
    }

    fn hardware(&self) -> Vec<String> {
        let mut v: Vec<String> = self.names.clone();
        v.push(format!("CUDA driver API {}", self.driver_version));
        v.extend(self.notes.iter().cloned());
        v
    }

    fn reserve(&mut self, count: usize, scratch: usize) -> Result<()> {
        // Every rank drains its streams before any rank frees memory that a
        // peer might still be copying into.
        self.threads.run_each(|_| Cmd::Sync)?;
        let got = self.threads.run_each(|_| Cmd::Reserve { count, scratch })?;
        let peers: Vec<[PeerBuf; 3]> = got
            .into_iter()
            .filter_map(|r| match r {
                Reply::Bufs(b) => Some(b),
                _ => None,
            })
            .collect();
        let peers = Arc::new(peers);
        self.threads.run_each(|_| Cmd::SetPeers(peers.clone()))?;
        Ok(())
    }

    fn write(&mut self, buf: Buf, data: &[&[T]]) -> Result<()> {
        // Other ranks may still be pulling from this rank's send buffer:
        // drain every rank before any rank overwrites its buffers.
        self.threads.run_each(|_| Cmd::Sync)?;
        let all: Arc<Vec<Vec<T>>> = Arc::new(data.iter().map(|d| d.to_vec()).collect());
        self.threads.run_each(|_| Cmd::Write(buf, all.clone()))?;
        Ok(())
    }

    fn fill(&mut self, buf: Buf, count: usize, value: T) -> Result<()> {
        if size_of::<T>() != 4 {
            return Err(Error::Unsupported(
                "fill of non-32-bit types".into(),
                "cuda",
            ));
        }
        let bits = value.to_bits() as u32;
        self.threads.run_each(|_| Cmd::Sync)?;
        self.threads.run_each(|_| Cmd::Fill(buf, count, bits))?;
        Ok(())
    }

    fn read(&mut self, buf: Buf, count: usize) -> Result<Vec<Vec<T>>> {
        Ok(self
            .threads
            .run_each(|_| Cmd::Read(buf, count))?
            .into_iter()
            .map(|r| match r {
                Reply::Data(d) => d,
                _ => Vec::new(),
            })
            .collect())
    }

    fn launch(&mut self, plan: &Arc<Plan>) -> Result<()> {
        plan.check_ranks(self.ranks())?;
        self.ensure_events(plan.signals())?;
        self.gen += 1;
        let (board, gen) = (self.board.clone(), self.gen);
        self.threads
            .run_each(|_| Cmd::Run(plan.clone(), board.clone(), gen))?;
        Ok(())
    }

    fn synchronize(&mut self) -> Result<()> {
        self.threads.run_each(|_| Cmd::Sync)?;
        Ok(())
    }

    fn ping(&mut self) -> Result<()> {
        self.threads.run_each(|_| Cmd::Ping)?;
        Ok(())
    }

    fn nccl_init(&mut self, lib: &nccl::Nccl) -> Result<()> {
        let mut d = self.devices.clone();
        d.sort_unstable();
        d.dedup();
        if d.len() != self.devices.len() {
            return Err(Error::Unsupported(
                format!(
                    "NCCL with {} ranks on {} GPUs (NCCL needs one GPU per rank)",
                    self.devices.len(),
                    d.len()
                ),
                "cuda",
            ));
        }
        let id = lib.unique_id()?;
        let n = self.devices.len();
        self.threads
            .run_each(|_| Cmd::NcclInit(lib.clone(), id, n))?;
        Ok(())
    }

    fn launch_nccl(&mut self, count: usize, in_place: bool) -> Result<()> {
        self.threads.run_each(|_| Cmd::Nccl(count, in_place))?;
        Ok(())
    }

    fn nccl_graph_capture(&mut self, count: usize, in_place: bool, calls: usize) -> Result<()> {
        self.threads
            .run_each(|_| Cmd::NcclCapture(count, in_place, calls))?;
        Ok(())
    }

    fn graph_capture(&mut self, plans: &[Arc<Plan>]) -> Result<()> {
        for p in plans {
            p.check_ranks(self.ranks())?;
        }
        let all = Arc::new(plans.to_vec());
        self.threads.run_each(|_| Cmd::Capture(all.clone()))?;
        Ok(())
    }

    fn launch_graph(&mut self) -> Result<()> {
        self.threads.run_each(|_| Cmd::Graph)?;
        Ok(())
    }

    fn launch_nccl_graph(&mut self) -> Result<()> {
        self.threads.run_each(|_| Cmd::NcclGraph)?;
        Ok(())
    }
}
