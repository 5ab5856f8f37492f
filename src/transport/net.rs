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
use crate::error::{Error, Result};
use crate::plan::{BufId, Call};
use crate::process::net::wire::{self, Put, TAG_FAIL, TAG_PUT, TAG_SIGNAL};
use crate::process::net::World;
use crate::process::Job;
use crate::sync::{AbortHandle, SignalBoard};
use crate::sys::mpi::Mpi;
use crate::sys::shm::Export;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the rank threads and the receiver share: the world and the job.
pub(crate) struct Link {
    mpi: &'static Mpi,
    world: Arc<World>,
    job: Arc<Job>,
    abort: AbortHandle,
    timeout: Duration,
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
        let deadline = Instant::now() + self.timeout;
        self.mpi.send(
            self.mpi.world,
            msg,
            to,
            tag,
            deadline,
            self.timeout,
            &|| self.stop("sending", what),
            what,
        )
    }

    /// Tell every rank of the other nodes that `rank` failed.
    fn broadcast_failure(&self, gen: u64, rank: usize, why: &str) {
        let me = self.world.node;
        for (r, &node) in self.world.node_of.iter().enumerate() {
            if node != me {
                // Best effort: the peer may be gone too; the send is
                // bounded, and its own failure is not news.
                let deadline = Instant::now() + Duration::from_secs(2).min(self.timeout);
                let _ = self.mpi.send(
                    self.mpi.world,
                    wire::failure(gen, rank, why),
                    r,
                    TAG_FAIL,
                    deadline,
                    self.timeout,
                    &|| Ok(()),
                    &|| format!("the failure of rank {rank} to rank {r}"),
                );
            }
        }
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
/// of the other nodes and applies it (NCCL's proxy thread).
pub(crate) struct Receiver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// How long dropping it waits for the thread (the job's timeout).
    timeout: Duration,
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
        let s = stop.clone();
        let link_timeout = link.timeout;
        let thread = std::thread::Builder::new()
            .name("ringreduce-net".into())
            .spawn(move || {
                let fresh = |n: usize| vec![0u8; n];
                let sink = Sink {
                    land: &*land,
                    alloc: alloc
                        .as_ref()
                        .map_or(&fresh as &dyn Fn(usize) -> Vec<u8>, |a| {
                            &**a as &dyn Fn(usize) -> Vec<u8>
                        }),
                    delivered: delivered.as_ref().map(|d| &**d as &dyn Fn(u64, usize)),
                    board: &board,
                };
                receive(&link, &sink, &s)
            })
            .map_err(|e| Error::Worker {
                rank: 0,
                message: format!("could not start the network receiver thread: {e}"),
            })?;
        Ok(Receiver {
            stop,
            thread: Some(thread),
            timeout: link_timeout,
        })
    }
}

impl Drop for Receiver {
    /// Stop the thread and wait for it, at most the job's timeout: every
    /// wait of the thread is bounded and polls the stop, but a call into
    /// MPI on a connection to a dead process is MPI's, and may not return.
    /// Then the thread is left behind (it owns what it uses) rather than
    /// hang the process; the process that failed its job does not
    /// finalize MPI.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let until = Instant::now() + self.timeout;
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
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

/// The receiver's loop: probe, receive, apply; forward this node's first
/// failure to the other nodes.
/// Where the receiver puts what arrives.
struct Sink<'a> {
    land: &'a dyn Fn(Vec<u8>) -> Result<()>,
    alloc: &'a dyn Fn(usize) -> Vec<u8>,
    delivered: Option<&'a dyn Fn(u64, usize)>,
    board: &'a SignalBoard,
}

fn receive(link: &Link, sink: &Sink, stop: &AtomicBool) {
    let control = link.job.control().clone();
    let me = link.mpi.rank;
    let mut forwarded = false;
    let mut idle = 0u32;
    let mut last_health = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if forwarded {
            // The job failed (the failure record is final) and the other
            // nodes know it: nothing that arrives can matter any more, and
            // polling MPI on connections to dead processes only makes Open
            // MPI print an error per poll. Quiet until stopped.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let got = link.mpi.iprobe(link.mpi.world).and_then(|m| match m {
            None => Ok(false),
            Some((src, tag, bytes)) => {
                let what = || format!("a message of {bytes} B from rank {src} (tag {tag})");
                // Bounded like every wait: the receiver stopping, an
                // abort, the job's failure, or the timeout end it.
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
                let buf = link.mpi.recv(
                    link.mpi.world,
                    (sink.alloc)(bytes),
                    src,
                    tag,
                    Instant::now() + link.timeout,
                    link.timeout,
                    &halt,
                    &what,
                )?;
                match tag {
                    TAG_PUT => (sink.land)(buf)?,
                    TAG_SIGNAL => {
                        let (gen, s, _) = wire::decode_signal(&buf)?;
                        if let Some(d) = sink.delivered {
                            d(gen, s);
                        }
                        sink.board.publish(s, gen);
                    }
                    TAG_FAIL => {
                        let (gen, rank, why) = wire::decode_failure(&buf)?;
                        // Another node's failure: recorded here, never sent
                        // back.
                        forwarded = true;
                        control.record_failure(gen, rank, &why);
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
        });
        match got {
            Ok(true) => idle = 0,
            Ok(false) => {
                idle += 1;
                if idle < 64 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            // A receive ended by the receiver's own stop (this process is
            // done with the job) is not a failure of the job.
            Err(_) if stop.load(Ordering::Acquire) => break,
            Err(e) => {
                control.record_failure(0, me, &format!("its network receiver failed: {e}"));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if !forwarded && last_health.elapsed() > Duration::from_millis(5) {
            last_health = Instant::now();
            // health() also notices a dead rank of this node.
            if control.health().is_some() {
                if let Some((gen, rank, why)) = control.failure() {
                    forwarded = true;
                    link.broadcast_failure(gen, rank, &why);
                }
            }
        }
    }
    // Stopped: this process is done with the job, maybe because of a
    // failure it saw first (a dead rank of this node) between two of the
    // checks above. Told now, or the ranks of the other nodes would wait for
    // it until their timeout.
    if !forwarded && control.health().is_some() {
        if let Some((gen, rank, why)) = control.failure() {
            link.broadcast_failure(gen, rank, &why);
        }
    }
}

/// This process's rank of a job over nodes.
pub(crate) struct Net {
    shm: Shm,
    link: Arc<Link>,
    me: usize,
    receiver: Option<Receiver>,
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
        only_pushes(&call.plan, "cpu")?;
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

/// Refuse a plan whose ranks read a peer's memory: over the network a rank
/// can only push (both backends over nodes).
pub(crate) fn only_pushes(plan: &crate::plan::Plan, backend: &'static str) -> Result<()> {
    if let Some(r) =
        (0..plan.ranks()).find(|&r| !crate::process::reads::send_readers(plan, r).is_empty())
    {
        return Err(Error::Unsupported(
            format!(
                "{} (its ranks read rank {r}'s memory; over the network transport a rank can only push: use a path whose ranks push, e.g. ring, ring:pipeK, hier:G or oneshot)",
                plan.name
            ),
            backend,
        ));
    }
    Ok(())
}
