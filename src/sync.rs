//! Ordering and aborting between rank threads on the host.
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
//!
//! Every wait is bounded: it ends with [`Error::Timeout`] after the board's
//! timeout, with [`Error::Aborted`] once [`AbortHandle::abort`] was called,
//! and at once with an error naming the failed rank when another rank of the
//! same call failed.
//!
//! Between processes (one rank per process), the counters and the failure
//! record live in shared memory instead ([`SignalBoard::shared`] over a
//! [`SharedBoard`], the job's control segment): publish and wait are the same
//! atomic store and load, and a waiter also checks, while it sleeps, that the
//! job is healthy (no rank failed, died or was aborted). There, a failure is
//! sticky: the ranks' call numbers no longer agree after it, so every later
//! wait of the job fails too.

use crate::error::{Error, Result, WaitKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default limit on any wait: `RINGREDUCE_TIMEOUT` (seconds) or 60 s.
/// A malformed `RINGREDUCE_TIMEOUT` gives 60 s here, and
/// [`crate::param::timeout`] (which [`crate::Engine::new`] checks) the
/// error naming it.
pub fn default_timeout() -> Duration {
    crate::param::timeout().unwrap_or(crate::param::DEFAULT_TIMEOUT)
}

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct AbortState {
    aborted: AtomicBool,
    /// Run by [`AbortHandle::abort`] only.
    hooks: Mutex<Vec<Hook>>,
    /// Run by [`AbortHandle::abort`] and [`AbortHandle::halt_device`].
    halt_hooks: Mutex<Vec<Hook>>,
}

/// Aborts every wait of an engine, from any thread (like `ncclCommAbort`).
/// Cheap to clone. After an abort the engine's calls fail until it is
/// rebuilt.
#[derive(Clone, Default)]
pub struct AbortHandle(Arc<AbortState>);

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AbortHandle(aborted: {})", self.is_aborted())
    }
}

impl AbortHandle {
    /// A handle not yet aborted.
    pub fn new() -> AbortHandle {
        AbortHandle::default()
    }

    /// Abort: every host wait returns [`Error::Aborted`], and every hook
    /// runs ([`AbortHandle::on_halt`]'s: the CUDA backend raises the abort
    /// word its kernels poll; then [`AbortHandle::on_abort`]'s).
    pub fn abort(&self) {
        self.0.aborted.store(true, Ordering::SeqCst);
        self.halt_device();
        let hooks = self.0.hooks.lock().unwrap_or_else(|e| e.into_inner());
        for h in hooks.iter() {
            h();
        }
    }

    /// Run the [`AbortHandle::on_halt`] hooks without marking the engine
    /// aborted (nor running the `on_abort` ones): a peer
    /// failed or died, so whatever spins on the device waiting for it (an
    /// exchange kernel polling its flags) must stop now instead of at its
    /// deadline. The host waits report the failure itself.
    pub fn halt_device(&self) {
        let hooks = self.0.halt_hooks.lock().unwrap_or_else(|e| e.into_inner());
        for h in hooks.iter() {
            h();
        }
    }

    /// Whether [`AbortHandle::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.0.aborted.load(Ordering::SeqCst)
    }

    /// Run `hook` on [`AbortHandle::abort`] (at once if already aborted).
    pub fn on_abort(&self, hook: impl Fn() + Send + Sync + 'static) {
        if self.is_aborted() {
            hook();
        }
        self.0
            .hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    /// Run `hook` on [`AbortHandle::abort`] and on
    /// [`AbortHandle::halt_device`] (at once if already aborted): what
    /// stops the device's spins (the CUDA backend raises its abort word).
    pub fn on_halt(&self, hook: impl Fn() + Send + Sync + 'static) {
        if self.is_aborted() {
            hook();
        }
        self.0
            .halt_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }
}

/// Why a rank gave up during a call.
#[derive(Debug, Clone)]
struct Failure {
    gen: u64,
    rank: usize,
    why: String,
}

