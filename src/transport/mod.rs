//! Transports: how a rank reaches its peers.
//!
//! A backend runs plans on one kind of device (the host's memory, a GPU); a
//! transport is how the ranks of a job reach each other's memory, signals
//! and the job's host board. The CPU backend ([`crate::backend::cpu`]) is
//! one engine over either CPU transport:
//!
//! | transport | ranks | a peer's buffer | the plans' signals |
//! |---|---|---|---|
//! | [`Threads`] | threads of one process | the same heap allocation | a board in this process |
//! | [`Shm`] | one rank per process ([`crate::process`]) | a memfd segment the peer mapped | the job's control segment |
//! | `Net` (the `mpi` feature) | one rank per process, on several nodes | inside a node as `Shm`; on another node none: a copy into it is a message ([`Wire`]) | the node's control segment, signals of other nodes forwarded as messages |
//!
//! (The CUDA backend reaches a peer the same two ways, with device pointers
//! and peer access in one process or CUDA IPC handles between processes,
//! and a rank of another node through this module's [`Wire`], host-staged;
//! see [`crate::backend::cuda`].) The model is NCCL's `ncclTransport`
//! table (p2p, shm, net: each a connect step at set-up and a data path) and
//! MSCCL++'s `Connection`: set-up is collective (allocate, export,
//! all-gather the handles, open the peers'), the data path is plain memory
//! access ordered by the plans' signals.
//!
//! # The contract
//!
//! A [`Transport`] is owned by one backend and called from that backend's
//! calling thread only (never from its rank threads: those get the board
//! and the opened buffers). Every method says what it orders and how long
//! it may block; every wait is bounded by the job's timeout and ends early
//! on an abort ([`Transport::abort`]) or, between processes, when a peer
//! failed or died.
//!
//! * **Buffers.** [`Transport::alloc`] makes a local rank's buffer and,
//!   when peers live in other processes, a handle for them;
//!   [`Transport::open`] maps a peer's handle. A handle is valid until the
//!   barrier that ends the reserve ([`all_records`] and [`to_open`] are the protocol,
//!   written once for every transport). A write by a rank to any buffer,
//!   its own or a peer's, is visible to every rank that then waits on a
//!   signal the writer published after it (release/acquire on the board's
//!   counters).
//! * **The host board.** [`Transport::board`] gives the plans' signal
//!   board, holding at least the signals asked for; it may only be called
//!   between calls (no rank thread running).
//! * **Set-up collectives.** [`Transport::allgather`] and
//!   [`Transport::barrier`] are collective over the job: every process
//!   calls them in the same order. In one process they return at once.
//! * **Host accesses between calls.** A rank's input may be read by peers
//!   (the pull paths) with no cross-rank wait in the plan; across
//!   processes [`Transport::begin`], [`Transport::drained`] and
//!   [`Transport::before_write`] order those reads against the owner's
//!   host writes ([`crate::process::reads`]). In one process they do
//!   nothing: every rank has finished a call before the caller returns.

mod mem;
#[cfg(feature = "mpi")]
mod net;
mod shm;
mod threads;

pub(crate) use mem::Storage;
#[cfg(feature = "mpi")]
pub(crate) use net::Net;
#[cfg(all(feature = "mpi", feature = "cuda"))]
pub(crate) use net::{Link, PushCheck, Receiver};
pub(crate) use shm::Shm;
pub(crate) use threads::Threads;

/// The backend's memory as a link that writes into the local ranks'
/// buffers by itself (the network receiver) sees it: the backend attaches
/// it to the link once it exists ([`Transport::attach`]).
pub(crate) trait RankMemory: Send + Sync {
    /// Write `data` at byte `offset` of buffer `id` of local rank `to`; an
    /// error names `from`, the sending rank, when the bytes do not fit.
    /// (Only the network link, with the `mpi` feature, lands bytes.)
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn land(&self, from: usize, to: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()>;
}

use crate::error::{Error, Result};
use crate::plan::{BufId, Call};
use crate::sync::{AbortHandle, SignalBoard};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// A memory that a rank can hand to its peers: the device side of a
/// transport. `Mem` is a buffer as this process holds it (its own or a
/// peer's); `Export` keeps an allocation's handle open until every peer
/// opened it (dropping it closes the handle, never the memory).
pub(crate) trait Transport: Send + 'static {
    /// A buffer as this process holds it.
    type Mem;
    /// An open export handle (dropped at the end of a reserve).
    type Export;

