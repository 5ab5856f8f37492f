//! The backend trait: one implementation per device (`cpu`, `cuda`).
//!
//! A backend owns, for every rank this process runs, a host thread and
//! that rank's buffers,
//! and executes [`Plan`]s: each [`OpKind`](crate::plan::OpKind) maps to
//! exactly one thing it does (a copy, a reduce kernel, an exchange kernel),
//! each [`SignalKind`](crate::plan::SignalKind) to one way of ordering. The
//! engine ([`crate::engine`]) chooses plans; the backend runs them.
//!
//! The core trait, `Backend` (crate-private), is small: buffers, launch,
//! synchronize, abort. What only some backends can do is an extension
//! trait, reached through `Backend::nccl`, `Backend::graphs` or
//! `Backend::ordered`: NCCL on the same buffers (`NcclBackend`), CUDA
//! graphs (`GraphBackend`), stream-ordered calls and the work stream
//! (`ordered::StreamOrdered`). The engine is their one caller; a library
//! user reaches them through the engine's methods
//! ([`Engine`](crate::engine::Engine)'s `graph_capture`, `nccl_init`,
//! `launch_after`, `work_launch`, ...). The measurement tools' own hooks
//! sit apart: NCCL's timings on the NCCL capability, the overlap
//! benchmark's on `overlap::OverlapBench` (reached from the stream-ordered
//! capability).
//!
//! How a rank reaches its peers (threads of one process, shared memory
//! between processes) is not the backend's: the CPU backend is one engine
//! generic over a transport (the private `transport` module: a peer's
//! buffers, the plans' signal board, the job's set-up collectives), so a
//! new way of reaching a peer is a new transport, not a new backend. The
//! CUDA backend is likewise one front end generic over a peer exchange
//! (the private `cuda::exchange` module: rank threads of one process, or
//! one rank per process over CUDA IPC).

pub(crate) mod cpu;
/// The CPU pool's phases of one round, as [`IssueProfile`] reports them.
pub use crate::pool::PoolPhases;
#[cfg(feature = "cuda")]
pub mod cuda;
mod nccl;
pub mod ordered;
pub mod overlap;

pub(crate) use nccl::NcclBackend;
pub use nccl::{NcclBuffers, NcclCall};

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::sync::AbortHandle;

/// Why the CUDA backend is unavailable in a build without the `cuda`
/// feature ([`crate::Error::NoCuda`] says it, and `auto` falls back to the
/// CPU with it).
#[cfg(not(feature = "cuda"))]
pub const NO_CUDA: &str = "built without the cuda feature";

/// Which backend runs the collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum BackendKind {
    /// Host threads (or processes) and host memory.
    Cpu,
    /// GPUs: copy engines and the PTX kernels.
    Cuda,
}

impl BackendKind {
    /// "cpu" or "cuda".
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

/// What the user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// CUDA when a driver and a GPU are present, otherwise CPU.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The CUDA backend (an error without a driver and a GPU).
    Cuda,
}

impl BackendChoice {
    /// Why this choice runs on the CPU backend, if it does: `--backend cpu`,
    /// or `auto` where CUDA is unavailable (the probe's reason). `None`: CUDA.
    pub fn cpu_reason(self) -> Option<String> {
        match self {
            BackendChoice::Cpu => Some("--backend cpu".into()),
            BackendChoice::Cuda => None,
            #[cfg(feature = "cuda")]
            BackendChoice::Auto => cuda::probe().err(),
            #[cfg(not(feature = "cuda"))]
            BackendChoice::Auto => Some(NO_CUDA.into()),
        }
    }
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "cuda" | "gpu" => Ok(BackendChoice::Cuda),
            other => Err(format!("unknown backend {other:?} (auto, cpu, cuda)")),
        }
    }
}

pub use crate::plan::call::{Binding, BufId, Call};

/// Milliseconds spent in the parts of a GPU backend's setup.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SetupBreakdown {
    /// Loading libcuda, `cuInit`, listing devices (once per process).
    pub driver_ms: f64,
    /// Binding (and on first use creating) the primary context, slowest rank.
    pub context_ms: f64,
    /// Loading the kernel modules, slowest rank.
    pub kernels_ms: f64,
    /// Enabling peer access between the GPUs.
    pub peer_ms: f64,
}

