//! The IPC exchange: one rank per process.
//!
//! The process owns one rank and one host thread bound to its GPU, running
//! the same [`Rank`] code as the in-process exchange; only how the rank
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

use super::super::front::devices;
use super::super::ipc::Exported;
use super::super::rank::activity::RankTiming;
use super::super::rank::Rank;
use super::super::{
    exchange_gave_up, serve_rank, Cmd, CudaBackend, CudaOptions, Front, Peers, Reply,
};
use super::PeerExchange;
use crate::backend::{BackendInfo, BackendKind, BufId, Call, CallTimeline, SetupBreakdown};
#[cfg(feature = "nccl")]
use crate::cuda::nccl;
use crate::cuda::{self, HostMapped, IpcEventHandle, RemoteEvent};
use crate::error::{Error, Result};
use crate::fault::Fault;
use crate::pool::{Inbox, RankThreads};
use crate::process::reads::PeerReads;
use crate::process::Job as ProcessJob;
use crate::sync::AbortHandle;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// One rank per process, peers through CUDA IPC (see the module doc).
pub(crate) struct Ipc {
    /// Over nodes: the network receiver (dropped first, before the job
    /// that MPI lives in).
    #[cfg(feature = "mpi")]
    receiver: Option<crate::transport::Receiver>,
    /// Over nodes: the node of every rank (ranks of other nodes are never
    /// opened; they are reached through the network, `net.rs`).
    node_of: Option<Vec<usize>>,
    job: Arc<ProcessJob>,
    me: usize,
    device: usize,
    /// Every rank's event tokens (this rank's own, the peers' opened).
    remote: Vec<Vec<RemoteEvent>>,
    /// Calls after whose issue this process kills itself (fault injection).
    kill_at: Vec<u64>,
    /// NCCL communicators made so far (each id goes under its own key).
    #[cfg(feature = "nccl")]
    nccl_inits: u64,
    /// Peers reading this rank's send buffers (see [`crate::process::reads`]).
    reads: PeerReads,
    /// Over nodes: the plans checked to only push.
    #[cfg(feature = "mpi")]
    pushes: crate::transport::PushCheck,
}

impl CudaBackend {
    /// The backend of this process's rank of `job`.
    pub fn process(job: Arc<ProcessJob>, opts: &CudaOptions) -> Result<Self> {
        let (me, n) = (job.rank(), job.size());
        // `ringreduce launch --devices` gives each rank its GPU this way.
        let from_env: Option<Vec<usize>> = crate::param::DEVICES.get()?;
        let (info, devs) = devices(opts.devices.as_ref().or(from_env.as_ref()))?;
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
        let facts = BackendInfo {
            kind: Some(BackendKind::Cuda),
            ranks: n,
            rank_to_device: vec![device; n],
            describe: String::new(),
            hardware: vec![name.clone(), format!("CUDA driver API {}", info.version)],
            setup: None,
        };
        let board = Arc::new(job.signal_board(abort.clone(), timeout));
        #[cfg(feature = "mpi")]
        let node_of = job
            .world()
            .filter(|w| w.nodes() > 1)
            .map(|w| w.node_of.clone());
        #[cfg(not(feature = "mpi"))]
        let node_of = None;
        let mut x = Ipc {
            #[cfg(feature = "mpi")]
            receiver: None,
            node_of,
            remote: vec![Vec::new(); n],
            kill_at,
            #[cfg(feature = "nccl")]
            nccl_inits: 0,
            reads: PeerReads::default(),
            #[cfg(feature = "mpi")]
            pushes: crate::transport::PushCheck::default(),
            job,
            me,
            device,
        };
        let mut front =
            Front::assemble(threads, facts, me..me + 1, board, abort, timeout, Some(me));
        let connected = x.connect(&mut front, &name).and_then(|()| {
            let board = front.board.clone();
            front.on(Box::new(move |rk: &mut Rank<'_>| {
                rk.board = Some(board);
                Ok(())
            }))
        });
        #[cfg(feature = "mpi")]
        let connected = connected.and_then(|()| {
            if x.node_of.is_some() {
                x.start_network(&mut front).map_err(|e| front.failed(e))
            } else {
                Ok(())
            }
        });
        CudaBackend::join(front, Box::new(x), connected)
    }
}

