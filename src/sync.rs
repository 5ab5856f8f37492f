//! Signals between rank threads on the host.
//!
//! A [`SignalBoard`] holds one generation counter per plan signal. Call number
//! `g` of the engine publishes signal `s` by storing `g` into it; a waiter for
//! call `g` proceeds once the counter is at least `g`. Counters only grow, so
//! no reset is needed between calls.
//!
//! * The CPU backend publishes a signal when the op has *completed*.
//! * The CUDA backend publishes it when the thread has *issued*
//!   `cuEventRecord`: the GPU-side wait (`cuStreamWaitEvent`) must be issued
//!   after the record it refers to, or it would wait on a stale one. This is
//!   ordering of host calls only; no GPU work is waited for on the host.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Waiting longer than this for a signal means the collective is stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(120);

/// Generation counters, one per plan signal (see the module doc).
#[derive(Debug, Default)]
pub struct SignalBoard {
    gens: Vec<AtomicU64>,
    /// The latest call in which some rank failed: waiters of that call give
    /// up at once instead of waiting for signals that will never come.
    failed: AtomicU64,
}

impl SignalBoard {
    pub fn new(signals: usize) -> Self {
        SignalBoard {
            gens: (0..signals).map(|_| AtomicU64::new(0)).collect(),
            failed: AtomicU64::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.gens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.gens.is_empty()
    }

    /// Mark signal `s` as published for call `gen`.
    pub fn publish(&self, s: usize, gen: u64) {
        if let Some(g) = self.gens.get(s) {
            g.store(gen, Ordering::Release);
        }
    }

    /// Rank failed during call `gen`: release every waiter of that call.
    pub fn fail(&self, gen: u64) {
        self.failed.fetch_max(gen, Ordering::AcqRel);
    }

    pub fn is_published(&self, s: usize, gen: u64) -> bool {
        self.gens
            .get(s)
            .is_some_and(|g| g.load(Ordering::Acquire) >= gen)
    }

    /// Wait until signal `s` is published for call `gen`: spin, then yield,
    /// then sleep in short naps. Gives up with [`Error::Timeout`] after
    /// [`STUCK_AFTER`] so a broken plan can never hang the process.
    pub fn wait(&self, s: usize, gen: u64, rank: usize) -> Result<()> {
        if s >= self.gens.len() {
            return Err(Error::Plan(format!(
                "rank {rank} waits on unknown signal {s}"
            )));
        }
        let start = Instant::now();
        let mut i: u32 = 0;
        while !self.is_published(s, gen) {
            if self.failed.load(Ordering::Acquire) >= gen {
                return Err(Error::Worker {
                    rank,
                    message: format!(
                        "gave up waiting for signal {s}: another rank failed in this call"
                    ),
                });
            }
            i = i.wrapping_add(1);
            if i < 256 {
                std::hint::spin_loop();
            } else if i < 512 {
                std::thread::yield_now();
            } else {
                if start.elapsed() > STUCK_AFTER {
                    return Err(Error::Timeout {
                        rank,
                        what: format!("signal {s} of call {gen}"),
                        seconds: STUCK_AFTER.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rank_releases_waiters() {
        let b = std::sync::Arc::new(SignalBoard::new(2));
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.wait(1, 3, 0));
        std::thread::sleep(Duration::from_millis(20));
        b.fail(3);
        let r = t.join().expect("thread");
        assert!(matches!(r, Err(Error::Worker { .. })), "{r:?}");
        // A later call is not affected.
        b.publish(1, 4);
        assert!(b.wait(1, 4, 0).is_ok());
    }
}
