//! The network transport (the `mpi` feature): one rank per process, as
//! [`Shm`] inside a node, and MPI point-to-point to the ranks of other
//! nodes.
//!
//! Inside a node nothing changes: a rank's buffers are shared segments its
//! node's peers map, the plans' signals live on the node's control
//! segment ([`Shm`] does it all, over the node's job). A rank on another
//! node is never mapped (no handle of it is opened) and shares no board;
//! it is reached by messages ([`crate::process::net::wire`]), the way NCCL's net
//! transport reaches a remote GPU through its proxy thread:
//!
//! * a **put**: a plan copy into a rank of another node is sent by the
//!   copying rank's thread as one message (where it lands, the data, the
//!   copy's signal); the receiving process's [`Receiver`] thread writes
//!   it into the destination buffer and raises the signal on its node's
//!   board. On the sender's node the copy's signal is raised when the send
//!   completed (the source may then be reused);
//! * a **signal**: any other signal a rank of another node waits for (a
//!   Begin fence, a reduce that frees a receive slot) is sent to one rank
//!   of each such node, whose receiver raises it there;
//! * a **failure**: a failure recorded on a node (a rank's error, a dead
//!   process) is sent to every rank of the other nodes by the receiver
//!   that sees it, so every wait of the job ends naming the failed rank.
//!
//! Every send is bounded by the job's timeout and ends early when the job
//! fails or the engine is aborted. Plans whose ranks read a peer's memory
//! (the pull one-shots, the parameter server) are refused: across a
//! network a rank can only push. The bytes each rank sends to other nodes
//! are counted ([`crate::plan::Traffic::network`]).

use super::{RankMemory, Storage};
use super::{Shm, Transport, Wire};
use crate::element::{combine_serial, Combine, DataType, DevOp};
use crate::error::{Error, Result};
use crate::plan::{BufId, Call};
use crate::process::net::wire::{self, Put, TAG_BEAT, TAG_BYE, TAG_FAIL, TAG_PUT, TAG_SIGNAL};
use crate::process::net::World;
use crate::process::Job;
use crate::sync::{AbortHandle, SignalBoard};
use crate::sys::mpi::{Bound, Mpi, MpiOp, MpiType, PendingSend};
use crate::sys::shm::{Export, Mapping};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the rank threads and the receiver share: the world and the job.
pub(crate) struct Link {
    mpi: &'static Mpi,
    world: Arc<World>,
    job: Arc<Job>,
    abort: AbortHandle,
    timeout: Duration,
    /// The receiving side's state, once the receiver started: polled by
    /// the receiver thread or by a waiting rank, one at a time.
    receiving: Mutex<Option<Receiving>>,
    /// Whether the current call sends this process messages
    /// ([`Wire::expect_messages`]; until told, yes).
    expecting: AtomicBool,
}

impl Link {
    /// The link of this process's rank of `job` (bootstrapped through MPI
    /// as `world`); `abort` ends its sends.
    pub(crate) fn new(
        job: Arc<Job>,
        world: Arc<World>,
        abort: AbortHandle,
        timeout: Duration,
    ) -> Arc<Link> {
        Arc::new(Link {
            mpi: world.mpi,
            abort,
            world,
            job,
            timeout,
            receiving: Mutex::new(None),
            expecting: AtomicBool::new(true),
        })
    }

    /// Why a send must stop now: an abort, a failed or dead rank.
    /// Whether a wait of this link (`doing`: "sending" or "receiving"
    /// `what`) must end: the engine was aborted, or the job failed.
    fn stop(&self, doing: &str, what: &dyn Fn() -> String) -> Result<()> {
        if self.abort.is_aborted() {
            return Err(Error::Aborted {
                rank: self.mpi.rank,
                what: format!("{doing} {}", what()),
                wait: crate::error::WaitKind::Host,
            });
        }
        self.job.control().check(what)
    }

