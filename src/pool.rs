//! One long-lived host thread per rank, and a cheap hand-off to them.
//!
//! Threads are created once, at engine setup, and reused for every call. A
//! call posts one command to every rank thread and waits for all replies. The
//! hand-off spins briefly before parking on both sides (the worker waiting for
//! work, the caller waiting for replies), so back-to-back calls do not pay a
//! futex wake-up each time; an idle engine still costs no CPU.
//!
//! A rank thread that panics or exits replies with an error instead of leaving
//! the caller waiting forever; a rank thread that does not answer within the
//! pool's deadline (stuck in a driver call) gives a timeout error, and the
//! pool is then broken: later calls fail at once, and dropping it detaches
//! the threads instead of waiting for them forever. If starting a thread
//! fails, the threads already started are shut down.

use crate::error::{Error, Result, WaitKind};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long each side spins before parking.
const SPIN: Duration = Duration::from_micros(50);

/// Rank threads this process left running when their pool broke (stuck
/// in a driver call): see [`threads_left_stuck`].
static LEFT_STUCK: AtomicUsize = AtomicUsize::new(0);

/// How many rank threads this process detached because they stopped
/// answering (stuck in a driver call behind GPU work that will never end,
/// such as a wait on a dead peer's event). While one runs, the CUDA
/// driver's own exit handlers can wait for it forever: a program that sees
/// a nonzero count ends without them (the command line does).
pub fn threads_left_stuck() -> usize {
    LEFT_STUCK.load(Ordering::Relaxed)
}

/// How much longer than the engine's timeout a caller waits for its rank
/// threads' answers before it takes them for stuck (every wait of a rank
/// thread is itself bounded by the timeout; this is the backstop).
pub const GRACE: Duration = Duration::from_secs(30);

struct State<C, R> {
    /// The next command, until the worker takes it.
    cmd: Option<C>,
    /// Answers not yet collected, oldest first, with the worker's stamps
    /// (taken, answered): at most two with one round deferred.
    replies: std::collections::VecDeque<(Result<R>, u64, u64)>,
    ready: Option<Result<()>>,
    shutdown: bool,
}

struct Mailbox<C, R> {
    state: Mutex<State<C, R>>,
    cv: Condvar,
    posted: AtomicU64,
    answered: AtomicU64,
    worker_parked: AtomicBool,
    caller_parked: AtomicBool,
    /// Pool clock stamp ([`now_ns`]) of the latest post, and of the worker
    /// taking its current command (it goes out with that command's answer).
    t_post: AtomicU64,
    t_pick: AtomicU64,
}

/// Nanoseconds on one clock shared by every thread of the process.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Where the calling thread's time went in the calls since the last take:
/// sums over calls, nanoseconds. A call's round is `post` (handing the
/// commands over), then every rank's `pickup` (its thread noticing the
/// command) and `handler` (its work), then the caller noticing the last
/// answer: `round - last_done`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PoolPhases {
    /// Launches summed.
    pub calls: u64,
    /// Posting the commands to every rank.
    pub post_ns: u64,
    /// From a rank's post to its thread taking the command, summed over ranks.
    pub pickup_ns: u64,
    /// A rank thread's handler, summed over ranks.
    pub handler_ns: u64,
    /// From the start of posting to the last rank's answer.
    pub last_done_ns: u64,
    /// From the start of posting to having every answer.
    pub round_ns: u64,
}

impl PoolPhases {
    /// Both sums together.
    pub fn add(&mut self, o: &PoolPhases) {
        self.calls += o.calls;
        self.post_ns += o.post_ns;
        self.pickup_ns += o.pickup_ns;
        self.handler_ns += o.handler_ns;
        self.last_done_ns += o.last_done_ns;
        self.round_ns += o.round_ns;
    }
}

