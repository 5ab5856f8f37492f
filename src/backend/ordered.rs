//! Stream-ordered calls: a collective queued after the caller's work on a
//! stream, returning at once with a completion per rank.
//!
//! The capability is an extension trait, `StreamOrdered`, reached through
//! `Backend::ordered`, rather than fields of
//! [`Call`]: a stream-ordered call returns per-rank completion tokens, and
//! comes with a work stream per rank, kernel launches on it and their
//! timings, none of which fit `Backend::launch(&Call) -> Result<()>`. So the
//! core trait stays as it is, and the CUDA backend implements it by wrapping
//! its existing per-rank issue of a plan (`backend/cuda/work.rs`) without
//! changing it.
//!
//! What "after" means ([`After`]):
//! * [`After::Work`]: each rank's *work stream*, a third stream per rank
//!   that the engine owns and on which the caller launches its own kernels
//!   through the engine ([`WorkLaunch`]): the overlap benchmark's backward
//!   pass runs there.
//! * `After::Streams`: a stream per rank from another library (CUDA only,
//!   with the `cuda` feature; `cuda::RawStream` is made by an `unsafe`
//!   constructor with a contract).
//! * [`After::Nothing`]: only after the engine's earlier calls, like a plain
//!   launch; the call still returns completions.
//!
//! On CUDA, a ringreduce call records an event on each rank's caller stream,
//! makes both lanes of *every* rank wait for *every* rank's event (a
//! collective reads the inputs of all ranks, and a rank's peers read its
//! memory), issues the plan unchanged, then joins: each rank's compute lane
//! waits for its copy lane and for every other rank's last op, and records
//! the rank's completion event. When it fires, the call is complete on every
//! rank: every output written, no input of any rank still read. An NCCL call
//! waits for its own rank's caller stream only (NCCL synchronizes the ranks
//! itself), the way PyTorch DDP orders `ncclAllReduce` after a gradient
//! bucket's kernel. Every wait is on the GPU; the caller's thread returns as
//! soon as the rank threads have issued the work.
//!
//! The CPU backend implements the same API with host semantics: a call runs
//! when it is issued, so every completion is complete on return, and the
//! work kernels run on the host through the host implementation a caller
//! gives them (`HostKernel`); CI checks the
//! results and the order through it.

pub use crate::work::{ArgView, Builtin, HostArgs, Param, WorkKernel};

use super::overlap::OverlapBench;

use super::cpu::CpuBackend;
use super::{Backend, BufId, Call};
#[cfg(feature = "cuda")]
use crate::cuda::{DoneEvent, RawStream};
use crate::error::{Error, Result};
use crate::transport::Storage;
use crate::transport::Transport;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a stream-ordered call is ordered after, on every rank.
#[derive(Debug, Clone, Default)]
pub enum After {
    /// Only the engine's earlier calls (like a plain launch).
    #[default]
    Nothing,
    /// The work queued so far on each rank's work stream.
    Work,
    /// The work queued so far on these streams, one per rank, each on its
    /// rank's device (CUDA only; needs the `cuda` feature).
    #[cfg(feature = "cuda")]
    Streams(Arc<Vec<RawStream>>),
}

/// The completion of a stream-ordered call on one rank. Cheap to clone;
/// `Send` and `Sync`: hand it to any thread.
#[derive(Debug, Clone)]
pub struct Completion {
    rank: usize,
    #[cfg(feature = "cuda")]
    event: Option<Arc<DoneEvent>>,
}