    /// Short name: `threads`, `shm`.
    fn name(&self) -> &'static str;

    /// The ranks of the job.
    fn ranks(&self) -> usize;

    /// The ranks this process runs (all of them in one process).
    fn local_ranks(&self) -> Range<usize>;

    /// How the ranks reach each other, for [`crate::backend::BackendInfo`].
    fn describe(&self) -> String;

    /// What the ranks' timestamps are (one clock or one per process).
    fn clock(&self) -> String;

    /// The handle that aborts every wait of this transport and of the
    /// boards it gave out.
    fn abort(&self) -> &AbortHandle;

    /// The plans' signal board, holding at least `signals` signals. Only
    /// between calls. [`Threads`] makes a larger one when asked for more;
    /// [`Shm`]'s is the job's and fixed: asking for more is an error naming
    /// the plan's need.
    /// `what` names the plan for the error.
    fn board(&mut self, signals: usize, what: &str) -> Result<Arc<SignalBoard>>;

    /// All-gather one small record per local rank (in local-rank order):
    /// the records of every rank, in rank order. Collective; blocks until
    /// every process contributed, bounded by the job's timeout.
    fn allgather(&self, mine: Vec<Vec<u8>>, what: &str) -> Result<Vec<Vec<u8>>>;

    /// Wait until every process reached this barrier (bounded as
    /// [`Transport::allgather`]).
    fn barrier(&self, what: &str) -> Result<()>;

    /// Make local rank `rank`'s buffer of `bytes` bytes, named `name`
    /// ([`unique_name`]), with the handle to publish when peers in other
    /// processes must open it (`None` in one process). The memory starts
    /// zeroed. Blocks only on the allocator.
    fn alloc(
        &mut self,
        rank: usize,
        name: &str,
        bytes: usize,
    ) -> Result<Allocated<Self::Mem, Self::Export>>;

    /// Open peer `rank`'s buffer from the handle it published. Only during
    /// a reserve, before its closing barrier.
    fn open(&mut self, rank: usize, handle: &str, bytes: usize) -> Result<Self::Mem>;

    /// Why the caller's own slices cannot be a rank's buffers, if they
    /// cannot ([`crate::backend::HostSlices`]).
    fn lend(&self) -> std::result::Result<(), &'static str>;

    /// Whether a failure of a collective set-up step must be recorded for
    /// the job (peers in other processes are waiting in it).
    fn shared(&self) -> bool {
        self.local_ranks().len() < self.ranks()
    }

    /// How many of the job's ranks run on this machine, sharing its cores:
    /// every rank, but for a transport whose ranks span machines.
    fn machine_ranks(&self) -> usize {
        self.ranks()
    }

    /// Call `gen` starts on the local ranks: say so and wait (bounded)
    /// until the peers whose input it reads started it too.
    fn begin(&mut self, _call: &Call, _gen: u64) -> Result<()> {
        Ok(())
    }

    /// The local ranks finished call `gen`: they read no peer's input any
    /// more.
    fn drained(&mut self, _gen: u64) {}

    /// Before the host overwrites buffer `id`: wait (bounded) until every
    /// peer that read it drained the call in which it did.
    fn before_write(&mut self, _id: BufId) -> Result<()> {
        Ok(())
    }

    /// Buffer `id` was released or reallocated (after a barrier).
    fn forget(&mut self, _id: BufId) {}

    /// Whether this process can map rank `rank`'s memory (every rank but
    /// those of other nodes): a reserve opens only the reachable peers.
    fn reachable(&self, _rank: usize) -> bool {
        true
    }

    /// The backend's memory, once it exists: a transport that writes into
    /// the local ranks' buffers by itself (the network receiver) keeps it.
    fn attach(&mut self, _mem: Arc<dyn RankMemory>) -> Result<()> {
        Ok(())
    }

    /// How the rank threads reach ranks they cannot map, if any.
    fn wire(&self) -> Option<Arc<dyn Wire>> {
        None
    }
}

/// The messages a rank thread sends to ranks on other nodes (the network
/// transport's data path; see `Net`). Every send is bounded by the job's
/// timeout and ends early when the job failed or was aborted.
pub(crate) trait Wire: Send + Sync {
    /// The node of rank `rank`.
    fn node(&self, rank: usize) -> usize;

