//! CPU backend: every rank is a host thread with its own buffers.
//!
//! A "peer copy" is a memcpy into the other rank's buffer and the "kernel"
//! is [`combine`](crate::element::combine), the same semantics as the PTX
//! kernels. Each rank thread runs its ops in list order through the plan
//! interpreter ([`crate::plan::interp`]), waiting on the same signals as on
//! the GPU, so a rank reduces a chunk only after its neighbour's copy of it
//! is complete. A call returns when every rank has finished it.
//!
//! The same rank code also runs one rank per process
//! ([`super::cpu_process`]): there a rank's buffers are shared-memory
//! mappings ([`Storage::Shared`]) that the peers' processes map too, and the
//! board's counters are shared; [`execute`] and the memory view below do not
//! change.

use super::{
    check_call, op_desc, signal_desc, Backend, BackendInfo, BackendKind, BufId, Call, CallTimeline,
    DeviceMemory, IssueProfile, OpTime, Profiling,
};
use crate::element::{combine, combine_into, Combine};
use crate::error::{Error, Result};
use crate::fault::{Fault, FaultPlan};
use crate::plan::interp::{self, Memory};
use crate::plan::{ReduceStep, Region};
use crate::pool::RankThreads;
use crate::sync::{AbortHandle, SignalBoard};
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

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

/// One rank's buffer as this process holds it.
pub(crate) enum Storage {
    /// Heap memory of this process: 8-byte words, so every element type is
    /// aligned.
    Heap(Vec<u64>),
    /// A shared-memory mapping (page-aligned): this rank's own buffer, or a
    /// peer process's, in the multi-process mode.
    Shared(crate::sys::shm::Mapping),
    /// The caller's own slice, lent for one host-slice call
    /// ([`crate::sys::lend`]): no copy in or out.
    Lent(crate::sys::lend::Loan),
}

impl Storage {
    /// This process's own bytes (heap or mapping); a lent slice is only
    /// accessed through [`open`] during a call.
    fn bytes(&mut self) -> Result<&mut [u8]> {
        match self {
            Storage::Heap(v) => Ok(bytemuck::cast_slice_mut(v)),
            Storage::Shared(m) => Ok(m.bytes_mut()),
            Storage::Lent(_) => Err(Error::internal(
                "a lent slice is read and written only by its call",
            )),
        }
    }
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
    /// Where large copies and reductions are split ([`par_pool`]).
    pub(crate) pool: &'static rayon::ThreadPool,
}

impl CpuMem {
    /// Memory for `ranks` ranks, with no buffer yet.
    pub(crate) fn new(ranks: usize) -> Result<CpuMem> {
        Ok(CpuMem {
            ranks: (0..ranks).map(|_| RankMem::default()).collect(),
            traffic: (0..ranks).map(|_| Default::default()).collect(),
            pool: par_pool()?,
        })
    }