impl Completion {
    /// A completion that is already complete (host backends).
    pub fn complete(rank: usize) -> Completion {
        Completion {
            rank,
            #[cfg(feature = "cuda")]
            event: None,
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn event(rank: usize, ev: Arc<DoneEvent>) -> Completion {
        Completion {
            rank,
            event: Some(ev),
        }
    }

    /// The rank this completion belongs to.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The event, when the backend has one (CUDA; with the `cuda` feature).
    #[cfg(feature = "cuda")]
    pub(crate) fn done_event(&self) -> Option<&DoneEvent> {
        self.event.as_deref()
    }

    #[cfg(feature = "cuda")]
    fn cuda_err(&self, e: crate::cuda::CudaError) -> Error {
        e.at(self.rank, self.event.as_ref().map_or(0, |e| e.device()))
    }

    /// Whether the call is complete on this rank (never blocks).
    pub fn is_complete(&self) -> Result<bool> {
        #[cfg(feature = "cuda")]
        if let Some(e) = &self.event {
            return e.query().map_err(|x| self.cuda_err(x));
        }
        Ok(true)
    }

    /// Wait (on this thread) until the call is complete, at most `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(e) = &self.event {
            return match e.wait_for(timeout) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Error::Timeout {
                    rank: self.rank,
                    what: "the completion of a stream-ordered call".into(),
                    seconds: timeout.as_secs_f64(),
                    wait: crate::error::WaitKind::Completion,
                }),
                Err(x) => Err(self.cuda_err(x)),
            };
        }
        let _ = timeout;
        Ok(())
    }

    /// Make another library's stream wait (on the GPU) for the call: the
    /// work queued on `stream` from now on runs after it (with the `cuda`
    /// feature).
    #[cfg(feature = "cuda")]
    pub(crate) fn order_before(&self, stream: &RawStream) -> Result<()> {
        match &self.event {
            None => Ok(()),
            Some(e) => stream.wait_done(e).map_err(|x| self.cuda_err(x)),
        }
    }
}

/// Names one timed span: what it is and which one (a bucket number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SpanTag {
    /// What the span is ("backward", "bucket", ...).
    pub what: &'static str,
    /// Which one.
    pub index: u32,
}

/// When a timed kernel or call ran on one rank, in nanoseconds from the
/// rank's last `StreamOrdered::work_mark` (device event timestamps on
/// CUDA, the host clock on the CPU).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WorkSpan {
    /// The rank.
    pub rank: usize,
    /// Its tag's `what`.
    pub what: &'static str,
    /// Its tag's `index`.
    pub index: u32,
    /// `work` (the work stream) or `comm` (the call's compute lane).
    pub stream: &'static str,
    /// When it started.
    pub start_ns: f64,
    /// When it ended.
    pub end_ns: f64,
}

/// One argument of a work-stream launch, the same on every rank except
/// [`WorkArg::Rank`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WorkArg {
    /// Bytes `offset .. offset + bytes` of engine buffer `id` of the rank.
    Buf {
        /// The buffer.
        id: BufId,
        /// Its first byte.
        offset: usize,
        /// Its length in bytes.
        bytes: usize,
    },
    /// The rank's index, as a `.u32`.
    Rank,
    /// A `.u32`.
    U32(u32),
    /// A `.u64`.
    U64(u64),
    /// A `.f32`.
    F32(f32),
}

/// The grid of a work launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    /// This many blocks.
    Blocks(u32),
    /// One item per thread: `ceil(items / block)` blocks (0 items: no
    /// launch).
    Items(u64),
}

impl Grid {
    /// Blocks for `block` threads each.
    pub fn blocks(&self, block: u32) -> Result<u32> {
        match *self {
            Grid::Blocks(b) => Ok(b),
            Grid::Items(n) => u32::try_from(n.div_ceil(u64::from(block.max(1))))
                .ok()
                .filter(|b| *b <= i32::MAX as u32)
                .ok_or_else(|| Error::BadArgument(format!("{n} items need too many blocks"))),
        }
    }
}

/// A kernel launch on every rank's work stream.
#[derive(Debug, Clone)]
pub struct WorkLaunch {
    /// The kernel.
    pub kernel: Arc<WorkKernel>,
    /// Its grid.
    pub grid: Grid,
    /// Threads per block.
    pub block: u32,
    /// Its arguments, in order.
    pub args: Vec<WorkArg>,
    /// Time the kernel (see `StreamOrdered::take_spans`).
    pub tag: Option<SpanTag>,
}