    /// The message of a copy of `data` from rank `from` into rank `to`'s
    /// buffer `buf` at byte `offset`, raising `signal` for call `gen` on
    /// the receiver's node once written, written into `out` (its memory
    /// reused). Built while the source is locked; sent after
    /// ([`Wire::send_put`]), so no lock is held on the network.
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
    );

    /// The most data bytes one put carries: a longer copy is sent as
    /// several puts, in order, its signal with the last ([`pieces`]).
    fn put_max(&self) -> usize {
        usize::MAX
    }

    /// Send a put to rank `to`; returns once the message left this
    /// process's hands (MPI's send completed), with the message's memory
    /// for the next one.
    fn send_put(&self, from: usize, to: usize, msg: Vec<u8>) -> Result<Vec<u8>>;

    /// Raise `signal` of call `gen`, published by rank `from`, on rank
    /// `to`'s node.
    fn signal(&self, from: usize, to: usize, signal: usize, gen: u64) -> Result<()>;

    /// Take what arrived from the other nodes, once, on the calling
    /// thread: a rank waiting on a signal of another node calls it, so
    /// that the message that ends its wait needs no other thread.
    fn progress(&self) {}

    /// Whether the call about to run sends this process any message (a
    /// put into one of its ranks, a signal one of them waits for): when
    /// none comes, the receiver only naps between its rounds of heartbeats
    /// and health, instead of yielding the core at every idle poll.
    fn expect_messages(&self, _incoming: bool) {}

    /// Reduce `data` (rank `rank`'s contribution, whole elements of
    /// `dtype`; returned with the result) with `op` over `members`, the
    /// members of a rail's all-reduce ([`crate::plan::KernelKind::Rail`]),
    /// with the network library's own collective (for a type it lacks, its
    /// all-gather, each member reducing in rail order). `members` must be
    /// `rank`'s rail in the job (its index on every node, in node order).
    /// A link without a collective of its own refuses.
    fn rail_all_reduce(
        &self,
        rank: usize,
        members: &[usize],
        _data: Vec<u8>,
        _dtype: crate::element::DataType,
        _op: crate::element::DevOp,
    ) -> Result<Vec<u8>> {
        Err(Error::Unsupported(
            format!("rank {rank}: a rail's all-reduce over ranks {members:?} needs a network library's all-reduce"),
            "cpu",
        ))
    }

    /// Whether [`Wire::rail_all_reduce_mapped`] takes `dtype`: the network
    /// library reduces it itself.
    fn rail_in_place(&self, _dtype: crate::element::DataType) -> bool {
        false
    }

    /// [`Wire::rail_all_reduce`] in place on bytes `range` of the shared
    /// mapping `m` (rank `rank`'s buffer), with no copy in or out, for a
    /// type [`Wire::rail_in_place`] takes. On an error `m` stays mapped for
    /// good: the library may still write it.
    fn rail_all_reduce_mapped(
        &self,
        rank: usize,
        members: &[usize],
        _m: &mut crate::sys::shm::Mapping,
        _range: Range<usize>,
        _dtype: crate::element::DataType,
        _op: crate::element::DevOp,
    ) -> Result<()> {
        Err(Error::Unsupported(
            format!("rank {rank}: a rail's all-reduce over ranks {members:?} in place needs a network library's all-reduce"),
            "cpu",
        ))
    }
}

/// The pieces of a copy of `len` bytes sent as puts of at most `max`
/// bytes each, as (start, end, last) byte ranges: one (empty) piece for an
/// empty copy, so that its signal still goes.
pub(crate) fn pieces(len: usize, max: usize) -> impl Iterator<Item = (usize, usize, bool)> {
    let max = max.max(1);
    let n = len.div_ceil(max).max(1);
    (0..n).map(move |i| {
        let start = i * max;
        let end = (start + max).min(len);
        (start, end, i + 1 == n)
    })
}

/// A new buffer, and the handle to publish with what keeps it open (see
/// [`Transport::alloc`]).
pub(crate) type Allocated<M, E> = (M, Option<(String, E)>);