    fn send(
        &self,
        to: usize,
        tag: i32,
        msg: Vec<u8>,
        what: &dyn Fn() -> String,
    ) -> Result<Vec<u8>> {
        let stop = || self.stop("sending", what);
        let bound = Bound::after(self.timeout, &stop, what);
        self.mpi
            .send(self.mpi.world, msg, to, tag, &bound)
            .map_err(|e| link_failed(e, what))
    }

    /// Send `msg` with `tag` to each rank of `to` not marked in `skip`, all
    /// at once, and wait for the sends together, at most `limit` (best
    /// effort: a peer may be gone; the sends still on their way then are
    /// cancelled).
    fn broadcast(&self, tag: i32, msg: &[u8], to: &[usize], skip: &[bool], limit: Duration) {
        let sends = to
            .iter()
            .filter(|&&r| !skip.get(r).copied().unwrap_or(false))
            .filter_map(|&r| self.mpi.isend(self.mpi.world, msg.to_vec(), r, tag).ok())
            .collect();
        settle(sends, Instant::now() + limit.min(self.timeout));
    }

    /// The ranks of the other nodes.
    fn remote(&self) -> Vec<usize> {
        let w = &self.world;
        (0..w.node_of.len())
            .filter(|&r| w.node_of[r] != w.node)
            .collect()
    }

    /// Tell every rank of the other nodes, except those marked in `skip`
    /// (known lost or gone), that `rank` failed.
    fn broadcast_failure(&self, gen: u64, rank: usize, why: &str, skip: &[bool]) {
        let msg = wire::failure(gen, rank, why);
        self.broadcast(TAG_FAIL, &msg, &self.remote(), skip, BROADCAST);
    }
}

impl Wire for Link {
    fn node(&self, rank: usize) -> usize {
        self.world.node_of.get(rank).copied().unwrap_or(usize::MAX)
    }

    #[allow(clippy::too_many_arguments)]
    fn put_message(
        &self,
        from: usize,
        to: usize,
        buf: BufId,
        offset: usize,
        signal: Option<usize>,
        gen: u64,
        data: &[u8],
        out: &mut Vec<u8>,
    ) {
        Put {
            gen,
            signal,
            from,
            to,
            buf: buf.0,
            offset,
        }
        .encode_into(data, out);
    }

    fn put_max(&self) -> usize {
        self.world.put_max
    }

    fn send_put(&self, from: usize, to: usize, msg: Vec<u8>) -> Result<Vec<u8>> {
        self.send(to, TAG_PUT, msg, &|| {
            format!("rank {from}'s copy to rank {to} on node {}", self.node(to))
        })
    }

    fn signal(&self, from: usize, to: usize, signal: usize, gen: u64) -> Result<()> {
        self.send(to, TAG_SIGNAL, wire::signal(gen, signal, from), &|| {
            format!("rank {from}'s signal {signal} to rank {to}")
        })
        .map(drop)
    }

    fn rail_all_reduce(
        &self,
        rank: usize,
        members: &[usize],
        data: Vec<u8>,
        dtype: DataType,
        op: DevOp,
    ) -> Result<Vec<u8>> {
        self.on_rail(rank, members, |rail, bound| {
            let Some(ty) = mpi_type(dtype) else {
                // MPI has no half, bfloat16 or FP8, and Open MPI sums the
                // 8-bit integers wrong (`mpi_type`): every member gathers
                // the rail's contributions and reduces them itself, in rail
                // order with this engine's own arithmetic, so every member
                // computes the same bits.
                let all = self.mpi.allgather_equal(rail, &data, bound)?;
                let c = Combine {
                    dtype,
                    op,
                    scalar: 0,
                    pre_a: false,
                    pre_b: false,
                    post: false,
                };
                let mut parts = all.chunks(data.len().max(1));
                let mut sum = parts.next().map(<[u8]>::to_vec).unwrap_or_default();
                for p in parts {
                    // This thread alone: not on rayon's global pool.
                    combine_serial(&c, &mut sum, None, p).map_err(Error::internal)?;
                }
                return Ok(sum);
            };
            self.mpi.allreduce(rail, data, (ty, mpi_op(op)), bound)
        })
    }

