//! The per-rank call style: one handle per rank for code that runs one
//! thread per GPU, the way NCCL is used. Each rank's thread calls the same
//! collective on its own handle; the call runs when every rank has called,
//! and each thread gets its own rank's result, or every thread the same
//! error.
//!
//! This module is the rendezvous underneath
//! [`Communicator::per_rank`](crate::Communicator::per_rank) (the API).
//!
//! ```
//! use ringreduce::{Communicator, EngineConfig, ReduceOp};
//! let ranks = Communicator::per_rank(EngineConfig::cpu(2)).unwrap();
//! let out: Vec<Vec<i32>> = std::thread::scope(|s| {
//!     let t: Vec<_> = ranks.into_iter().map(|mut c| s.spawn(move || {
//!         let mut out = vec![0; 4];
//!         c.all_reduce(&[c.rank() as i32 + 1; 4], &mut out, ReduceOp::Sum).unwrap();
//!         out
//!     })).collect();
//!     t.into_iter().map(|t| t.join().unwrap()).collect()
//! });
//! assert_eq!(out, vec![vec![3; 4], vec![3; 4]]);
//! ```

use super::EngineCell;
use crate::engine::Engine;
use crate::error::{Error, Result, WaitKind};
use crate::sync::AbortHandle;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::desc::CallDesc;

/// What a rank brings to a call, and what it takes away: the call's
/// element type is the caller's, so the rendezvous carries it untyped (the
/// rank that runs the call made every rank's descriptor agree first, the
/// element type included).
pub(crate) type Payload = Box<dyn Any + Send>;

/// Why a call failed for every rank that joined it (each rank's own error
/// is made from it, [`Fail::error_for`]).
#[derive(Debug)]
enum Fail {
    /// Ranks that never came within the timeout; `hint` says why they may
    /// not have (empty when nothing is known).
    Timeout {
        missing: Vec<usize>,
        waiters: Vec<usize>,
        what: String,
        seconds: f64,
        hint: String,
    },
    /// The engine was aborted while ranks waited for `missing`.
    Aborted { missing: Vec<usize>, what: String },
    /// Rank `rank`'s handle is gone (dropped, or its thread panicked)
    /// before it joined the call.
    Gone {
        rank: usize,
        why: &'static str,
        what: String,
    },
    /// Rank `rank`'s own arguments are wrong (its output's length, ...).
    Own { rank: usize, error: Error },
    /// The call's error: a mismatch, or what the engine returned.
    Error(Error),
}

impl Fail {
    /// Whether the rendezvous can go on after this failure: a timeout,
    /// an abort, a rank gone or a fatal error of the engine leaves the
    /// ranks' calls out of step, so every later call is refused
    /// ([`Error::Poisoned`]), as in every other mode.
    fn is_fatal(&self) -> bool {
        match self {
            Fail::Timeout { .. } | Fail::Aborted { .. } | Fail::Gone { .. } => true,
            Fail::Own { .. } => false,
            Fail::Error(e) => e.is_fatal(),
        }
    }

    /// Rank `r`'s error for this failure: the same failure for every rank,
    /// whole. A failure of one rank (its driver call, its thread, its
    /// arguments) is that rank's own error for it, and
    /// [`Error::PeerFailed`] (or [`Error::PeerArgument`]) naming it for
    /// the others; a fatal error stays [`Error::Poisoned`] for everyone.
    fn error_for(&self, r: usize) -> Error {
        match self {
            Fail::Timeout {
                missing,
                waiters,
                what,
                seconds,
                hint,
            } => {
                let who = crate::words::rank_list(missing);
                // A late rank is told by a rank that waited: its call is
                // the one the others gave up on, and failed with theirs.
                let (rank, late) = match missing.contains(&r) {
                    true => (
                        *waiters.first().unwrap_or(&r),
                        format!("; rank {r} came too late, and its call failed with the others'"),
                    ),
                    false => (r, String::new()),
                };
                Error::Timeout {
                    rank,
                    what: format!("{who} to join {what}{late}{hint}"),
                    seconds: *seconds,
                    wait: WaitKind::Host,
                }
            }
            Fail::Aborted { missing, what } => Error::Aborted {
                rank: r,
                what: format!(
                    "waiting for {} to join {what}",
                    crate::words::rank_list(missing)
                ),
                wait: WaitKind::Host,
            },
            Fail::Gone { rank, why, what } => {
                Error::peer_failed(*rank, why, format!("rank {r} waited for it to join {what}"))
            }
            Fail::Own { rank, error } if *rank == r => error.clone(),
            Fail::Own { rank, error } => Error::PeerArgument {
                rank: *rank,
                reason: strip_rank(*rank, &error.to_string()),
            },
            Fail::Error(e) => {
                let root = e.root();
                match root {
                    Error::Worker { rank, .. }
                    | Error::Cuda { rank, .. }
                    | Error::NcclRank { rank, .. }
                        if *rank != r =>
                    {
                        Error::peer_failed(*rank, &root.to_string(), "")
                    }
                    Error::BufferSize { rank, .. } | Error::LengthMismatch { rank, .. }
                        if *rank != r =>
                    {
                        Error::PeerArgument {
                            rank: *rank,
                            reason: strip_rank(*rank, &root.to_string()),
                        }
                    }
                    // Its own failure, a peer's (named), a mismatch, a
                    // timeout or abort of the engine: the same for every
                    // rank.
                    _ => e.clone(),
                }
            }
        }
    }
}

