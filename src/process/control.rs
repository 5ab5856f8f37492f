//! The job's shared control segment: one file of the store, mapped by every
//! rank, accessed only as 64-bit atomic words. It holds
//!
//! * each rank's process (pid, start time) and state (joined, finished),
//! * the plan signals' generation counters (the cross-process
//!   [`SignalBoard`](crate::sync::SignalBoard): the same publish/wait as
//!   between threads, a few nanoseconds per signal instead of a message),
//! * the failure record (the first rank that failed, in which call, why),
//!   which releases every waiter of the job at once, and
//! * two mailboxes per rank for [`Control::allgather`] (and so barriers and
//!   the small reductions the reports need).
//!
//! Rank 0 creates it without a name ([`Mapping::create_exported`]),
//! initialises it, publishes its handle in the store, and closes the handle
//! once every rank mapped it, so a run killed at any point leaves no
//! segment behind.

use super::ProcId;
use crate::error::{Error, Result, WaitKind};
use crate::sync::{AbortHandle, Backoff, JobFault, SharedBoard};
use crate::sys::shm::{Export, Mapping};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const MAGIC: u64 = 0x3144_5241_4f42_5252; // "RRBOARD1"
const VERSION: u64 = 1;

/// Signals the shared board holds (the largest plans of 256 ranks need far
/// fewer; a plan that needs more is refused with an error).
pub const SIGNALS: usize = 1 << 16;
/// Bytes of one mailbox slot.
pub const SLOT_BYTES: usize = 64 << 10;
const SLOT_WORDS: usize = SLOT_BYTES / 8;

// Word offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 1;
const H_SIZE: usize = 2;
const H_SIGNALS: usize = 3;
const H_SLOT: usize = 4;
const H_RUN: usize = 5;
const F_STATE: usize = 16;
const F_GEN: usize = 17;
const F_RANK: usize = 18;
const F_LEN: usize = 19;
const F_MSG: usize = 20;
const F_MSG_WORDS: usize = 64;
/// Whether the recorded failure was a timeout (1) or not (0).
const F_TIMED_OUT: usize = F_MSG + F_MSG_WORDS;
const RANKS_AT: usize = 128;
const RANK_WORDS: usize = 8;
const R_PID: usize = 0;
const R_START: usize = 1;
const R_STATE: usize = 2;
const R_MAIL: usize = 3;
const R_DRAINED: usize = 4;
const R_BEGUN: usize = 5;
const R_AGREED: usize = 6;

/// Rank states.
const JOINED: u64 = 1;
const FINISHED: u64 = 2;

/// Failure record states.
const F_WRITING: u64 = 1;
const F_WRITTEN: u64 = 2;

fn signals_at(size: usize) -> usize {
    (RANKS_AT + size * RANK_WORDS).next_multiple_of(8)
}

fn mail_at(size: usize) -> usize {
    signals_at(size) + SIGNALS
}

/// Bytes of the segment for `size` ranks.
pub(crate) fn segment_bytes(size: usize) -> usize {
    (mail_at(size) + size * 2 * SLOT_WORDS) * 8
}

/// A hash of the run id, so a segment of another run is recognised.
fn run_hash(run: &str) -> u64 {
    // FNV-1a.
    run.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// One rank's view of the control segment.
pub struct Control {
    map: Mapping,
    size: usize,
    me: usize,
    timeout: Duration,
    /// The next mailbox round.
    round: Mutex<u64>,
    store: Option<super::store::Store>,
    /// The abort handle of this process's engine ([`Control::watch_abort`]):
    /// every wait here ends with [`Error::Aborted`] once it is raised.
    abort: OnceLock<AbortHandle>,
    /// The job's rank of each rank of this segment, when the segment is
    /// one node's of a job over several nodes (the `mpi` feature): errors
    /// name job ranks. Empty: the segment's ranks are the job's (a job
    /// over one node passes none).
    names: Vec<usize>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Control(rank {} of {}, {:?})",
            self.me, self.size, self.map
        )
    }
}

