//! The ranks are threads of one process: a peer's buffer is the same heap
//! allocation, the board is this process's.

use super::Storage;
use super::Transport;
use crate::error::{Error, Result};
use crate::sync::{AbortHandle, SignalBoard};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Every rank in this process.
pub(crate) struct Threads {
    ranks: usize,
    abort: AbortHandle,
    timeout: Duration,
    board: Arc<SignalBoard>,
}

impl Threads {
    /// `ranks` ranks, every wait bounded by `timeout`.
    pub fn new(ranks: usize, timeout: Duration) -> Result<Threads> {
        if ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        let abort = AbortHandle::new();
        Ok(Threads {
            ranks,
            board: Arc::new(SignalBoard::new(0, abort.clone(), timeout)),
            abort,
            timeout,
        })
    }
}

impl Transport for Threads {
    type Mem = Storage;
    type Export = ();

    fn name(&self) -> &'static str {
        "threads"
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn local_ranks(&self) -> Range<usize> {
        0..self.ranks
    }

    fn describe(&self) -> String {
        let threads = match self.ranks {
            0 | 1 => String::new(),
            n => format!(" and {}", crate::words::counted(n - 1, "rank thread")),
        };
        format!(
            "{} in this process (the caller's thread{threads})",
            crate::words::counted(self.ranks, "rank")
        )
    }

    fn clock(&self) -> String {
        "host timestamps (CPU backend): one monotonic clock shared by every rank thread".into()
    }

    fn abort(&self) -> &AbortHandle {
        &self.abort
    }

    /// A larger board replaces the old one: safe, no rank thread runs
    /// between calls.
    fn board(&mut self, signals: usize, _what: &str) -> Result<Arc<SignalBoard>> {
        if self.board.len() < signals {
            self.board = Arc::new(SignalBoard::new(
                signals.next_power_of_two(),
                self.abort.clone(),
                self.timeout,
            ));
        }
        Ok(self.board.clone())
    }

    fn allgather(&self, mine: Vec<Vec<u8>>, what: &str) -> Result<Vec<Vec<u8>>> {
        if mine.len() != self.ranks {
            return Err(Error::internal(format!(
                "{what}: {} records for {} ranks",
                mine.len(),
                self.ranks
            )));
        }
        Ok(mine)
    }

    fn barrier(&self, _what: &str) -> Result<()> {
        Ok(())
    }

    /// Heap memory in 8-byte words (every element type aligned).
    fn alloc(
        &mut self,
        rank: usize,
        _name: &str,
        bytes: usize,
    ) -> Result<(Storage, Option<(String, ())>)> {
        let what = format!("rank {rank}'s buffer of {bytes} bytes");
        let v = crate::sys::proc::zeroed::<u64>(bytes.div_ceil(8), &what)?;
        Ok((Storage::Heap(v), None))
    }

    fn open(&mut self, rank: usize, _handle: &str, _bytes: usize) -> Result<Storage> {
        Err(Error::internal(format!(
            "rank {rank} is a thread of this process: there is no handle to open"
        )))
    }

    fn lend(&self) -> std::result::Result<(), &'static str> {
        Ok(())
    }
}