/// `text` without a leading `rank <rank>: ` (the error names the rank).
pub(super) fn strip_rank(rank: usize, text: &str) -> String {
    let prefix = format!("rank {rank}: ");
    text.strip_prefix(&prefix).unwrap_or(text).to_string()
}

enum Phase {
    /// Ranks are arriving.
    Gathering,
    /// Every rank arrived; rank `by` runs the call (since `since`).
    Running {
        since: Instant,
        by: usize,
    },
    /// Each rank's result, until it takes it.
    Done(Vec<Option<Payload>>),
    Failed(Fail),
}

/// One call of the per-rank style (one round of the rendezvous).
struct Round {
    args: Vec<Option<(CallDesc, Payload)>>,
    joined: Vec<bool>,
    /// Whether each rank that joined took its outcome.
    taken: Vec<bool>,
    /// The size of the rayon pool each rank that joined was called from
    /// (`None`: not a rayon thread), for the hint of a timeout.
    pools: Vec<Option<usize>>,
    phase: Phase,
}

struct State {
    /// The number of each rank's next call: every rank's k-th call is
    /// call k, whenever it comes. A rank that comes late to a call the
    /// others gave up on gets that call's failure, never another call's
    /// data (the ranks' calls are numbered across ranks).
    next: Vec<u64>,
    /// Calls not yet finished, or whose outcome a rank has not taken.
    rounds: BTreeMap<u64, Round>,
    /// Why later calls are refused: a call failed in a way that leaves the
    /// ranks out of step (a timeout, an abort, a rank gone, a fatal error).
    broken: Option<String>,
    /// Ranks whose handle is gone (dropped, or unwound by a panic), and
    /// how.
    gone: Vec<Option<&'static str>>,
}

/// The rendezvous of every rank's handle, and the engine the calls run on.
pub(crate) struct Rendezvous {
    engine: Mutex<EngineCell>,
    state: Mutex<State>,
    cv: Condvar,
    ranks: usize,
    timeout: Duration,
    abort: AbortHandle,
}

/// One rank's handle on the rendezvous (see [`Communicator::per_rank`](crate::Communicator::per_rank)).
/// Dropping it (or unwinding through it) tells the other ranks at once:
/// a call this rank never joins fails on every rank with
/// [`Error::PeerFailed`] naming it.
pub(crate) struct RankHandle {
    rank: usize,
    shared: Arc<Rendezvous>,
}

impl std::fmt::Debug for RankHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {}", self.rank, self.shared.ranks)
    }
}

/// One handle per rank of `engine`.
pub(crate) fn handles(engine: Engine) -> Vec<RankHandle> {
    let ranks = engine.ranks();
    let timeout = engine.timeout();
    let abort = engine.abort_handle();
    let shared = Arc::new(Rendezvous {
        engine: Mutex::new(EngineCell::new(engine)),
        state: Mutex::new(State {
            next: vec![0; ranks],
            rounds: BTreeMap::new(),
            broken: None,
            gone: vec![None; ranks],
        }),
        cv: Condvar::new(),
        ranks,
        timeout,
        abort,
    });
    // Aborting wakes every waiter at once (they also look every POLL).
    let weak = Arc::downgrade(&shared);
    shared.abort.on_abort(move || {
        if let Some(sh) = weak.upgrade() {
            let _g = guard(&sh.state);
            sh.cv.notify_all();
        }
    });
    (0..ranks)
        .map(|rank| RankHandle {
            rank,
            shared: shared.clone(),
        })
        .collect()
}