    fn rail_in_place(&self, dtype: DataType) -> bool {
        mpi_type(dtype).is_some()
    }

    fn rail_all_reduce_mapped(
        &self,
        rank: usize,
        members: &[usize],
        m: &mut Mapping,
        range: Range<usize>,
        dtype: DataType,
        op: DevOp,
    ) -> Result<()> {
        let ty = mpi_type(dtype)
            .ok_or_else(|| Error::internal(format!("an in-place rail all-reduce of {dtype:?}")))?;
        self.on_rail(rank, members, |rail, bound| {
            self.mpi
                .allreduce_mapped(rail, m, range, (ty, mpi_op(op)), bound)
        })
    }

    /// Poll once for the receiver, unless it (or another waiting rank)
    /// is polling now.
    fn progress(&self) {
        self.poll_once();
    }

    fn expect_messages(&self, incoming: bool) {
        self.expecting.store(incoming, Ordering::Relaxed);
    }
}

impl Link {
    /// One poll of the receiving state by whoever calls, the receiver
    /// thread or a waiting rank; `None` while another holds it.
    fn poll_once(&self) -> Option<Polled> {
        let mut g = match self.receiving.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            // A poll that panicked left the state as consistent as any
            // poll leaves it.
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        };
        Some(g.as_mut().map_or(Polled::Quiet, |r| r.poll(self)))
    }

    /// `f` on rank `rank`'s rail communicator, bounded from now for the
    /// job's timeout; `members` must be that rail (the plan's nodes the
    /// job's).
    fn on_rail<R>(
        &self,
        rank: usize,
        members: &[usize],
        f: impl FnOnce(crate::sys::mpi::Comm, &Bound<'_>) -> Result<R>,
    ) -> Result<R> {
        let rail = &self.world.rail_members;
        if members != rail.as_slice() {
            return Err(Error::Unsupported(
                format!(
                    "rank {rank}: a rail's all-reduce over ranks {members:?}, but rank {rank}'s rail in this job is {rail:?} (the plan's nodes are not the job's: see RINGREDUCE_RANKS_PER_NODE and the launcher's layout)"
                ),
                "cpu",
            ));
        }
        let what = || format!("rank {rank}'s rail (ranks {members:?}) in MPI's collective");
        let stop = || self.stop("reducing", &what);
        f(self.world.rail, &Bound::after(self.timeout, &stop, &what))
    }
}

/// MPI's type of `dtype`, where the rail may hand it MPI's reduction: not
/// half, bfloat16 or FP8 (MPI has none), and not the 8-bit integers, whose
/// sums Open MPI 4.1's vectorized ops saturate instead of wrapping (127 for
/// 100 + 100 in `int8`; open-mpi/ompi#8045, closed "wontfix"), so a
/// `hier:G:mpi` sum of `int8` or `uint8` over nodes came back wrong: those
/// go the gathering way too.
fn mpi_type(dtype: DataType) -> Option<MpiType> {
    Some(match dtype {
        DataType::Int32 => MpiType::I32,
        DataType::Uint32 => MpiType::U32,
        DataType::Int64 => MpiType::I64,
        DataType::Uint64 => MpiType::U64,
        DataType::Float => MpiType::F32,
        DataType::Double => MpiType::F64,
        _ => return None,
    })
}

/// MPI's op for `op`: the pre- and post-ops are applied around the
/// collective by the caller.
fn mpi_op(op: DevOp) -> MpiOp {
    match op {
        DevOp::Sum | DevOp::PreMulSum | DevOp::SumPostDiv => MpiOp::Sum,
        DevOp::Prod => MpiOp::Prod,
        DevOp::Max => MpiOp::Max,
        DevOp::Min => MpiOp::Min,
    }
}

