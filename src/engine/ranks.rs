//! The per-rank call style: one handle per rank for code that runs one
//! thread per GPU, the way NCCL is used. Each rank's thread calls the same
//! collective on its own handle; the call runs when every rank has called,
//! and each thread gets its own rank's result, or every thread the same
//! error (see [`RankComm`]).
//!
//! ```
//! use ringreduce::{Engine, EngineConfig, ReduceOp};
//! let ranks = Engine::<i32>::new(EngineConfig::cpu(2)).unwrap().into_ranks();
//! let out: Vec<Vec<i32>> = std::thread::scope(|s| {
//!     let t: Vec<_> = ranks.iter().map(|h| s.spawn(move || {
//!         let mut out = vec![0; 4];
//!         h.all_reduce(&[h.rank() as i32 + 1; 4], &mut out, ReduceOp::Sum).unwrap();
//!         out
//!     })).collect();
//!     t.into_iter().map(|t| t.join().unwrap()).collect()
//! });
//! assert_eq!(out, vec![vec![3; 4], vec![3; 4]]);
//! ```

use super::typed::Engine;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::Collective;
use crate::sync::AbortHandle;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What one rank asks of a call: every rank of the call must ask the same
/// (its output length is checked against it by the rank itself). The
/// per-rank rendezvous compares these as ranks arrive ([`CallDesc::agree`]);
/// the same check fits [`crate::Comm`]'s calls once their descriptors are
/// all-gathered (issue 32, item 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallDesc {
    pub collective: Collective,
    /// The op (all-gather: none, it reduces nothing).
    pub op: Option<ReduceOp>,
    pub in_place: bool,
    /// Elements of each rank's input.
    pub count: usize,
}

impl std::fmt::Display for CallDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} elements", self.collective, self.count)?;
        if let Some(op) = self.op {
            write!(f, ", {}", op.name())?;
        }
        f.write_str(if self.in_place {
            ", in place"
        } else {
            ", out of place"
        })
    }
}

impl CallDesc {
    /// [`Error::Mismatch`] unless every rank's descriptor (rank, what it
    /// asked) is the same; `asked` in rank order.
    pub fn agree(asked: &[(usize, CallDesc)]) -> Result<()> {
        let Some((_, first)) = asked.first() else {
            return Ok(());
        };
        match asked.iter().find(|(_, d)| d != first) {
            None => Ok(()),
            Some(&(rank, _)) => Err(Error::Mismatch {
                rank,
                asked: asked.iter().map(|(r, d)| (*r, d.to_string())).collect(),
            }),
        }
    }

    /// The output length rank `rank` of `ranks` must pass, or why its input
    /// cannot be this call's.
    fn expected_out(&self, rank: usize, ranks: usize) -> Result<usize> {
        match self.collective {
            Collective::AllReduce => Ok(self.count),
            Collective::ReduceScatter => {
                if self.count % ranks != 0 {
                    return Err(Error::BadArgument(format!(
                        "rank {rank}: a reduce-scatter input of {} elements does not split into {ranks} equal chunks",
                        self.count
                    )));
                }
                Ok(self.count / ranks)
            }
            Collective::AllGather => self.count.checked_mul(ranks).ok_or(Error::TooLarge {
                what: "all-gather output",
                count: self.count as u128,
                elem_size: 1,
                ranks,
            }),
        }
    }
}

/// One rank's part of a call.
#[derive(Debug, Clone)]
struct Arg<T> {
    desc: CallDesc,
    input: Vec<T>,
}

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
    /// The call's error: a mismatch, a rank's bad argument, or what the
    /// engine returned.
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
            },
            Fail::Aborted { missing, what } => Error::Aborted {
                rank: r,
                what: format!("waiting for ranks {missing:?} to join {what}"),
            },
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

enum Phase<T> {
    /// Ranks are arriving.
    Gathering,
    /// Every rank arrived; rank `by` runs the call (since `since`).
    Running {
        since: Instant,
        by: usize,
    },
    /// Each rank's output, until it takes it.
    Done(Vec<Option<Vec<T>>>),
    Failed(Fail),
}

/// One call of the per-rank style (one round of the rendezvous).
struct Round<T> {
    args: Vec<Option<Arg<T>>>,
    joined: Vec<bool>,
    /// Whether each rank that joined took its outcome.
    taken: Vec<bool>,
    phase: Phase<T>,
}