impl WorkLaunch {
    /// The arguments as rank `rank` sees them, for the argument checks.
    pub fn views(&self, rank: usize) -> Vec<ArgView> {
        self.args
            .iter()
            .map(|a| match *a {
                WorkArg::Buf { offset, bytes, .. } => ArgView::Buf { offset, bytes },
                WorkArg::Rank => ArgView::U32(rank as u32),
                WorkArg::U32(v) => ArgView::U32(v),
                WorkArg::U64(v) => ArgView::U64(v),
                WorkArg::F32(v) => ArgView::F32(v),
            })
            .collect()
    }
}

/// Stream-ordered calls and the work stream (see the module doc).
pub(crate) trait StreamOrdered {
    /// Launch `call` on every rank after `after`; returns each rank's
    /// completion, in rank order, once every rank thread issued its part.
    fn launch_after(
        &mut self,
        call: &Call,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>>;

    /// Launch a kernel on every rank's work stream.
    fn work_launch(&mut self, w: &WorkLaunch) -> Result<()>;

    /// Make rank r's work stream wait (on the GPU) for `done[r]`.
    fn work_wait(&mut self, done: &[Completion]) -> Result<()>;

    /// Start a new timing window: forget the spans so far and make "now" on
    /// each rank's work stream their origin.
    fn work_mark(&mut self) -> Result<()>;

    /// The spans timed since the last mark (after a synchronize).
    fn take_spans(&mut self) -> Result<Vec<WorkSpan>>;

    /// Give the collectives' streams (the lanes, where NCCL runs too) the
    /// device's highest priority (`true`) or the default one.
    ///
    /// A capability for library users, not only for the benchmark: when a
    /// collective overlaps the caller's compute (gradient buckets reduced
    /// during the backward pass), compute kernels queued first take the
    /// SMs and the collective waits behind them; PyTorch's NCCL process
    /// group offers the same choice (`is_high_priority_stream`). A no-op
    /// on host backends.
    fn set_comm_priority(&mut self, high: bool) -> Result<()>;

    /// The overlap benchmark's hooks on the same streams
    /// ([`OverlapBench`]), if the backend has them; a library user never
    /// needs them.
    fn overlap_bench(&mut self) -> Option<&mut dyn OverlapBench> {
        None
    }
}

/// Why the CUDA backend over its IPC peer exchange (one rank per process)
/// refuses stream-ordered calls: a call takes a caller stream for every rank and
/// hands back a completion event for every rank, all in the caller's
/// process, and makes every rank's lanes wait for every rank's caller
/// stream; with one rank per process the other ranks' streams and events
/// belong to other processes' CUDA contexts (only the interprocess events
/// made at set-up are shared), and that exchange does not record the
/// callers' streams into them. The CPU backend over shared memory has no
/// such limit (its calls complete on the host).
#[cfg(any(feature = "cuda", test))]
pub(crate) fn refused_with_one_rank_per_process(backend: &'static str) -> Error {
    Error::Refused {
        what: "stream-ordered calls",
        backend,
        over: "with one rank per process",
        reason: "a call takes every rank's caller stream and returns every rank's completion event in the caller's process, but here the other ranks' streams and events belong to other processes (only the interprocess events made at set-up are shared)",
    }
}

// -- the CPU backend ------------------------------------------------------

/// The CPU backend's ordered-call state: the origin of the spans, and the
/// spans.
#[derive(Debug)]
pub(crate) struct CpuOrder {
    base: Instant,
    spans: Vec<WorkSpan>,
}

impl Default for CpuOrder {
    fn default() -> Self {
        CpuOrder {
            base: Instant::now(),
            spans: Vec::new(),
        }
    }
}

impl CpuOrder {
    fn ns(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.base).as_secs_f64() * 1e9
    }

    /// A span of `ranks` (this process's), from `t0` to now.
    fn span(
        &mut self,
        ranks: std::ops::Range<usize>,
        tag: Option<SpanTag>,
        stream: &'static str,
        t0: Instant,
    ) {
        if let Some(t) = tag {
            let (a, b) = (self.ns(t0), self.ns(Instant::now()));
            for rank in ranks {
                self.spans.push(WorkSpan {
                    rank,
                    what: t.what,
                    index: t.index,
                    stream,
                    start_ns: a,
                    end_ns: b,
                });
            }
        }
    }
}

