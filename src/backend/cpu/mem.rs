//! The CPU backend's memory and its rank code: a rank's buffers
//! ([`Storage`]), every rank's buffers as this process holds them
//! ([`CpuMem`]), and [`execute`], which runs one rank's ops of a call
//! through the plan interpreter ([`crate::plan::interp`]): a "peer copy" is
//! a memcpy into the other rank's buffer and the "kernel" is
//! [`combine`](crate::element::combine), the same semantics as the PTX
//! kernels. The code is the same whatever the transport: a peer's buffer
//! is a heap allocation of this process ([`crate::transport::Threads`]) or
//! a mapping of the peer's segment ([`crate::transport::Shm`]).

use crate::backend::{op_desc, part_desc, signal_desc, BufId, Call, OpTime};
use crate::element::{combine, combine_into, combine_serial, Combine};
use crate::error::{Error, Result};
use crate::fault::{FaultPlan, Injected};
use crate::plan::interp::{self, Memory};
use crate::plan::{KernelKind, OpKind, ReduceStep, Region};
use crate::sync::SignalBoard;
use crate::transport::Storage;
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Instant;

/// Slices at least this many bytes are copied / reduced in parallel, on
/// the backend's own pool ([`par_pool`]).
const PAR_MIN_BYTES: usize = 1 << 20;
/// Reductions of at least this many bytes run on the backend's pool: the
/// typed combine splits slices of 2^18 elements and more (one-byte types:
/// 256 KiB) by itself, and must not do it on rayon's global pool.
const POOL_MIN_BYTES: usize = 1 << 18;

/// The pool that splits the CPU backend's large copies and reductions: its
/// own threads (one per hardware thread, named `ringreduce-par<i>`), made
/// once per process and shared by every CPU engine, never rayon's global
/// pool. A caller that is itself a worker of the global pool (inside
/// `rayon::join` or `rayon::scope`, or with `RAYON_NUM_THREADS=1`) blocks
/// that worker while it waits for the rank threads; had the rank threads
/// split their slices on the same global pool, nobody would have run the
/// pieces and the call would have hung (issue 32, item 1). Only copies and
/// reductions run here, none of which waits for anything, so sharing the
/// pool between engines cannot deadlock either. `Err`: the threads could
/// not be started (then no engine is).
pub(crate) fn par_pool() -> Result<&'static rayon::ThreadPool> {
    static POOL: OnceLock<std::result::Result<rayon::ThreadPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
            .thread_name(|i| format!("ringreduce-par{i}"))
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| Error::Worker {
        rank: 0,
        message: format!("could not start the CPU backend's pool threads: {e}"),
    })
}

/// A buffer's bytes while its storage is locked: its own, or a held loan.
enum Bytes<'a> {
    Own(&'a mut [u8]),
    Lent(crate::sys::lend::LoanGuard<'a>),
}

/// Open a locked storage for one access.
fn open(s: &mut Storage) -> Bytes<'_> {
    match s {
        Storage::Heap(v) => Bytes::Own(bytemuck::cast_slice_mut(v)),
        Storage::Shared(m) => Bytes::Own(m.bytes_mut()),
        Storage::Lent(l) => Bytes::Lent(l.lock()),
    }
}

impl Bytes<'_> {
    fn get(&self) -> Result<&[u8]> {
        match self {
            Bytes::Own(b) => Ok(b),
            Bytes::Lent(g) => g
                .bytes()
                .ok_or_else(|| Error::internal("the caller's slice is no longer lent")),
        }
    }

    fn get_mut(&mut self) -> Result<&mut [u8]> {
        match self {
            Bytes::Own(b) => Ok(b),
            Bytes::Lent(g) => g.bytes_mut().ok_or_else(|| {
                Error::Plan("the caller's input is read-only (or no longer lent)".into())
            }),
        }
    }
}

/// One rank's buffer, locked while a thread of this process uses it.
pub(crate) type Words = Arc<Mutex<Storage>>;

#[derive(Default)]
pub(crate) struct RankMem {
    pub(crate) bufs: RwLock<HashMap<BufId, (Words, usize)>>,
}

pub(crate) struct CpuMem {
    pub(crate) ranks: Vec<RankMem>,
    /// Bytes each rank sent to / received from other ranks (copies between
    /// ranks, reduces reading another rank's buffer), since the last take.
    pub(crate) traffic: Vec<[AtomicU64; 2]>,
    /// Of those, the bytes each rank sent to / received from ranks of
    /// other nodes (the network transport).
    pub(crate) network: Vec<[AtomicU64; 2]>,
    /// Where large copies and reductions are split ([`par_pool`]).
    pub(crate) pool: &'static rayon::ThreadPool,
}

