//! Typed errors. Every error names what it can: the rank, the device, the call.

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ringreduce.
#[derive(Debug, Error)]
pub enum Error {
    #[error("the number of ranks must be at least 1 (got 0)")]
    ZeroRanks,
    #[error("expected one buffer per rank: {ranks} ranks but {buffers} buffers")]
    WrongBufferCount { ranks: usize, buffers: usize },
    #[error("all ranks must have buffers of the same length: rank 0 has {expected} elements, rank {rank} has {found}")]
    LengthMismatch {
        rank: usize,
        expected: usize,
        found: usize,
    },
    #[error("rank {rank}: send buffer has {send} elements but receive buffer has {recv}")]
    SendRecvMismatch {
        rank: usize,
        send: usize,
        recv: usize,
    },
    #[error("{what}: {count} elements of {elem_size} bytes per rank x {ranks} ranks does not fit in memory ({detail})")]
    TooLarge {
        what: &'static str,
        count: u128,
        elem_size: usize,
        ranks: usize,
        detail: String,
    },
    #[error("invalid size {input:?}: {reason}")]
    BadSize { input: String, reason: String },
    #[error("invalid argument: {0}")]
    BadArgument(String),
    #[error("the CUDA backend is unavailable: {0}")]
    NoCuda(String),
    #[error("rank {rank} (device {device}): {call} failed: {message}")]
    Cuda {
        rank: usize,
        device: usize,
        call: &'static str,
        message: String,
    },
    #[error("CUDA setup: {call} failed: {message}")]
    CudaSetup { call: &'static str, message: String },
    #[error(transparent)]
    Nccl(#[from] crate::cuda::nccl::NcclError),
    #[error("rank {rank}: NCCL: {message}")]
    NcclRank { rank: usize, message: String },
    #[error("{0} is not supported by the {1} backend")]
    Unsupported(String, &'static str),
    #[error("rank {rank}: waited more than {seconds} s for {what}; the collective is stuck")]
    Timeout {
        rank: usize,
        what: String,
        seconds: u64,
    },
    #[error("rank {rank}: the rank thread failed: {message}")]
    Worker { rank: usize, message: String },
    #[error("plan error: {0}")]
    Plan(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("report: {0}")]
    Report(String),
}