/// One rank's part of a work launch on a host backend: what a
/// `HostKernel` sees ([`HostArgs`]) on a backend's buffers.
pub(crate) struct HostRank<'a> {
    be: &'a mut dyn Backend,
    rank: usize,
    launch: &'a WorkLaunch,
    views: Vec<ArgView>,
}

impl HostRank<'_> {
    /// The buffer and offset of argument `i`.
    fn buf(&self, i: usize) -> Result<(BufId, usize)> {
        match self.launch.args.get(i) {
            Some(WorkArg::Buf { id, offset, .. }) => Ok((*id, *offset)),
            _ => Err(Error::BadArgument(format!(
                "argument {i} of {} is not a buffer",
                self.launch.kernel.entry()
            ))),
        }
    }
}

impl HostArgs for HostRank<'_> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn args(&self) -> &[ArgView] {
        &self.views
    }

    fn read(&mut self, i: usize, out: &mut [u8]) -> Result<()> {
        let (id, offset) = self.buf(i)?;
        let rank = self.rank;
        self.be.read(&mut [super::HostRead {
            rank,
            id,
            offset,
            out,
        }])
    }

    fn write(&mut self, i: usize, data: &[u8]) -> Result<()> {
        let (id, offset) = self.buf(i)?;
        let rank = self.rank;
        self.be.write(&[super::HostWrite {
            rank,
            id,
            offset,
            data,
        }])
    }
}

/// Rank `rank`'s part of a work launch, on the host: the kernel's host
/// implementation, after the argument checks.
pub(crate) fn host_kernel(be: &mut dyn Backend, rank: usize, w: &WorkLaunch) -> Result<()> {
    let f = w.kernel.host().ok_or_else(|| {
        Error::Unsupported(
            format!("the PTX kernel {} on the work stream", w.kernel.entry()),
            "cpu",
        )
    })?;
    let views = w.views(rank);
    w.kernel.check_args(&views).map_err(Error::BadArgument)?;
    f(&mut HostRank {
        be,
        rank,
        launch: w,
        views,
    })
}

impl<T: Transport<Mem = Storage>> StreamOrdered for CpuBackend<T> {
    fn launch_after(
        &mut self,
        call: &Call,
        after: &After,
        tag: Option<SpanTag>,
    ) -> Result<Vec<Completion>> {
        match after {
            After::Nothing | After::Work => {}
            #[cfg(feature = "cuda")]
            After::Streams(_) => {
                return Err(Error::Unsupported(
                    "ordering after CUDA streams".into(),
                    "cpu",
                ))
            }
        }
        // Host semantics: the work launched so far has run; the call runs
        // now and is complete on return.
        let t0 = Instant::now();
        self.launch(call)?;
        let local = self.local_ranks();
        self.order.span(local, tag, "comm", t0);
        Ok((0..self.info().ranks).map(Completion::complete).collect())
    }

    fn work_launch(&mut self, w: &WorkLaunch) -> Result<()> {
        let t0 = Instant::now();
        let local = self.local_ranks();
        for r in local.clone() {
            host_kernel(self, r, w)?;
        }
        self.order.span(local, w.tag, "work", t0);
        Ok(())
    }

    fn work_wait(&mut self, done: &[Completion]) -> Result<()> {
        if done.len() != self.info().ranks {
            return Err(Error::WrongBufferCount {
                ranks: self.info().ranks,
                buffers: done.len(),
            });
        }
        Ok(())
    }

    fn work_mark(&mut self) -> Result<()> {
        self.order = CpuOrder::default();
        Ok(())
    }

    fn take_spans(&mut self) -> Result<Vec<WorkSpan>> {
        Ok(std::mem::take(&mut self.order.spans))
    }

    fn set_comm_priority(&mut self, _high: bool) -> Result<()> {
        Ok(())
    }

    fn overlap_bench(&mut self) -> Option<&mut dyn OverlapBench> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