struct State<T> {
    /// The round of each rank's next call: every rank's k-th call is call
    /// k, so a rank that is late for a call still meets it (and its
    /// outcome). A rank the others gave up waiting for (a timeout) is
    /// excused from that call: its next call is the one after.
    next: Vec<u64>,
    /// Calls not yet finished, or whose outcome a rank has not taken.
    rounds: BTreeMap<u64, Round<T>>,
}

struct Shared<T: Element> {
    engine: Mutex<Engine<T>>,
    state: Mutex<State<T>>,
    cv: Condvar,
    ranks: usize,
    timeout: Duration,
    abort: AbortHandle,
}

/// One rank's handle (see the module doc). `Send`: move it to the rank's
/// thread.
///
/// Every rank of a call gets the same outcome: all succeed, or all fail
/// with the same error, at once. Different arguments are
/// [`Error::Mismatch`] for every rank (naming what each asked for); a rank
/// whose own arguments are wrong fails the call with its error, and the
/// others get [`Error::PeerFailed`] naming it; ranks that do not come
/// within the timeout are named in every waiter's [`Error::Timeout`] (a
/// waiter never names itself); [`RankComm::abort_handle`] ends every wait
/// with [`Error::Aborted`]. A failure the engine cannot recover from stays
/// [`Error::Poisoned`] (fatal) for every rank.
pub struct RankComm<T: Element> {
    rank: usize,
    shared: Arc<Shared<T>>,
}

