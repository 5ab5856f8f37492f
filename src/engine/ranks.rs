//! The per-rank call style: one handle per rank for code that runs one
//! thread per GPU, the way NCCL is used. Each rank's thread calls the same
//! collective on its own handle; the call runs when every rank has called,
//! and each thread gets its own rank's result (or its own error).
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
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One rank's part of a call.
#[derive(Debug, Clone)]
struct Arg<T> {
    collective: Collective,
    op: ReduceOp,
    in_place: bool,
    input: Vec<T>,
}

/// Every rank's outcome of one call (taken by each rank as it reads it).
type Outcomes<T> = Vec<Option<Result<Vec<T>>>>;

struct Round<T> {
    /// The call being assembled.
    seq: u64,
    args: Vec<Option<Arg<T>>>,
    /// Outcomes of the last finished call: (seq, per-rank result).
    done: Option<(u64, Outcomes<T>)>,
    /// A call that timed out waiting for ranks: (seq, the missing ranks).
    failed: Option<(u64, Vec<usize>)>,
}

struct Shared<T: Element> {
    engine: Mutex<Engine<T>>,
    round: Mutex<Round<T>>,
    cv: Condvar,
    ranks: usize,
    timeout: Duration,
}

/// One rank's handle (see the module doc). `Send`: move it to the rank's
/// thread.
pub struct RankComm<T: Element> {
    rank: usize,
    shared: Arc<Shared<T>>,
}

impl<T: Element> Engine<T> {
    /// One handle per rank, sharing this engine.
    pub fn into_ranks(self) -> Vec<RankComm<T>> {
        let ranks = self.ranks();
        let timeout = self.core().timeout();
        let shared = Arc::new(Shared {
            engine: Mutex::new(self),
            round: Mutex::new(Round {
                seq: 0,
                args: vec![None; ranks],
                done: None,
                failed: None,
            }),
            cv: Condvar::new(),
            ranks,
            timeout,
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

impl<T: Element> RankComm<T> {
    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn ranks(&self) -> usize {
        self.shared.ranks
    }

    /// All-reduce of this rank's `send` into its `recv`.
    pub fn all_reduce(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(Collective::AllReduce, send.to_vec(), false, op)?;
        copy_out(self.rank, recv, &out)
    }

    /// All-reduce in place.
    pub fn all_reduce_in_place(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(Collective::AllReduce, buf.to_vec(), true, op)?;
        copy_out(self.rank, buf, &out)
    }

    /// Reduce-scatter: `send` holds `ranks * c` elements, `recv` c.
    pub fn reduce_scatter(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let out = self.call(Collective::ReduceScatter, send.to_vec(), false, op)?;
        copy_out(self.rank, recv, &out)
    }

    /// All-gather: `send` holds c elements, `recv` `ranks * c`.
    pub fn all_gather(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let out = self.call(Collective::AllGather, send.to_vec(), false, ReduceOp::Sum)?;
        copy_out(self.rank, recv, &out)
    }

    /// Deposit this rank's part; the last rank to arrive runs the call.
    fn call(
        &self,
        collective: Collective,
        input: Vec<T>,
        in_place: bool,
        op: ReduceOp,
    ) -> Result<Vec<T>> {
        let sh = &*self.shared;
        let mut round = guard(&sh.round);
        if round.args[self.rank].is_some() {
            return Err(Error::BadArgument(format!(
                "rank {} called twice before the other ranks joined",
                self.rank
            )));
        }
        let arg = Arg {
            collective,
            op,
            in_place,
            input,
        };
        if let Some(other) = round.args.iter().flatten().next() {
            if other.collective != arg.collective
                || other.op != arg.op
                || other.in_place != arg.in_place
                || other.input.len() != arg.input.len()
            {
                return Err(Error::BadArgument(format!(
                    "rank {} calls {} ({} elements, {}) but another rank called {} ({} elements, {})",
                    self.rank,
                    arg.collective,
                    arg.input.len(),
                    arg.op.name(),
                    other.collective,
                    other.input.len(),
                    other.op.name()
                )));
            }
        }
        round.args[self.rank] = Some(arg);
        let seq = round.seq;
        if round.args.iter().all(Option::is_some) {
            // Everyone is here: run it.
            let args: Vec<Arg<T>> = round.args.iter_mut().filter_map(Option::take).collect();
            round.seq += 1;
            drop(round);
            let results = self.execute(&args);
            let mut round = guard(&sh.round);
            let mut mine = None;
            let mut all: Outcomes<T> = Vec::with_capacity(sh.ranks);
            for (r, res) in results.into_iter().enumerate() {
                if r == self.rank {
                    mine = Some(res);
                    all.push(None);
                } else {
                    all.push(Some(res));
                }
            }
            round.done = Some((seq, all));
            sh.cv.notify_all();
            return mine.unwrap_or_else(|| Err(Error::Plan("no result".into())));
        }
        // Wait for the last rank to run the call.
        let start = Instant::now();
        loop {
            if let Some((s, res)) = &mut round.done {
                if *s == seq {
                    if let Some(r) = res.get_mut(self.rank).and_then(Option::take) {
                        return r;
                    }
                }
            }
            let timed_out = |missing: &[usize]| Error::Timeout {
                rank: self.rank,
                what: format!("ranks {missing:?} to join the {collective}"),
                seconds: sh.timeout.as_secs_f64(),
            };
            if let Some((s, missing)) = &round.failed {
                if *s == seq {
                    return Err(timed_out(missing));
                }
            }
            let left = sh.timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                // The first waiter to give up ends the call for everyone who
                // joined it, naming the ranks that never came; the next call
                // starts afresh.
                let missing: Vec<usize> = round
                    .args
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| a.is_none())
                    .map(|(r, _)| r)
                    .collect();
                round.failed = Some((seq, missing.clone()));
                round.args.iter_mut().for_each(|a| *a = None);
                round.seq += 1;
                sh.cv.notify_all();
                return Err(timed_out(&missing));
            }
            round = sh
                .cv
                .wait_timeout(round, left.min(Duration::from_millis(100)))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Run the assembled call; one result per rank.
    fn execute(&self, args: &[Arg<T>]) -> Vec<Result<Vec<T>>> {
        let n = self.shared.ranks;
        let Some(first) = args.first() else {
            return Vec::new();
        };
        let mut engine = guard(&self.shared.engine);
        let inputs: Vec<&[T]> = args.iter().map(|a| a.input.as_slice()).collect();
        let run = (|| -> Result<Vec<Vec<T>>> {
            let shape = engine.load(first.collective, &inputs, first.in_place)?;
            engine.poison(&shape)?;
            engine.run(None, &shape, first.op)?;
            engine.read_output(&shape)
        })();
        match run {
            Ok(out) => out.into_iter().map(Ok).collect(),
            Err(e) => {
                let text = e.to_string();
                (0..n)
                    .map(|r| {
                        Err(Error::Worker {
                            rank: r,
                            message: format!("the collective failed: {text}"),
                        })
                    })
                    .collect()
            }
        }
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