/// Facts about a backend for reports.
#[derive(Debug, Clone, Default)]
pub struct BackendInfo {
    /// Which backend.
    pub kind: Option<BackendKind>,
    /// The ranks it runs.
    pub ranks: usize,
    /// Device of each rank (all 0 on the CPU).
    pub rank_to_device: Vec<usize>,
    /// One line for humans: the devices and how ranks map onto them.
    pub describe: String,
    /// Driver and hardware facts, setup notes.
    pub hardware: Vec<String>,
    /// What its setup took, part by part (the CUDA backend).
    pub setup: Option<SetupBreakdown>,
}

impl BackendInfo {
    /// Bytes this backend keeps per byte of a plan's LL slots
    /// ([`crate::plan::Buf::Lines`], buffer [`BufId::LL`]): on GPUs each
    /// word carries its flag (`schedule::LL_WIDEN`); the CPU
    /// backend keeps the elements as they are and its flags on the signal
    /// board.
    pub(crate) fn lines_widen(&self) -> usize {
        if self.kind == Some(BackendKind::Cuda) {
            crate::schedule::LL_WIDEN
        } else {
            1
        }
    }

    /// Number of distinct devices.
    pub fn devices(&self) -> usize {
        let mut d = self.rank_to_device.clone();
        d.sort_unstable();
        d.dedup();
        d.len()
    }
}

/// The device of each of `ranks` ranks given the devices to use, `devs`
/// (a device may be listed more than once).
///
/// * With at least as many devices as ranks, rank `r` uses `devs[r]`.
/// * With more ranks than devices, the ranks go in contiguous blocks:
///   rank `r` uses `devs[r * len / ranks]` (4 ranks on 2 GPUs:
///   0,1 -> the first, 2,3 -> the second). A ring `0 -> 1 -> ... -> N-1 ->
///   0` then crosses between two devices only where one block ends, once
///   each way on 2 GPUs, where round-robin made every hop cross: the ring
///   moves `2(N-1)/N * D` per hop, so round-robin put `N/2` hops' worth on
///   each link direction (measured, 4 ranks on 2 x H200 at 256 MiB: 2184 us
///   round-robin, 1129 us in blocks; `results/2026-11-30-h200x2-s8-place`).
///   List the devices round-robin yourself (`0,1,0,1`) for the old layout.
/// * No devices: every rank on device 0.
pub fn placement(ranks: usize, devs: &[usize]) -> Vec<usize> {
    (0..ranks).map(|r| device_of(r, ranks, devs)).collect()
}

/// Rank `rank`'s entry of [`placement`]`(ranks, devs)`, without building
/// the whole map (a process knows only its own rank; the product is taken
/// in 128 bits, so any `ranks` is safe). A rank at or past `ranks` wraps
/// onto the devices (`devs[rank % len]`).
pub fn device_of(rank: usize, ranks: usize, devs: &[usize]) -> usize {
    let len = devs.len();
    if len == 0 {
        return 0;
    }
    if ranks <= len || rank >= ranks {
        return devs[rank % len];
    }
    devs[(rank as u128 * len as u128 / ranks as u128) as usize]
}

/// The device of the process with local rank `local_rank` among
/// `local_size` processes on this machine (if known), given the devices to
/// use: [`placement`] when the local size is known and covers the rank, so
/// that processes sit as one process's rank threads do; else
/// `devs[local_rank % len]` (the usual local-rank convention). No devices:
/// device 0.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn process_device(
    local_rank: usize,
    local_size: Option<usize>,
    devs: &[usize],
) -> usize {
    // An unknown local size: no ranks to place in blocks, so the rank wraps.
    device_of(local_rank, local_size.unwrap_or(0), devs)
}

/// Memory of one rank's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceMemory {
    /// The device (GPU ordinal; 0 on the CPU).
    pub device: usize,
    /// Bytes free.
    pub free: u64,
    /// Bytes in all.
    pub total: u64,
}

/// One host write into a local rank's buffer: `data` at byte `offset` of
/// buffer `id` of rank `rank`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostWrite<'a> {
    pub rank: usize,
    pub id: BufId,
    pub offset: usize,
    pub data: &'a [u8],
}

/// One host read out of a local rank's buffer: `out.len()` bytes from byte
/// `offset` of buffer `id` of rank `rank`.
#[derive(Debug)]
pub(crate) struct HostRead<'a> {
    pub rank: usize,
    pub id: BufId,
    pub offset: usize,
    pub out: &'a mut [u8],
}