impl Control {
    /// Create the segment (rank 0), initialised, with the handle the other
    /// ranks open it by ([`Control::open`] of [`Export::path`]); drop the
    /// handle once they all did.
    pub fn create(run: &str, size: usize, timeout: Duration) -> Result<(Control, Export)> {
        let bytes = segment_bytes(size);
        let name = format!("ringreduce-control-{run}");
        let (map, export) = Mapping::create_exported(&name, bytes)
            .map_err(|e| Error::io(format!("memfd:{name}"), e))?;
        let w = map.words();
        w[H_VERSION].store(VERSION, Ordering::Relaxed);
        w[H_SIZE].store(size as u64, Ordering::Relaxed);
        w[H_SIGNALS].store(SIGNALS as u64, Ordering::Relaxed);
        w[H_SLOT].store(SLOT_BYTES as u64, Ordering::Relaxed);
        w[H_RUN].store(run_hash(run), Ordering::Relaxed);
        w[H_MAGIC].store(MAGIC, Ordering::Release);
        let c = Control {
            map,
            size,
            me: 0,
            timeout,
            round: Mutex::new(0),
            store: None,
            abort: OnceLock::new(),
            names: Vec::new(),
        };
        Ok((c, export))
    }

    /// Map the segment at `path` (another rank: rank 0's handle) and check
    /// it is this run's.
    pub fn open(
        path: &Path,
        run: &str,
        size: usize,
        me: usize,
        timeout: Duration,
    ) -> Result<Control> {
        let map = Mapping::open(path, segment_bytes(size)).map_err(Error::io_at(path))?;
        let w = map.words();
        let bad = |what: String| {
            Error::BadArgument(format!("the shared segment {} {what}", path.display()))
        };
        if w[H_MAGIC].load(Ordering::Acquire) != MAGIC
            || w[H_VERSION].load(Ordering::Relaxed) != VERSION
        {
            return Err(bad(
                "is not a ringreduce control segment of this version".into()
            ));
        }
        if w[H_RUN].load(Ordering::Relaxed) != run_hash(run) {
            return Err(bad("belongs to another run (stale)".into()));
        }
        let n = w[H_SIZE].load(Ordering::Relaxed);
        let c = Control {
            map,
            size: usize::try_from(n).unwrap_or(0),
            me,
            timeout,
            round: Mutex::new(0),
            store: None,
            abort: OnceLock::new(),
            names: Vec::new(),
        };
        if n != size as u64 {
            // The ranks that mapped it would wait their whole timeout for a
            // job that cannot form: the failure record ends their waits.
            c.record_failure(
                0,
                me,
                &format!("it was started as one of {size} ranks, but the job has {n}"),
            );
            return Err(bad(format!("is for {n} ranks, not {size}")));
        }
        Ok(c)
    }