/// Why a multi-process job cannot go on, as a waiter finds it.
#[derive(Debug, Clone, PartialEq)]
pub enum JobFault {
    /// Rank `rank` recorded a failure in its call `call`; `timed_out`:
    /// after waiting `seconds` (the failure was a timeout, which every
    /// other rank reports as a timeout too).
    Failed {
        rank: usize,
        call: u64,
        why: String,
        timed_out: Option<f64>,
    },
    /// Rank `rank`'s process died without finishing.
    Died { rank: usize, pid: u32 },
    /// Rank `rank` left the job (closed its communicator, or its process
    /// ended) while the others still waited for it.
    Left { rank: usize },
    /// The run was aborted: by the launcher because rank `rank` ended
    /// badly (`why` says how), or for another reason (`rank` is `None`).
    Aborted { why: String, rank: Option<usize> },
}

/// What a rank that left the job is said to have done.
pub(crate) const LEFT: &str =
    "it left the job (its communicator was closed, or its process ended) while the others waited for it";

impl std::fmt::Display for JobFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobFault::Failed {
                rank, call, why, ..
            } => {
                write!(f, "rank {rank} failed in call {call}: {why}")
            }
            JobFault::Died { rank, pid } => write!(f, "rank {rank} (pid {pid}) died"),
            JobFault::Left { rank } => write!(f, "rank {rank} left the job"),
            JobFault::Aborted { why, .. } => write!(f, "the run was aborted: {why}"),
        }
    }
}

impl JobFault {
    /// The rank this fault is about, when one is.
    pub fn rank(&self) -> Option<usize> {
        match self {
            JobFault::Failed { rank, .. }
            | JobFault::Died { rank, .. }
            | JobFault::Left { rank } => Some(*rank),
            JobFault::Aborted { rank, .. } => *rank,
        }
    }

    /// The error rank `waiter` returns when it finds this fault while
    /// waiting for `what`: [`Error::PeerFailed`] naming the failed or dead
    /// rank, [`Error::Aborted`] for an aborted run, [`Error::Poisoned`] when
    /// the recorded failure is the waiter's own (an earlier call of its).
    pub fn error(&self, waiter: usize, what: &str) -> Error {
        let noticed = format!("rank {waiter} gave up waiting for {what}");
        match self {
            JobFault::Failed {
                rank, call, why, ..
            } if *rank == waiter => Error::Poisoned {
                reason: format!("this rank (rank {rank}) failed in its call {call}: {why}"),
            },
            // A rank gave up waiting: every rank's call timed out with it.
            JobFault::Failed {
                rank,
                why,
                timed_out: Some(seconds),
                ..
            } => Error::Timeout {
                rank: waiter,
                what: format!(
                    "{what}: rank {rank} gave up first ({})",
                    why.strip_prefix(&format!("rank {rank}: ")).unwrap_or(why)
                ),
                seconds: *seconds,
                wait: WaitKind::Host,
            },
            JobFault::Failed {
                rank, call, why, ..
            } => {
                let prefix = format!("rank {rank}: ");
                let why = why.strip_prefix(&prefix).unwrap_or(why);
                let why = match call {
                    0 => why.to_string(),
                    c => format!("{why} (in its call {c})"),
                };
                Error::peer_failed(*rank, &why, noticed)
            }
            JobFault::Died { rank, pid } => {
                Error::peer_failed(*rank, &format!("its process (pid {pid}) died"), noticed)
            }
            JobFault::Left { rank } => Error::peer_failed(*rank, LEFT, noticed),
            // The launcher gave up the run because a rank ended badly:
            // that rank is the one to name, on every survivor.
            JobFault::Aborted {
                why,
                rank: Some(rank),
            } => Error::peer_failed(*rank, why, noticed),
            JobFault::Aborted { why, rank: None } => Error::Aborted {
                rank: waiter,
                what: format!("waiting for {what}: the run was aborted: {why}"),
                wait: WaitKind::Host,
            },
        }
    }
}

/// A board shared with other processes: the counters, the failure record
/// and a health check (implemented by the job's control segment,
/// [`crate::process::Control`]).
pub trait SharedBoard: Send + Sync {
    /// The generation counters.
    fn gens(&self) -> &[AtomicU64];
    /// Record that `rank` failed in call `gen` (the first failure wins).
    fn fail(&self, gen: u64, rank: usize, why: &str);
    /// Record that `rank` gave up waiting in call `gen` (a timeout: the
    /// others report a timeout too).
    fn fail_timed_out(&self, gen: u64, rank: usize, why: &str) {
        self.fail(gen, rank, why);
    }
    /// Whether some rank recorded a failure (one atomic load).
    fn failed(&self) -> bool;
    /// The recorded failure: (rank, why).
    fn failure(&self) -> Option<(usize, String)>;
    /// The last call job rank `rank` completed (0: none, or not known): a
    /// rank that completed the call a waiter is in did its whole part of
    /// it, so its failure afterwards cannot keep that call from completing.
    fn completed(&self, _rank: usize) -> u64 {
        0
    }
    /// Why the job cannot go on (a failure, an abort, a dead rank), checked
    /// every few milliseconds by a sleeping waiter.
    fn health(&self) -> Option<JobFault>;
}