impl Ipc {
    /// Over nodes: start the network receiver (puts filed for the rank
    /// thread, signals raised on the node's board) and hand the rank its
    /// port (see `net.rs`).
    #[cfg(feature = "mpi")]
    fn start_network(&mut self, front: &mut Front) -> Result<()> {
        use super::super::net::{Arrived, NetPort};
        let world = self
            .job
            .world()
            .cloned()
            .ok_or_else(|| Error::internal("a job over nodes with no world"))?;
        let link = crate::transport::Link::new(
            self.job.clone(),
            world.clone(),
            front.abort.clone(),
            front.timeout,
        );
        let port = Arc::new(NetPort::new(link.clone(), world.node_of.clone()));
        let (p, board, me) = (port.clone(), front.board.clone(), self.me);
        let land = Box::new(move |msg: Vec<u8>| -> Result<()> {
            let (put, data) = crate::process::net::wire::Put::decode(&msg)?;
            let at = msg.len() - data.len();
            let bad = |why: &str| {
                Err(Error::internal(format!(
                    "rank {me} received rank {}'s put {why}",
                    put.from
                )))
            };
            if put.to != me {
                return bad(&format!("for rank {}", put.to));
            }
            let Some(s) = put.signal else {
                return bad("with no signal");
            };
            p.file(
                put.gen,
                s,
                Arrived {
                    from: put.from,
                    buf: BufId(put.buf),
                    offset: put.offset,
                    msg,
                    at,
                },
            )?;
            board.publish(s, put.gen);
            Ok(())
        });
        let (d, a) = (port.clone(), port.clone());
        self.receiver = Some(crate::transport::Receiver::start(
            link,
            land,
            Some(Box::new(move |gen, s| d.deliver(gen, s))),
            Some(Box::new(move |n| a.buffer(n))),
            front.board.clone(),
        )?);
        front.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.net = Some(port);
            Ok(())
        }))
    }

    /// Setup after the thread is up: every rank's device, the exchange
    /// flags through IPC, the abort hook, the setup breakdown.
    fn connect(&mut self, front: &mut Front, name: &str) -> Result<()> {
        let (flags, ctrl, setup): (Exported, Weak<HostMapped>, (f64, f64, &'static str)) = front
            .on(Box::new(|rk: &mut Rank<'_>| {
                Ok((rk.export_flags()?, Arc::downgrade(&rk.ctrl), rk.setup_ms))
            }))
            .map_err(|e| front.failed(e))?;
        front.abort.on_halt(move || {
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
        front.info.rank_to_device = all.iter().map(|x| x.device).collect();
        let device = self.device;
        for (_, x) in all.iter().enumerate().filter(|(r, _)| self.reaches(*r)) {
            if x.device != device && !cuda::can_access_peer(device, x.device).unwrap_or(false) {
                return Err(front.failed(Error::CudaSetup {
                    call: "cuDeviceCanAccessPeer",
                    message: format!(
                        "GPU {} cannot access GPU {} directly; peer copies would go through host memory, which this engine refuses to do silently",
                        device, x.device
                    ),
                }));
            }
        }
        let me = self.me;
        let reach: Vec<bool> = (0..all.len()).map(|r| self.reaches(r)).collect();
        // Other processes on this GPU (on this node): their contexts and
        // this one take turns on it.
        let turns: Arc<Vec<bool>> = Arc::new(
            (0..all.len())
                .map(|r| r != me && reach[r] && all[r].device == device)
                .collect(),
        );
        let flags: Vec<_> = front
            .on(Box::new(move |rk: &mut Rank<'_>| {
                rk.turns = turns;
                all.iter()
                    .enumerate()
                    .map(|(r, x)| {
                        // A rank of another node: never opened (the
                        // lowering refuses an exchange with it); its slot
                        // holds this rank's own token.
                        if r == me || !reach[r] {
                            Ok(rk.flags_token())
                        } else {
                            rk.open_buf(x)
                        }
                    })
                    .collect::<Result<Vec<_>>>()
            }))
            .map_err(|e| front.failed(e))?;
        front.peers.flags = flags;
        front.peers.bufs = vec![HashMap::new(); self.job.size()];
        front.share_peers()?;
        let b = SetupBreakdown {
            driver_ms: cuda::driver_init_ms(),
            context_ms: setup.0,
            kernels_ms: setup.1,
            peer_ms: t_peer.elapsed().as_secs_f64() * 1e3,
        };
        front.info.hardware.push(format!(
            "setup: driver load+cuInit {:.1} ms, context bind {:.1} ms, kernel modules {:.1} ms from {}, IPC exchange of the flags {:.1} ms",
            b.driver_ms, b.context_ms, b.kernels_ms, setup.2, b.peer_ms
        ));
        front.info.setup = Some(b);
        let map = &front.info.rank_to_device;
        front.info.describe = format!(
            "cuda: rank {me} of {} processes ({}) on GPU{} {name}; ranks on GPUs {}; peers through CUDA IPC",
            self.job.size(),
            self.job.spec().origin.name(),
            device,
            map.iter()
                .enumerate()
                .map(|(r, g)| format!("{r}->GPU{g}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        if let Some(n) = &self.node_of {
            let mut nodes = n.clone();
            nodes.sort_unstable();
            nodes.dedup();
            let nodes = nodes.len();
            let mine: Vec<usize> = (0..n.len()).filter(|&r| self.reaches(r)).collect();
            front.info.describe = format!(
                "{}; on {nodes} nodes (this is node {}: ranks {mine:?}), CUDA IPC inside a node, MPI point-to-point between nodes (host-staged: device to host, a message, host to device)",
                front.info.describe,
                n.get(me).copied().unwrap_or(0)
            );
        }
        Ok(())
    }

    /// Drop every rank's tokens of `id` whose owner says `replaced[r]`
    /// (closing this process's mappings of them).
    fn close_peers(&mut self, front: &mut Front, id: BufId, replaced: &[bool]) -> Result<()> {
        for r in super::super::peers::to_reopen(front.peers.bufs.len(), replaced, |_| true) {
            front.peers.bufs[r].remove(&id);
        }
        front.share_peers()
    }

    fn reserve_inner(&mut self, front: &mut Front, id: BufId, want: usize) -> Result<()> {
        let me = self.me;
        let have: Option<usize> = front.on(Box::new(move |rk: &mut Rank<'_>| {
            Ok(rk.bufs.get(&id).map(|b| b.len()))
        }))?;
        let grows = have.is_none_or(|h| h < want);
        let flags = self.job.allgather(
            &[u8::from(grows)],
            &format!("reserve of buffer {} (every rank idle)", id.0),
        )?;
        let replaced: Vec<bool> = flags.iter().map(|b| b.first() == Some(&1)).collect();
        self.close_peers(front, id, &replaced)?;
        self.job.barrier(&format!(
            "reserve of buffer {} (every peer closed its old mapping)",
            id.0
        ))?;
        let x: Exported = front
            .on(Box::new(move |rk: &mut Rank<'_>| {
                let own = rk.reserve(id, want)?;
                drop(own);
                rk.export_buf(id)
            }))
            .map_err(|e| front.failed(e))?;
        let all = self.job.allgather(
            &x.encode(),
            &format!("reserve of buffer {} (exchanging handles)", id.0),
        )?;
        let all: Vec<Exported> = all
            .iter()
            .map(|b| Exported::decode(b))
            .collect::<Result<_>>()?;
        let mut reopen = super::super::peers::to_reopen(all.len(), &replaced, |r| {
            front.peers.bufs.get(r).is_some_and(|m| m.contains_key(&id))
        });
        reopen.retain(|&r| self.reaches(r));
        let todo: Vec<(usize, Exported)> = all
            .into_iter()
            .enumerate()
            .filter(|(r, _)| reopen.contains(r))
            .collect();
        let opened: Vec<(usize, crate::cuda::PeerBuf)> = front
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
            .map_err(|e| front.failed(e))?;
        for (r, t) in opened {
            front.peers.bufs[r].insert(id, t);
        }
        front.share_peers()
    }
}

impl Ipc {
    /// Whether rank `r` is on this process's node (every rank, on one).
    fn reaches(&self, r: usize) -> bool {
        self.node_of
            .as_ref()
            .is_none_or(|n| n.get(r) == n.get(self.me))
    }
}

impl PeerExchange for Ipc {
    /// Grow this rank's interprocess events to cover `n` signals, and open
    /// every peer's new ones (collective: every rank launches the same
    /// plans, so every rank grows at the same call).
    fn ensure_events(&mut self, front: &mut Front, n: usize) -> Result<()> {
        let Some(want) =
            super::super::peers::events_to_grow(n, front.events, Some(front.board.len()))?
        else {
            return Ok(());
        };
        let from = front.events;
        let mine: Vec<IpcEventHandle> = front
            .on(Box::new(move |rk: &mut Rank<'_>| {
                rk.grow_ipc_events(want, from)
            }))
            .map_err(|e| front.failed(e))?;
        let bytes = super::super::peers::encode_events(&mine);
        let all = self
            .job
            .allgather(&bytes, "exchanging interprocess events")?;
        let me = self.me;
        let reach: Vec<bool> = (0..all.len()).map(|r| self.reaches(r)).collect();
        let opened: Vec<Vec<RemoteEvent>> = front
            .on(Box::new(move |rk: &mut Rank<'_>| {
                all.iter()
                    .enumerate()
                    .map(|(r, b)| {
                        if r == me {
                            return Ok(rk.own_events(from));
                        }
                        if !reach[r] {
                            return Ok(Vec::new());
                        }
                        rk.open_events(&super::super::peers::decode_events(b))
                    })
                    .collect::<Result<Vec<_>>>()
            }))
            .map_err(|e| front.failed(e))?;
        for (r, v) in opened.into_iter().enumerate() {
            self.remote[r].extend(v);
        }
        let remote = Arc::new(self.remote.clone());
        front.on(Box::new(move |rk: &mut Rank<'_>| {
            rk.remote = remote;
            Ok(())
        }))?;
        front.events = want;
        Ok(())
    }

    /// Wait (bounded) until this rank's streams are idle. An exchange
    /// kernel that gave up poisons the job (its peer in another process may
    /// still run; the call numbering cannot be restarted in step).
    fn drain(&mut self, front: &mut Front) -> Result<()> {
        // Wait in short tries, looking at the job's health between them: a
        // stream waiting on a dead peer's event would otherwise hold this
        // rank for the whole timeout.
        let start = Instant::now();
        let limit = front.timeout + Duration::from_secs(5);
        loop {
            let idle = front.on(Box::new(|rk: &mut Rank<'_>| {
                rk.idle_within(Duration::from_millis(20))
            }))?;
            if idle || start.elapsed() > limit {
                break;
            }
            if let Some(f) = self.job.health() {
                // Whatever spins on this GPU waiting for the failed peer
                // (an exchange kernel on its flags) stops now, not at its
                // deadline.
                front.abort.halt_device();
                return Err(front.failed(f.error(self.me, "this rank's GPU work")));
            }
        }
        let r = front.on(Box::new(|rk: &mut Rank<'_>| rk.sync()));
        if r.is_ok() {
            // Every call so far is complete on this GPU: it reads no peer's
            // input any more.
            self.job.control().publish_drained(front.gen);
        }
        if let Err(e) = &r {
            if exchange_gave_up(e) {
                return Err(front.failed(Error::Poisoned {
                    reason: format!("an exchange kernel gave up waiting for its peer process: {e}"),
                }));
            }
        }
        r
    }

    /// Collective: every rank of the job calls it with the same `bytes`.
    fn reserve(&mut self, front: &mut Front, id: BufId, bytes: &[usize]) -> Result<()> {
        self.drain(front)?;
        self.reads.forget(id);
        let want = bytes.get(self.me).copied().unwrap_or(0);
        self.reserve_inner(front, id, want)
            .map_err(|e| front.failed(e))
    }

    /// Collective, like [`PeerExchange::reserve`].
    fn release(&mut self, front: &mut Front, id: BufId) -> Result<()> {
        self.drain(front)?;
        self.job
            .barrier(&format!("release of buffer {} (every rank idle)", id.0))?;
        let n = self.job.size();
        self.close_peers(front, id, &vec![true; n])?;
        self.reads.forget(id);
        self.job.barrier(&format!(
            "release of buffer {} (every peer closed its mapping)",
            id.0
        ))?;
        front.on(Box::new(move |rk: &mut Rank<'_>| rk.release(id)))
    }

    fn teardown(&mut self, front: &mut Front) {
        // Drain this rank; then, unless the job already failed, wait until
        // every rank is idle and close the peers' mappings before this
        // process's memory goes (an exported allocation must not be freed
        // while another process has it open).
        let drained = self.drain(front).is_ok() || {
            front.abort.abort();
            self.drain(front).is_ok()
        };
        if !drained {
            let _ = front.on(Box::new(|rk: &mut Rank<'_>| {
                rk.leak();
                Ok(())
            }));
            if front.threads.broken().is_some() {
                // The rank thread is stuck in a driver call and keeps its
                // context: nothing of the driver's may be released from
                // this thread (it would wait on the driver's lock behind
                // the stuck one). Leak this side's handles too.
                std::mem::forget(std::mem::take(&mut front.peers));
                std::mem::forget(std::mem::take(&mut self.remote));
                std::mem::forget(std::mem::take(&mut front.held));
                #[cfg(feature = "nccl")]
                std::mem::forget(std::mem::take(&mut front.held_nccl));
            }
            return;
        }
        if self.job.health().is_none() && self.job.barrier("teardown (every rank idle)").is_ok() {
            front.peers = Peers::default();
            self.remote = Vec::new();
            let _ = front.share_peers();
            let _ = front.on(Box::new(|rk: &mut Rank<'_>| {
                rk.remote = Arc::new(Vec::new());
                Ok(())
            }));
            let _ = self
                .job
                .barrier("teardown (every peer closed its mappings)");
        }
    }

    fn begin(&mut self, front: &Front, call: &Call, gen: u64) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let Some(node_of) = &self.node_of {
            self.pushes.check(&call.plan, "cuda", node_of)?;
        }
        if let Err(e) = self.reads.begin(call, self.me, gen, self.job.control()) {
            return Err(front.failed(e));
        }
        Ok(())
    }

    fn issued(&mut self, gen: u64) {
        if self.kill_at.contains(&gen) {
            // Issued, not complete: the peers are inside the call.
            crate::sys::proc::kill_self();
        }
    }

    fn before_write(&mut self, id: BufId) -> Result<()> {
        self.reads.before_write(id, self.job.control())
    }

    /// `ncclGetUniqueId` on rank 0, its 128 bytes through the store (or,
    /// in a job that met through the caller's key-value store, the control
    /// segment's all-gather), then `ncclCommInitRank` in every process.
    #[cfg(feature = "nccl")]
    fn nccl_id(&mut self, front: &Front, lib: &nccl::Nccl) -> Result<nccl::UniqueId> {
        self.nccl_inits += 1;
        let key = format!("nccl-id-{}", self.nccl_inits);
        let what = "the NCCL unique id (ncclGetUniqueId on rank 0)";
        // Over nodes each node has its own store: the id goes through the
        // job's all-gather (MPI) instead.
        let Some(store) = self.job.store().filter(|_| self.node_of.is_none()) else {
            let mine = if self.me == 0 {
                lib.unique_id()
                    .map_err(|e| front.failed(e.into()))?
                    .as_bytes()
                    .to_vec()
            } else {
                Vec::new()
            };
            let all = self.job.allgather(&mine, what)?;
            return Ok(nccl::UniqueId::from_bytes(
                all.first().map_or(&[][..], Vec::as_slice),
            )?);
        };
        if self.me == 0 {
            let id = lib.unique_id().map_err(|e| front.failed(e.into()))?;
            store.put(&key, id.as_bytes())?;
            Ok(id)
        } else {
            let b = store.get(&key, 0, what)?;
            Ok(nccl::UniqueId::from_bytes(&b)?)
        }
    }

    fn ordered(&self) -> Result<()> {
        Err(refuse_ordered())
    }

    fn joint_graphs(&self, plan: &str) -> Result<()> {
        Err(refuse_joint_graphs(plan))
    }

    fn timelines(
        &self,
        calls: Vec<(String, f64)>,
        per_rank: Vec<RankTiming>,
        nccl: bool,
    ) -> Vec<CallTimeline> {
        own_timelines(calls, per_rank, nccl)
    }
}