/// An error of MPI on a call with one peer is the link to that peer
/// failing, and what this rank can tell of it is that the peer failed: a
/// live rank is the one that reports it (a dead one reports nothing), so
/// the job's failure names the peer, not the survivor that noticed (an
/// `MPI_Isend` to a killed process fails with `MPI_ERR_INTERN` in Open MPI
/// before the process's silence is noticed). Every other error is
/// returned as it is.
fn link_failed(e: Error, what: &dyn Fn() -> String) -> Error {
    match e {
        Error::Mpi {
            rank,
            peer: Some(peer),
            call,
            message,
        } if peer != rank => Error::peer_failed(
            peer,
            &format!("MPI could not reach it from rank {rank} ({call}: {message})"),
            format!("rank {rank} at {}", what()),
        ),
        e => e,
    }
}

/// What the receiver does with a put (the whole message, header and
/// data): land it and raise its signal (the CPU backend), or file it for
/// the destination rank's thread and raise the signal (the CUDA backend).
pub(crate) type Landing = Box<dyn Fn(Vec<u8>) -> Result<()> + Send>;

/// Where the receiver takes the memory of a message of `n` bytes from (the
/// CUDA backend reuses the landed ones'), zeroed or not.
pub(crate) type Alloc = Box<dyn Fn(usize) -> Vec<u8> + Send>;

/// Told of every signal the receiver raises, before it raises it (the
/// CUDA backend marks it as reached this process).
pub(crate) type Delivered = Box<dyn Fn(u64, usize) + Send>;

/// The receiving side of this process: a thread that takes every message
/// of the other nodes and applies it (NCCL's proxy thread). A rank that
/// waits on a signal takes messages too while it waits
/// ([`Wire::progress`]): whoever holds the receiving state polls, so a
/// message that ends a rank's wait is taken by that rank, with no hand-off
/// from the thread.
pub(crate) struct Receiver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Its link: how long dropping it waits for the thread (the job's
    /// timeout), and the job to fail if it does not end.
    link: Arc<Link>,
}

impl Receiver {
    /// Start the receiver: puts go to `land`, signals to `board`.
    pub(crate) fn start(
        link: Arc<Link>,
        land: Landing,
        delivered: Option<Delivered>,
        alloc: Option<Alloc>,
        board: Arc<SignalBoard>,
    ) -> Result<Receiver> {
        let stop = Arc::new(AtomicBool::new(false));
        *lock(&link.receiving) = Some(Receiving {
            land,
            alloc,
            delivered,
            board,
            stop: stop.clone(),
            live: Liveness::new(&link),
            forwarded: false,
            last_health: Instant::now(),
        });
        let kept = link.clone();
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ringreduce-net".into())
            .spawn(move || receive(&link, &s))
            .map_err(|e| {
                lock(&kept.receiving).take();
                Error::Worker {
                    rank: 0,
                    message: format!("could not start the network receiver thread: {e}"),
                }
            })?;
        Ok(Receiver {
            stop,
            thread: Some(thread),
            link: kept,
        })
    }
}

impl Drop for Receiver {
    /// Stop the thread and wait for it, at most the job's timeout: every
    /// wait of the thread is bounded and polls the stop, but a call into
    /// MPI on a connection to a dead process is MPI's, and may not return.
    /// Then the thread is left behind (it owns what it uses) rather than
    /// hang the process. The job is then failed, so that this process
    /// does not finalize MPI under a thread still inside it.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let until = Instant::now() + self.link.timeout;
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                self.link.job.control().record_failure(
                    0,
                    self.link.mpi.rank,
                    "its network receiver did not stop within the timeout",
                );
            }
        }
    }
}

/// A mutex's guard, poisoned or not (a poll that panicked left the state
/// as consistent as any poll leaves it).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Write a put into its destination and raise its signal.
fn land(mem: &dyn RankMemory, board: &SignalBoard, msg: &[u8]) -> Result<()> {
    let (p, data) = Put::decode(msg)?;
    mem.land(p.from, p.to, BufId(p.buf), p.offset, data)?;
    if let Some(s) = p.signal {
        board.publish(s, p.gen);
    }
    Ok(())
}

