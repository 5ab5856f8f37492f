//! The per-rank call style: one handle per rank for code that runs one
//! thread per GPU, the way NCCL is used. Each rank's thread calls the same
//! collective on its own handle; the call runs when every rank has called,
//! and each thread gets its own rank's result, or every thread the same
//! error.
//!
//! This module is the rendezvous underneath
//! [`Communicator::per_rank`](crate::Communicator::per_rank) (the API);
//! [`RankComm`] is its old typed handle, kept for migration.
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

use super::typed::Engine;
use crate::communicator::{self, HostCall, Slot};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result, WaitKind};
use crate::plan::Collective;
use crate::sync::AbortHandle;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::communicator::desc::{CallDesc, CallKind};

/// What a rank brings to a call, and what it takes away: the call's
/// element type is the caller's, so the rendezvous carries it untyped (the
/// rank that runs the call made every rank's descriptor agree first, the
/// element type included).
pub(crate) type Payload = Box<dyn Any + Send>;

/// Why a call failed for every rank that joined it (each rank's own error
/// is made from it, [`Fail::error_for`]).
#[derive(Debug)]
enum Fail {
    /// Ranks that never came within the timeout.
    Timeout {
        missing: Vec<usize>,
        what: String,
        seconds: f64,
    },
    /// The engine was aborted while ranks waited for `missing`.
    Aborted { missing: Vec<usize>, what: String },
    /// Rank `rank`'s own arguments are wrong (its output's length, ...).
    Own { rank: usize, error: Error },
    /// The call's error: a mismatch, or what the engine returned.
    Error(Error),
}

impl Fail {
    /// Rank `r`'s error for this failure: the same failure for every rank,
    /// whole. A failure of one rank (its driver call, its thread, its
    /// arguments) is that rank's own error for it, and
    /// [`Error::PeerFailed`] naming it for the others; a fatal error stays
    /// [`Error::Poisoned`] for everyone.
    fn error_for(&self, r: usize) -> Error {
        match self {
            Fail::Timeout {
                missing,
                what,
                seconds,
            } => Error::Timeout {
                rank: r,
                what: format!("ranks {missing:?} to join {what}"),
                seconds: *seconds,
                wait: WaitKind::Host,
            },
            Fail::Aborted { missing, what } => Error::Aborted {
                rank: r,
                what: format!("waiting for ranks {missing:?} to join {what}"),
                wait: WaitKind::Host,
            },
            Fail::Own { rank, error } if *rank == r => error.duplicate(),
            Fail::Own { rank, error } => Error::peer_failed(
                *rank,
                &error.to_string(),
                format!("its arguments to the call rank {r} joined"),
            ),
            Fail::Error(e) => {
                if e.is_fatal() {
                    let poisoned = match e {
                        Error::Ranks(v) => v.iter().find(|x| x.is_fatal()).unwrap_or(e),
                        e => e,
                    };
                    return poisoned.duplicate();
                }
                let root = e.root();
                match root {
                    Error::Worker { rank, .. }
                    | Error::Cuda { rank, .. }
                    | Error::NcclRank { rank, .. }
                    | Error::BufferSize { rank, .. }
                    | Error::LengthMismatch { rank, .. }
                        if *rank != r =>
                    {
                        Error::peer_failed(
                            *rank,
                            &root.to_string(),
                            format!("rank {r}'s call failed with it"),
                        )
                    }
                    // Its own failure, a peer's (named), a mismatch, a
                    // timeout or abort of the engine: the same for every
                    // rank.
                    root => root.duplicate(),
                }
            }
        }
    }
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
    phase: Phase,
}

struct State {
    /// The round of each rank's next call: every rank's k-th call is call
    /// k, so a rank that is late for a call still meets it (and its
    /// outcome). A rank the others gave up waiting for (a timeout) is
    /// excused from that call: its next call is the one after.
    next: Vec<u64>,
    /// Calls not yet finished, or whose outcome a rank has not taken.
    rounds: BTreeMap<u64, Round>,
}

/// The rendezvous of every rank's handle, and the engine the calls run on.
pub(crate) struct Rendezvous {
    engine: Mutex<Slot>,
    state: Mutex<State>,
    cv: Condvar,
    ranks: usize,
    timeout: Duration,
    abort: AbortHandle,
}

