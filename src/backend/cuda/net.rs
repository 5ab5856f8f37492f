//! A CUDA rank's way to the ranks of other nodes (the `mpi` feature's
//! network hop, host-staged): the wire to send puts and signals, and the
//! mailbox the network receiver fills.
//!
//! The CPU backend's network transport ([`crate::transport::Net`]) lands a
//! put in host memory from its receiver thread. A CUDA rank's buffers
//! belong to its rank thread, so the receiver only files the put here and
//! raises its signal on the node's board; the destination rank's thread,
//! at each wait on a signal of another node (the lowering's `Wait::Land`
//! and `Wait::Remote`), once the board has it, copies every put of the
//! call filed so far into its buffers (host to device, complete on return)
//! before it issues anything after the wait. A signal another node waits
//! on is sent to every rank that waits on it, and a rank's wait ends only
//! once the signal reached its own process: MPI delivers one sender's
//! messages to one receiver in the order they were sent, so whatever that
//! sender put into this rank before the signal is filed by then and lands
//! with it. The lowering (`rank/lower/nodes.rs`) guarantees that the
//! destination has such a wait for every put into it, that none of its ops
//! the plan orders after the put comes before that wait, and that no other
//! rank waits on a put's signal before its End (another rank learns only
//! that the bytes left, not that they landed). The sending side reads its
//! source to the host once its lane reached the copy, and a signal that
//! other nodes wait on leaves only once the work before it is complete on
//! the GPU: a step costs a host round trip. The staging and message memory
//! is reused from step to step (fresh buffers paid their page faults every
//! time: `docs/lab/perf-notes.md`). NCCL's `ncclSend`/`ncclRecv` on a rail communicator and
//! CUDA-aware MPI (device pointers in MPI calls, no host copy) are the
//! faster hops `docs/SCALE-OUT.md` designs; neither is built.

use crate::backend::BufId;
use crate::error::{Error, Result};
use crate::transport::Wire;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A put that arrived for this process's rank, not yet landed: the whole
/// message, its data from byte `at`.
#[derive(Debug)]
pub(crate) struct Arrived {
    pub from: usize,
    pub buf: BufId,
    pub offset: usize,
    pub msg: Vec<u8>,
    pub at: usize,
}

impl Arrived {
    pub fn data(&self) -> &[u8] {
        self.msg.get(self.at..).unwrap_or(&[])
    }
}

/// Message buffers kept for reuse (a fresh buffer of a large put costs its
/// page faults on every step).
const SPARE: usize = 8;

/// What a CUDA rank of a job over nodes reaches other nodes with.
pub(crate) struct NetPort {
    pub wire: Arc<dyn Wire>,
    /// The node of every rank.
    pub node_of: Vec<usize>,
    /// Puts received and not landed yet, by (call generation, signal).
    mail: Mutex<Mail>,
    arrived: Condvar,
    /// The sending rank's staging: the bytes read from the device, and the
    /// message built from them (both reused).
    stage: Mutex<(Vec<u8>, Vec<u8>)>,
    /// Landed messages' memory, for the receiver's next ones.
    spare: Mutex<Vec<Vec<u8>>>,
}

#[derive(Default)]
struct Mail {
    puts: HashMap<(u64, usize), Arrived>,
    /// The signals that reached this process (a put's, or forwarded), by
    /// (call generation, signal).
    delivered: HashSet<(u64, usize)>,
}

impl NetPort {
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn new(wire: Arc<dyn Wire>, node_of: Vec<usize>) -> NetPort {
        NetPort {
            wire,
            node_of,
            mail: Mutex::new(Mail::default()),
            arrived: Condvar::new(),
            stage: Mutex::new((Vec::new(), Vec::new())),
            spare: Mutex::new(Vec::new()),
        }
    }

    fn mail(&self) -> MutexGuard<'_, Mail> {
        // A thread that panicked holding it left the map whole (every
        // update is one insert or remove).
        self.mail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// File a put of call `gen` carrying `signal` (the receiver, before it
    /// raises the signal on the board).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn file(&self, gen: u64, signal: usize, put: Arrived) -> Result<()> {
        let mut m = self.mail();
        if m.puts.insert((gen, signal), put).is_some() {
            return Err(Error::internal(format!(
                "two puts of call {gen} carry signal {signal}"
            )));
        }
        m.delivered.insert((gen, signal));
        self.arrived.notify_all();
        Ok(())
    }

    /// Signal `signal` of call `gen` reached this process (forwarded by
    /// its owner; the receiver, before it raises it on the board).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn deliver(&self, gen: u64, signal: usize) {
        self.mail().delivered.insert((gen, signal));
        self.arrived.notify_all();
    }

    /// Wait (bounded by `limit`, asking `check` every few milliseconds)
    /// until signal `signal` of call `gen` reached this process. The
    /// node's board may have it first (another rank of the node received
    /// it); what its sender sent this process before it is filed only once
    /// this process received it too.
    pub fn wait_delivered(
        &self,
        gen: u64,
        signal: usize,
        rank: usize,
        limit: Duration,
        check: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut m = self.mail();
        while !m.delivered.contains(&(gen, signal)) {
            drop(m);
            check()?;
            if start.elapsed() > limit {
                return Err(Error::Timeout {
                    rank,
                    what: format!(
                        "signal {signal} of call {gen} to reach this process over the network"
                    ),
                    seconds: limit.as_secs_f64(),
                    wait: crate::error::WaitKind::Host,
                });
            }
            m = self.mail();
            if !m.delivered.contains(&(gen, signal)) {
                m = self
                    .arrived
                    .wait_timeout(m, Duration::from_millis(5))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        Ok(())
    }

    /// Every put of call `gen` filed so far, to land now (in the order
    /// they arrived per sender does not matter: puts of one call never
    /// overlap).
    pub fn take_all(&self, gen: u64) -> Vec<Arrived> {
        let mut m = self.mail();
        let keys: Vec<(u64, usize)> = m.puts.keys().filter(|k| k.0 == gen).copied().collect();
        keys.iter().filter_map(|k| m.puts.remove(k)).collect()
    }

    /// The sender's staging buffers (the rank thread's only).
    pub fn stage(&self) -> MutexGuard<'_, (Vec<u8>, Vec<u8>)> {
        self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spares(&self) -> MutexGuard<'_, Vec<Vec<u8>>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Memory for a received message of `n` bytes (the receiver's
    /// [`crate::transport::Receiver`] hook): a landed one's, else new.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn buffer(&self, n: usize) -> Vec<u8> {
        let mut b = self.spares().pop().unwrap_or_default();
        b.clear();
        b.resize(n, 0);
        b
    }

    /// A landed message's memory, kept for the next.
    pub fn recycle(&self, msg: Vec<u8>) {
        let mut s = self.spares();
        if s.len() < SPARE {
            s.push(msg);
        }
    }

    /// Puts of calls before `gen` that were never landed (a failed call's):
    /// dropped.
    pub fn forget_before(&self, gen: u64) {
        let mut m = self.mail();
        m.puts.retain(|k, _| k.0 >= gen);
        m.delivered.retain(|k| k.0 >= gen);
    }
}