fn guard<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How often a waiting rank looks at the abort handle and its deadline.
const POLL: Duration = Duration::from_millis(10);

impl State {
    /// Fail call `k` with `f` (unless it already ended); a fatal failure
    /// refuses every later call.
    fn fail(&mut self, k: u64, f: Fail) {
        let Some(round) = self.rounds.get_mut(&k) else {
            return;
        };
        if matches!(round.phase, Phase::Done(_) | Phase::Failed(_)) {
            return;
        }
        if f.is_fatal() && self.broken.is_none() {
            self.broken = Some(format!("call {k} failed: {}", f.error_for(usize::MAX)));
        }
        round.args.iter_mut().for_each(|a| *a = None);
        round.phase = Phase::Failed(f);
    }

    /// A rank gone before call `k` that has not joined it: who, and how.
    fn gone_from(&self, k: u64, round: &Round) -> Option<(usize, &'static str)> {
        (0..self.gone.len()).find_map(|q| {
            let how = self.gone[q]?;
            (!round.joined[q] && self.next[q] <= k).then_some((q, how))
        })
    }
}

/// Hint for a timeout whose waiting ranks were called from a rayon pool
/// they fill: the missing ranks may be queued behind them in that pool.
fn pool_hint(round: &Round, missing: &[usize]) -> String {
    let pooled: Vec<usize> = (0..round.pools.len())
        .filter(|&q| round.joined[q] && round.pools[q].is_some())
        .collect();
    let Some(size) = pooled.first().and_then(|&q| round.pools[q]) else {
        return String::new();
    };
    if pooled.len() < size || missing.is_empty() {
        return String::new();
    }
    format!(
        " (hint: {} called from a rayon pool of {}, all of them blocked in this call, so the other ranks' calls may be queued behind them in that pool: a per-rank call blocks its thread until every rank joined; give each rank a thread of its own, e.g. std::thread::scope, or a pool of at least {} threads)",
        crate::words::rank_list(&pooled),
        crate::words::counted(size, "thread"),
        round.joined.len()
    )
}

impl RankHandle {
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn ranks(&self) -> usize {
        self.shared.ranks
    }

