//! Typed errors. Every error names what it can: the rank, the device, the
//! step of the plan and the driver call.

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ringreduce.
// New failures get new variants: a match on `Error` outside this crate
// needs a wildcard arm.
#[non_exhaustive]
#[derive(Debug, Error)]
pub enum Error {
    #[error("the number of ranks must be at least 1 (got 0)")]
    ZeroRanks,
    #[error("{ranks} ranks requested; at most {max} (one host thread each)")]
    TooManyRanks { ranks: usize, max: usize },
    #[error("expected one buffer per rank: {ranks} ranks but {buffers} buffers")]
    WrongBufferCount { ranks: usize, buffers: usize },
    #[error("all ranks must have buffers of the same length: rank 0 has {expected} elements, rank {rank} has {found}")]
    LengthMismatch {
        rank: usize,
        expected: usize,
        found: usize,
    },
    #[error("rank {rank}: {what} has {found} elements, expected {expected}")]
    BufferSize {
        rank: usize,
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("{what} needs {} of {memory} but {} {}; {hint}",
        crate::size::format_bytes_about(*need), crate::size::format_bytes_about(*available),
        if *is_free { "are free" } else { "exist" })]
    OutOfMemory {
        what: String,
        memory: String,
        need: u64,
        available: u64,
        is_free: bool,
        hint: String,
    },
    #[error(
        "{what}: {count} elements of {elem_size} bytes x {ranks} ranks overflows the address space"
    )]
    TooLarge {
        what: &'static str,
        count: u128,
        elem_size: usize,
        ranks: usize,
    },
    #[error("invalid size {input:?}: {reason}")]
    BadSize { input: String, reason: String },
    #[error("invalid argument: {0}")]
    BadArgument(String),
    /// A malformed or out-of-range environment variable (see
    /// [`crate::param`]): its name, its value, why it is refused and what
    /// is accepted.
    #[error("environment variable {var}={value:?}: {reason}; accepted: {expected}")]
    Env {
        var: &'static str,
        value: String,
        reason: String,
        expected: String,
    },
    #[error("the CUDA backend is unavailable: {0}")]
    NoCuda(String),
    #[error("rank {rank} (GPU {device}){}: {call} failed: {message}", step.as_ref().map(|s| format!(", {s}")).unwrap_or_default())]
    Cuda {
        rank: usize,
        device: usize,
        call: &'static str,
        message: String,
        step: Option<String>,
    },
    #[error("CUDA setup: {call} failed: {message}")]
    CudaSetup { call: &'static str, message: String },
    #[error(transparent)]
    Nccl(#[from] crate::cuda::nccl::NcclError),
    #[error("rank {rank}: NCCL: {message}")]
    NcclRank { rank: usize, message: String },
    #[error("{0} is not supported by the {1} backend")]
    Unsupported(String, &'static str),
    #[error("rank {rank}: waited more than {seconds} s for {what}; the collective is stuck (set the limit with RINGREDUCE_TIMEOUT or EngineConfig::timeout)")]
    Timeout {
        rank: usize,
        what: String,
        seconds: f64,
    },
    #[error("rank {rank}: aborted while {what}")]
    Aborted { rank: usize, what: String },
    #[error("rank {rank}: {message}")]
    Worker { rank: usize, message: String },
    #[error("the engine must be rebuilt: {reason}")]
    Poisoned { reason: String },
    /// Several ranks failed in one call; each names its rank.
    #[error("{} ranks failed:\n  {}", .0.len(), .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n  "))]
    Ranks(Vec<Error>),
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
    /// Standard output was closed (e.g. `| head -1`): the command ends
    /// quietly.
    #[error("standard output closed")]
    Closed,
}

impl Error {
    /// The rank the error is about, if it names one.
    pub fn rank(&self) -> Option<usize> {
        match self {
            Error::Cuda { rank, .. }
            | Error::NcclRank { rank, .. }
            | Error::Timeout { rank, .. }
            | Error::Aborted { rank, .. }
            | Error::Worker { rank, .. }
            | Error::BufferSize { rank, .. }
            | Error::LengthMismatch { rank, .. } => Some(*rank),
            _ => None,
        }
    }

    /// Whether this error leaves the engine unusable (a device-side fault).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::Poisoned { .. })
    }
}
