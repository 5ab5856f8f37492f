//! CPU backend: every rank is a host thread with its own buffers.
//!
//! A "peer copy" is a memcpy into the neighbour's buffer and the "kernel" is a
//! reduce loop (rayon for large slices). Ops run in the plan's issue order and
//! wait on the same signals as on the GPU, so a rank reduces a chunk only after
//! its neighbour's copy of it is complete: the same step order and the same
//! dependencies as the CUDA backend.

use super::{Backend, BackendKind};
use crate::element::{combine_one, Combine, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::plan::{Buf, OpKind, Plan, Region};
use crate::pool::RankThreads;
use crate::sync::SignalBoard;
use rayon::prelude::*;
use std::sync::{Arc, Mutex, MutexGuard};

/// Slices at least this long are reduced / copied with rayon.
const PAR_MIN: usize = 1 << 18;

struct RankMem<T> {
    bufs: [Mutex<Vec<T>>; 3],
}

type Mem<T> = Arc<Vec<RankMem<T>>>;

fn lock<T>(mem: &[RankMem<T>], rank: usize, buf: Buf) -> MutexGuard<'_, Vec<T>> {
    // Poisoning only follows a panic in another rank thread, which the pool
    // already reports; the data is plain numbers, so keep going.
    mem[rank].bufs[buf.index()]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A command: run a plan, or `None` for a no-op round trip.
type Run = Option<RunPlan>;

struct RunPlan {
    plan: Arc<Plan>,
    board: Arc<SignalBoard>,
    gen: u64,
}

pub struct CpuBackend<T: Element> {
    mem: Mem<T>,
    threads: RankThreads<Run, ()>,
    board: Arc<SignalBoard>,
    gen: u64,
}

impl<T: Element> CpuBackend<T> {
    pub fn new(ranks: usize, op: ReduceOp) -> Result<Self> {
        if ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        if op == ReduceOp::Avg {
            // Avg needs per-step pre/post flags, which the plan does not carry yet.
            return Err(Error::Unsupported(
                format!("{} {}", T::DTYPE.name(), op.name()),
                "cpu",
            ));
        }
        let op = Combine::new(T::DTYPE, op, ranks);
        let mem: Mem<T> = Arc::new(
            (0..ranks)
                .map(|_| RankMem {
                    bufs: [
                        Mutex::new(Vec::new()),
                        Mutex::new(Vec::new()),
                        Mutex::new(Vec::new()),
                    ],
                })
                .collect(),
        );
        let m = mem.clone();
        let threads = RankThreads::spawn(ranks, "cpu", move |rank, inbox| {
            inbox.ready(Ok(()));
            let mem = m.clone();
            inbox.serve(|run: Run| match run {
                Some(run) => execute(&mem, rank, &run, op).inspect_err(|_| run.board.fail(run.gen)),
                None => Ok(()),
            });
        })?;
        Ok(CpuBackend {
            mem,
            threads,
            board: Arc::new(SignalBoard::new(0)),
            gen: 0,
        })
    }
}

/// Run rank `r`'s part of the plan.
fn execute<T: Element>(mem: &[RankMem<T>], r: usize, run: &RunPlan, op: Combine) -> Result<()> {
    for o in &run.plan.ops[r] {
        for w in &o.waits {
            run.board.wait(w.0, run.gen, r)?;
        }
        match &o.kind {
            OpKind::Begin | OpKind::End => {}
            OpKind::Copy { from, to, src, dst } => copy(mem, *from, src, *to, dst)?,
            OpKind::Reduce { dst, a, b } => reduce(mem, r, dst, a, b, op)?,
            OpKind::ReducePeer { dst, a, from, b } => reduce_peer(mem, r, dst, a, *from, b, op)?,
        }
        if let Some(s) = o.signal {
            run.board.publish(s.0, run.gen);
        }
    }
    Ok(())
}

fn copy<T: Element>(
    mem: &[RankMem<T>],
    r: usize,
    src: &Region,
    to: usize,
    dst: &Region,
) -> Result<()> {
    if (r, src.buf) == (to, dst.buf) {
        return Err(Error::Plan(format!("rank {r}: copy within one buffer")));
    }
    // Lock in a global order so two ranks copying into each other cannot deadlock.
    let (s, mut d) = if (r, src.buf) < (to, dst.buf) {
        let s = lock(mem, r, src.buf);
        (s, lock(mem, to, dst.buf))
    } else {
        let d = lock(mem, to, dst.buf);
        (lock(mem, r, src.buf), d)
    };
    let from = &s[src.range.clone()];
    let into = &mut d[dst.range.clone()];
    if from.len() >= PAR_MIN {
        into.par_chunks_mut(PAR_MIN / 4)
            .zip(from.par_chunks(PAR_MIN / 4))
            .for_each(|(d, s)| d.copy_from_slice(s));
    } else {
        into.copy_from_slice(from);
    }
    Ok(())
}

fn reduce<T: Element>(
    mem: &[RankMem<T>],
    r: usize,
    dst: &Region,
    a: &Region,
    b: &Region,
    op: Combine,
) -> Result<()> {
    if b.buf == dst.buf || (a.buf == dst.buf && a != dst) {
        return Err(Error::Plan(format!(
            "rank {r}: unsupported reduce aliasing"
        )));
    }
    // Lock the distinct buffers in index order.
    let mut guards: [Option<MutexGuard<'_, Vec<T>>>; 3] = [None, None, None];
    for buf in Buf::ALL {
        if [dst.buf, a.buf, b.buf].contains(&buf) {
            guards[buf.index()] = Some(lock(mem, r, buf));
        }
    }
    let mut d = guards[dst.buf.index()]
        .take()
        .ok_or_else(|| Error::Plan("reduce: missing destination".into()))?;
    let bs = guards[b.buf.index()]
        .as_ref()
        .ok_or_else(|| Error::Plan("reduce: missing operand".into()))?;
    let bs = &bs[b.range.clone()];
    let f = move |x: T, y: T| combine_one(&op, x, y);
    if a.buf == dst.buf {
        // Reduce into: dst += b.
        let ds = &mut d[dst.range.clone()];
        if ds.len() >= PAR_MIN {
            ds.par_iter_mut()
                .zip(bs.par_iter())
                .for_each(|(x, y)| *x = f(*x, *y));
        } else {
            ds.iter_mut().zip(bs).for_each(|(x, y)| *x = f(*x, *y));
        }
    } else {
        let asl = guards[a.buf.index()]
            .as_ref()
            .ok_or_else(|| Error::Plan("reduce: missing operand".into()))?;
        let asl = &asl[a.range.clone()];
        let ds = &mut d[dst.range.clone()];
        if ds.len() >= PAR_MIN {
            ds.par_iter_mut()
                .zip(asl.par_iter().zip(bs.par_iter()))
                .for_each(|(x, (p, q))| *x = f(*p, *q));
        } else {
            for (x, (p, q)) in ds.iter_mut().zip(asl.iter().zip(bs)) {
                *x = f(*p, *q);
            }
        }
    }
    Ok(())
}

/// `dst = a + b` with `b` in rank `from`'s send buffer (never written during
/// a collective): read it under its lock, then reduce locally.
fn reduce_peer<T: Element>(
    mem: &[RankMem<T>],
    r: usize,
    dst: &Region,
    a: &Region,
    from: usize,
    b: &Region,
    op: Combine,
) -> Result<()> {
    let theirs: Vec<T> = lock(mem, from, b.buf)[b.range.clone()].to_vec();
    let f = move |x: T, y: T| combine_one(&op, x, y);
    if a.buf == dst.buf {
        if a != dst {
            return Err(Error::Plan(format!(
                "rank {r}: unsupported reduce aliasing"
            )));
        }
        let mut d = lock(mem, r, dst.buf);
        d[dst.range.clone()]
            .iter_mut()
            .zip(&theirs)
            .for_each(|(x, y)| *x = f(*x, *y));
    } else {
        // Two different local buffers: lock in index order.
        let (ga, mut gd) = if a.buf < dst.buf {
            let ga = lock(mem, r, a.buf);
            (ga, lock(mem, r, dst.buf))
        } else {
            let gd = lock(mem, r, dst.buf);
            (lock(mem, r, a.buf), gd)
        };
        for ((x, p), q) in gd[dst.range.clone()]
            .iter_mut()
            .zip(&ga[a.range.clone()])
            .zip(&theirs)
        {
            *x = f(*p, *q);
        }
    }
    Ok(())
}

impl<T: Element> Backend<T> for CpuBackend<T> {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn describe(&self) -> String {
        format!(
            "cpu: {} rank threads, {} rayon threads for large slices",
            self.threads.ranks(),
            rayon::current_num_threads()
        )
    }

    fn ranks(&self) -> usize {
        self.threads.ranks()
    }

    fn reserve(&mut self, count: usize, scratch: usize) -> Result<()> {
        for r in 0..self.mem.len() {
            for (buf, want) in [
                (Buf::Send, count),
                (Buf::Recv, count),
                (Buf::Scratch, scratch),
            ] {
                let mut g = lock(&self.mem, r, buf);
                if g.len() < want {
                    let extra = want - g.len();
                    g.try_reserve_exact(extra).map_err(|e| Error::TooLarge {
                        what: "cpu buffer",
                        count: want as u128,
                        elem_size: size_of::<T>(),
                        ranks: self.mem.len(),
                        detail: e.to_string(),
                    })?;
                    g.resize(want, T::default());
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, buf: Buf, data: &[&[T]]) -> Result<()> {
        for (r, d) in data.iter().enumerate() {
            let mut g = lock(&self.mem, r, buf);
            if g.len() < d.len() {
                return Err(Error::BadArgument(format!(
                    "rank {r}: {} buffer holds {} elements, cannot write {}",
                    buf.name(),
                    g.len(),
                    d.len()
                )));
            }
            g[..d.len()].copy_from_slice(d);
        }
        Ok(())
    }

    fn read(&mut self, buf: Buf, count: usize) -> Result<Vec<Vec<T>>> {
        (0..self.mem.len())
            .map(|r| {
                let g = lock(&self.mem, r, buf);
                g.get(..count).map(<[T]>::to_vec).ok_or_else(|| {
                    Error::BadArgument(format!(
                        "rank {r}: {} buffer shorter than {count}",
                        buf.name()
                    ))
                })
            })
            .collect()
    }

    fn launch(&mut self, plan: &Arc<Plan>) -> Result<()> {
        plan.check_ranks(self.ranks())?;
        if self.board.len() < plan.signals() {
            // Safe to replace: no rank thread is running between calls.
            self.board = Arc::new(SignalBoard::new(plan.signals()));
            self.gen = 0;
        }
        self.gen += 1;
        let gen = self.gen;
        let board = self.board.clone();
        self.threads
            .run_each(|_| {
                Some(RunPlan {
                    plan: plan.clone(),
                    board: board.clone(),
                    gen,
                })
            })
            .map(|_| ())
    }

    fn ping(&mut self) -> Result<()> {
        self.threads.run_each(|_| None).map(|_| ())
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }
}