    /// Run `f` on the engine alone (a rank-local step: writing or reading
    /// this rank's part of a device buffer), between calls.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut EngineCell) -> Result<R>) -> Result<R> {
        if let Some(why) = &guard(&self.shared.state).broken {
            return Err(Error::Poisoned {
                reason: why.clone(),
            });
        }
        f(&mut guard(&self.shared.engine))
    }

    /// Join this rank's next call, asking for `desc` (`own`: this rank's
    /// own arguments checked), with `payload`; the last rank to arrive runs
    /// `exec` on every rank's payload, in rank order, and hands each rank
    /// its part of the result. Returns this rank's part.
    pub(crate) fn call(
        &self,
        desc: CallDesc,
        own: Result<()>,
        payload: Payload,
        exec: impl FnOnce(&mut EngineCell, Vec<Payload>) -> Result<Vec<Payload>>,
    ) -> Result<Payload> {
        let sh = &*self.shared;
        let (n, r) = (sh.ranks, self.rank);
        let mut st = guard(&sh.state);
        let k = st.next[r];
        if !st.rounds.contains_key(&k) {
            // A new call: refused once the ranks are out of step.
            if let Some(why) = &st.broken {
                return Err(Error::Poisoned {
                    reason: why.clone(),
                });
            }
            if sh.abort.is_aborted() {
                return Err(Error::Poisoned {
                    reason: "the engine was aborted".into(),
                });
            }
        }
        st.next[r] = k + 1;
        let pool = rayon::current_thread_index().map(|_| rayon::current_num_threads());
        let round = st.rounds.entry(k).or_insert_with(|| Round {
            args: (0..n).map(|_| None).collect(),
            joined: vec![false; n],
            taken: vec![false; n],
            pools: vec![None; n],
            phase: Phase::Gathering,
        });
        round.joined[r] = true;
        round.pools[r] = pool;
        let what = format!("{desc} (call {k})");
        if matches!(round.phase, Phase::Gathering) {
            st = self.arrive(st, k, (desc, own, payload), exec);
        }
        self.await_outcome(st, k, &what)
    }

    /// This rank arrives at call `k` while it gathers: its own arguments
    /// are checked first, then against the others'; a failure fails the
    /// call for every rank, and the last rank to arrive runs it.
    fn arrive<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        k: u64,
        (desc, own, payload): (CallDesc, Result<()>, Payload),
        exec: impl FnOnce(&mut EngineCell, Vec<Payload>) -> Result<Vec<Payload>>,
    ) -> MutexGuard<'a, State> {
        let sh = &*self.shared;
        let r = self.rank;
        let Some(round) = st.rounds.get(&k) else {
            return st;
        };
        let asked: Vec<(usize, CallDesc)> = round
            .args
            .iter()
            .enumerate()
            .filter_map(|(q, a)| a.as_ref().map(|a| (q, a.0)))
            .chain(std::iter::once((r, desc)))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let what = format!("{desc} (call {k})");
        let failed = match own {
            Err(error) => Some(Fail::Own { rank: r, error }),
            Ok(()) => match CallDesc::agree(&asked) {
                Err(e) => Some(Fail::Error(e)),
                Ok(()) => st.gone_from(k, round).map(|(q, why)| Fail::Gone {
                    rank: q,
                    why,
                    what: what.clone(),
                }),
            },
        };
        match failed {
            Some(f) => {
                st.fail(k, f);
                sh.cv.notify_all();
            }
            None => {
                let Some(round) = st.rounds.get_mut(&k) else {
                    return st;
                };
                round.args[r] = Some((desc, payload));
                if round.joined.iter().all(|&j| j) {
                    return self.run_round(st, k, exec);
                }
            }
        }
        st
    }

    /// Run call `k`, which every rank has joined, on their payloads (the
    /// state unlocked meanwhile), and record its outcome. A panic inside
    /// `exec` fails the call on every rank (never a wait until the
    /// backstop).
    fn run_round<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        k: u64,
        exec: impl FnOnce(&mut EngineCell, Vec<Payload>) -> Result<Vec<Payload>>,
    ) -> MutexGuard<'a, State> {
        let sh = &*self.shared;
        let (n, r) = (sh.ranks, self.rank);
        let Some(round) = st.rounds.get_mut(&k) else {
            return st;
        };
        let args: Vec<Payload> = round
            .args
            .iter_mut()
            .filter_map(Option::take)
            .map(|a| a.1)
            .collect();
        round.phase = Phase::Running {
            since: Instant::now(),
            by: r,
        };
        drop(st);
        let unwinding = FailOnUnwind { rank: self, k };
        let result = exec(&mut guard(&sh.engine), args).and_then(|out| {
            if out.len() == n {
                Ok(out)
            } else {
                Err(Error::internal(format!(
                    "the call gave {} results for {n} ranks",
                    out.len()
                )))
            }
        });
        std::mem::forget(unwinding);
        let mut st = guard(&sh.state);
        if let Some(round) = st.rounds.get_mut(&k) {
            // Unless the waiters gave up on this rank (the backstop in
            // `await_outcome`): then they were told it failed, and so is
            // this rank.
            if matches!(round.phase, Phase::Running { .. }) {
                match result {
                    Ok(out) => round.phase = Phase::Done(out.into_iter().map(Some).collect()),
                    Err(e) => st.fail(k, Fail::Error(e)),
                }
            }
        }
        sh.cv.notify_all();
        st
    }

    /// Wait for call `k`'s outcome: bounded by the timeout while ranks are
    /// missing, by the abort handle, and by a backstop while it runs (the
    /// engine's own waits are bounded by the timeout).
    fn await_outcome(&self, mut st: MutexGuard<'_, State>, k: u64, what: &str) -> Result<Payload> {
        let sh = &*self.shared;
        let (n, r) = (sh.ranks, self.rank);
        let start = Instant::now();
        let backstop = 2 * (sh.timeout + crate::pool::GRACE);
        loop {
            let Some(round) = st.rounds.get(&k) else {
                return Err(Error::internal(format!("rank {r}: call {k} vanished")));
            };
            match &round.phase {
                Phase::Done(_) | Phase::Failed(_) => return Self::take(&mut st, k, r),
                Phase::Gathering => {
                    let missing: Vec<usize> = (0..n).filter(|&q| !round.joined[q]).collect();
                    let fail = if let Some((q, why)) = st.gone_from(k, round) {
                        Some(Fail::Gone {
                            rank: q,
                            why,
                            what: what.to_string(),
                        })
                    } else if let Some(why) = &st.broken {
                        Some(Fail::Error(Error::Poisoned {
                            reason: why.clone(),
                        }))
                    } else if sh.abort.is_aborted() {
                        Some(Fail::Aborted {
                            missing,
                            what: what.to_string(),
                        })
                    } else if start.elapsed() >= sh.timeout {
                        let hint = pool_hint(round, &missing);
                        let waiters = (0..n).filter(|&q| round.joined[q]).collect();
                        Some(Fail::Timeout {
                            missing,
                            waiters,
                            what: what.to_string(),
                            seconds: sh.timeout.as_secs_f64(),
                            hint,
                        })
                    } else {
                        None
                    };
                    if let Some(f) = fail {
                        st.fail(k, f);
                        sh.cv.notify_all();
                        continue;
                    }
                }
                Phase::Running { since, by } => {
                    if since.elapsed() > backstop {
                        let by = *by;
                        st.fail(
                            k,
                            Fail::Error(Error::Timeout {
                                rank: r,
                                what: format!("rank {by} to finish running {what}"),
                                seconds: backstop.as_secs_f64(),
                                wait: WaitKind::Host,
                            }),
                        );
                        sh.cv.notify_all();
                        continue;
                    }
                }
            }
            let nap = match st.rounds.get(&k).map(|x| &x.phase) {
                Some(Phase::Gathering) => sh
                    .timeout
                    .saturating_sub(start.elapsed())
                    .clamp(Duration::from_millis(1), POLL),
                _ => POLL,
            };
            st = sh
                .cv
                .wait_timeout(st, nap)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Rank `r`'s outcome of finished call `k`; forget the call once every
    /// rank took its outcome.
    fn take(st: &mut State, k: u64, r: usize) -> Result<Payload> {
        let Some(round) = st.rounds.get_mut(&k) else {
            return Err(Error::internal(format!("rank {r}: call {k} vanished")));
        };
        round.taken[r] = true;
        let out = match &mut round.phase {
            Phase::Done(v) => v
                .get_mut(r)
                .and_then(Option::take)
                .ok_or_else(|| Error::internal(format!("rank {r}: no result of call {k}"))),
            Phase::Failed(f) => Err(f.error_for(r)),
            _ => Err(Error::internal(format!(
                "rank {r}: call {k} is not finished"
            ))),
        };
        let (next, gone) = (&st.next, &st.gone);
        st.rounds.retain(|&j, round| {
            // Kept while a rank may still come for it (a late rank gets
            // its failure); a rank that is gone never will.
            !(0..next.len()).all(|q| round.taken[q] || (gone[q].is_some() && next[q] <= j))
        });
        out
    }
}

/// Fails call `k` on every rank if the thread running it unwinds (a panic
/// inside the engine); forgotten when the call returns.
struct FailOnUnwind<'a> {
    rank: &'a RankHandle,
    k: u64,
}

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        let sh = &*self.rank.shared;
        let mut st = guard(&sh.state);
        let r = self.rank.rank;
        st.fail(
            self.k,
            Fail::Error(Error::Poisoned {
                reason: format!(
                    "rank {r}'s thread panicked while it ran call {} for every rank",
                    self.k
                ),
            }),
        );
        sh.cv.notify_all();
    }
}

impl Drop for RankHandle {
    /// The rank is gone: a call it never joins fails on every rank at
    /// once, naming it (its thread panicked, or its handle was dropped).
    fn drop(&mut self) {
        let sh = &*self.shared;
        let r = self.rank;
        let why = if std::thread::panicking() {
            "its thread panicked (the handle was dropped while unwinding)"
        } else {
            "its handle was dropped"
        };
        let mut st = guard(&sh.state);
        st.gone[r] = Some(why);
        let waiting: Vec<u64> = st
            .rounds
            .iter()
            .filter(|(&k, round)| {
                matches!(round.phase, Phase::Gathering) && !round.joined[r] && k >= st.next[r]
            })
            .map(|(&k, _)| k)
            .collect();
        for k in waiting {
            st.fail(
                k,
                Fail::Gone {
                    rank: r,
                    why,
                    what: format!("call {k}"),
                },
            );
        }
        sh.cv.notify_all();
    }
}

#[cfg(test)]
mod tests;