/// One rank's handle on the rendezvous (see [`Communicator::per_rank`](crate::Communicator::per_rank)).
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
pub(crate) fn handles(engine: Engine<u8>) -> Vec<RankHandle> {
    let ranks = engine.ranks();
    let timeout = engine.core().timeout();
    let abort = engine.core().abort_handle();
    let shared = Arc::new(Rendezvous {
        engine: Mutex::new(Slot::new(engine)),
        state: Mutex::new(State {
            next: vec![0; ranks],
            rounds: BTreeMap::new(),
        }),
        cv: Condvar::new(),
        ranks,
        timeout,
        abort,
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

impl RankHandle {
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn ranks(&self) -> usize {
        self.shared.ranks
    }

    /// The engine's abort handle: aborting it ends every rank's wait (the
    /// rendezvous of a call, and the call itself) with [`Error::Aborted`];
    /// later calls fail with [`Error::Poisoned`].
    pub(crate) fn abort_handle(&self) -> AbortHandle {
        self.shared.abort.clone()
    }

    /// Run `f` on the engine alone (a rank-local step: writing or reading
    /// this rank's part of a device buffer), between calls.
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&mut Slot) -> Result<R>) -> Result<R> {
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
        exec: impl FnOnce(&mut Slot, Vec<Payload>) -> Result<Vec<Payload>>,
    ) -> Result<Payload> {
        let sh = &*self.shared;
        let (n, r) = (sh.ranks, self.rank);
        let mut st = guard(&sh.state);
        let k = st.next[r];
        if sh.abort.is_aborted() && !st.rounds.contains_key(&k) {
            return Err(Error::Poisoned {
                reason: "the engine was aborted".into(),
            });
        }
        st.next[r] = k + 1;
        let round = st.rounds.entry(k).or_insert_with(|| Round {
            args: (0..n).map(|_| None).collect(),
            joined: vec![false; n],
            taken: vec![false; n],
            phase: Phase::Gathering,
        });
        round.joined[r] = true;
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
        exec: impl FnOnce(&mut Slot, Vec<Payload>) -> Result<Vec<Payload>>,
    ) -> MutexGuard<'a, State> {
        let sh = &*self.shared;
        let r = self.rank;
        let Some(round) = st.rounds.get_mut(&k) else {
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
        let failed = match own {
            Err(error) => Some(Fail::Own { rank: r, error }),
            Ok(()) => CallDesc::agree(&asked).err().map(Fail::Error),
        };
        match failed {
            Some(f) => {
                round.args.iter_mut().for_each(|a| *a = None);
                round.phase = Phase::Failed(f);
                sh.cv.notify_all();
            }
            None => {
                round.args[r] = Some((desc, payload));
                if round.joined.iter().all(|&j| j) {
                    return self.run_round(st, k, exec);
                }
            }
        }
        st
    }

    /// Run call `k`, which every rank has joined, on their payloads (the
    /// state unlocked meanwhile), and record its outcome.
    fn run_round<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        k: u64,
        exec: impl FnOnce(&mut Slot, Vec<Payload>) -> Result<Vec<Payload>>,
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
        let mut st = guard(&sh.state);
        if let Some(round) = st.rounds.get_mut(&k) {
            // Unless the waiters gave up on this rank (the backstop in
            // `await_outcome`): then they were told it failed, and so is
            // this rank.
            if matches!(round.phase, Phase::Running { .. }) {
                round.phase = match result {
                    Ok(out) => Phase::Done(out.into_iter().map(Some).collect()),
                    Err(e) => Phase::Failed(Fail::Error(e)),
                };
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
            let Some(round) = st.rounds.get_mut(&k) else {
                return Err(Error::internal(format!("rank {r}: call {k} vanished")));
            };
            match &round.phase {
                Phase::Done(_) | Phase::Failed(_) => return Self::take(&mut st, k, r),
                Phase::Gathering => {
                    let missing: Vec<usize> = (0..n).filter(|&q| !round.joined[q]).collect();
                    let aborted = sh.abort.is_aborted();
                    let timed_out = start.elapsed() >= sh.timeout;
                    if aborted || timed_out {
                        // Those who never came are excused from this call:
                        // their next call is the next one (after an abort,
                        // it finds the engine aborted).
                        for &q in &missing {
                            st.next[q] = st.next[q].max(k + 1);
                        }
                    }
                    let fail = if aborted {
                        Some(Fail::Aborted {
                            missing,
                            what: what.to_string(),
                        })
                    } else if timed_out {
                        Some(Fail::Timeout {
                            missing,
                            what: what.to_string(),
                            seconds: sh.timeout.as_secs_f64(),
                        })
                    } else {
                        None
                    };
                    if let Some(f) = fail {
                        if let Some(round) = st.rounds.get_mut(&k) {
                            round.args.iter_mut().for_each(|a| *a = None);
                            round.phase = Phase::Failed(f);
                        }
                        sh.cv.notify_all();
                        continue;
                    }
                }
                Phase::Running { since, by } => {
                    if since.elapsed() > backstop {
                        let by = *by;
                        round.phase = Phase::Failed(Fail::Error(Error::Timeout {
                            rank: r,
                            what: format!("rank {by} to finish running {what}"),
                            seconds: backstop.as_secs_f64(),
                            wait: WaitKind::Host,
                        }));
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
    /// rank took its outcome or was excused.
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
        let next = &st.next;
        st.rounds.retain(|&j, round| {
            !(0..next.len()).all(|q| next[q] > j && (!round.joined[q] || round.taken[q]))
        });
        out
    }
}

/// One rank's typed handle of the per-rank style, from before
/// [`Communicator`](crate::Communicator): the same rendezvous, fixed to
/// one element type, four collectives.
///
/// Migration: `Engine::<T>::new(cfg)?.into_ranks()` is
/// [`Communicator::per_rank(cfg)`](crate::Communicator::per_rank); the
/// calls are the same, generic in the element type, plus the in-place
/// forms, broadcast, barrier and device buffers.
#[deprecated(
    since = "0.1.0",
    note = "use ringreduce::Communicator::per_rank(cfg) (issue 32 item 8; README, 'Migrating')"
)]
pub struct RankComm<T: Element> {
    h: RankHandle,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: Element> Engine<T> {
    /// One handle per rank, sharing this engine.
    #[deprecated(
        since = "0.1.0",
        note = "use ringreduce::Communicator::per_rank(cfg) (issue 32 item 8; README, 'Migrating')"
    )]
    #[allow(deprecated)]
    pub fn into_ranks(self) -> Vec<RankComm<T>> {
        handles(self.retype())
            .into_iter()
            .map(|h| RankComm {
                h,
                _t: std::marker::PhantomData,
            })
            .collect()
    }
}

#[allow(deprecated)]
impl<T: Element> RankComm<T> {
    pub fn rank(&self) -> usize {
        self.h.rank()
    }

    pub fn ranks(&self) -> usize {
        self.h.ranks()
    }

    /// The engine's abort handle (see [`crate::Communicator::abort_handle`]).
    pub fn abort_handle(&self) -> AbortHandle {
        self.h.abort_handle()
    }

    /// All-reduce of this rank's `send` into its `recv`.
    pub fn all_reduce(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<super::CallInfo> {
        let c = HostCall::new(Collective::AllReduce, false, op);
        communicator::rank_host(&self.h, c, send, recv)
    }

    /// All-reduce in place.
    pub fn all_reduce_in_place(&self, buf: &mut [T], op: ReduceOp) -> Result<super::CallInfo> {
        let c = HostCall::new(Collective::AllReduce, true, op);
        communicator::rank_host(&self.h, c, &[], buf)
    }

    /// Reduce-scatter: `send` holds `ranks * c` elements, `recv` c.
    pub fn reduce_scatter(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<super::CallInfo> {
        let c = HostCall::new(Collective::ReduceScatter, false, op);
        communicator::rank_host(&self.h, c, send, recv)
    }

    /// All-gather: `send` holds c elements, `recv` `ranks * c`.
    pub fn all_gather(&self, send: &[T], recv: &mut [T]) -> Result<super::CallInfo> {
        let c = HostCall::new(Collective::AllGather, false, ReduceOp::Sum);
        communicator::rank_host(&self.h, c, send, recv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_gets_the_same_failure_typed() {
        let worker = || Error::Worker {
            rank: 1,
            message: "step 2: injected failure".into(),
        };
        // One rank's failure: its own error for it, PeerFailed naming it for
        // the others.
        let f = Fail::Error(Error::Ranks(vec![
            Error::peer_failed(1, "rank 1: step 2: injected failure", "rank 0 waiting"),
            worker(),
        ]));
        assert!(matches!(f.error_for(1), Error::Worker { rank: 1, .. }));
        for r in [0, 2] {
            let e = f.error_for(r);
            assert!(matches!(e, Error::PeerFailed { rank: 1, .. }), "{e:?}");
            assert_eq!(e.rank(), Some(1));
        }
        // A fatal error stays Poisoned for everyone.
        let f = Fail::Error(Error::Ranks(vec![
            worker(),
            Error::Poisoned {
                reason: "a GPU could not be drained".into(),
            },
        ]));
        for r in 0..3 {
            let e = f.error_for(r);
            assert!(matches!(e, Error::Poisoned { .. }) && e.is_fatal(), "{e:?}");
        }
        // A timeout names the missing ranks, each waiter as itself.
        let f = Fail::Timeout {
            missing: vec![2],
            what: "the all-reduce (call 0)".into(),
            seconds: 1.0,
        };
        for r in 0..2 {
            let e = f.error_for(r);
            assert!(matches!(e, Error::Timeout { rank, .. } if rank == r));
            assert!(e.to_string().contains("ranks [2]"), "{e}");
        }
    }
}