    /// Name the segment's ranks by their job ranks (`names[i]` is the job
    /// rank of the segment's rank `i`), for a node's segment.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn set_names(&mut self, names: Vec<usize>) {
        self.names = names;
    }

    /// The job rank of the segment's rank `r`.
    fn name(&self, r: usize) -> usize {
        self.names.get(r).copied().unwrap_or(r)
    }

    /// Check the store as well while waiting (aborts written by the
    /// launcher).
    pub(crate) fn watch_store(&mut self, store: super::store::Store) {
        self.store = Some(store);
    }

    /// End every wait of this rank (barriers, all-gathers, the buffer
    /// reservation's steps, the peer-read waits) with [`Error::Aborted`]
    /// once `abort` is raised. Set once, by the engine's backend; a later
    /// call is ignored.
    pub(crate) fn watch_abort(&self, abort: AbortHandle) {
        let _ = self.abort.set(abort);
    }

    fn words(&self) -> &[AtomicU64] {
        self.map.words()
    }

    fn rank_word(&self, r: usize, k: usize) -> &AtomicU64 {
        &self.words()[RANKS_AT + r * RANK_WORDS + k]
    }

    /// Record this process as the rank's.
    pub fn register(&self) {
        let p = ProcId::me();
        self.rank_word(self.me, R_PID)
            .store(u64::from(p.pid), Ordering::Relaxed);
        self.rank_word(self.me, R_START)
            .store(p.start, Ordering::Relaxed);
        self.rank_word(self.me, R_STATE)
            .store(JOINED, Ordering::Release);
    }

    /// This rank is done (a clean end: its peers need not report it).
    pub fn finish(&self) {
        self.rank_word(self.me, R_STATE)
            .store(FINISHED, Ordering::Release);
    }

    /// Whether every other rank finished or is gone.
    pub(crate) fn others_done(&self) -> bool {
        (0..self.size).filter(|&r| r != self.me).all(|r| {
            let st = self.rank_word(r, R_STATE).load(Ordering::Acquire);
            st == FINISHED || (st == JOINED && !self.proc_of(r).is_some_and(|p| p.alive()))
        })
    }

    fn proc_of(&self, r: usize) -> Option<ProcId> {
        if self.rank_word(r, R_STATE).load(Ordering::Acquire) == 0 {
            return None;
        }
        let pid = self.rank_word(r, R_PID).load(Ordering::Relaxed);
        Some(ProcId {
            pid: u32::try_from(pid).ok()?,
            start: self.rank_word(r, R_START).load(Ordering::Relaxed),
        })
    }

    /// Every call of this rank up to `gen` is complete (its streams
    /// drained): peers waiting to overwrite a buffer it read may go on.
    pub(crate) fn publish_drained(&self, gen: u64) {
        self.rank_word(self.me, R_DRAINED)
            .fetch_max(gen, Ordering::AcqRel);
    }

    /// Wait (bounded, watching the job's health) until rank `r` drained
    /// call `gen`; `what` names the buffer for the error.
    pub(crate) fn wait_drained(&self, r: usize, gen: u64, what: &str) -> Result<()> {
        let desc = || format!("rank {r} to finish reading this rank's {what} (its call {gen})");
        let i = self.index_of(r, &desc)?;
        // A rank that finished reads nothing any more.
        self.wait_until(&desc, None, || {
            self.rank_word(i, R_DRAINED).load(Ordering::Acquire) >= gen
                || self.rank_word(i, R_STATE).load(Ordering::Acquire) == FINISHED
        })
    }

    /// This rank starts its call `gen` (its inputs for it are written).
    pub(crate) fn publish_begun(&self, gen: u64) {
        self.rank_word(self.me, R_BEGUN)
            .fetch_max(gen, Ordering::AcqRel);
    }

    /// Wait (bounded, watching the job's health) until rank `r` started
    /// its call `gen`.
    pub(crate) fn wait_begun(&self, r: usize, gen: u64) -> Result<()> {
        let desc = || format!("rank {r} to start call {gen} (this rank reads its input)");
        let i = self.index_of(r, &desc)?;
        self.wait_until(&desc, Some(i), || {
            self.rank_word(i, R_BEGUN).load(Ordering::Acquire) >= gen
        })
    }

    /// The segment's index of job rank `r`: `r` itself on one machine; over
    /// nodes, its place among the node's ranks. A rank of another node has
    /// no word here (an error naming the wait: nothing waits on the words
    /// of a rank it cannot map).
    fn index_of(&self, r: usize, what: &dyn Fn() -> String) -> Result<usize> {
        let i = if self.names.is_empty() {
            Some(r).filter(|&r| r < self.size)
        } else {
            self.names.iter().position(|&x| x == r)
        };
        i.ok_or_else(|| {
            Error::internal(format!(
                "rank {} waiting for {}: rank {r} is not in this node's control segment",
                self.name(self.me),
                what()
            ))
        })
    }

    /// This rank agreed on its communicator call `k` with every other
    /// (the all-gather of the call descriptors completed here).
    pub(crate) fn publish_agreed(&self, k: u64) {
        self.rank_word(self.me, R_AGREED)
            .fetch_max(k, Ordering::AcqRel);
    }

    /// Whether the job's fault, if any, concerns this rank's agreement on
    /// call `k`: a rank that gave up before it agreed on `k` (a timeout in
    /// the agreement, a failure) left the others' agreement incomplete,
    /// even when its descriptor reached them. The error, if so.
    pub(crate) fn agreement_fault(&self, k: u64, what: &str) -> Option<Error> {
        let f = self.health()?;
        if f.rank()
            .is_some_and(|q| self.seen_everywhere(q, R_AGREED) >= k)
        {
            return None;
        }
        Some(f.error(self.name(self.me), what))
    }

    /// Job rank `rank`'s counter `k` (agreed, completed) as every rank of
    /// the job sees it; 0 when some rank cannot see it. A waiter may let a
    /// call go on past a failed rank's fault only if that rank's counter
    /// says it did its part, and only if every other rank decides the
    /// same: a rank that gave up on the call would leave the waiter waiting
    /// for what it never sends. Over several nodes, a node's counters are
    /// invisible to the others (they fail the call on any fault), so this
    /// node's ranks must fail it too.
    fn seen_everywhere(&self, rank: usize, k: usize) -> u64 {
        if !self.names.is_empty() {
            return 0;
        }
        if rank >= self.size {
            return 0;
        }
        self.rank_word(rank, k).load(Ordering::Acquire)
    }

    /// The failure record, if a rank wrote one: (call, rank, why).
    pub fn failure(&self) -> Option<(u64, usize, String)> {
        let w = self.words();
        if w[F_STATE].load(Ordering::Acquire) != F_WRITTEN {
            return None;
        }
        let len = (w[F_LEN].load(Ordering::Relaxed) as usize).min(F_MSG_WORDS * 8);
        let mut bytes = Vec::with_capacity(len);
        for i in 0..len.div_ceil(8) {
            bytes.extend_from_slice(&w[F_MSG + i].load(Ordering::Relaxed).to_le_bytes());
        }
        bytes.truncate(len);
        Some((
            w[F_GEN].load(Ordering::Relaxed),
            w[F_RANK].load(Ordering::Relaxed) as usize,
            String::from_utf8_lossy(&bytes).into_owned(),
        ))
    }

    /// Record that `rank` failed in call `gen` because of `why` (the first
    /// failure of the job wins; the message is cut to 512 bytes).
    pub(crate) fn record_failure(&self, gen: u64, rank: usize, why: &str) {
        self.record(gen, rank, why, false);
    }

    /// The job's recorded failure as a fault, if a rank wrote one.
    fn recorded(&self) -> Option<JobFault> {
        self.failure().map(|(call, rank, why)| JobFault::Failed {
            rank,
            call,
            why,
            timed_out: self.failure_timed_out(),
        })
    }

    /// Whether the recorded failure was a timeout.
    fn failure_timed_out(&self) -> Option<f64> {
        (self.words()[F_TIMED_OUT].load(Ordering::Relaxed) == 1)
            .then_some(self.timeout.as_secs_f64())
    }

    /// [`Control::record_failure`], saying whether it was a timeout.
    pub fn record(&self, gen: u64, rank: usize, why: &str, timed_out: bool) {
        let w = self.words();
        if w[F_STATE]
            .compare_exchange(0, F_WRITING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let mut b = why.as_bytes();
        if b.len() > F_MSG_WORDS * 8 {
            b = &b[..F_MSG_WORDS * 8];
        }
        for (i, chunk) in b.chunks(8).enumerate() {
            let mut x = [0u8; 8];
            x[..chunk.len()].copy_from_slice(chunk);
            w[F_MSG + i].store(u64::from_le_bytes(x), Ordering::Relaxed);
        }
        w[F_LEN].store(b.len() as u64, Ordering::Relaxed);
        w[F_TIMED_OUT].store(u64::from(timed_out), Ordering::Relaxed);
        w[F_GEN].store(gen, Ordering::Relaxed);
        w[F_RANK].store(rank as u64, Ordering::Relaxed);
        w[F_STATE].store(F_WRITTEN, Ordering::Release);
    }

    /// Why the job cannot go on, if it cannot: a rank recorded a failure,
    /// the run was aborted, or another rank's process died without
    /// finishing.
    pub(crate) fn health(&self) -> Option<JobFault> {
        if let Some(f) = self.recorded() {
            return Some(f);
        }
        // The launcher's abort for a rank that ended badly names the first
        // such rank (the first record wins): a survivor that noticed it and
        // exited since is dead too, and must not be named instead.
        // Read once per check: this runs every few milliseconds of a wait.
        let abort = self.store.as_ref().and_then(|s| s.abort_record());
        if let Some((Some(rank), why)) = &abort {
            self.record_failure(0, self.name(*rank), why);
            return Some(JobFault::Aborted {
                why: why.clone(),
                rank: Some(self.name(*rank)),
            });
        }
        // A dead rank before the launcher's abort: the launcher aborts the
        // run because it reaped that rank, and the rank is what to name.
        for r in (0..self.size).filter(|&r| r != self.me) {
            if self.rank_word(r, R_STATE).load(Ordering::Acquire) == JOINED {
                if let Some(p) = self.proc_of(r) {
                    if !p.alive() {
                        // Recorded as the job's failure (the first wins), so
                        // a peer that looks after this rank has exited names
                        // the dead rank, not this one.
                        self.record_failure(
                            0,
                            self.name(r),
                            &format!("its process (pid {}) died", p.pid),
                        );
                        // Another rank may have recorded the first failure
                        // since this check read none, and exited since: it
                        // is dead now but not the one to name (seen in CI,
                        // loaded: rank 2 named rank 0, which had recorded
                        // rank 1's death and exited). The record says.
                        return Some(self.recorded().unwrap_or(JobFault::Died {
                            rank: self.name(r),
                            pid: p.pid,
                        }));
                    }
                }
            }
        }
        abort.map(|(rank, why)| JobFault::Aborted {
            why,
            rank: rank.map(|r| self.name(r)),
        })
    }

    /// Why this rank must stop waiting for `what` now, if it must: its
    /// engine was aborted, or the job cannot go on ([`Control::health`]:
    /// then the engine's device spins are halted too,
    /// [`AbortHandle::halt_device`]).
    pub fn check(&self, what: &dyn Fn() -> String) -> Result<()> {
        let abort = self.abort.get();
        if abort.is_some_and(AbortHandle::is_aborted) {
            return Err(Error::Aborted {
                rank: self.name(self.me),
                what: format!("waiting for {}", what()),
                wait: WaitKind::Host,
            });
        }
        if let Some(f) = self.health() {
            if let Some(a) = abort {
                a.halt_device();
            }
            return Err(f.error(self.name(self.me), &what()));
        }
        Ok(())
    }

    /// Whether rank `r` left the job (finished) before `ready()` held: then
    /// it never will, and the job cannot go on (recorded, so every rank
    /// names it).
    fn left(&self, r: usize, ready: &impl Fn() -> bool) -> Option<JobFault> {
        if r == self.me || self.rank_word(r, R_STATE).load(Ordering::Acquire) != FINISHED {
            return None;
        }
        // It published everything before it finished (release, acquire).
        if ready() {
            return None;
        }
        self.record_failure(0, self.name(r), crate::sync::LEFT);
        Some(JobFault::Left { rank: self.name(r) })
    }

    /// Wait (bounded, watching the abort handle and the job's health) until
    /// `ready()`; `from`: the rank that makes it ready, if one does (a rank
    /// that left the job never will).
    fn wait_until(
        &self,
        what: &dyn Fn() -> String,
        from: Option<usize>,
        ready: impl Fn() -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        let mut checked = Instant::now();
        let mut pause = Backoff::new(512, 1024, Duration::from_micros(50));
        while !ready() {
            if !pause.next() {
                pause.pause();
                continue;
            }
            if self.abort.get().is_some_and(AbortHandle::is_aborted) {
                return Err(Error::Aborted {
                    rank: self.name(self.me),
                    what: format!("waiting for {}", what()),
                    wait: WaitKind::Host,
                });
            }
            if checked.elapsed() > Duration::from_millis(20) {
                checked = Instant::now();
                self.check(what)?;
                if let Some(f) = from.and_then(|r| self.left(r, &ready)) {
                    return Err(f.error(self.name(self.me), &what()));
                }
            }
            if start.elapsed() > self.timeout {
                return Err(Error::Timeout {
                    rank: self.name(self.me),
                    what: what(),
                    seconds: self.timeout.as_secs_f64(),
                    wait: WaitKind::Host,
                });
            }
            pause.pause();
        }
        Ok(())
    }

    /// Every rank's `data`, in rank order, once every rank contributed
    /// (`what` names the step for errors). Any length: longer payloads take
    /// several rounds of the 64 KiB mailboxes.
    pub(crate) fn allgather(&self, data: &[u8], what: &str) -> Result<Vec<Vec<u8>>> {
        let mut round = self.round.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.size;
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); n];
        let mut total: Vec<Option<usize>> = vec![None; n];
        let chunk = (SLOT_WORDS - 2) * 8;
        let mut sent = 0usize;
        loop {
            *round += 1;
            let k = *round;
            let slot = (k % 2) as usize;
            let base = |r: usize| mail_at(n) + (r * 2 + slot) * SLOT_WORDS;
            let w = self.words();
            // Write this rank's chunk, then publish the round.
            let piece = &data[sent.min(data.len())..(sent + chunk).min(data.len())];
            let b = base(self.me);
            w[b].store(data.len() as u64, Ordering::Relaxed);
            w[b + 1].store(piece.len() as u64, Ordering::Relaxed);
            for (i, c) in piece.chunks(8).enumerate() {
                let mut x = [0u8; 8];
                x[..c.len()].copy_from_slice(c);
                w[b + 2 + i].store(u64::from_le_bytes(x), Ordering::Relaxed);
            }
            sent += piece.len();
            self.rank_word(self.me, R_MAIL).store(k, Ordering::Release);
            for r in 0..n {
                let desc = || format!("rank {r} at {what}");
                self.wait_until(&desc, Some(r), || {
                    self.rank_word(r, R_MAIL).load(Ordering::Acquire) >= k
                })?;
                let b = base(r);
                let len = w[b].load(Ordering::Relaxed) as usize;
                let got = (w[b + 1].load(Ordering::Relaxed) as usize).min(chunk);
                total[r] = Some(len);
                for i in 0..got.div_ceil(8) {
                    let x = w[b + 2 + i].load(Ordering::Relaxed).to_le_bytes();
                    let take = (got - i * 8).min(8);
                    out[r].extend_from_slice(&x[..take]);
                }
            }
            let done = (0..n).all(|r| total[r].is_some_and(|t| out[r].len() >= t));
            if done {
                return Ok(out);
            }
        }
    }

    /// Every rank reaches this point before any goes on.
    pub fn barrier(&self, what: &str) -> Result<()> {
        self.allgather(&[], what).map(|_| ())
    }
}

impl SharedBoard for Control {
    fn gens(&self) -> &[AtomicU64] {
        let at = signals_at(self.size);
        &self.words()[at..at + SIGNALS]
    }

    fn fail(&self, gen: u64, rank: usize, why: &str) {
        self.record_failure(gen, rank, why);
    }

    fn fail_timed_out(&self, gen: u64, rank: usize, why: &str) {
        self.record(gen, rank, why, true);
    }

    fn failed(&self) -> bool {
        self.words()[F_STATE].load(Ordering::Acquire) == F_WRITTEN
    }

    fn failure(&self) -> Option<(usize, String)> {
        Control::failure(self).map(|(g, r, w)| match g {
            0 => (r, w),
            g => (r, format!("{w} (in its call {g})")),
        })
    }

    fn health(&self) -> Option<JobFault> {
        Control::health(self)
    }

    fn completed(&self, rank: usize) -> u64 {
        self.seen_everywhere(rank, R_DRAINED)
    }
}

#[cfg(test)]
mod tests;
