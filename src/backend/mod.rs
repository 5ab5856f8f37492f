//! The backend trait: one implementation per file (`cpu`, `cuda`).
//!
//! A backend owns, for every rank, a host thread and three buffers (send,
//! receive, scratch), and executes [`Plan`]s. The engine
//! ([`crate::engine::Engine`]) chooses plans; the backend runs them.

pub mod cpu;
pub mod cuda;

use crate::element::Element;
use crate::error::{Error, Result};
use crate::plan::{Buf, Plan};
use std::sync::Arc;

/// Which backend runs the collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Cuda,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

/// What the user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a driver and a GPU are present, otherwise CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

/// Milliseconds spent in the parts of a GPU backend's setup.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct SetupBreakdown {
    /// Loading libcuda, `cuInit`, listing devices (once per process).
    pub driver_ms: f64,
    /// Binding (and on first use creating) the primary context, slowest rank.
    pub context_ms: f64,
    /// Loading the kernel modules, slowest rank: a prebuilt cubin where the
    /// GPU matches, else PTX JIT (fast once the driver's JIT cache is warm).
    pub ptx_ms: f64,
    /// Enabling peer access between the GPUs.
    pub peer_ms: f64,
}

/// Host time one rank thread spent issuing collectives, by kind of call
/// (nanoseconds, summed since the last [`Backend::take_issue_profile`]).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct IssueProfile {
    /// Collectives issued.
    pub calls: u64,
    /// `cuMemcpyPeerAsync`.
    pub copy_ns: u64,
    /// `cuLaunchKernel` of the reduce kernel.
    pub kernel_ns: u64,
    /// `cuEventRecord`.
    pub record_ns: u64,
    /// `cuStreamWaitEvent`.
    pub wait_ns: u64,
    /// Waiting for another rank thread to issue the record we wait on.
    pub peer_ns: u64,
    /// The whole issue of the rank's ops.
    pub total_ns: u64,
}

/// Executes plans on per-rank buffers.
pub trait Backend<T: Element>: Send {
    fn kind(&self) -> BackendKind;
    /// One line for humans, e.g. the devices and how ranks map onto them.
    fn describe(&self) -> String;
    fn ranks(&self) -> usize;
    /// Device index of each rank (all 0 on the CPU).
    fn rank_to_device(&self) -> Vec<usize> {
        vec![0; self.ranks()]
    }
    /// Make every rank's send/recv buffers hold at least `count` elements and
    /// its scratch at least `scratch` elements.
    fn reserve(&mut self, count: usize, scratch: usize) -> Result<()>;
    /// Write `data[r]` to the start of rank r's buffer `buf`.
    fn write(&mut self, buf: Buf, data: &[&[T]]) -> Result<()>;
    /// Read the first `count` elements of every rank's buffer `buf`.
    fn read(&mut self, buf: Buf, count: usize) -> Result<Vec<Vec<T>>>;
    /// Fill the first `count` elements of every rank's `buf` with `value`.
    fn fill(&mut self, buf: Buf, count: usize, value: T) -> Result<()> {
        let v = vec![value; count];
        let d: Vec<&[T]> = (0..self.ranks()).map(|_| v.as_slice()).collect();
        self.write(buf, &d)
    }
    /// Start executing `plan` (asynchronously where the backend can).
    fn launch(&mut self, plan: &Arc<Plan>) -> Result<()>;
    /// A round trip to every rank thread that does nothing: the cost of the
    /// caller-to-rank-thread hand-off.
    fn ping(&mut self) -> Result<()>;
    /// Wait until everything launched so far has completed on every rank.
    fn synchronize(&mut self) -> Result<()>;
    /// Set up NCCL communicators (CUDA only).
    fn nccl_init(&mut self, _nccl: &crate::cuda::nccl::Nccl) -> Result<()> {
        Err(Error::Unsupported("NCCL".into(), self.kind().name()))
    }
    /// Launch NCCL's all-reduce on the same buffers (CUDA only).
    fn launch_nccl(&mut self, _count: usize, _in_place: bool) -> Result<()> {
        Err(Error::Unsupported("NCCL".into(), self.kind().name()))
    }
    /// Capture `calls` NCCL all-reduces per rank into a CUDA graph (CUDA only).
    fn nccl_graph_capture(&mut self, _count: usize, _in_place: bool, _calls: usize) -> Result<()> {
        Err(Error::Unsupported("NCCL graphs".into(), self.kind().name()))
    }
    /// Capture `plans`, in order, into one CUDA graph per rank (CUDA only).
    /// Only plans that need no event between streams or ranks can be
    /// captured (checked while capturing).
    fn graph_capture(&mut self, _plans: &[Arc<Plan>]) -> Result<()> {
        Err(Error::Unsupported("CUDA graphs".into(), self.kind().name()))
    }
    /// Replay the graphs of [`Backend::graph_capture`] once on every rank.
    fn launch_graph(&mut self) -> Result<()> {
        Err(Error::Unsupported("CUDA graphs".into(), self.kind().name()))
    }
    /// Replay the captured NCCL graphs once on every rank.
    fn launch_nccl_graph(&mut self) -> Result<()> {
        Err(Error::Unsupported("NCCL graphs".into(), self.kind().name()))
    }
    /// Per-rank host issue profile since the last call, then reset (CUDA only).
    fn take_issue_profile(&mut self) -> Result<Vec<IssueProfile>> {
        Err(Error::Unsupported(
            "issue profile".into(),
            self.kind().name(),
        ))
    }
    /// Where the setup time went (CUDA only).
    fn setup_breakdown(&self) -> Option<SetupBreakdown> {
        None
    }
    /// Driver / hardware facts for reports.
    fn hardware(&self) -> Vec<String> {
        vec![]
    }
}
