//! One rank per process ([`crate::process`]): each process allocates its
//! rank's buffers as nameless shared segments
//! ([`Mapping::create_exported`]), the peers map them from the handle
//! published in a reserve (then the owner closes it: the mappings stay,
//! and no name is left anywhere for a killed job to leave behind), and the
//! board's counters live in the job's control segment.
//!
//! Why shared memory and not messages: the rank code and every path,
//! including those that read a peer's memory (`oneshot:fused`, the
//! parameter server), run unchanged, and the structure (export, publish,
//! open in the peer, re-open when a buffer grows) is CUDA IPC's, so CI
//! tests the same protocol the GPU uses. A signal costs an atomic store,
//! not a message.

use super::Storage;
use super::Transport;
use crate::error::{Error, Result};
use crate::plan::{BufId, Call};
use crate::process::reads::PeerReads;
use crate::process::Job;
use crate::sync::{AbortHandle, SignalBoard};
use crate::sys::shm::{Export, Mapping};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// This process's rank of a multi-process job.
pub(crate) struct Shm {
    job: Arc<Job>,
    me: usize,
    abort: AbortHandle,
    board: Arc<SignalBoard>,
    /// Peers reading this rank's send buffers ([`crate::process::reads`]).
    reads: PeerReads,
}

impl Shm {
    /// The transport of this process's rank of `job`, every wait bounded by
    /// `timeout` (an abort of the job wakes them).
    pub fn new(job: Arc<Job>, timeout: Duration) -> Shm {
        let abort = AbortHandle::new();
        job.control().watch_abort(abort.clone());
        let board = Arc::new(job.signal_board(abort.clone(), timeout));
        Shm {
            me: job.rank(),
            job,
            abort,
            board,
            reads: PeerReads::default(),
        }
    }
}

impl Transport for Shm {
    type Mem = Storage;
    type Export = Export;

    fn name(&self) -> &'static str {
        "shm"
    }

    fn ranks(&self) -> usize {
        self.job.size()
    }

    fn local_ranks(&self) -> Range<usize> {
        self.me..self.me + 1
    }

    fn describe(&self) -> String {
        format!(
            "rank {} of {} processes ({}), buffers in shared memory (nameless memfd segments), {}",
            self.me,
            self.job.size(),
            self.job.spec().origin.name(),
            match (self.job.store_path(), &self.job.spec().key_value) {
                (Some(p), _) => format!("the job's key files under {}", p.display()),
                (None, Some(kv)) => format!("met through {}", kv.0.describe()),
                (None, None) => "no store".into(),
            }
        )
    }

    fn clock(&self) -> String {
        format!("host timestamps of rank {}'s process (CPU backend, one rank per process; other processes' clocks are not aligned with it)", self.me)
    }

    fn abort(&self) -> &AbortHandle {
        &self.abort
    }

    fn board(&mut self, signals: usize, what: &str) -> Result<Arc<SignalBoard>> {
        if signals > self.board.len() {
            return Err(Error::Plan(format!(
                "{what} needs {signals} signals; the job's shared board holds {}",
                self.board.len()
            )));
        }
        Ok(self.board.clone())
    }

    fn allgather(&self, mine: Vec<Vec<u8>>, what: &str) -> Result<Vec<Vec<u8>>> {
        match mine.as_slice() {
            [one] => self.job.allgather(one, what),
            _ => Err(Error::internal(format!(
                "{what}: {} records from a process of one rank",
                mine.len()
            ))),
        }
    }

    fn barrier(&self, what: &str) -> Result<()> {
        self.job.barrier(what)
    }

    fn alloc(
        &mut self,
        _rank: usize,
        name: &str,
        bytes: usize,
    ) -> Result<(Storage, Option<(String, Export)>)> {
        // The segment is sized here and filled by the calls.
        crate::sys::proc::fits(bytes as u64, &format!("the shared segment {name}"))?;
        let (m, export) = Mapping::create_exported(name, bytes)
            .map_err(Error::io_at(&PathBuf::from(format!("memfd:{name}"))))?;
        let handle = export.path().display().to_string();
        Ok((Storage::Shared(m), Some((handle, export))))
    }

    fn open(&mut self, _rank: usize, handle: &str, bytes: usize) -> Result<Storage> {
        let path = PathBuf::from(handle);
        let m = Mapping::open(&path, bytes).map_err(Error::io_at(&path))?;
        Ok(Storage::Shared(m))
    }

    fn lend(&self) -> std::result::Result<(), &'static str> {
        Err("host slices: the caller's slice cannot be lent to another process")
    }

    fn begin(&mut self, call: &Call, gen: u64) -> Result<()> {
        self.reads.begin(call, self.me, gen, self.job.control())
    }

    fn drained(&mut self, gen: u64) {
        self.job.control().publish_drained(gen);
    }

    fn before_write(&mut self, id: BufId) -> Result<()> {
        self.reads.before_write(id, self.job.control())
    }

    fn forget(&mut self, id: BufId) {
        self.reads.forget(id);
    }
}