impl<C, R> Mailbox<C, R> {
    fn lock(&self) -> MutexGuard<'_, State<C, R>> {
        // A poisoned lock only means a thread panicked while holding it; the
        // state itself is still consistent (plain Options), so keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether every rank thread and the caller can have a core to themselves
/// while they spin (then spinning never yields: a `yield_now` is a system
/// call, and the time it takes delays noticing the other side).
fn cores_to_spare(threads: usize) -> bool {
    static CORES: OnceLock<usize> = OnceLock::new();
    threads < *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Spin until `done()` or `SPIN` elapses; true if done. With cores to spare
/// the spin only pauses the core between polls; otherwise it yields every
/// 64 polls so the threads it waits for can run.
fn spin_until(spare: bool, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut i = 0u32;
    loop {
        if done() {
            return true;
        }
        i = i.wrapping_add(1);
        if i % 64 == 0 {
            if start.elapsed() > SPIN {
                return false;
            }
            if !spare {
                std::thread::yield_now();
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The text of a caught panic.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let m = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown payload".into());
    format!("the rank thread panicked: {m}")
}

/// The worker's end of a slot.
pub struct Inbox<C, R> {
    slot: Arc<Mailbox<C, R>>,
    seen: u64,
    rank: usize,
    spare: bool,
}

impl<C, R> Inbox<C, R> {
    /// Report the outcome of the thread's setup (must be called once, first).
    pub fn ready(&self, r: Result<()>) {
        let mut st = self.slot.lock();
        st.ready = Some(r);
        drop(st);
        self.slot.cv.notify_all();
    }

    /// Serve commands until shutdown. Panics inside `handler` become errors.
    pub(crate) fn serve(mut self, mut handler: impl FnMut(C) -> Result<R>) {
        while let Some(cmd) = self.next() {
            let r = catch_unwind(AssertUnwindSafe(|| handler(cmd))).unwrap_or_else(|p| {
                Err(Error::Worker {
                    rank: self.rank,
                    message: panic_message(p.as_ref()),
                })
            });
            self.answer(r);
        }
    }

    fn next(&mut self) -> Option<C> {
        let slot = &self.slot;
        let want = self.seen + 1;
        spin_until(self.spare, || slot.posted.load(Ordering::Acquire) >= want);
        let mut st = slot.lock();
        loop {
            if st.shutdown {
                return None;
            }
            if let Some(c) = st.cmd.take() {
                slot.t_pick.store(now_ns(), Ordering::Relaxed);
                self.seen = want;
                // A caller posting the next command may wait for the mailbox.
                if slot.caller_parked.load(Ordering::SeqCst) {
                    slot.cv.notify_all();
                }
                return Some(c);
            }
            slot.worker_parked.store(true, Ordering::SeqCst);
            st = slot.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            slot.worker_parked.store(false, Ordering::SeqCst);
        }
    }

    fn answer(&self, r: Result<R>) {
        let mut st = self.slot.lock();
        let t_pick = self.slot.t_pick.load(Ordering::Relaxed);
        st.replies.push_back((r, t_pick, now_ns()));
        self.slot.answered.store(self.seen, Ordering::Release);
        let wake = self.slot.caller_parked.load(Ordering::SeqCst);
        drop(st);
        if wake {
            self.slot.cv.notify_all();
        }
    }
}

/// What the caller watches while it waits for its rank threads (besides
/// their answers and the deadline): `Some(error)` once it must stop
/// waiting (a peer process died). See [`RankThreads::set_watch`].
pub type Watch = Box<dyn Fn() -> Option<Error> + Send + Sync>;

/// How long the caller still waits for its rank threads once its watch
/// fired: what the watch found (a dead peer) releases their own waits too,
/// so they usually answer within it.
pub const WATCH_GRACE: Duration = Duration::from_secs(1);

/// The rank threads of one engine.
pub struct RankThreads<C: Send + 'static, R: Send + 'static> {
    slots: Vec<Arc<Mailbox<C, R>>>,
    handles: Vec<Option<JoinHandle<()>>>,
    seq: u64,
    /// How long a call may wait for a rank thread's reply.
    deadline: Option<Duration>,
    /// Checked every park while waiting ([`RankThreads::set_watch`]).
    watch: Option<Watch>,
    /// Pool clock stamp ([`now_ns`]) of when the watch fired in the
    /// current wait (0: it did not).
    watch_fired: AtomicU64,
    /// Set when a rank thread did not answer in time.
    broken: Option<String>,
    /// The phases of the last call that every rank answered.
    last: PoolPhases,
    /// Whether the caller and every rank thread have a core each (see
    /// [`cores_to_spare`]).
    spare: bool,
    /// The round posted by [`RankThreads::run_deferred`] whose answers are
    /// not collected yet: (seq, posting began, posting ended).
    pending: Option<(u64, u64, u64)>,
}

impl<C: Send + 'static, R: Send + 'static> RankThreads<C, R> {
    /// Start `n` threads. `body(rank, inbox)` runs on each: it sets up the
    /// rank, calls `inbox.ready(..)`, then `inbox.serve(handler)`. Returns once
    /// every thread reported ready, or the first setup error.
    // The CPU backend names its threads itself (`spawn_named`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn spawn<F>(n: usize, name: &str, body: F) -> Result<Self>
    where
        F: Fn(usize, Inbox<C, R>) + Send + Sync + 'static,
    {
        Self::spawn_named(n, &|rank| format!("{name}-rank{rank}"), body)
    }

    /// [`RankThreads::spawn`], thread `i` named `name(i)`.
    pub(crate) fn spawn_named<F>(n: usize, name: &dyn Fn(usize) -> String, body: F) -> Result<Self>
    where
        F: Fn(usize, Inbox<C, R>) + Send + Sync + 'static,
    {
        let body = Arc::new(body);
        // Built up in place: if a later spawn fails, dropping `pool` shuts
        // down and joins the threads already started.
        let mut pool = RankThreads {
            slots: Vec::with_capacity(n),
            handles: Vec::with_capacity(n),
            seq: 0,
            deadline: None,
            watch: None,
            watch_fired: AtomicU64::new(0),
            broken: None,
            last: PoolPhases::default(),
            spare: cores_to_spare(n),
            pending: None,
        };
        for rank in 0..n {
            let slot = Arc::new(Mailbox {
                state: Mutex::new(State {
                    cmd: None,
                    replies: std::collections::VecDeque::new(),
                    ready: None,
                    shutdown: false,
                }),
                cv: Condvar::new(),
                posted: AtomicU64::new(0),
                answered: AtomicU64::new(0),
                worker_parked: AtomicBool::new(false),
                caller_parked: AtomicBool::new(false),
                t_post: AtomicU64::new(0),
                t_pick: AtomicU64::new(0),
            });
            let inbox = Inbox {
                slot: slot.clone(),
                seen: 0,
                rank,
                spare: pool.spare,
            };
            let body = body.clone();
            let h = std::thread::Builder::new()
                .name(name(rank))
                .spawn(move || body(rank, inbox))
                .map_err(|e| Error::Worker {
                    rank,
                    message: format!("could not start its thread: {e}"),
                })?;
            pool.slots.push(slot);
            pool.handles.push(Some(h));
        }
        let mut first_err = None;
        for rank in 0..n {
            let r = pool.wait_ready(rank);
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(pool),
        }
    }

    /// How many threads the pool has.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Bound every later wait for a reply by `d` (none: unbounded).
    pub(crate) fn set_deadline(&mut self, d: Option<Duration>) {
        self.deadline = d;
    }

    /// While the caller waits for its rank threads (their answers, or a
    /// free mailbox), look at `watch` every park (50 ms at most): once it
    /// returns an error, give the rank threads [`WATCH_GRACE`] more to
    /// answer, then stop waiting with that error (the pool is then broken,
    /// as after its deadline). For a rank thread that waits on the host
    /// for a GPU whose work depends on a peer process (a stream waiting on
    /// a dead peer's event, a driver call blocked on a full queue): the
    /// caller names the dead peer instead of waiting for the deadline.
    // Used by the CUDA backend only.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn set_watch(&mut self, watch: Option<Watch>) {
        self.watch = watch;
    }

    /// The phases of the last call every rank answered (one call: `calls`
    /// is 1); callers add up the ones they count.
    pub(crate) fn last_phases(&self) -> PoolPhases {
        self.last
    }

    /// Keep a finished call's stamps as the last phases; `t0` is when
    /// posting began, `posted` when it ended, `stamps` each rank's (taken,
    /// answered). Pickup counts from the end of posting; for a deferred
    /// round that includes the worker finishing the round before.
    fn account(&mut self, t0: u64, posted: u64, stamps: &[(u64, u64)]) {
        let end = now_ns();
        let mut p = PoolPhases {
            calls: 1,
            ..PoolPhases::default()
        };
        p.post_ns = posted.saturating_sub(t0);
        let mut last = t0;
        for &(b, c) in stamps {
            p.pickup_ns += b.saturating_sub(posted);
            p.handler_ns += c.saturating_sub(b);
            last = last.max(c);
        }
        p.last_done_ns = last.saturating_sub(t0);
        p.round_ns = end.saturating_sub(t0);
        self.last = p;
    }

    fn thread_gone(&self, rank: usize) -> bool {
        self.handles[rank].as_ref().is_none_or(|h| h.is_finished())
    }

    fn wait_ready(&mut self, rank: usize) -> Result<()> {
        let slot = self.slots[rank].clone();
        let mut st = slot.lock();
        loop {
            if let Some(r) = st.ready.take() {
                return r;
            }
            if self.thread_gone(rank) {
                return Err(Error::Worker {
                    rank,
                    message: "thread exited during setup".into(),
                });
            }
            st = slot
                .cv
                .wait_timeout(st, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Refuse a round when the pool is broken, a deferred round is still
    /// pending (its answers would be lost), or the command count is wrong.
    fn can_post(&self, n: usize, deferred: bool) -> Result<()> {
        if let Some(why) = &self.broken {
            return Err(Error::Poisoned {
                reason: why.clone(),
            });
        }
        if self.pending.is_some() && !deferred {
            return Err(Error::internal(
                "a deferred round's answers must be collected (settle) before the next round",
            ));
        }
        if n != self.slots.len() {
            return Err(Error::WrongBufferCount {
                ranks: self.slots.len(),
                buffers: n,
            });
        }
        Ok(())
    }

    /// Post `cmds[r]` to rank r for every rank, then wait for every reply.
    /// Returns the replies in rank order, or the first error (after all ranks
    /// have answered, so no rank is left working on a half-finished call).
    pub fn run(&mut self, cmds: Vec<C>) -> Result<Vec<R>> {
        let mut out = Vec::with_capacity(self.slots.len());
        let mut first_err = None;
        for r in self.run_all(cmds)? {
            match r {
                Ok(r) => out.push(r),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Like [`RankThreads::run`], but every rank's own outcome (the outer
    /// error: the pool itself is unusable).
    pub fn run_all(&mut self, cmds: Vec<C>) -> Result<Vec<Result<R>>> {
        self.can_post(cmds.len(), false)?;
        let round = self.post(cmds)?;
        self.collect(round)
    }

    /// [`RankThreads::run_all`] with a share of the caller's own: post
    /// `cmds`, run `mine` on the calling thread while the threads work,
    /// then collect; `mine`'s outcome comes first. The caller does one
    /// rank's work instead of waiting idle for it, and the phases count it
    /// as one more rank (taken at once, after posting).
    pub(crate) fn run_all_with(
        &mut self,
        cmds: Vec<C>,
        mine: impl FnOnce() -> Result<R>,
    ) -> Result<Vec<Result<R>>> {
        self.can_post(cmds.len(), false)?;
        let round = self.post(cmds)?;
        let taken = now_ns();
        let own = mine();
        let mut out = self.collect_with(round, Some((taken, now_ns())))?;
        out.insert(0, own);
        Ok(out)
    }

    /// Post `cmds` and return without waiting for them; instead collect
    /// the round posted before by this function, if any, and return its
    /// answers. A rank thread takes the new command as soon as it has
    /// answered the previous one, so the caller's posting and the answers'
    /// way back overlap the ranks' work. Before any other round, collect
    /// the last one with [`RankThreads::settle`].
    // Used by the CUDA backend only.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn run_deferred(&mut self, cmds: Vec<C>) -> Result<Option<Vec<Result<R>>>> {
        self.can_post(cmds.len(), true)?;
        let round = self.post(cmds)?;
        let before = self.pending.replace(round);
        before.map(|b| self.collect(b)).transpose()
    }

    /// Collect the answers of the round [`RankThreads::run_deferred`] left
    /// pending, if any.
    // Used by the CUDA backend only.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn settle(&mut self) -> Result<Option<Vec<Result<R>>>> {
        self.pending.take().map(|b| self.collect(b)).transpose()
    }

    /// Whether a deferred round's answers are still to be collected.
    #[cfg(test)]
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Wait for every rank's answer to round `(seq, t0, posted)`.
    fn collect(&mut self, round: (u64, u64, u64)) -> Result<Vec<Result<R>>> {
        self.collect_with(round, None)
    }

    /// [`RankThreads::collect`], with the caller's own share of the round
    /// (its stamps: taken, answered) counted in the phases.
    fn collect_with(
        &mut self,
        (seq, t0, posted): (u64, u64, u64),
        own: Option<(u64, u64)>,
    ) -> Result<Vec<Result<R>>> {
        // A round that breaks the pool leaves no phases (`calls` 0).
        self.last = PoolPhases::default();
        let mut out = Vec::with_capacity(self.slots.len());
        let mut stamps: Vec<(u64, u64)> = own.into_iter().collect();
        for rank in 0..self.slots.len() {
            let r = match self.wait_reply(rank, seq, t0) {
                Ok((r, pick, done)) => {
                    stamps.push((pick, done));
                    r
                }
                Err(e) => {
                    self.broken = Some(format!("rank {rank}'s thread stopped answering"));
                    Err(e)
                }
            };
            out.push(r);
        }
        if self.broken.is_none() {
            self.account(t0, posted, &stamps);
        }
        Ok(out)
    }

    /// Put one command in every rank's mailbox (waiting, bounded, for a
    /// worker still to take the previous one); the round's (seq, start,
    /// end of posting).
    fn post(&mut self, cmds: Vec<C>) -> Result<(u64, u64, u64)> {
        // A watch that fired in an earlier round and still fires ends this
        // one before anything is posted (the pool stays whole: no thread
        // was left with a command). Looked at only then: the watch may
        // cost a system call.
        if self.watch_fired.load(Ordering::Relaxed) != 0 {
            self.watch_expired()?;
        }
        self.seq += 1;
        let seq = self.seq;
        let t0 = now_ns();
        for (rank, cmd) in cmds.into_iter().enumerate() {
            let slot = self.slots[rank].clone();
            // The mailbox is free once the worker took the last command
            // (checked under the lock below; this only spins first).
            spin_until(self.spare, || {
                slot.t_pick.load(Ordering::Relaxed) >= slot.t_post.load(Ordering::Relaxed)
            });
            let mut st = slot.lock();
            while st.cmd.is_some() {
                if self.thread_gone(rank) {
                    self.broken = Some(format!("rank {rank}'s thread exited"));
                    return Err(Error::Worker {
                        rank,
                        message: "rank thread exited".into(),
                    });
                }
                const WHAT: &str =
                    "its rank thread to take the next command (stuck in a driver call?)";
                match self.park(rank, &slot, st, t0, WHAT) {
                    Ok(g) => st = g,
                    Err(e) => {
                        self.broken = Some(format!("rank {rank}'s thread stopped answering"));
                        return Err(e);
                    }
                }
            }
            st.cmd = Some(cmd);
            slot.t_post.store(now_ns(), Ordering::Relaxed);
            slot.posted.store(seq, Ordering::Release);
            let wake = slot.worker_parked.load(Ordering::SeqCst);
            drop(st);
            if wake {
                slot.cv.notify_all();
            }
        }
        Ok((seq, t0, now_ns()))
    }

    /// Why the pool is unusable (a rank thread stopped answering or
    /// exited), if it is.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Run the same command (built per rank) on every rank.
    #[cfg(test)]
    pub(crate) fn run_each(&mut self, mut make: impl FnMut(usize) -> C) -> Result<Vec<R>> {
        let cmds = (0..self.slots.len()).map(&mut make).collect();
        self.run(cmds)
    }

    /// The rank's answer to round `seq` (its own result, and when it took
    /// and answered the command), or `Err` when the thread is gone or did
    /// not answer within the deadline (then the pool is unusable). Answers
    /// are collected in the order of their rounds.
    fn wait_reply(&self, rank: usize, seq: u64, t0: u64) -> Result<(Result<R>, u64, u64)> {
        let slot = &self.slots[rank];
        spin_until(self.spare, || slot.answered.load(Ordering::Acquire) >= seq);
        let mut st = slot.lock();
        loop {
            if slot.answered.load(Ordering::Acquire) >= seq {
                if let Some(r) = st.replies.pop_front() {
                    return Ok(r);
                }
            }
            if self.thread_gone(rank) {
                return Ok((
                    Err(Error::Worker {
                        rank,
                        message: "rank thread exited".into(),
                    }),
                    0,
                    0,
                ));
            }
            st = self.park(
                rank,
                slot,
                st,
                t0,
                "its rank thread to finish (stuck in a driver call?)",
            )?;
        }
    }

    /// Look at the watch: `Err` with what it found once it has kept
    /// finding it for [`WATCH_GRACE`]. The first sighting is remembered
    /// across rounds (only a clear look forgets it): after a peer died,
    /// rounds can still complete one by one (the halted GPU work drains
    /// behind them), and a grace that began again with every round would
    /// never end.
    fn watch_expired(&self) -> Result<()> {
        let Some(w) = self.watch.as_ref() else {
            return Ok(());
        };
        match w() {
            None => self.watch_fired.store(0, Ordering::Relaxed),
            Some(e) => {
                let now = now_ns().max(1);
                let fired = match self.watch_fired.load(Ordering::Relaxed) {
                    0 => {
                        self.watch_fired.store(now, Ordering::Relaxed);
                        now
                    }
                    t => t,
                };
                if u128::from(now - fired) > WATCH_GRACE.as_nanos() {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Park the caller on `slot` for up to 50 ms (a worker's notify wakes
    /// it sooner); the guard back, or a timeout naming `what` once the
    /// pool's deadline has passed since `t0`.
    fn park<'a>(
        &self,
        rank: usize,
        slot: &'a Mailbox<C, R>,
        st: MutexGuard<'a, State<C, R>>,
        t0: u64,
        what: &str,
    ) -> Result<MutexGuard<'a, State<C, R>>> {
        if let Some(d) = self.deadline {
            if u128::from(now_ns().saturating_sub(t0)) > d.as_nanos() {
                return Err(Error::Timeout {
                    rank,
                    what: what.into(),
                    seconds: d.as_secs_f64(),
                    wait: WaitKind::Host,
                });
            }
        }
        self.watch_expired()?;
        slot.caller_parked.store(true, Ordering::SeqCst);
        let st = slot
            .cv
            .wait_timeout(st, Duration::from_millis(50))
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
        slot.caller_parked.store(false, Ordering::SeqCst);
        Ok(st)
    }
}

impl<C: Send + 'static, R: Send + 'static> Drop for RankThreads<C, R> {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.lock().shutdown = true;
            slot.cv.notify_all();
        }
        if self.broken.is_some() {
            // A thread stuck in a driver call would block the join forever:
            // detach them all instead.
            let left = self
                .handles
                .iter()
                .flatten()
                .filter(|h| !h.is_finished())
                .count();
            LEFT_STUCK.fetch_add(left, Ordering::Relaxed);
            self.handles.clear();
            return;
        }
        for h in self.handles.iter_mut().filter_map(Option::take) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests;