/// Stream-ordered calls are refused, with the reason
/// (`backend::ordered::refused_with_one_rank_per_process`).
pub(super) fn refuse_ordered() -> Error {
    crate::backend::ordered::refused_with_one_rank_per_process("cuda")
}

/// A joint graph of `plan` is refused: its steps are ordered with events
/// between processes.
pub(super) fn refuse_joint_graphs(plan: &str) -> Error {
    Error::Unsupported(
        format!("CUDA graph capture of {plan} (orders steps with events)"),
        "cuda",
    )
}

/// The timelines of this process's rank only, on its own host clock (other
/// processes' clocks are not aligned with it).
pub(super) fn own_timelines(
    calls: Vec<(String, f64)>,
    per_rank: Vec<RankTiming>,
    nccl: bool,
) -> Vec<CallTimeline> {
    let mine = per_rank.into_iter().next().map(|p| p.0).unwrap_or_default();
    calls
        .into_iter()
        .zip(mine)
        .map(|((plan, launch_ns), (ops, source))| CallTimeline {
            plan,
            clock: if nccl {
                "GPU event timestamps of this rank's process, placed on its host clock through an anchor event".into()
            } else {
                format!("{}; device timestamps of this rank's process, placed on its host clock (other processes' clocks are not aligned with it)", source.line())
            },
            launch_ns,
            skew_ns: 0.0,
            ops,
        })
        .collect()
}
