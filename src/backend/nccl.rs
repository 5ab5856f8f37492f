//! NCCL on a backend's buffers: the call and the capability a backend
//! offers for it, reached through `Backend::nccl`. Only the CUDA backend
//! built with the `nccl` feature has it (`cuda/nccl.rs`, over the binding
//! in `cuda::nccl`); elsewhere the engine's NCCL calls are refused by
//! name.

use super::{Binding, CallTimeline};
use crate::element::{DataType, ReduceOp};
use crate::error::Result;
use crate::plan::Collective;
use std::sync::Arc;

/// An NCCL call on the same buffers.
#[derive(Debug, Clone)]
pub struct NcclCall {
    /// Which collective.
    pub collective: Collective,
    /// NCCL's count: all-reduce elements, reduce-scatter `recvcount`,
    /// all-gather `sendcount`.
    pub count: usize,
    /// The element type.
    pub dtype: DataType,
    /// The reduction.
    pub op: ReduceOp,
    /// Whether each rank's output is its input buffer.
    pub in_place: bool,
    /// Each rank's send and receive buffers.
    pub bind: Arc<Vec<Binding>>,
    /// How NCCL knows the buffers.
    pub buffers: NcclBuffers,
}

/// How NCCL knows the buffers of a call: nccl-tests' `-R 0`, `-R 1` and
/// `-R 2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NcclBuffers {
    /// Unregistered: NCCL copies through its own buffers where it needs to.
    #[default]
    Plain,
    /// Registered with each rank's communicator (`ncclCommRegister`,
    /// NCCL 2.19+) before the first call on them.
    Registered,
    /// Registered as symmetric windows (`ncclCommWindowRegister` with
    /// `NCCL_WIN_COLL_SYMMETRIC`, NCCL 2.27+), so that NCCL's symmetric
    /// kernels may run; the engine's buffers must come from NCCL's
    /// allocator (`Engine::nccl_memory`).
    Symmetric,
}

/// NCCL on a backend's buffers.
pub(crate) trait NcclBackend {
    /// Create one NCCL communicator per rank (one GPU per rank).
    #[cfg(feature = "nccl")]
    fn nccl_init(&mut self, lib: &crate::cuda::nccl::Nccl) -> Result<()>;
    /// Allocate every buffer from here on with NCCL's allocator
    /// (`ncclMemAlloc`), the memory symmetric windows need.
    #[cfg(feature = "nccl")]
    fn nccl_memory(&mut self, lib: &crate::cuda::nccl::Nccl) -> Result<()>;
    /// Launch an NCCL collective on every rank.
    fn launch_nccl(&mut self, call: &NcclCall) -> Result<()>;
    /// Capture `calls` NCCL calls per rank into a CUDA graph.
    fn nccl_graph_capture(&mut self, call: &NcclCall, calls: usize) -> Result<()>;
    /// Replay the captured NCCL graph on every rank.
    fn launch_nccl_graph(&mut self) -> Result<()>;
    /// Time the following NCCL calls (start and end of each on every rank,
    /// on the same clock as [`Profiling::take_timeline`]), for a comparison
    /// with ringreduce's own calls.
    fn set_nccl_timing(&mut self, on: bool);
    /// The timings of the NCCL calls made with NCCL timing on since the last
    /// take: one [`CallTimeline`] per call, one [`OpTime`] (op 0) per rank.
    fn take_nccl_timeline(&mut self) -> Result<Vec<CallTimeline>>;
}