impl<T: Element> Engine<T> {
    /// One handle per rank, sharing this engine.
    pub fn into_ranks(self) -> Vec<RankComm<T>> {
        let ranks = self.ranks();
        let timeout = self.core().timeout();
        let abort = self.core().abort_handle();
        let shared = Arc::new(Shared {
            engine: Mutex::new(self),
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
            .map(|rank| RankComm {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

fn guard<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How often a waiting rank looks at the abort handle and its deadline.
const POLL: Duration = Duration::from_millis(10);

impl<T: Element> RankComm<T> {
    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn ranks(&self) -> usize {
        self.shared.ranks
    }

    /// The engine's abort handle: aborting it ends every rank's wait (the
    /// rendezvous of a call, and the call itself) with [`Error::Aborted`];
    /// later calls fail with [`Error::Poisoned`].
    pub fn abort_handle(&self) -> AbortHandle {
        self.shared.abort.clone()
    }

    /// All-reduce of this rank's `send` into its `recv`.
    pub fn all_reduce(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(
            Collective::AllReduce,
            send.to_vec(),
            false,
            Some(op),
            recv.len(),
        )?;
        copy_out(self.rank, recv, &out)
    }

    /// All-reduce in place.
    pub fn all_reduce_in_place(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(
            Collective::AllReduce,
            buf.to_vec(),
            true,
            Some(op),
            buf.len(),
        )?;
        copy_out(self.rank, buf, &out)
    }

    /// Reduce-scatter: `send` holds `ranks * c` elements, `recv` c.
    pub fn reduce_scatter(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(
            Collective::ReduceScatter,
            send.to_vec(),
            false,
            Some(op),
            recv.len(),
        )?;
        copy_out(self.rank, recv, &out)
    }

    /// All-gather: `send` holds c elements, `recv` `ranks * c`.
    pub fn all_gather(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let out = self.call(
            Collective::AllGather,
            send.to_vec(),
            false,
            None,
            recv.len(),
        )?;
        copy_out(self.rank, recv, &out)
    }

    /// Join this rank's next call with `input`; the last rank to arrive
    /// runs it. Returns this rank's output.
    fn call(
        &self,
        collective: Collective,
        input: Vec<T>,
        in_place: bool,
        op: Option<ReduceOp>,
        out_len: usize,
    ) -> Result<Vec<T>> {
        let sh = &*self.shared;
        let (n, r) = (sh.ranks, self.rank);
        let desc = CallDesc {
            collective,
            op,
            in_place,
            count: input.len(),
        };
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
        let what = format!("the {desc} (call {k})");
        if matches!(round.phase, Phase::Gathering) {
            // This rank's own arguments first, then against the others'.
            let own = desc.expected_out(r, n).and_then(|want| {
                if want == out_len {
                    Ok(())
                } else {
                    Err(Error::BufferSize {
                        rank: r,
                        what: "output",
                        expected: want,
                        found: out_len,
                    })
                }
            });
            let asked: Vec<(usize, CallDesc)> = round
                .args
                .iter()
                .enumerate()
                .filter_map(|(q, a)| a.as_ref().map(|a| (q, a.desc)))
                .chain(std::iter::once((r, desc)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect();
            match own.and_then(|()| CallDesc::agree(&asked)) {
                Err(e) => {
                    round.args.iter_mut().for_each(|a| *a = None);
                    round.phase = Phase::Failed(Fail::Error(e));
                    sh.cv.notify_all();
                }
                Ok(()) => {
                    round.args[r] = Some(Arg { desc, input });
                    if round.joined.iter().all(|&j| j) {
                        let args: Vec<Arg<T>> =
                            round.args.iter_mut().filter_map(Option::take).collect();
                        round.phase = Phase::Running {
                            since: Instant::now(),
                            by: r,
                        };
                        drop(st);
                        let result = self.execute(&args);
                        st = guard(&sh.state);
                        if let Some(round) = st.rounds.get_mut(&k) {
                            // Unless the waiters gave up on this rank (the
                            // backstop below): then they were told it
                            // failed, and so is this rank.
                            if matches!(round.phase, Phase::Running { .. }) {
                                round.phase = match result {
                                    Ok(out) => Phase::Done(out.into_iter().map(Some).collect()),
                                    Err(e) => Phase::Failed(Fail::Error(e)),
                                };
                            }
                        }
                        sh.cv.notify_all();
                    }
                }
            }
        }
        // Wait for the call's outcome: bounded by the timeout while ranks
        // are missing, by the abort handle, and by a backstop while it runs
        // (the engine's own waits are bounded by the timeout).
        let start = Instant::now();
        let backstop = 2 * (sh.timeout + crate::pool::GRACE);
        loop {
            let Some(round) = st.rounds.get_mut(&k) else {
                return Err(Error::Plan(format!("rank {r}: call {k} vanished")));
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
                            what: what.clone(),
                        })
                    } else if timed_out {
                        Some(Fail::Timeout {
                            missing,
                            what: what.clone(),
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
    fn take(st: &mut State<T>, k: u64, r: usize) -> Result<Vec<T>> {
        let Some(round) = st.rounds.get_mut(&k) else {
            return Err(Error::Plan(format!("rank {r}: call {k} vanished")));
        };
        round.taken[r] = true;
        let out = match &mut round.phase {
            Phase::Done(v) => v
                .get_mut(r)
                .and_then(Option::take)
                .ok_or_else(|| Error::Plan(format!("rank {r}: no output of call {k}"))),
            Phase::Failed(f) => Err(f.error_for(r)),
            _ => Err(Error::Plan(format!("rank {r}: call {k} is not finished"))),
        };
        let next = &st.next;
        st.rounds.retain(|&j, round| {
            !(0..next.len()).all(|q| next[q] > j && (!round.joined[q] || round.taken[q]))
        });
        out
    }

    /// Run the assembled call: every rank's output, or the call's error.
    fn execute(&self, args: &[Arg<T>]) -> Result<Vec<Vec<T>>> {
        let Some(first) = args.first() else {
            return Ok(Vec::new());
        };
        let mut engine = guard(&self.shared.engine);
        let inputs: Vec<&[T]> = args.iter().map(|a| a.input.as_slice()).collect();
        let shape = engine.load(first.desc.collective, &inputs, first.desc.in_place)?;
        engine.poison(&shape)?;
        engine.run(None, &shape, first.desc.op.unwrap_or(ReduceOp::Sum))?;
        engine.read_output(&shape)
    }
}

fn copy_out<T: Element>(rank: usize, dst: &mut [T], src: &[T]) -> Result<()> {
    if dst.len() != src.len() {
        return Err(Error::BufferSize {
            rank,
            what: "output",
            expected: src.len(),
            found: dst.len(),
        });
    }
    dst.copy_from_slice(src);
    Ok(())
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

    #[test]
    fn descriptors_agree_or_name_the_first_that_differs() {
        let d = CallDesc {
            collective: Collective::AllReduce,
            op: Some(ReduceOp::Sum),
            in_place: false,
            count: 4,
        };
        assert!(CallDesc::agree(&[(0, d), (1, d), (2, d)]).is_ok());
        let other = CallDesc { count: 5, ..d };
        match CallDesc::agree(&[(0, d), (1, d), (2, other)]) {
            Err(Error::Mismatch { rank: 2, asked }) => {
                assert_eq!(asked.len(), 3);
                assert!(asked[2].1.contains("5 elements"), "{asked:?}");
            }
            other => panic!("{other:?}"),
        }
    }
}