/// Generation counters, one per plan signal (see the module doc).
pub struct SignalBoard {
    gens: Vec<AtomicU64>,
    shared: Option<Arc<dyn SharedBoard>>,
    /// The latest call in which some rank failed, and why.
    failed: AtomicU64,
    failure: Mutex<Option<Failure>>,
    abort: AbortHandle,
    timeout: Duration,
}

impl std::fmt::Debug for SignalBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SignalBoard({} signals{})",
            self.len(),
            if self.shared.is_some() {
                ", shared"
            } else {
                ""
            }
        )
    }
}

impl SignalBoard {
    pub fn new(signals: usize, abort: AbortHandle, timeout: Duration) -> Self {
        SignalBoard {
            gens: (0..signals).map(|_| AtomicU64::new(0)).collect(),
            shared: None,
            failed: AtomicU64::new(0),
            failure: Mutex::new(None),
            abort,
            timeout,
        }
    }

    /// A board whose counters and failure record are shared with other
    /// processes (see the module doc).
    pub fn shared(board: Arc<dyn SharedBoard>, abort: AbortHandle, timeout: Duration) -> Self {
        SignalBoard {
            gens: Vec::new(),
            shared: Some(board),
            failed: AtomicU64::new(0),
            failure: Mutex::new(None),
            abort,
            timeout,
        }
    }

    #[inline]
    fn gens(&self) -> &[AtomicU64] {
        match &self.shared {
            Some(s) => s.gens(),
            None => &self.gens,
        }
    }

    pub fn len(&self) -> usize {
        self.gens().len()
    }

    /// Mark signal `s` as published for call `gen`.
    pub(crate) fn publish(&self, s: usize, gen: u64) {
        if let Some(g) = self.gens().get(s) {
            g.store(gen, Ordering::Release);
        }
    }