/// Wait until every send of `sends` completed, at most until `until`; the
/// ones still on their way are then dropped (cancelled).
fn settle(mut sends: Vec<PendingSend>, until: Instant) {
    while Instant::now() < until {
        sends.retain_mut(|p| !p.done().unwrap_or(true));
        if sends.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// How long a failure or a goodbye waits for its sends: a small message to
/// a live process completes in microseconds; one to a dead process never
/// does (a live rank left untold notices this one's silence instead).
const BROADCAST: Duration = Duration::from_millis(500);

/// How often a receiver tells the other nodes' ranks it is alive.
const BEAT: Duration = Duration::from_millis(100);

/// How long a rank of another node may be silent (no message at all, the
/// heartbeats included) before it counts as lost: half the timeout, from
/// 1 s to 10 s. Before its first message, the whole timeout (it may still
/// be starting).
fn silence_limit(timeout: Duration) -> Duration {
    (timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// What a receiver knows of the ranks of the other nodes: when each was
/// last heard from, which said goodbye, and the heartbeat on its way to
/// each.
struct Liveness {
    start: Instant,
    heard: Vec<Option<Instant>>,
    left: Vec<bool>,
    beats: Vec<Option<PendingSend>>,
    last_beat: Option<Instant>,
    remote: Vec<usize>,
    silence: Duration,
    timeout: Duration,
}

impl Liveness {
    fn new(link: &Link) -> Liveness {
        let n = link.world.node_of.len();
        Liveness {
            start: Instant::now(),
            heard: vec![None; n],
            left: vec![false; n],
            beats: (0..n).map(|_| None).collect(),
            last_beat: None,
            remote: link.remote(),
            silence: silence_limit(link.timeout),
            timeout: link.timeout,
        }
    }

    /// Send a heartbeat to every rank of the other nodes that has not said
    /// goodbye, at most one on its way to each (best effort: a send that
    /// fails is the silence the other side notices).
    fn beat(&mut self, link: &Link) {
        if self.last_beat.is_some_and(|t| t.elapsed() < BEAT) {
            return;
        }
        self.last_beat = Some(Instant::now());
        for &r in &self.remote {
            if self.left[r] {
                continue;
            }
            let busy = match &mut self.beats[r] {
                Some(p) => !p.done().unwrap_or(true),
                None => false,
            };
            if !busy {
                self.beats[r] = link.mpi.isend(link.mpi.world, Vec::new(), r, TAG_BEAT).ok();
            }
        }
    }

    /// How long rank `r` of another node has been silent, if too long.
    fn quiet(&self, r: usize) -> Option<Duration> {
        let (since, limit) = match self.heard[r] {
            Some(t) => (t, self.silence),
            None => (self.start, self.timeout),
        };
        let quiet = since.elapsed();
        (!self.left[r] && quiet > limit).then_some(quiet)
    }

    /// The first rank of another node silent for too long: (rank, seconds).
    fn lost(&self) -> Option<(usize, f64)> {
        self.remote
            .iter()
            .find_map(|&r| self.quiet(r).map(|q| (r, q.as_secs_f64())))
    }

    /// The ranks not to send to any more: gone (goodbye) or lost (silent).
    fn gone(&self) -> Vec<bool> {
        let mut gone = self.left.clone();
        for &r in &self.remote {
            gone[r] |= self.quiet(r).is_some();
        }
        gone
    }

    /// Wait a little for the heartbeats still on their way, then drop
    /// (cancel) the rest: none may be pending when MPI is finalized.
    fn settle(&mut self) {
        let beats = self.beats.iter_mut().filter_map(Option::take).collect();
        settle(beats, Instant::now() + BROADCAST);
    }
}

/// What the receiving side holds between polls: where messages go, what
/// it knows of the other nodes, and whether this node's failure was told.
struct Receiving {
    land: Landing,
    alloc: Option<Alloc>,
    delivered: Option<Delivered>,
    board: Arc<SignalBoard>,
    /// The receiver's stop: a receive it ends is no failure of the job.
    stop: Arc<AtomicBool>,
    live: Liveness,
    /// The job failed and the other nodes were told: nothing that arrives
    /// can matter any more.
    forwarded: bool,
    last_health: Instant,
}

/// What one poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    /// A message, taken and applied.
    Message,
    /// Nothing yet.
    Nothing,
    /// The job failed and the other nodes know it: polling MPI on
    /// connections to dead processes only makes Open MPI print an error
    /// per poll, so nothing is polled any more.
    Quiet,
}

impl Receiving {
    /// One poll: the heartbeats, at most one message taken and applied,
    /// and every 5 ms the other nodes' silence and this node's health (the
    /// first failure forwarded to the other nodes).
    fn poll(&mut self, link: &Link) -> Polled {
        if self.forwarded {
            return Polled::Quiet;
        }
        let control = link.job.control();
        let me = link.mpi.rank;
        self.live.beat(link);
        let polled = match self.take(link) {
            Ok(true) => Polled::Message,
            Ok(false) => Polled::Nothing,
            // A receive ended by the receiver's own stop (this process is
            // done with the job) is not a failure of the job.
            Err(_) if self.stop.load(Ordering::Acquire) => Polled::Nothing,
            Err(e) => {
                match link_failed(e, &|| "receiving".to_string()) {
                    Error::PeerFailed { rank, reason, .. } => {
                        control.record_failure(0, rank, &reason)
                    }
                    e => {
                        control.record_failure(0, me, &format!("its network receiver failed: {e}"))
                    }
                }
                Polled::Nothing
            }
        };
        if self.last_health.elapsed() > Duration::from_millis(5) {
            self.last_health = Instant::now();
            if let Some((r, quiet)) = self.live.lost() {
                // A node that died cannot say so: its silence does.
                control.record_failure(
                    0,
                    r,
                    &format!(
                        "its process on node {} went silent (no message for {quiet:.1} s: the node died or cannot be reached)",
                        link.node(r)
                    ),
                );
            }
            // health() also notices a dead rank of this node.
            if control.health().is_some() {
                if let Some((gen, rank, why)) = control.failure() {
                    self.forwarded = true;
                    link.broadcast_failure(gen, rank, &why, &self.live.gone());
                }
            }
        }
        polled
    }

    /// Take one message, if one is there, and apply it.
    fn take(&mut self, link: &Link) -> Result<bool> {
        let me = link.mpi.rank;
        let Some((src, tag, bytes)) = link.mpi.iprobe(link.mpi.world)? else {
            return Ok(false);
        };
        if let Some(h) = self.live.heard.get_mut(src) {
            *h = Some(Instant::now());
        }
        let what = || format!("a message of {bytes} B from rank {src} (tag {tag})");
        // Bounded like every wait: the receiver stopping, an abort, the
        // job's failure, or the timeout end it.
        let stop = &self.stop;
        let halt = || {
            if stop.load(Ordering::Acquire) {
                return Err(Error::Aborted {
                    rank: me,
                    what: format!("receiving {}", what()),
                    wait: crate::error::WaitKind::Host,
                });
            }
            link.stop("receiving", &what)
        };
        let memory = match &self.alloc {
            Some(a) => a(bytes),
            None => vec![0u8; bytes],
        };
        let bound = Bound::after(link.timeout, &halt, &what);
        let buf = link.mpi.recv(link.mpi.world, memory, src, tag, &bound)?;
        match tag {
            TAG_PUT => (self.land)(buf)?,
            TAG_SIGNAL => {
                let (gen, s, _) = wire::decode_signal(&buf)?;
                if let Some(d) = &self.delivered {
                    d(gen, s);
                }
                self.board.publish(s, gen);
            }
            TAG_FAIL => {
                let (gen, rank, why) = wire::decode_failure(&buf)?;
                // Another node's failure: recorded here, never sent back.
                self.forwarded = true;
                link.job.control().record_failure(gen, rank, &why);
            }
            TAG_BEAT => {}
            TAG_BYE => {
                if let Some(l) = self.live.left.get_mut(src) {
                    *l = true;
                }
            }
            t => {
                return Err(Error::Mpi {
                    rank: me,
                    peer: Some(src),
                    call: "MPI_Recv",
                    message: format!("a message with the unknown tag {t}"),
                })
            }
        }
        Ok(true)
    }

    /// The receiver stops: this process is done with the job, maybe
    /// because of a failure it saw first (a dead rank of this node)
    /// between two polls. Told now, or the ranks of the other nodes would
    /// wait for it until their timeout; a clean end says goodbye instead.
    fn finish(mut self, link: &Link) {
        let control = link.job.control();
        if !self.forwarded && control.health().is_some() {
            if let Some((gen, rank, why)) = control.failure() {
                link.broadcast_failure(gen, rank, &why, &self.live.gone());
            }
        }
        if control.health().is_none() {
            // Done with the job, cleanly: from now on this process's
            // silence is no failure.
            link.broadcast(TAG_BYE, &[], &self.live.remote, &self.live.left, BROADCAST);
        }
        self.live.settle();
    }
}

/// The receiver thread: polls whenever no waiting rank does, naps when
/// nothing comes, and finishes the receiving state once stopped. While
/// the calls send this process no message (the rail's all-reduce is the
/// MPI library's own; a plan all inside the node), an idle poll is
/// followed by a nap of a millisecond, not a yield: on a machine with more
/// threads than cores each yield hands the core around the ranks that do
/// the call's work.
fn receive(link: &Link, stop: &AtomicBool) {
    let mut idle = 0u32;
    while !stop.load(Ordering::Acquire) {
        // `None`: a waiting rank polls.
        let polled = link.poll_once().unwrap_or(Polled::Nothing);
        match polled {
            Polled::Message => idle = 0,
            Polled::Nothing if !link.expecting.load(Ordering::Relaxed) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Polled::Nothing => {
                idle += 1;
                if idle < 64 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            Polled::Quiet => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    if let Some(r) = lock(&link.receiving).take() {
        r.finish(link);
    }
}

/// This process's rank of a job over nodes.
pub(crate) struct Net {
    shm: Shm,
    link: Arc<Link>,
    me: usize,
    receiver: Option<Receiver>,
    pushes: PushCheck,
}

impl Net {
    /// The transport of this process's rank of `job`, which bootstrapped
    /// through MPI (`world`).
    pub fn new(job: Arc<Job>, world: Arc<World>, timeout: Duration) -> Net {
        let shm = Shm::new(job.clone(), timeout);
        let link = Link::new(job, world, shm.abort().clone(), timeout);
        Net {
            me: link.mpi.rank,
            shm,
            link,
            receiver: None,
            pushes: PushCheck::default(),
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // The receiver ends before the job (and MPI) does.
        self.receiver.take();
    }
}

impl Transport for Net {
    type Mem = Storage;
    type Export = Export;

    fn name(&self) -> &'static str {
        "net"
    }

    fn ranks(&self) -> usize {
        self.shm.ranks()
    }

    fn local_ranks(&self) -> Range<usize> {
        self.me..self.me + 1
    }

    /// The ranks of this node (nodes on one machine, as in the tests,
    /// share its cores too, so this is a floor).
    fn machine_ranks(&self) -> usize {
        self.link.world.members.len()
    }

    fn describe(&self) -> String {
        let w = &self.link.world;
        format!(
            "rank {} of {} processes on {} nodes (this is node {}: ranks {:?}), shared memory inside a node, MPI point-to-point between nodes",
            self.me,
            self.shm.ranks(),
            w.nodes(),
            w.node,
            w.members
        )
    }

    fn clock(&self) -> String {
        self.shm.clock()
    }

    fn abort(&self) -> &AbortHandle {
        self.shm.abort()
    }

    fn board(&mut self, signals: usize, what: &str) -> Result<Arc<SignalBoard>> {
        self.shm.board(signals, what)
    }

    fn allgather(&self, mine: Vec<Vec<u8>>, what: &str) -> Result<Vec<Vec<u8>>> {
        self.shm.allgather(mine, what)
    }

    fn barrier(&self, what: &str) -> Result<()> {
        self.shm.barrier(what)
    }

    fn alloc(
        &mut self,
        rank: usize,
        name: &str,
        bytes: usize,
    ) -> Result<(Storage, Option<(String, Export)>)> {
        self.shm.alloc(rank, name, bytes)
    }

    fn open(&mut self, rank: usize, handle: &str, bytes: usize) -> Result<Storage> {
        if !self.reachable(rank) {
            return Err(Error::internal(format!(
                "rank {rank} is on another node: its memory cannot be mapped"
            )));
        }
        self.shm.open(rank, handle, bytes)
    }

    fn reachable(&self, rank: usize) -> bool {
        self.link.node(rank) == self.link.world.node
    }

    fn lend(&self) -> std::result::Result<(), &'static str> {
        self.shm.lend()
    }

    fn attach(&mut self, mem: Arc<dyn RankMemory>) -> Result<()> {
        let board = self.shm.board(0, "the network receiver")?;
        let (m, b) = (mem, board.clone());
        self.receiver = Some(Receiver::start(
            self.link.clone(),
            Box::new(move |msg: Vec<u8>| land(m.as_ref(), &b, &msg)),
            None,
            None,
            board,
        )?);
        Ok(())
    }

    fn wire(&self) -> Option<Arc<dyn Wire>> {
        Some(self.link.clone())
    }

    fn begin(&mut self, call: &Call, gen: u64) -> Result<()> {
        self.pushes
            .check(&call.plan, "cpu", &self.link.world.node_of)?;
        self.shm.begin(call, gen)
    }

    fn drained(&mut self, gen: u64) {
        self.shm.drained(gen);
    }

    fn before_write(&mut self, id: BufId) -> Result<()> {
        self.shm.before_write(id)
    }

    fn forget(&mut self, id: BufId) {
        self.shm.forget(id);
    }
}

/// [`only_pushes`] once per plan: the check walks every op's effects, and
/// a plan is called again and again (both backends over nodes check each
/// call's plan as it begins).
#[derive(Default)]
pub(crate) struct PushCheck {
    /// The plans that passed, held so that their addresses stay theirs.
    passed: Vec<Arc<crate::plan::Plan>>,
}

impl PushCheck {
    /// [`only_pushes`] of `plan` on the nodes `node_of`, unless it passed
    /// before (a job's layout does not change).
    pub(crate) fn check(
        &mut self,
        plan: &Arc<crate::plan::Plan>,
        backend: &'static str,
        node_of: &[usize],
    ) -> Result<()> {
        if !self.passed.iter().any(|p| Arc::ptr_eq(p, plan)) {
            only_pushes(plan, backend, node_of)?;
            if self.passed.len() >= 64 {
                self.passed.clear();
            }
            self.passed.push(plan.clone());
        }
        Ok(())
    }
}

/// Refuse a plan in which a rank reads memory of a rank on another node
/// (`node_of[rank]`; a rank past its end counts as a node of its own), in
/// or out of place: over the network a rank can only push its own data
/// (both backends over nodes). Reads inside a node (shared memory, CUDA
/// IPC) are the node's business. Every rank checks the same plan at the
/// call's start, so every rank refuses it alike.
pub(crate) fn only_pushes(
    plan: &crate::plan::Plan,
    backend: &'static str,
    node_of: &[usize],
) -> Result<()> {
    let node = |r: usize| node_of.get(r).copied().unwrap_or(usize::MAX - r);
    for (r, ops) in plan.ops.iter().enumerate() {
        for op in ops {
            // `moved`: (the rank read, the rank written, length).
            let reads = crate::plan::interp::effects(r, &op.kind)
                .into_iter()
                .filter_map(|e| e.moved().map(|(read, _, _)| read));
            for read in reads {
                if node(read) != node(r) {
                    return Err(Error::Unsupported(
                        format!(
                            "{} (rank {r} reads rank {read}'s memory, which is on another node; over the network transport a rank can only push: use a path whose ranks push, e.g. ring, ring:pipeK, hier:G, hier:G:mpi or oneshot)",
                            plan.name
                        ),
                        backend,
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