impl CpuMem {
    /// Memory for `ranks` ranks, with no buffer yet.
    pub(crate) fn new(ranks: usize) -> Result<CpuMem> {
        Ok(CpuMem {
            ranks: (0..ranks).map(|_| RankMem::default()).collect(),
            traffic: (0..ranks).map(|_| Default::default()).collect(),
            network: (0..ranks).map(|_| Default::default()).collect(),
            pool: par_pool()?,
        })
    }

    /// `dst.copy_from_slice(src)`, split across the backend's pool when
    /// large.
    pub(crate) fn copy(&self, dst: &mut [u8], src: &[u8]) {
        self.copy_split(true, dst, src)
    }

    /// [`CpuMem::copy`], split only if `split` ([`Run::split`]).
    fn copy_split(&self, split: bool, dst: &mut [u8], src: &[u8]) {
        if split && dst.len() >= PAR_MIN_BYTES {
            self.pool.install(|| {
                dst.par_chunks_mut(PAR_MIN_BYTES / 4)
                    .zip(src.par_chunks(PAR_MIN_BYTES / 4))
                    .for_each(|(d, s)| d.copy_from_slice(s))
            });
        } else {
            dst.copy_from_slice(src);
        }
    }

    /// The bytes counted by [`CpuMem::moved`] since the last take, per rank,
    /// then reset.
    pub(crate) fn take_traffic(&self) -> Vec<crate::plan::Traffic> {
        self.traffic
            .iter()
            .zip(&self.network)
            .map(|(t, n)| {
                n[1].swap(0, Ordering::Relaxed);
                crate::plan::Traffic {
                    sent: t[0].swap(0, Ordering::Relaxed),
                    received: t[1].swap(0, Ordering::Relaxed),
                    network: n[0].swap(0, Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Count `bytes` moved from rank `from` to rank `to` (nothing within a
    /// rank).
    fn moved(&self, from: usize, to: usize, bytes: usize) {
        if from == to {
            return;
        }
        if let Some(t) = self.traffic.get(from) {
            t[0].fetch_add(bytes as u64, Ordering::Relaxed);
        }
        if let Some(t) = self.traffic.get(to) {
            t[1].fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Count `bytes` that rank `to` of this process received from another
    /// node (the network receiver).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn received_from_network(&self, to: usize, bytes: usize) {
        if let Some(t) = self.traffic.get(to) {
            t[1].fetch_add(bytes as u64, Ordering::Relaxed);
        }
        if let Some(t) = self.network.get(to) {
            t[1].fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Hold `m` as rank `rank`'s buffer `id` of `bytes` bytes.
    pub(crate) fn insert(&self, rank: usize, id: BufId, m: Storage, bytes: usize) {
        self.insert_words(rank, id, Arc::new(Mutex::new(m)), bytes);
    }

    /// Hold `w` as rank `rank`'s buffer `id` of `bytes` bytes.
    pub(crate) fn insert_words(&self, rank: usize, id: BufId, w: Words, bytes: usize) {
        if let Some(m) = self.ranks.get(rank) {
            let mut map = m.bufs.write().unwrap_or_else(|e| e.into_inner());
            map.insert(id, (w, bytes));
        }
    }

    /// Forget rank `rank`'s buffer `id` (the memory goes with its last user).
    pub(crate) fn remove(&self, rank: usize, id: BufId) {
        if let Some(m) = self.ranks.get(rank) {
            m.bufs
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        }
    }

    /// The buffer `id` of `rank` and its size in bytes.
    pub(crate) fn get(&self, rank: usize, id: BufId) -> Result<(Words, usize)> {
        let m = self
            .ranks
            .get(rank)
            .ok_or_else(|| Error::internal(format!("rank {rank} does not exist")))?;
        let map = m.bufs.read().unwrap_or_else(|e| e.into_inner());
        map.get(&id)
            .cloned()
            .ok_or_else(|| Error::Plan(format!("rank {rank} has no buffer {}", id.0)))
    }
}

pub(crate) fn lock(w: &Words) -> MutexGuard<'_, Storage> {
    // Poisoning only follows a panic in another rank thread, which the pool
    // already reports; the data is plain numbers, so keep going.
    w.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct Run {
    pub(crate) call: Call,
    pub(crate) board: Arc<SignalBoard>,
    pub(crate) gen: u64,
    /// The backend's call number (1-based), for fault injection.
    pub(crate) call_no: u64,
    pub(crate) faults: FaultPlan,
    pub(crate) epoch: Instant,
    /// The ranks on other nodes, when the transport has any.
    pub(crate) net: Option<NetRun>,
    /// Whether large copies and reductions are split across the pool
    /// ([`splits`]); else each runs on its rank's thread alone.
    pub(crate) split: bool,
}

/// Whether a plan's large steps gain from the pool's threads where rank
/// processes already keep every core busy: only when its ranks' work is
/// uneven, so that the others wait while one works (the parameter server's
/// root reduces every contribution, a third to half its call on 2-4
/// ranks). Where every rank works at once (the rings, `hier:G`), a split
/// takes cores from the peers' steps and adds two switches per step:
/// measured on 2 cores with 4 rank processes, `ring` 0.78x at 1 MiB and
/// `hier:2:mpi` 0.90-0.93x without it, 16 MiB within the spread, and in a
/// probe `ps` 1.5x slower at 16 MiB without it
/// (docs/results/2026-12-07-cpu-processes-unsplit/). Uneven: the busiest
/// rank writes at least twice the bytes of the idlest (copies it issues,
/// reductions it makes).
pub(crate) fn splits(plan: &crate::plan::Plan) -> bool {
    fn written(op: &crate::plan::Op) -> usize {
        match &op.kind {
            OpKind::Copy { dst, .. } | OpKind::Reduce { dst, .. } => dst.len(),
            OpKind::Kernel(k) => k.steps.iter().map(written).sum(),
            _ => 0,
        }
    }
    let work: Vec<usize> = plan
        .ops
        .iter()
        .map(|ops| ops.iter().map(written).sum())
        .collect();
    let (most, least) = (
        work.iter().copied().max().unwrap_or(0),
        work.iter().copied().min().unwrap_or(0),
    );
    most > 0 && most >= 2 * least
}

/// How a call reaches the ranks of other nodes: the transport's wire, and
/// for each signal a local rank publishes, the ranks of other nodes to
/// send it to (one per node that waits for it, the put's own destination
/// left out: the put carries it).
#[derive(Clone)]
pub(crate) struct NetRun {
    pub(crate) wire: Arc<dyn crate::transport::Wire>,
    pub(crate) forward: Arc<HashMap<usize, Vec<usize>>>,
    /// Whether a rank of another node sends the local ranks anything: a
    /// put into one of them, or a signal one of them waits for.
    pub(crate) incoming: bool,
}

impl NetRun {
    /// The forwarding table of `plan` for the ranks in `local`.
    pub(crate) fn new(
        wire: Arc<dyn crate::transport::Wire>,
        plan: &crate::plan::Plan,
        local: Range<usize>,
    ) -> NetRun {
        // Who waits on each signal.
        let mut waiters: HashMap<usize, Vec<usize>> = HashMap::new();
        for (r, ops) in plan.ops.iter().enumerate() {
            for op in ops {
                for part in net_parts(true, r, op) {
                    for w in part.waits {
                        waiters.entry(w.0).or_default().push(r);
                    }
                }
            }
        }
        let here = local.clone().next().map(|r| wire.node(r));
        let is_local = |x: usize| Some(wire.node(x)) == here;
        let incoming = (0..plan.ranks()).filter(|&r| !is_local(r)).any(|r| {
            plan.ops[r].iter().any(|op| {
                net_parts(true, r, op).iter().any(|part| {
                    let put = matches!(part.effect, Some(interp::Effect::Copy { to, .. }) if is_local(to));
                    let waited = part.signal.is_some_and(|s| {
                        waiters.get(&s.0).into_iter().flatten().any(|&w| is_local(w))
                    });
                    put || waited
                })
            })
        });
        let mut forward: HashMap<usize, Vec<usize>> = HashMap::new();
        for r in local {
            let mine = wire.node(r);
            for op in plan.ops.get(r).into_iter().flatten() {
                for part in net_parts(true, r, op) {
                    let Some(s) = part.signal else { continue };
                    let carried = match part.effect {
                        Some(interp::Effect::Copy { to, .. }) if wire.node(to) != mine => {
                            Some(wire.node(to))
                        }
                        _ => None,
                    };
                    let mut nodes = Vec::new();
                    let mut dest = Vec::new();
                    for &w in waiters.get(&s.0).into_iter().flatten() {
                        let n = wire.node(w);
                        if n != mine && Some(n) != carried && !nodes.contains(&n) {
                            nodes.push(n);
                            dest.push(w);
                        }
                    }
                    if !dest.is_empty() {
                        forward.insert(s.0, dest);
                    }
                }
            }
        }
        NetRun {
            wire,
            forward: Arc::new(forward),
            incoming,
        }
    }
}

/// Run rank `r`'s part of the call; returns its op timings when timed.
pub(crate) fn execute(mem: &CpuMem, r: usize, run: &Run) -> Result<Vec<OpTime>> {
    let plan = &run.call.plan;
    let mut view = View {
        mem,
        bind: &run.call.bind,
        elem: run.call.dtype.size(),
        base: Combine::new(run.call.dtype, run.call.op, plan.ranks()),
        split: run.split,
    };
    let mut times = Vec::new();
    let ns = |t: Instant| t.duration_since(run.epoch).as_secs_f64() * 1e9;
    // Over nodes a waiting rank takes the messages that end its wait itself
    // (no hand-off from the receiver thread).
    let drive = || {
        if let Some(net) = &run.net {
            net.wire.progress();
        }
    };
    for (i, op) in plan.ops[r].iter().enumerate() {
        let at = || op_desc(plan, r, i);
        match run.faults.inject(r, i, run.call_no, &at) {
            None => {}
            Some(Injected::Stall(why)) => return Err(run.board.stall(run.gen, r, &why)),
            Some(Injected::Fail(message)) => return Err(Error::Worker { rank: r, message }),
            // Only the multi-process mode injects it: this process is the rank.
            Some(Injected::Kill) => crate::sys::proc::kill_self(),
        }
        for (k, part) in net_parts(run.net.is_some(), r, op).into_iter().enumerate() {
            let at = || part_desc(plan, r, i, k);
            for w in part.waits {
                run.board
                    .wait_driving(w.0, run.gen, r, &|| signal_desc(plan, *w), &drive)
                    .map_err(|e| e.in_step(&at()))?;
            }
            let t0 = Instant::now();
            match (&run.net, part.effect, rail_group(op)) {
                (Some(net), _, Some(group)) => view.rail(net, r, group),
                (Some(net), Some(e), None) => {
                    view.apply_net(net, r, &e, part.signal.map(|s| s.0), run.gen)
                }
                (None, Some(e), _) => interp::apply(&mut view, &e),
                (_, None, _) => Ok(()),
            }
            .map_err(|e| e.in_step(&at()))?;
            if run.call.timing {
                let (start_ns, end_ns) = (ns(t0), ns(Instant::now()));
                // Over nodes a rail's op is one part, the network library's
                // collective: each of the plan's parts gets its interval,
                // as an op timed as a whole does (a timeline reads that as
                // parts that could not be timed apart).
                let parts = match (&run.net, rail_group(op)) {
                    (Some(_), Some(_)) => 0..interp::parts(r, op).len(),
                    _ => k..k + 1,
                };
                times.extend(parts.map(|part| OpTime {
                    rank: r,
                    op: i,
                    part,
                    start_ns,
                    end_ns,
                }));
            }
            if let Some(s) = part.signal {
                run.board.publish(s.0, run.gen);
                if let Some(net) = &run.net {
                    for &to in net.forward.get(&s.0).into_iter().flatten() {
                        net.wire
                            .signal(r, to, s.0, run.gen)
                            .map_err(|e| e.in_step(&at()))?;
                    }
                }
            }
        }
    }
    Ok(times)
}

thread_local! {
    /// The contribution buffer of this thread's last rail all-reduce
    /// ([`View::rail`]), kept for the next.
    static RAIL_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A rail's all-reduce op's group ([`KernelKind::Rail`]), if `op` is one.
fn rail_group(op: &crate::plan::Op) -> Option<&crate::plan::Group> {
    match &op.kind {
        OpKind::Kernel(k) if k.kind == KernelKind::Rail => k.group.as_ref(),
        _ => None,
    }
}

/// The parts of rank `r`'s op as this backend runs them: the
/// interpreter's, except that over nodes (`net`) a rail's all-reduce is
/// one part, the network library's all-reduce of its group (its steps,
/// with their waits and flags, do not run).
fn net_parts(net: bool, r: usize, op: &crate::plan::Op) -> Vec<interp::Part<'_>> {
    if net && rail_group(op).is_some() {
        return vec![interp::Part {
            waits: &op.waits,
            effect: None,
            signal: op.signal,
            label: &op.label,
            step: None,
        }];
    }
    interp::parts(r, op)
}

/// A rank thread's view of everyone's buffers for one call.
struct View<'a> {
    mem: &'a CpuMem,
    bind: &'a [crate::backend::Binding],
    elem: usize,
    base: Combine,
    /// [`Run::split`].
    split: bool,
}

impl View<'_> {
    fn bytes(&self, r: &Region) -> Range<usize> {
        r.range.start * self.elem..r.range.end * self.elem
    }

    fn buf(&self, rank: usize, region: &Region) -> Result<(Words, usize)> {
        let id = self
            .bind
            .get(rank)
            .ok_or_else(|| Error::internal(format!("no binding for rank {rank}")))?
            .id(region.buf);
        let (w, len) = self.mem.get(rank, id)?;
        let b = self.bytes(region);
        if b.end > len {
            return Err(Error::Plan(format!(
                "rank {rank}: {} bytes {b:?} outside its {len} bytes",
                region.buf.name()
            )));
        }
        Ok((w, len))
    }
}

impl View<'_> {
    /// Apply effect `e` of rank `r`'s op where some ranks are on other
    /// nodes: a copy from `r` into another node's rank is a put (carrying
    /// `signal`); reading another node's memory is refused; the rest is the
    /// interpreter's.
    fn apply_net(
        &mut self,
        net: &NetRun,
        r: usize,
        e: &interp::Effect<'_>,
        signal: Option<usize>,
        gen: u64,
    ) -> Result<()> {
        let node = |x: usize| net.wire.node(x);
        let here = node(r);
        match *e {
            interp::Effect::Copy { from, src, to, dst } if node(to) != here || node(from) != here => {
                if from != r || node(from) != here {
                    return Err(Error::Unsupported(
                        format!(
                            "rank {r} copying rank {from}'s memory on node {} (over the network a rank only pushes its own data)",
                            node(from)
                        ),
                        "cpu",
                    ));
                }
                self.put(net, from, src, to, dst, signal, gen)
            }
            interp::Effect::Reduce { b_rank, .. } if node(b_rank) != here => {
                Err(Error::Unsupported(
                    format!(
                        "rank {r} reducing rank {b_rank}'s memory on node {} (over the network a rank only pushes its own data)",
                        node(b_rank)
                    ),
                    "cpu",
                ))
            }
            _ => interp::apply(self, e),
        }
    }

    /// Rank `r`'s rail all-reduce between nodes: its contribution (the
    /// group's source, with the pre-op where it takes it) reduced by the
    /// network library over the group's members, the post-op applied, into
    /// the group's destination.
    fn rail(&mut self, net: &NetRun, r: usize, g: &crate::plan::Group) -> Result<()> {
        let c = self.base.with_flags(g.step.pre_a, false, g.step.post);
        let (sb, db) = (self.bytes(&g.src), self.bytes(&g.dst));
        let pre = Combine { post: false, ..c };
        let post = Combine { pre_a: false, ..c };
        let ops = |c: &Combine, bytes: &mut [u8]| {
            crate::element::apply_ops(c, bytes).map_err(Error::internal)
        };
        // In place (the node's reduce-scatter left the contribution where
        // the result goes) in this rank's shared segment: the network
        // library reduces it there, with no copy in or out. The buffer's
        // lock is held through the library's wait: no other thread of this
        // process touches this rank's buffer during its rail (the plan
        // orders the node phases around it, and no put between nodes lands
        // in it).
        if g.src == g.dst && net.wire.rail_in_place(c.dtype) {
            let (wd, _) = self.buf(r, &g.dst)?;
            let mut w = lock(&wd);
            if let Storage::Shared(m) = &mut *w {
                ops(&pre, &mut m.bytes_mut()[db.clone()])?;
                net.wire
                    .rail_all_reduce_mapped(r, &g.members, m, db.clone(), c.dtype, c.op)?;
                return ops(&post, &mut m.bytes_mut()[db]);
            }
        }
        // Else (a lent slice, another type, out of place) through a buffer
        // of the network's own.
        let (ws, _) = self.buf(r, &g.src)?;
        // The thread's buffer of the last call, reused: a fresh one of
        // megabytes per call is fresh pages to fault in per call.
        let mut data = RAIL_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
        {
            let mut w = lock(&ws);
            let b = open(&mut w);
            data.clear();
            data.extend_from_slice(&b.get()?[sb]);
        }
        ops(&pre, &mut data)?;
        let mut data = net
            .wire
            .rail_all_reduce(r, &g.members, data, c.dtype, c.op)?;
        ops(&post, &mut data)?;
        let (wd, _) = self.buf(r, &g.dst)?;
        {
            let mut w = lock(&wd);
            let mut b = open(&mut w);
            b.get_mut()?[db].copy_from_slice(&data);
        }
        RAIL_BUF.with(|b| *b.borrow_mut() = data);
        Ok(())
    }

    /// Send `from`'s `src` into `to`'s `dst` on another node: the message
    /// is built under the source's lock, sent without it.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        net: &NetRun,
        from: usize,
        src: &Region,
        to: usize,
        dst: &Region,
        signal: Option<usize>,
        gen: u64,
    ) -> Result<()> {
        let (ws, _) = self.buf(from, src)?;
        let id = self
            .bind
            .get(to)
            .ok_or_else(|| Error::internal(format!("no binding for rank {to}")))?
            .id(dst.buf);
        let (sb, db) = (self.bytes(src), self.bytes(dst));
        let mut msg = Vec::new();
        // A copy longer than one message goes as several, in order, its
        // signal with the last.
        for (a, b, last) in crate::transport::pieces(sb.len(), net.wire.put_max()) {
            {
                let mut g = lock(&ws);
                let words = open(&mut g);
                let data = &words.get()?[sb.start + a..sb.start + b];
                let signal = if last { signal } else { None };
                net.wire
                    .put_message(from, to, id, db.start + a, signal, gen, data, &mut msg);
            }
            msg = net.wire.send_put(from, to, std::mem::take(&mut msg))?;
        }
        self.mem.moved(from, to, sb.len());
        if let Some(t) = self.mem.network.get(from) {
            t[0].fetch_add(sb.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// `buf` cut around the mutable range `dst`: (before, dst, after).
fn carve(buf: &mut [u8], dst: Range<usize>) -> (&[u8], &mut [u8], &[u8]) {
    let (before, rest) = buf.split_at_mut(dst.start);
    let (mid, after) = rest.split_at_mut(dst.len());
    (before, mid, after)
}

/// The read-only range `r` of a carved buffer (disjoint from `dst`).
fn piece<'a>(
    before: &'a [u8],
    after: &'a [u8],
    dst: &Range<usize>,
    r: &Range<usize>,
) -> Result<&'a [u8]> {
    if r.end <= dst.start {
        Ok(&before[r.clone()])
    } else if r.start >= dst.end {
        Ok(&after[r.start - dst.end..r.end - dst.end])
    } else {
        Err(Error::Plan("operands overlap the output".into()))
    }
}

/// Chunk length (bytes) for parallel combines: a multiple of the element.
fn par_chunk(elem: usize) -> usize {
    (PAR_MIN_BYTES / 4 / elem).max(1) * elem
}

impl Memory for View<'_> {
    type Error = Error;

    fn copy(&mut self, from: usize, src: &Region, to: usize, dst: &Region) -> Result<()> {
        let (ws, _) = self.buf(from, src)?;
        let (wd, _) = self.buf(to, dst)?;
        let (sb, db) = (self.bytes(src), self.bytes(dst));
        self.mem.moved(from, to, sb.len());
        if Arc::ptr_eq(&ws, &wd) {
            let mut g = lock(&wd);
            let mut b = open(&mut g);
            let (before, mid, after) = carve(b.get_mut()?, db.clone());
            let s = piece(before, after, &db, &sb)?;
            self.mem.copy_split(self.split, mid, s);
            return Ok(());
        }
        // Lock in a global order (address) so two ranks copying into each
        // other cannot deadlock.
        let (mut gs, mut gd) = if Arc::as_ptr(&ws) < Arc::as_ptr(&wd) {
            let s = lock(&ws);
            (s, lock(&wd))
        } else {
            let d = lock(&wd);
            (lock(&ws), d)
        };
        let (bs, mut bd) = (open(&mut gs), open(&mut gd));
        let s = &bs.get()?[sb];
        self.mem.copy_split(self.split, &mut bd.get_mut()?[db], s);
        Ok(())
    }

    fn reduce(
        &mut self,
        rank: usize,
        dst: &Region,
        a: &Region,
        b_rank: usize,
        b: &Region,
        step: ReduceStep,
    ) -> Result<()> {
        let c = self.base.with_flags(step.pre_a, step.pre_b, step.post);
        let (wd, _) = self.buf(rank, dst)?;
        let (wa, _) = self.buf(rank, a)?;
        let (wb, _) = self.buf(b_rank, b)?;
        let (db, ab, bb) = (self.bytes(dst), self.bytes(a), self.bytes(b));
        self.mem.moved(b_rank, rank, bb.len());
        let into = Arc::ptr_eq(&wa, &wd) && ab == db;
        // Lock each distinct buffer once, in address order.
        let mut keys = vec![wd.clone(), wa.clone(), wb.clone()];
        keys.sort_by_key(|w| Arc::as_ptr(w) as usize);
        keys.dedup_by(|x, y| Arc::ptr_eq(x, y));
        let mut guards: Vec<MutexGuard<'_, Storage>> = keys.iter().map(lock).collect();
        let pos = |w: &Words| keys.iter().position(|k| Arc::ptr_eq(k, w)).unwrap_or(0);
        let (pd, pa, pb) = (pos(&wd), pos(&wa), pos(&wb));
        // Split the guards so the destination can be borrowed mutably while
        // the operands are read.
        let (left, right) = guards.split_at_mut(pd);
        let (dguard, right) = right
            .split_first_mut()
            .ok_or_else(|| Error::internal("no destination"))?;
        let left: Vec<Bytes<'_>> = left.iter_mut().map(|g| open(g)).collect();
        let right: Vec<Bytes<'_>> = right.iter_mut().map(|g| open(g)).collect();
        let left: Vec<&[u8]> = left.iter().map(Bytes::get).collect::<Result<_>>()?;
        let right: Vec<&[u8]> = right.iter().map(Bytes::get).collect::<Result<_>>()?;
        let mut dbytes = open(dguard);
        let (before, out, after) = carve(dbytes.get_mut()?, db.clone());
        let get = |p: usize, r: &Range<usize>| -> Result<&[u8]> {
            if p == pd {
                piece(before, after, &db, r)
            } else if p < pd {
                Ok(&left[p][r.clone()])
            } else {
                Ok(&right[p - pd - 1][r.clone()])
            }
        };
        let bs = get(pb, &bb)?;
        let as_ = if into { None } else { Some(get(pa, &ab)?) };
        let elem = self.elem;
        let err = |m: String| Error::Plan(format!("rank {rank}: reduce: {m}"));
        if !self.split {
            // This thread alone, in pieces the typed loop does not split.
            return combine_serial(&c, out, as_, bs).map_err(err);
        }
        let on_pool = out.len() >= POOL_MIN_BYTES;
        let mut run = move || match as_ {
            None if out.len() >= PAR_MIN_BYTES => {
                let n = par_chunk(elem);
                out.par_chunks_mut(n)
                    .zip(bs.par_chunks(n))
                    .try_for_each(|(d, s)| combine_into(&c, d, s))
            }
            None => combine_into(&c, out, bs),
            Some(as_) if out.len() >= PAR_MIN_BYTES => {
                let n = par_chunk(elem);
                out.par_chunks_mut(n)
                    .zip(as_.par_chunks(n).zip(bs.par_chunks(n)))
                    .try_for_each(|(d, (x, y))| combine(&c, d, x, y))
            }
            Some(as_) => combine(&c, out, as_, bs),
        };
        // Anything that may split (here, or inside the typed combine) runs
        // on the backend's own pool, never on rayon's global one.
        if on_pool {
            self.mem.pool.install(run).map_err(err)
        } else {
            run().map_err(err)
        }
    }
}

impl crate::transport::RankMemory for CpuMem {
    fn land(&self, from: usize, to: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()> {
        let (w, len) = self.get(to, id)?;
        let end = offset + data.len();
        if end > len {
            return Err(Error::Plan(format!(
                "rank {from}'s copy into rank {to} lands at bytes {offset}..{end} of its {len}-byte buffer {}",
                id.0
            )));
        }
        {
            let mut g = lock(&w);
            self.copy(&mut g.bytes()?[offset..end], data);
        }
        self.received_from_network(to, data.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