    /// Stop the device's spins now ([`AbortHandle::halt_device`]): a
    /// rank's failure means its part of a call never runs, and kernels of
    /// other ranks waiting for it inside the GPU would spin to their
    /// deadline.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn halt_device(&self) {
        self.abort.halt_device();
    }

    /// Rank `rank` failed during call `gen`: release every waiter of that
    /// call, telling them who failed and why.
    pub fn fail(&self, gen: u64, rank: usize, why: &str) {
        if let Some(sh) = &self.shared {
            sh.fail(gen, rank, why);
            return;
        }
        {
            let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            if f.as_ref().is_none_or(|f| f.gen < gen) {
                *f = Some(Failure {
                    gen,
                    rank,
                    why: why.to_string(),
                });
            }
        }
        self.failed.fetch_max(gen, Ordering::AcqRel);
    }

    /// Rank `rank` failed during call `gen` with `e`: like
    /// [`SignalBoard::fail`], but a rank that only noticed another's
    /// failure ([`Error::PeerFailed`]) records that rank's failure, so
    /// every waiter names the rank that failed first.
    pub(crate) fn fail_with(&self, gen: u64, rank: usize, e: &Error) {
        match (e.root(), &self.shared) {
            (
                Error::PeerFailed {
                    rank: failed,
                    reason,
                    ..
                },
                _,
            ) => self.fail(gen, *failed, reason),
            (Error::Timeout { .. }, Some(sh)) => {
                sh.fail_timed_out(gen, rank, &e.root().to_string())
            }
            (root, _) => self.fail(gen, rank, &root.to_string()),
        }
    }

    pub(crate) fn is_published(&self, s: usize, gen: u64) -> bool {
        self.gens()
            .get(s)
            .is_some_and(|g| g.load(Ordering::Acquire) >= gen)
    }

    /// The error a waiter of call `gen` gets when another rank failed:
    /// [`Error::PeerFailed`] naming the failed rank.
    fn failure_error(&self, gen: u64, rank: usize, what: &dyn Fn() -> String) -> Error {
        // A job's failure as the job tells it (a timeout stays a timeout).
        if let Some(f) = self.shared.as_ref().and_then(|sh| sh.health()) {
            return f.error(rank, &what());
        }
        let failed = match &self.shared {
            Some(sh) => sh.failure(),
            None => self
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|f| f.gen == gen)
                .map(|f| (f.rank, f.why)),
        };
        let noticed = format!("rank {rank} gave up waiting for {}", what());
        match failed {
            Some((r, why)) => Error::peer_failed(r, &why, noticed),
            None => Error::Worker {
                rank,
                message: format!("{noticed}: another rank failed"),
            },
        }
    }

    /// Why rank `rank` must stop waiting for `what` now, if it must: an
    /// abort, or (shared boards) a job that cannot go on. A fault of the
    /// job also halts this process's device spins
    /// ([`AbortHandle::halt_device`]): the exchange kernels polling a dead
    /// peer's flags stop at once.
    pub fn check(&self, rank: usize, what: &dyn Fn() -> String) -> Result<()> {
        if self.abort.is_aborted() {
            return Err(Error::Aborted {
                rank,
                what: format!("waiting for {}", what()),
                wait: WaitKind::Host,
            });
        }
        self.job_fault(rank, what)
    }

    /// Only the job's part of [`SignalBoard::check`]: on a shared board,
    /// why the job cannot go on (a peer failed, died, or the run was
    /// aborted), halting this process's device spins; always `Ok` on a
    /// board of one process. For waits that must go on after an abort of
    /// this engine (a drain waiting for its kernels to see the abort word)
    /// but not for a dead peer.
    pub(crate) fn job_fault(&self, rank: usize, what: &dyn Fn() -> String) -> Result<()> {
        if let Some(f) = self.shared.as_ref().and_then(|sh| sh.health()) {
            self.abort.halt_device();
            return Err(f.error(rank, &what()));
        }
        Ok(())
    }

    /// Signal `s` exists on this board.
    fn known(&self, s: usize, rank: usize) -> Result<()> {
        if s >= self.len() {
            return Err(Error::Plan(format!(
                "rank {rank} waits on unknown signal {s}"
            )));
        }
        Ok(())
    }

    /// A host wait's abort check.
    fn not_aborted(&self, rank: usize, what: &dyn Fn() -> String) -> Result<()> {
        if self.abort.is_aborted() {
            return Err(Error::Aborted {
                rank,
                what: format!("waiting for {}", what()),
                wait: WaitKind::Host,
            });
        }
        Ok(())
    }

    /// A host wait begun at `start` is still within the board's timeout.
    fn in_time(&self, start: Instant, rank: usize, what: &dyn Fn() -> String) -> Result<()> {
        if start.elapsed() > self.timeout {
            return Err(Error::Timeout {
                rank,
                what: what(),
                seconds: self.timeout.as_secs_f64(),
                wait: WaitKind::Host,
            });
        }
        Ok(())
    }

    /// Wait until signal `s` is published for call `gen`: spin, then yield,
    /// then sleep in short naps. `what` describes what is waited for (the
    /// producing rank and step), for the error.
    // The CPU backend waits through `wait_driving`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn wait(&self, s: usize, gen: u64, rank: usize, what: &dyn Fn() -> String) -> Result<()> {
        self.wait_driving(s, gen, rank, what, &|| {})
    }

    /// [`SignalBoard::wait`], calling `drive` at every poll: the waiter
    /// does the work that publishes the signal, where that work is polling
    /// (the network transport's receive, `Wire::progress`).
    pub(crate) fn wait_driving(
        &self,
        s: usize,
        gen: u64,
        rank: usize,
        what: &dyn Fn() -> String,
        drive: &dyn Fn(),
    ) -> Result<()> {
        self.known(s, rank)?;
        let start = Instant::now();
        let mut checked = start;
        let mut pause = Backoff::new(256, 512, Duration::from_micros(20));
        // A job's failure that cannot keep this call from completing (its
        // rank had finished its part of it): waited past, not reported.
        let mut past = false;
        while !self.is_published(s, gen) {
            let failed = match &self.shared {
                Some(sh) => !past && sh.failed(),
                None => self.failed.load(Ordering::Acquire) >= gen,
            };
            if failed {
                match &self.shared {
                    Some(_) => match self.fault_of_call(gen, rank, what) {
                        Some(e) => return Err(e),
                        None => past = true,
                    },
                    None => return Err(self.failure_error(gen, rank, what)),
                }
            }
            self.not_aborted(rank, what)?;
            if pause.next() {
                self.in_time(start, rank, what)?;
                if self.shared.is_some() && checked.elapsed() > Duration::from_millis(20) {
                    checked = Instant::now();
                    if let Some(e) = self.fault_of_call(gen, rank, what) {
                        return Err(e);
                    }
                }
            }
            drive();
            if self.is_published(s, gen) {
                break;
            }
            pause.pause();
        }
        Ok(())
    }

    /// On a shared board: the error of the job's fault, if there is one
    /// that concerns call `gen` (a fault of a rank that completed this
    /// call does not: it did its whole part of it, so what this rank waits
    /// for is still coming). Halts the device spins when it does.
    fn fault_of_call(&self, gen: u64, rank: usize, what: &dyn Fn() -> String) -> Option<Error> {
        let sh = self.shared.as_ref()?;
        let f = sh.health()?;
        if f.rank().is_some_and(|q| sh.completed(q) >= gen) {
            return None;
        }
        self.abort.halt_device();
        Some(f.error(rank, &what()))
    }

    /// Wait until signal `s` is published for call `gen` even when some
    /// rank failed the call (the clean-up hand-shakes of a failed call: a
    /// rank that failed still publishes that it has stopped). Bounded by the
    /// abort handle and the timeout like [`SignalBoard::wait`].
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn wait_settled(
        &self,
        s: usize,
        gen: u64,
        rank: usize,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        self.known(s, rank)?;
        let start = Instant::now();
        // Spin, then nap (no yields).
        let mut pause = Backoff::new(256, 256, Duration::from_micros(20));
        while !self.is_published(s, gen) {
            self.not_aborted(rank, what)?;
            if pause.next() {
                self.in_time(start, rank, what)?;
            }
            pause.pause();
        }
        Ok(())
    }

    /// Sleep until the call is aborted, fails elsewhere or times out (an
    /// injected stall); always an error. A stall that lasts the whole
    /// timeout is this rank's own failure ([`Error::Worker`], naming the
    /// step): the cause of the others' timeouts, not one of them.
    pub fn stall(&self, gen: u64, rank: usize, what: &str) -> Error {
        let start = Instant::now();
        loop {
            match self.check(rank, &|| what.to_string()) {
                Err(e @ Error::Aborted { .. }) => return e,
                Err(_) => {
                    return Error::Worker {
                        rank,
                        message: format!("{what}: this rank stood still until the others gave up"),
                    }
                }
                Ok(()) => {}
            }
            if start.elapsed() > self.timeout {
                return Error::Worker {
                    rank,
                    message: format!(
                        "{what}: this rank stood still for {} s (the timeout)",
                        self.timeout.as_secs_f64()
                    ),
                };
            }
            let _ = gen;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// How a host wait pauses between polls: it spins for the first `spins`
/// polls, yields its core until poll `yields`, then naps `nap` each time.
/// The slower checks of a wait (timeout, the job's health) go with the
/// naps ([`Backoff::next`] says when).
#[derive(Debug)]
pub(crate) struct Backoff {
    polls: u32,
    spins: u32,
    yields: u32,
    nap: Duration,
}

impl Backoff {
    pub(crate) const fn new(spins: u32, yields: u32, nap: Duration) -> Backoff {
        Backoff {
            polls: 0,
            spins,
            yields,
            nap,
        }
    }

    /// Count one more poll; `true` once the pauses are naps.
    pub(crate) fn next(&mut self) -> bool {
        self.polls = self.polls.saturating_add(1);
        self.polls >= self.yields
    }

    /// Pause as the polls counted so far say: spin, yield or nap.
    pub(crate) fn pause(&self) {
        if self.polls < self.spins {
            std::hint::spin_loop();
        } else if self.polls < self.yields {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.nap);
        }
    }

    /// [`Backoff::next`], then [`Backoff::pause`].
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn snooze(&mut self) {
        self.next();
        self.pause();
    }
}

#[cfg(test)]
mod tests;