/// What a rank publishes about one of its buffers in a reserve: a name
/// unique for the process's life, the size, and the handle (empty when
/// peers already opened this name, or in one process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub name: String,
    pub bytes: usize,
    pub handle: String,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        format!("{}\n{}\n{}", self.name, self.bytes, self.handle).into_bytes()
    }

    /// Parse rank `rank`'s published record.
    pub fn parse(rank: usize, data: &[u8]) -> Result<Record> {
        let text = String::from_utf8_lossy(data);
        let bad = || {
            Error::internal(format!(
                "rank {rank} published a bad buffer entry {text:?} (expected name, bytes and handle)"
            ))
        };
        let mut parts = text.splitn(3, '\n');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(n), Some(b), Some(h)) => Ok(Record {
                name: n.to_string(),
                bytes: b.parse().map_err(|_| bad())?,
                handle: h.to_string(),
            }),
            _ => Err(bad()),
        }
    }
}

/// Which buffer (by its record's name) this process holds for each rank.
#[derive(Debug, Default)]
pub(crate) struct Names(HashMap<(usize, BufId), (String, usize)>);

impl Names {
    /// The size of rank `rank`'s buffer `id`, if this process holds one.
    pub fn bytes(&self, rank: usize, id: BufId) -> Option<usize> {
        self.0.get(&(rank, id)).map(|x| x.1)
    }

    /// The record name and size of rank `rank`'s buffer `id`.
    pub fn get(&self, rank: usize, id: BufId) -> Option<(String, usize)> {
        self.0.get(&(rank, id)).cloned()
    }

    pub fn insert(&mut self, rank: usize, id: BufId, name: String, bytes: usize) {
        self.0.insert((rank, id), (name, bytes));
    }

    pub fn remove(&mut self, rank: usize, id: BufId) {
        self.0.remove(&(rank, id));
    }

    /// After the all-gather of a reserve of buffer `id`: the peers (ranks
    /// outside `local`) whose buffer this process must open, because it
    /// grew (a new name) or was never opened. A peer with a new name but no
    /// handle is an error (its handle is already closed).
    pub(crate) fn to_open(
        &self,
        id: BufId,
        local: &Range<usize>,
        all: &[Record],
    ) -> Result<Vec<usize>> {
        let mut v = Vec::new();
        for (r, rec) in all.iter().enumerate().filter(|(r, _)| !local.contains(r)) {
            if self.0.get(&(r, id)).is_some_and(|x| x.0 == rec.name) {
                continue;
            }
            if rec.handle.is_empty() {
                return Err(Error::internal(format!(
                    "rank {r} published buffer {} as {:?} with no handle, but this process never opened it",
                    id.0, rec.name
                )));
            }
            v.push(r);
        }
        Ok(v)
    }
}

/// Names unique in this process for its whole life (a name a peer opened
/// is never reused, whichever backend made it).
pub(crate) fn unique_name(rank: usize, id: BufId) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("buf-r{rank}-b{}-p{}-{n}", id.0, std::process::id())
}

/// The name a rank's record takes when its allocation failed (its
/// `handle` holds the reason): the reserve fails on every rank alike.
pub(crate) const FAILED_RECORD: &str = "!allocation-failed";

/// The reserve protocol of every transport, from the records of the local
/// ranks (`mine`, in local-rank order): all-gather them (every rank's
/// record, in rank order; a rank whose allocation failed sent a
/// [`FAILED_RECORD`]).
pub(crate) fn all_records<T: Transport + ?Sized>(
    t: &T,
    id: BufId,
    mine: &[Record],
) -> Result<Vec<Record>> {
    let all = t.allgather(
        mine.iter().map(Record::encode).collect(),
        &format!("reserve of buffer {}", id.0),
    )?;
    all.iter()
        .enumerate()
        .map(|(r, d)| Record::parse(r, d))
        .collect::<Result<Vec<_>>>()
}

/// The peers to open ([`Names::to_open`]) with their records, once every
/// rank's allocation succeeded. The caller opens them, then calls
/// [`Transport::barrier`] before dropping its exports.
pub(crate) fn to_open<T: Transport + ?Sized>(
    t: &T,
    names: &Names,
    id: BufId,
    all: Vec<Record>,
) -> Result<Vec<(usize, Record)>> {
    let open = names.to_open(id, &t.local_ranks(), &all)?;
    Ok(open.into_iter().map(|r| (r, all[r].clone())).collect())
}

#[cfg(test)]
mod tests;