    /// `dst.copy_from_slice(src)`, split across the backend's pool when
    /// large.
    pub(crate) fn copy(&self, dst: &mut [u8], src: &[u8]) {
        if dst.len() >= PAR_MIN_BYTES {
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
            .map(|t| crate::plan::Traffic {
                sent: t[0].swap(0, Ordering::Relaxed),
                received: t[1].swap(0, Ordering::Relaxed),
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

fn lock(w: &Words) -> MutexGuard<'_, Storage> {
    // Poisoning only follows a panic in another rank thread, which the pool
    // already reports; the data is plain numbers, so keep going.
    w.lock().unwrap_or_else(|e| e.into_inner())
}

enum Job {
    Run(Arc<Run>),
    Ping,
}

pub(crate) struct Run {
    pub(crate) call: Call,
    pub(crate) board: Arc<SignalBoard>,
    pub(crate) gen: u64,
    /// The backend's call number (1-based), for fault injection.
    pub(crate) call_no: u64,
    pub(crate) faults: FaultPlan,
    pub(crate) epoch: Instant,
}

/// The CPU backend.
pub struct CpuBackend {
    mem: Arc<CpuMem>,
    threads: RankThreads<Job, Vec<OpTime>>,
    board: Arc<SignalBoard>,
    gen: u64,
    calls: u64,
    abort: AbortHandle,
    timeout: Duration,
    faults: FaultPlan,
    info: BackendInfo,
    epoch: Instant,
    timelines: Vec<CallTimeline>,
    profile: Vec<IssueProfile>,
    /// Stream-ordered calls' spans ([`super::ordered`]).
    pub(super) order: super::ordered::CpuOrder,
}

impl CpuBackend {
    pub fn new(ranks: usize, timeout: Duration, faults: FaultPlan) -> Result<Self> {
        if ranks == 0 {
            return Err(Error::ZeroRanks);
        }
        let mem = Arc::new(CpuMem::new(ranks)?);
        let m = mem.clone();
        let mut threads = RankThreads::spawn(ranks, "cpu", move |rank, inbox| {
            inbox.ready(Ok(()));
            let mem = m.clone();
            inbox.serve(|job: Job| match job {
                Job::Run(run) => {
                    // A panic must also release the other ranks at once.
                    let r = catch_unwind(AssertUnwindSafe(|| execute(&mem, rank, &run)))
                        .unwrap_or_else(|p| {
                            Err(Error::Worker {
                                rank,
                                message: crate::pool::panic_message(p.as_ref()),
                            })
                        });
                    r.inspect_err(|e| run.board.fail_with(run.gen, rank, e))
                }
                Job::Ping => Ok(Vec::new()),
            });
        })?;
        // Every wait of a rank thread is bounded by the timeout (the
        // board's waits, the abort); this bounds the caller's wait for the
        // rank threads too, should one be stuck anyway.
        threads.set_deadline(Some(timeout + crate::pool::GRACE));
        let abort = AbortHandle::new();
        let info = BackendInfo {
            kind: Some(BackendKind::Cpu),
            ranks,
            rank_to_device: vec![0; ranks],
            describe: format!(
                "cpu: {}, {} for large slices",
                crate::words::counted(ranks, "rank thread"),
                crate::words::counted(mem.pool.current_num_threads(), "pool thread")
            ),
            hardware: vec![format!(
                "CPU: {} hardware threads",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            )],
            setup: None,
        };
        Ok(CpuBackend {
            mem,
            threads,
            board: Arc::new(SignalBoard::new(0, abort.clone(), timeout)),
            gen: 0,
            calls: 0,
            abort,
            timeout,
            faults,
            info,
            epoch: Instant::now(),
            timelines: Vec::new(),
            profile: vec![IssueProfile::default(); ranks],
            order: Default::default(),
        })
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
    };
    let mut times = Vec::new();
    let ns = |t: Instant| t.duration_since(run.epoch).as_secs_f64() * 1e9;
    for (i, op) in plan.ops[r].iter().enumerate() {
        let at = || op_desc(plan, r, i);
        match run.faults.at(r, i, run.call_no) {
            Some(Fault::Panic) => panic!("injected panic at {}", at()),
            Some(Fault::Stall) => {
                return Err(run
                    .board
                    .stall(run.gen, r, &format!("injected stall at {}", at())))
            }
            Some(Fault::Fail) => {
                return Err(Error::Worker {
                    rank: r,
                    message: format!("{}: injected failure", at()),
                })
            }
            // Only the multi-process mode injects it: this process is the rank.
            Some(Fault::Kill) => crate::sys::proc::kill_self(),
            Some(Fault::Delay { ms }) => std::thread::sleep(Duration::from_millis(u64::from(ms))),
            _ => {}
        }
        for (k, part) in interp::parts(r, op).into_iter().enumerate() {
            for w in part.waits {
                run.board
                    .wait(w.0, run.gen, r, &|| signal_desc(plan, *w))
                    .map_err(|e| e.in_step(&at()))?;
            }
            let t0 = Instant::now();
            if let Some(e) = part.effect {
                interp::apply(&mut view, &e).map_err(|e| e.in_step(&at()))?;
            }
            if run.call.timing {
                times.push(OpTime {
                    rank: r,
                    op: i,
                    part: k,
                    start_ns: ns(t0),
                    end_ns: ns(Instant::now()),
                });
            }
            if let Some(s) = part.signal {
                run.board.publish(s.0, run.gen);
            }
        }
    }
    Ok(times)
}

/// A rank thread's view of everyone's buffers for one call.
struct View<'a> {
    mem: &'a CpuMem,
    bind: &'a [super::Binding],
    elem: usize,
    base: Combine,
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
            self.mem.copy(mid, s);
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
        self.mem.copy(&mut bd.get_mut()?[db], s);
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

/// The buffer ids a lent call binds on rank `r` (its `Send`, its `Recv`):
/// from the top of the id space, never an engine buffer's.
fn lent_ids(r: usize) -> (BufId, BufId) {
    let top = u32::MAX - 2 * u32::try_from(r).unwrap_or(u32::MAX / 2);
    (BufId(top), BufId(top - 1))
}

impl super::HostSlices for CpuBackend {
    fn run_lent(
        &mut self,
        call: &Call,
        send: &[crate::sys::lend::Loan],
        recv: &[crate::sys::lend::Loan],
    ) -> Result<()> {
        let n = self.info.ranks;
        if recv.len() != n || !(send.len() == n || call.plan.shape.in_place) {
            return Err(Error::internal(format!(
                "a lent call needs every rank's buffers: {} send and {} receive slices for {n} ranks",
                send.len(),
                recv.len()
            )));
        }
        let mut bind = Vec::with_capacity(n);
        for (r, m) in self.mem.ranks.iter().enumerate() {
            let (s, d) = lent_ids(r);
            let mut map = m.bufs.write().unwrap_or_else(|e| e.into_inner());
            let entry = |l: &crate::sys::lend::Loan| {
                (Arc::new(Mutex::new(Storage::Lent(l.clone()))), l.len())
            };
            map.insert(d, entry(&recv[r]));
            if let Some(l) = send.get(r) {
                map.insert(s, entry(l));
            }
            let send_id = if send.get(r).is_some() { s } else { d };
            bind.push(super::Binding {
                send: send_id,
                recv: d,
            });
        }
        let lent = Call {
            bind: Arc::new(bind),
            ..call.clone()
        };
        let r = self.launch(&lent).and_then(|()| self.synchronize());
        // The rank maps forget the slices whatever happened (the loans end
        // when the caller's `lend` returns).
        for (i, m) in self.mem.ranks.iter().enumerate() {
            let (s, d) = lent_ids(i);
            let mut map = m.bufs.write().unwrap_or_else(|e| e.into_inner());
            map.remove(&s);
            map.remove(&d);
        }
        r
    }
}

/// Host memory from /proc/meminfo: (available, total) bytes.
pub fn host_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kib| kib * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

impl Backend for CpuBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()> {
        for (r, (m, &want)) in self.mem.ranks.iter().zip(bytes).enumerate() {
            let mut map = m.bufs.write().unwrap_or_else(|e| e.into_inner());
            let have = map.get(&id).map_or(0, |(_, len)| *len);
            if have >= want && map.contains_key(&id) {
                continue;
            }
            if self.faults.alloc_fails(r) {
                return Err(Error::Worker {
                    rank: r,
                    message: format!("injected allocation failure of {want} bytes"),
                });
            }
            let words = want.div_ceil(8);
            let mut v: Vec<u64> = Vec::new();
            v.try_reserve_exact(words).map_err(|_| Error::OutOfMemory {
                what: format!("rank {r}'s buffer of {want} bytes"),
                memory: "host memory".into(),
                need: want as u64,
                available: host_memory().map_or(0, |m| m.0),
                is_free: true,
                hint: "use fewer ranks or a smaller size".into(),
            })?;
            v.resize(words, 0);
            map.insert(id, (Arc::new(Mutex::new(Storage::Heap(v))), want));
        }
        Ok(())
    }

    fn release(&mut self, id: BufId) -> Result<()> {
        for m in &self.mem.ranks {
            m.bufs
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        }
        Ok(())
    }

    fn write(&mut self, rank: usize, id: BufId, offset: usize, data: &[u8]) -> Result<()> {
        let (w, len) = self.mem.get(rank, id)?;
        if offset + data.len() > len {
            return Err(Error::BufferSize {
                rank,
                what: "buffer",
                expected: len,
                found: offset + data.len(),
            });
        }
        let mut g = lock(&w);
        self.mem
            .copy(&mut g.bytes()?[offset..offset + data.len()], data);
        Ok(())
    }

    fn read(&mut self, rank: usize, id: BufId, offset: usize, out: &mut [u8]) -> Result<()> {
        let (w, len) = self.mem.get(rank, id)?;
        if offset + out.len() > len {
            return Err(Error::BufferSize {
                rank,
                what: "buffer",
                expected: len,
                found: offset + out.len(),
            });
        }
        let mut g = lock(&w);
        self.mem.copy(out, &g.bytes()?[offset..offset + out.len()]);
        Ok(())
    }

    fn launch(&mut self, call: &Call) -> Result<()> {
        let launch_ns = self.epoch.elapsed().as_secs_f64() * 1e9;
        check_call(call, self.info.ranks)?;
        if self.abort.is_aborted() {
            return Err(Error::Poisoned {
                reason: "the engine was aborted".into(),
            });
        }
        if self.board.len() < call.plan.signal_count() {
            // Safe to replace: no rank thread is running between calls.
            self.board = Arc::new(SignalBoard::new(
                call.plan.signal_count().next_power_of_two(),
                self.abort.clone(),
                self.timeout,
            ));
            self.gen = 0;
        }
        self.gen += 1;
        self.calls += 1;
        let run = Arc::new(Run {
            call: call.clone(),
            board: self.board.clone(),
            gen: self.gen,
            call_no: self.calls,
            faults: self.faults.clone(),
            epoch: self.epoch,
        });
        let t0 = Instant::now();
        let results = self.threads.run_all(
            (0..self.info.ranks)
                .map(|_| Job::Run(run.clone()))
                .collect(),
        )?;
        let total = t0.elapsed().as_nanos() as u64;
        let phases = self.threads.last_phases();
        for p in &mut self.profile {
            p.calls += 1;
            p.total_ns += total;
            p.pool.add(&phases);
        }
        let mut errors = Vec::new();
        let mut ops = Vec::new();
        for r in results {
            match r {
                Ok(t) => ops.extend(t),
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => {
                if call.timing {
                    self.timelines.push(CallTimeline {
                        plan: call.plan.name.clone(),
                        clock: "host timestamps (CPU backend): one monotonic clock shared by every rank thread".into(),
                        launch_ns,
                        skew_ns: 0.0,
                        ops,
                    });
                }
                Ok(())
            }
            1 => Err(errors.remove(0)),
            _ => Err(Error::Ranks(errors)),
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    fn abort_handle(&self) -> AbortHandle {
        self.abort.clone()
    }

    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>> {
        let (free, total) = host_memory().unwrap_or((0, 0));
        Ok(vec![
            Some(DeviceMemory {
                device: 0,
                free,
                total
            });
            self.info.ranks
        ])
    }

    fn ping(&mut self) -> Result<()> {
        self.threads
            .run((0..self.info.ranks).map(|_| Job::Ping).collect())
            .map(|_| ())
    }

    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        Some(self)
    }

    fn host_slices(&mut self) -> Option<&mut dyn super::HostSlices> {
        Some(self)
    }

    fn ordered(&mut self) -> Option<&mut dyn super::ordered::StreamOrdered> {
        Some(self)
    }
}

impl Profiling for CpuBackend {
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        Ok(std::mem::replace(
            &mut self.profile,
            vec![IssueProfile::default(); self.info.ranks],
        ))
    }

    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        Ok(std::mem::take(&mut self.timelines))
    }

    fn set_nccl_timing(&mut self, _on: bool) {}

    fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>> {
        Ok(Vec::new())
    }

    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>> {
        Ok(self.mem.take_traffic())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::WaitKind;

    /// Regression (issue 26): naming the step keeps the kind of the wait.
    #[test]
    fn naming_the_step_keeps_the_kind_of_the_wait() {
        let e = Error::in_step(
            Error::Timeout {
                rank: 1,
                what: "rank 0's copy".into(),
                seconds: 2.0,
                wait: WaitKind::ExchangeKernel,
            },
            "step 3",
        );
        assert_eq!(e.wait_kind(), Some(WaitKind::ExchangeKernel));
        assert!(e.to_string().contains("rank 0's copy (at step 3)"), "{e}");
        let a = Error::in_step(
            Error::Aborted {
                rank: 1,
                what: "waiting".into(),
                wait: WaitKind::Completion,
            },
            "step 1",
        );
        assert_eq!(a.wait_kind(), Some(WaitKind::Completion));
    }
}