/// Executes plans on per-rank buffers.
pub(crate) trait Backend: Send {
    /// What the backend is and runs on.
    fn info(&self) -> &BackendInfo;

    /// Make buffer `id` on every rank r hold at least `bytes[r]` bytes. A
    /// buffer that grows loses its contents; every rank's work is drained
    /// before any memory is freed.
    fn reserve(&mut self, id: BufId, bytes: &[usize]) -> Result<()>;

    /// Free buffer `id` on every rank (after draining every rank).
    fn release(&mut self, id: BufId) -> Result<()>;

    /// Copy each write's bytes into its local rank's buffer (after
    /// draining every rank: a peer may still be reading it). The writes of
    /// one call (every local rank's input) come together: a backend with a
    /// thread per rank makes them in one round.
    fn write(&mut self, writes: &[HostWrite<'_>]) -> Result<()>;

    /// Copy each read's bytes out of its local rank's buffer (after the
    /// ranks' work completed), in one round as [`Backend::write`].
    fn read(&mut self, reads: &mut [HostRead<'_>]) -> Result<()>;

    /// Start executing `call` (asynchronously where the backend can). A
    /// backend may return before its rank threads have issued the call;
    /// then a rank's failure to issue it is returned by the next `launch`
    /// or by whatever is called next (`synchronize`, a read, ...), as a
    /// CUDA stream reports an earlier launch's error.
    fn launch(&mut self, call: &Call) -> Result<()>;

    /// Wait until everything launched so far has completed on every rank.
    fn synchronize(&mut self) -> Result<()>;

    /// A handle that aborts waits on every rank, from any thread.
    fn abort_handle(&self) -> AbortHandle;

    /// Free and total memory of each rank's device (the host on the CPU),
    /// one entry per rank: `None` for a rank whose device this process does
    /// not see (another process's rank in a multi-process job).
    fn memory(&self) -> Result<Vec<Option<DeviceMemory>>>;

    /// A round trip to every rank thread that does nothing: the cost of the
    /// caller-to-rank-thread hand-off.
    fn ping(&mut self) -> Result<()>;

    /// The ranks this process runs and whose buffers it can read and write:
    /// all of them, except in the multi-process mode (one rank per process,
    /// [`crate::process`]), where buffers of the other ranks are reached
    /// only by the plans' ops.
    fn local_ranks(&self) -> std::ops::Range<usize> {
        0..self.info().ranks
    }

    /// NCCL on the same buffers, if the backend has it (the CUDA backend
    /// with the `nccl` feature).
    fn nccl(&mut self) -> Option<&mut dyn NcclBackend> {
        None
    }

    /// CUDA graphs, if the backend has them.
    fn graphs(&mut self) -> Option<&mut dyn GraphBackend> {
        None
    }

    /// Timelines and host-issue profiles.
    fn profiling(&mut self) -> Option<&mut dyn Profiling> {
        None
    }

    /// Stream-ordered calls and the per-rank work stream, or why not: a
    /// backend without them says [`Error::Unsupported`], one that has them
    /// but not where it runs says [`Error::Refused`] with the reason.
    fn ordered(&mut self) -> Result<&mut dyn ordered::StreamOrdered> {
        Err(Error::Unsupported(
            "stream-ordered calls".into(),
            self.info().kind.unwrap_or(BackendKind::Cpu).name(),
        ))
    }

    /// The device address of engine buffer `id` of local rank `rank`, for
    /// copies between it and another library's device memory on that
    /// library's stream (the CUDA backend with rank threads in one process).
    #[cfg(feature = "cuda")]
    fn device_buf(&self, rank: usize, id: BufId) -> Result<crate::cuda::PeerBuf> {
        let _ = (rank, id);
        Err(Error::Unsupported(
            "calls on another library's device memory".into(),
            self.info().kind.unwrap_or(BackendKind::Cpu).name(),
        ))
    }

    /// Copy all of `span` into engine buffer `id` of local rank `rank` on
    /// `stream`, as a host write into it would be ordered (after this
    /// rank's calls and any peer still reading the buffer), and return once
    /// the bytes landed (`stream` synchronized: peers in other processes
    /// read a buffer as soon as its owner begins its next call).
    #[cfg(feature = "cuda")]
    fn copy_in_landed(
        &mut self,
        rank: usize,
        id: BufId,
        span: &crate::cuda::DeviceSpan,
        stream: &crate::cuda::RawStream,
    ) -> Result<()> {
        let _ = (span, stream);
        self.device_buf(rank, id).map(|_| ())
    }

    /// Calls on the caller's own host slices, if the backend's ranks can
    /// address them (the CPU backend in one process).
    fn host_slices(&mut self) -> Option<&mut dyn HostSlices> {
        None
    }
}

/// Optional capability: run a call with every rank's plan buffers `Send`
/// and `Recv` on the caller's slices, lent for the call
/// (the private `sys::lend` module), instead of copying them into the backend's
/// buffers and back (issue 32, item 11).
pub(crate) trait HostSlices {
    /// Run `call` (its `bind` is ignored) to completion with rank r's
    /// `Send` on `send[r]` (read-only; unused in place) and its `Recv` on
    /// `recv[r]`; `Scratch` stays the backend's.
    fn run_lent(
        &mut self,
        call: &Call,
        send: &[crate::sys::lend::Loan],
        recv: &[crate::sys::lend::Loan],
    ) -> Result<()>;
}

/// CUDA graphs of ringreduce calls.
pub(crate) trait GraphBackend {
    /// Capture `calls`, in order, into CUDA graphs: one per rank when every
    /// plan is ordered on the device ([`Plan::device_ordered`]), else one
    /// graph across every GPU whose edges are the plans' signals.
    fn capture(&mut self, calls: &[Call]) -> Result<()>;
    /// Replay the captured graphs once on every rank.
    fn replay(&mut self) -> Result<()>;
}

/// Host time one rank thread spent issuing collectives, by kind of call
/// (nanoseconds, summed since the last `Profiling::take_issue_profile`).
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IssueProfile {
    /// Calls summed.
    pub calls: u64,
    /// Copies (`cuMemcpyPeerAsync`).
    pub copy_ns: u64,
    /// Kernel launches.
    pub kernel_ns: u64,
    /// Event records.
    pub record_ns: u64,
    /// Event waits.
    pub wait_ns: u64,
    /// Waiting for another rank thread to issue the record we wait on.
    pub peer_ns: u64,
    /// The whole issue of the rank's ops.
    pub total_ns: u64,
    /// The calling thread, in the backend's launch (before, during and
    /// after the hand-off to the rank threads), the same on every rank.
    pub backend_ns: u64,
    /// The hand-off's phases over the launches (the same on every rank):
    /// a rank thread's whole job is its `handler_ns`, posting to every
    /// reply the `round_ns`.
    pub pool: crate::pool::PoolPhases,
    /// The same for the NCCL calls made through the rank threads.
    pub nccl_pool: crate::pool::PoolPhases,
}

/// When one op part ran on one rank, in nanoseconds on the backend's clock.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct OpTime {
    /// The rank.
    pub rank: usize,
    /// Index of the op in the rank's list, and its part (0, or 1 for an
    /// exchange's reduce half).
    pub op: usize,
    /// The part of the op (see `op`).
    pub part: usize,
    /// When it started.
    pub start_ns: f64,
    /// When it ended.
    pub end_ns: f64,
}

/// The timings of one timed call.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CallTimeline {
    /// The plan's name (its path).
    pub plan: String,
    /// What the clock is (device or host timestamps) and how the ranks'
    /// clocks were aligned.
    pub clock: String,
    /// When the caller launched the call, on the host, on the same clock as
    /// `ops` (nanoseconds).
    pub launch_ns: f64,
    /// How far apart two ranks' times can be because their clocks were
    /// aligned imperfectly (nanoseconds; 0 for one shared clock).
    pub skew_ns: f64,
    /// Every timed op part of every rank.
    pub ops: Vec<OpTime>,
}

/// Timelines, issue profiles and traffic counters of the engine's own calls
/// (NCCL's calls are timed through [`NcclBackend`]).
pub(crate) trait Profiling {
    /// Per-rank host issue profile since the last call, then reset.
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>>;
    /// The timelines of the calls launched with `timing` since the last
    /// take (after a synchronize).
    fn take_timeline(&mut self) -> Result<Vec<CallTimeline>>;
    /// Bytes each rank sent to and received from other ranks since the last
    /// take, counted by the backend as it moved them (copies between ranks,
    /// and reduces reading another rank's memory), then reset.
    fn take_traffic(&mut self) -> Result<Vec<crate::plan::Traffic>>;
    /// Timing is switched on (`on`) or off for the calls that follow: set
    /// up, or end, what timing needs outside the calls themselves, so that
    /// the timed calls do not pay it (default: nothing).
    fn prepare_timing(&mut self, _on: bool) -> Result<()> {
        Ok(())
    }
}

/// Check that a call's bindings cover every rank.
pub(crate) fn check_call(call: &Call, ranks: usize) -> Result<()> {
    call.plan.check_ranks(ranks).map_err(Error::Plan)?;
    if call.bind.len() != ranks {
        return Err(Error::WrongBufferCount {
            ranks,
            buffers: call.bind.len(),
        });
    }
    if call.plan.shape.elem_size != call.dtype.size() {
        return Err(Error::Plan(format!(
            "{}: plan for {}-byte elements called with {}",
            call.plan.name,
            call.plan.shape.elem_size,
            call.dtype.name()
        )));
    }
    Ok(())
}

/// Refuse a host access (`what`: "read", "write into") to rank `rank`'s
/// buffer when this process does not run that rank (`local`): it lives in
/// another process, reached only by the plans' ops.
pub(crate) fn check_local(rank: usize, local: std::ops::Range<usize>, what: &str) -> Result<()> {
    if local.contains(&rank) {
        return Ok(());
    }
    let this = if local.len() == 1 {
        format!("this process is rank {}", local.start)
    } else {
        format!("this process runs ranks {local:?}")
    };
    Err(Error::BadArgument(format!(
        "{what} rank {rank}'s buffer: it lives in rank {rank}'s process ({this})"
    )))
}

/// Describe rank `r`'s op `i` of `plan` for error messages:
/// `ring:pipe2 reduce-scatter step 1 chunk 3 slice 0 (reduce)`.
pub fn op_desc(plan: &Plan, r: usize, i: usize) -> String {
    match plan.ops.get(r).and_then(|o| o.get(i)) {
        Some(op) => label_desc(plan, &op.label, &op.kind, i),
        None => format!("{} op {i}", plan.name),
    }
}

/// Describe op `i` by its label and kind (a kernel's step: its own label
/// and kind).
fn label_desc(plan: &Plan, l: &crate::plan::Label, kind: &crate::plan::OpKind, i: usize) -> String {
    match l.phase {
        Some(p) => format!(
            "{} {} step {} chunk {} slice {} ({})",
            plan.name,
            p.label(),
            l.step,
            l.chunk,
            l.slice,
            kind.name()
        ),
        None if !l.note.is_empty() => format!("{} {} ({})", plan.name, l.note, kind.name()),
        None => match kind {
            crate::plan::OpKind::Begin => format!("start of its {} call", plan.name),
            crate::plan::OpKind::End => format!("end of its {} call", plan.name),
            _ => format!("{} op {i} ({})", plan.name, kind.name()),
        },
    }
}

/// Describe part `k` of rank `r`'s op `i` ([`crate::plan::interp::parts`]):
/// a kernel's step by its own label, any other part as its op.
pub(crate) fn part_desc(plan: &Plan, r: usize, i: usize, k: usize) -> String {
    let Some(op) = plan.ops.get(r).and_then(|o| o.get(i)) else {
        return format!("{} op {i}", plan.name);
    };
    let crate::plan::OpKind::Kernel(kernel) = &op.kind else {
        return op_desc(plan, r, i);
    };
    let part = crate::plan::interp::parts(r, op).into_iter().nth(k);
    match part.and_then(|p| p.step).and_then(|j| kernel.steps.get(j)) {
        Some(st) => format!(
            "{}, in its {}",
            label_desc(plan, &st.label, &st.kind, i),
            op.kind.name()
        ),
        None => op_desc(plan, r, i),
    }
}

/// Describe what a wait on `s` waits for: the producing rank and op (or
/// kernel step).
pub(crate) fn signal_desc(plan: &Plan, s: crate::plan::SignalId) -> String {
    for (r, ops) in plan.ops.iter().enumerate() {
        for (i, op) in ops.iter().enumerate() {
            let parts = crate::plan::interp::parts(r, op);
            if let Some(k) = parts.iter().position(|p| p.signal == Some(s)) {
                return format!("rank {r}'s {}", part_desc(plan, r, i, k));
            }
        }
    }
    format!("signal {}", s.0)
}

#[cfg(test)]
mod tests;
