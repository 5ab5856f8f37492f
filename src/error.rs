//! Typed errors. Every error names what it can: the rank, the device, the
//! step of the plan and the driver call.

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ringreduce.
///
/// `#[non_exhaustive]`: new kinds of failure may be added; match the ones
/// you handle and keep a catch-all arm. [`Error::rank`] names the rank an
/// error is about (for [`Error::PeerFailed`], the rank that failed, not the
/// one that noticed), and [`Error::is_fatal`] says whether the engine must
/// be rebuilt. Every error crosses thread and call-style boundaries whole
/// (`Error` is `Clone`): a per-rank call gets the same variant the
/// engine returned, never a string inside another one.
///
/// # One error per call, the same in every mode
///
/// A call returns one error whatever runs the ranks: the failure that
/// caused the others (a rank that failed, not the ranks that noticed it),
/// so `matches!(e, Error::Aborted { .. })` holds for an abort in every
/// mode. Only when several ranks failed on their own, each for its own
/// reason, is the error [`Error::Ranks`], whose [`Error::kind`] and
/// [`Error::rank`] are those of its first cause. [`Error::is_fatal`] is
/// true exactly when the communicator's next call returns
/// [`Error::Poisoned`]: a failure after data started to move (a rank that
/// failed, died, timed out or was aborted). Errors found before anything
/// moved (arguments, a mismatch, a plan refused) leave it usable.
#[derive(Debug, Error, Clone)]
#[non_exhaustive]
pub enum Error {
    /// An engine or plan of no ranks.
    #[error("the number of ranks must be at least 1 (got 0)")]
    ZeroRanks,
    /// More ranks than an engine runs.
    #[error("{ranks} ranks requested; at most {max} (one host thread each)")]
    TooManyRanks {
        /// The ranks asked for.
        ranks: usize,
        /// The most an engine runs ([`crate::plan::MAX_RANKS`]).
        max: usize,
    },
    /// A call given another number of buffers than it has ranks.
    #[error("expected one buffer per rank: {ranks} ranks but {buffers} buffers")]
    WrongBufferCount {
        /// The ranks of the call.
        ranks: usize,
        /// The buffers it was given.
        buffers: usize,
    },
    /// Ranks of one call given buffers of different lengths.
    #[error("all ranks must have buffers of the same length: rank 0 has {expected} elements, rank {rank} has {found}")]
    LengthMismatch {
        /// The first rank whose length differs from rank 0's.
        rank: usize,
        /// Rank 0's length, in elements.
        expected: usize,
        /// That rank's length.
        found: usize,
    },
    /// A rank's buffer of the wrong length for the call (NCCL's count
    /// decides what each buffer must hold).
    #[error("rank {rank}: {what} has {found} elements, expected {expected}")]
    BufferSize {
        /// The rank whose buffer it is.
        rank: usize,
        /// Which buffer ("input", "output", "in-place buffer", ...).
        what: &'static str,
        /// The elements the call needs there.
        expected: usize,
        /// The elements the buffer has.
        found: usize,
    },
    /// Memory that cannot be had (host or GPU), refused before it is asked
    /// for where it can be, never an abort of the process.
    #[error("{what} needs {} of {memory} but {} {}; {hint}",
        crate::size::format_bytes_about(*need), crate::size::format_bytes_about(*available),
        if *is_free { "are free" } else { "exist" })]
    OutOfMemory {
        /// What the memory was for.
        what: String,
        /// Which memory ("host memory", "GPU 0's memory", ...).
        memory: String,
        /// Bytes needed.
        need: u64,
        /// Bytes there are: free ones, or all the machine has.
        available: u64,
        /// Whether `available` counts the free bytes (else all there are).
        is_free: bool,
        /// What to do about it.
        hint: String,
    },
    /// A size whose bytes overflow the address space.
    #[error(
        "{what}: {count} elements of {elem_size} bytes x {ranks} ranks overflows the address space"
    )]
    TooLarge {
        /// What was to be that large ("plan", "call", ...).
        what: &'static str,
        /// Elements per rank.
        count: u128,
        /// Bytes per element.
        elem_size: usize,
        /// Ranks.
        ranks: usize,
    },
    /// An argument that cannot be used, with the reason.
    #[error("invalid argument: {0}")]
    BadArgument(String),
    /// A rank number outside the engine's ranks (`0..ranks`).
    #[error("rank {rank} does not exist (the engine has {ranks} ranks: 0..{ranks})")]
    #[non_exhaustive]
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
        /// The ranks there are.
        ranks: usize,
    },
    /// The ranks of one call asked for different things (another
    /// collective, op, length or place): what each rank that arrived asked
    /// for, in rank order. `rank` is the first rank whose call differs from
    /// the lowest-numbered rank's. Every rank of the call gets this error,
    /// at once.
    #[error("the ranks' calls do not match (rank {rank} differs): {}",
        asked.iter().map(|(r, a)| format!("rank {r} asked for {a}")).collect::<Vec<_>>().join("; "))]
    #[non_exhaustive]
    Mismatch {
        /// The first rank whose call differs.
        rank: usize,
        /// Each arrived rank and the call it asked for, in rank order.
        asked: Vec<(usize, String)>,
    },
    /// Rank `rank`'s own arguments to a call are wrong (an output of the
    /// wrong length, a root out of range): every other rank of the call
    /// gets this error, at once, and rank `rank` its own; nothing moved
    /// and the communicator stays usable.
    #[error("rank {rank} called with bad arguments: {reason} (no data moved)")]
    #[non_exhaustive]
    PeerArgument {
        /// The rank whose arguments are wrong.
        rank: usize,
        /// What is wrong with them.
        reason: String,
    },
    /// A malformed or out-of-range environment variable (`ringreduce env`
    /// lists them): its name, its value, why it is refused and what
    /// is accepted.
    #[error("environment variable {var}={value:?}: {reason}; accepted: {expected}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it is refused.
        reason: String,
        /// What is accepted.
        expected: String,
    },
    /// The CUDA backend cannot start here (no driver or GPU, or a build
    /// without the `cuda` feature), with the reason.
    #[error("the CUDA backend is unavailable: {0}")]
    NoCuda(String),
    /// A CUDA driver call of a rank failed.
    #[error("rank {rank} (GPU {device}){}: {call} failed: {message}", step.as_ref().map(|s| format!(", {s}")).unwrap_or_default())]
    Cuda {
        /// The rank that made the call.
        rank: usize,
        /// The rank's GPU.
        device: usize,
        /// The driver call (`cuMemcpyPeerAsync`, ...).
        call: &'static str,
        /// The driver's message.
        message: String,
        /// The plan's step the rank was at, where known.
        step: Option<String>,
    },
    /// A CUDA driver call while setting up (before any rank runs) failed.
    #[error("CUDA setup: {call} failed: {message}")]
    CudaSetup {
        /// The driver call.
        call: &'static str,
        /// The driver's message.
        message: String,
    },
    /// Loading or calling NCCL failed (with the `cuda` feature): the NCCL
    /// layer's own error, `cuda::nccl::NcclError` (`downcast_ref` reads it;
    /// kept as a trait object so that this bottom layer names no layer
    /// above it).
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Nccl(std::sync::Arc<dyn std::error::Error + Send + Sync>),
    /// NCCL failed on a rank, with its message.
    #[error("rank {rank}: NCCL: {message}")]
    NcclRank {
        /// The rank.
        rank: usize,
        /// What NCCL said.
        message: String,
    },
    /// An MPI call of the network transport failed (the `mpi` feature):
    /// the rank that made it, the peer MPI failed it for (none for a
    /// collective, or for a size refused before the call), the call and
    /// MPI's own message.
    #[error("rank {rank}: MPI: {call}{} failed: {message}", peer.map_or(String::new(), |p| format!(" with rank {p}")))]
    Mpi {
        /// The rank that made the call.
        rank: usize,
        /// The peer it was failed for, if any.
        peer: Option<usize>,
        /// The MPI call.
        call: &'static str,
        /// MPI's message.
        message: String,
    },
    /// Something the backend does not have at all: what, and the backend.
    #[error("{0} is not supported by the {1} backend")]
    Unsupported(String, &'static str),
    /// A capability the backend has, refused where it runs (over this
    /// transport or process model), with the reason.
    #[error("{what} are not available on the {backend} backend {over}: {reason}")]
    Refused {
        /// The capability ("stream-ordered calls", ...).
        what: &'static str,
        /// The backend that has it.
        backend: &'static str,
        /// Where it is refused ("with one rank per process", ...).
        over: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A bounded wait ran out: `what` says what was waited for (text for
    /// people), `wait` which kind of wait it was (for code).
    #[error("rank {rank}: waited more than {seconds} s for {what}; the collective is stuck (set the limit with RINGREDUCE_TIMEOUT or EngineConfig::timeout)")]
    Timeout {
        /// The rank that waited.
        rank: usize,
        /// What it waited for.
        what: String,
        /// The bound, in seconds.
        seconds: f64,
        /// Which kind of wait.
        wait: WaitKind,
    },
    /// A wait ended because the run was aborted: `what` says what was
    /// waited for (text for people), `wait` which kind of wait it was.
    #[error("rank {rank}: aborted while {what}")]
    Aborted {
        /// The rank that waited.
        rank: usize,
        /// What it waited for.
        what: String,
        /// Which kind of wait.
        wait: WaitKind,
    },
    /// A rank's host thread failed outside a driver call (it panicked, or
    /// its work could not be handed to it).
    #[error("rank {rank}: {message}")]
    Worker {
        /// The rank.
        rank: usize,
        /// What happened.
        message: String,
    },
    /// Another rank of the call failed (its error, or its process died):
    /// `rank` is the rank that failed, `reason` what happened to it, and
    /// `noticed` who noticed it while waiting for what (may be empty).
    #[error("rank {rank} failed: {reason}{}", if noticed.is_empty() { String::new() } else { format!(" ({noticed})") })]
    #[non_exhaustive]
    PeerFailed {
        /// The rank that failed.
        rank: usize,
        /// What happened to it.
        reason: String,
        /// Who noticed it, waiting for what (may be empty).
        noticed: String,
    },
    /// An earlier failure was fatal ([`Error::is_fatal`]): every later
    /// call is refused until the communicator (or engine) is rebuilt.
    #[error("the communicator must be rebuilt: {reason}")]
    #[non_exhaustive]
    Poisoned {
        /// The earlier failure.
        reason: String,
    },
    /// Several ranks failed in one call; each names its rank.
    #[error("{} ranks failed:\n  {}", .0.len(), .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n  "))]
    Ranks(Vec<Error>),
    /// A plan that cannot run here: the validator's findings, a plan or
    /// shape for another number of ranks or element size, a plan that
    /// names a buffer or signal that does not exist.
    #[error("plan error: {0}")]
    Plan(String),
    /// A broken internal invariant: a bug in ringreduce, not in the
    /// caller's plan or arguments (a rank thread's reply of the wrong type,
    /// a cache entry or handle that should exist and does not). Not fatal
    /// by itself ([`Error::is_fatal`]): the engine is left as it was.
    #[error("internal error: {what} (a bug in ringreduce; please report it)")]
    #[non_exhaustive]
    Internal {
        /// The invariant that broke.
        what: String,
    },
    /// A file or shared segment could not be used.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path (or `memfd:NAME`).
        path: String,
        /// The operating system's error.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
}

/// Which kind of wait ended in an [`Error::Timeout`] or an
/// [`Error::Aborted`]: set where the error is made, so that code can tell
/// the waits apart without reading the text of `what`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitKind {
    /// A host thread waiting for the ranks, a peer's signal, the job's
    /// store or a rank thread.
    Host,
    /// An exchange kernel on a GPU, waiting for its peer's push, gave up
    /// (its status word said so after a drain): the peer's kernel may still
    /// run, so the GPUs are drained again and the exchange numbering
    /// restarts.
    ExchangeKernel,
    /// [`Completion::wait`](crate::backend::ordered::Completion::wait): the
    /// GPU work of a stream-ordered call did not complete in time.
    Completion,
}

impl Error {
    /// The same error with the plan step it happened at named: a rank
    /// thread's failure gets the step in front, a wait (timeout, abort)
    /// gets it after; its kind and rank are kept. Other errors are
    /// returned as they are.
    pub(crate) fn in_step(self, step: &str) -> Error {
        match self {
            Error::Worker { rank, message } => Error::Worker {
                rank,
                message: format!("{step}: {message}"),
            },
            Error::Timeout {
                rank,
                what,
                seconds,
                wait,
            } => Error::Timeout {
                rank,
                what: format!("{what} (at {step})"),
                seconds,
                wait,
            },
            Error::Aborted { rank, what, wait } => Error::Aborted {
                rank,
                what: format!("{what} (at {step})"),
                wait,
            },
            e => e,
        }
    }

    /// The kind of wait of an [`Error::Timeout`] or [`Error::Aborted`]
    /// (for [`Error::Ranks`], of its root cause, [`Error::root`]); `None`
    /// for every other error.
    pub fn wait_kind(&self) -> Option<WaitKind> {
        match self {
            Error::Timeout { wait, .. } | Error::Aborted { wait, .. } => Some(*wait),
            Error::Ranks(_) => match self.root() {
                Error::Ranks(_) => None,
                e => e.wait_kind(),
            },
            _ => None,
        }
    }

    /// The rank the error is about, if it names one: the rank that failed
    /// ([`Error::PeerFailed`]: the dead or failed peer, not the rank that
    /// noticed), the rank whose arguments differ ([`Error::Mismatch`]), the
    /// rank that waited ([`Error::Timeout`], [`Error::Aborted`]). For
    /// [`Error::Ranks`], the rank of its root cause ([`Error::root`]).
    pub fn rank(&self) -> Option<usize> {
        match self {
            Error::Cuda { rank, .. }
            | Error::NcclRank { rank, .. }
            | Error::Mpi { rank, .. }
            | Error::Timeout { rank, .. }
            | Error::Aborted { rank, .. }
            | Error::Worker { rank, .. }
            | Error::PeerFailed { rank, .. }
            | Error::Mismatch { rank, .. }
            | Error::PeerArgument { rank, .. }
            | Error::RankOutOfRange { rank, .. }
            | Error::BufferSize { rank, .. }
            | Error::LengthMismatch { rank, .. } => Some(*rank),
            Error::Ranks(_) => self.root().rank(),
            _ => None,
        }
    }

    /// Whether this error leaves the communicator unusable: its next call
    /// returns [`Error::Poisoned`] and it must be rebuilt. True for a
    /// failure after data started to move, whichever rank it hit and in
    /// every mode: [`Error::Poisoned`], [`Error::Aborted`],
    /// [`Error::Timeout`], [`Error::PeerFailed`], [`Error::Worker`],
    /// [`Error::Cuda`] and [`Error::Mpi`] (and an
    /// [`Error::Ranks`] holding one). False for what was found before
    /// anything moved: arguments, a [`Error::Mismatch`], a peer's
    /// arguments ([`Error::PeerArgument`]), a plan or capability refused,
    /// memory that could not be had.
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Ranks(v) => v.iter().any(Error::is_fatal),
            e => e.kind().is_fatal(),
        }
    }

    /// What kind of error this is, for code (of [`Error::Ranks`]: of its
    /// first cause, [`Error::root`]).
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self.root() {
            Error::ZeroRanks | Error::TooManyRanks { .. } | Error::WrongBufferCount { .. } => {
                K::BadArgument
            }
            Error::LengthMismatch { .. } | Error::BufferSize { .. } => K::BufferSize,
            Error::OutOfMemory { .. } => K::OutOfMemory,
            Error::TooLarge { .. } | Error::BadArgument(_) => K::BadArgument,
            Error::RankOutOfRange { .. } => K::BadArgument,
            Error::Mismatch { .. } => K::Mismatch,
            Error::PeerArgument { .. } => K::PeerArgument,
            Error::Env { .. } => K::Env,
            Error::NoCuda(_) | Error::Unsupported(..) | Error::Refused { .. } => K::Unsupported,
            Error::Cuda { .. } => K::Cuda,
            Error::CudaSetup { .. } => K::CudaSetup,
            #[cfg(feature = "cuda")]
            Error::Nccl(_) => K::Nccl,
            Error::NcclRank { .. } => K::Nccl,
            Error::Mpi { .. } => K::Mpi,
            Error::Timeout { .. } => K::Timeout,
            Error::Aborted { .. } => K::Aborted,
            Error::Worker { .. } => K::RankFailed,
            Error::PeerFailed { .. } => K::PeerFailed,
            Error::Poisoned { .. } => K::Poisoned,
            Error::Plan(_) => K::Plan,
            Error::Io { .. } => K::Io,
            Error::Internal { .. } | Error::Ranks(_) => K::Internal,
        }
    }

    /// One error for a call from the errors of the ranks that failed it
    /// (in rank order): the cause, not the ranks that noticed it. The
    /// ranks' own failures (not [`Error::PeerFailed`], [`Error::Timeout`]
    /// or [`Error::Aborted`], which follow from another's) are the causes:
    /// one is returned as itself, several of different ranks as
    /// [`Error::Ranks`]. Without one, the first rank's own wait that
    /// ended ([`Error::Timeout`], [`Error::Aborted`]: the others were told
    /// of it as [`Error::PeerFailed`]), else the first error.
    pub(crate) fn of_ranks(mut errors: Vec<Error>) -> Error {
        if errors.len() <= 1 {
            return errors
                .pop()
                .unwrap_or_else(|| Error::internal("a call failed without an error"));
        }
        // Flatten errors that were already combined.
        let errors: Vec<Error> = errors
            .into_iter()
            .flat_map(|e| match e {
                Error::Ranks(v) => v,
                e => vec![e],
            })
            .collect();
        let follows = |e: &Error| {
            matches!(
                e,
                Error::PeerFailed { .. } | Error::Timeout { .. } | Error::Aborted { .. }
            )
        };
        let mut causes: Vec<Error> = Vec::new();
        for e in errors.iter().filter(|e| !follows(e)) {
            // The same cause seen by several ranks is one cause.
            if !causes.iter().any(|c| c.to_string() == e.to_string()) {
                causes.push(e.clone());
            }
        }
        match causes.len() {
            1 => return causes.remove(0),
            0 => {}
            _ => return Error::Ranks(causes),
        }
        errors
            .iter()
            .find(|e| !matches!(e, Error::PeerFailed { .. }))
            .or_else(|| errors.first())
            .cloned()
            .unwrap_or_else(|| Error::internal("a call failed without an error"))
    }

    /// An [`Error::Internal`]: `what` is the invariant that does not hold.
    pub fn internal(what: impl Into<String>) -> Error {
        Error::Internal { what: what.into() }
    }

    /// An [`Error::Io`] on `path`.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source: std::sync::Arc::new(source),
        }
    }

    /// [`Error::io`] of `path`, for `map_err`.
    pub(crate) fn io_at(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
        move |e| Error::io(path.display().to_string(), e)
    }

    /// Whether this is a bug in ringreduce ([`Error::Internal`]; for
    /// [`Error::Ranks`], its root cause).
    pub fn is_internal(&self) -> bool {
        matches!(self.root(), Error::Internal { .. })
    }

    /// A `PeerFailed` error for rank `rank`, which failed with `why` (an
    /// error's text: a leading `rank <rank>: ` is dropped, the variant says
    /// it), noticed by `noticed` (may be empty).
    pub(crate) fn peer_failed(rank: usize, why: &str, noticed: impl Into<String>) -> Error {
        let prefix = format!("rank {rank}: ");
        Error::PeerFailed {
            rank,
            reason: why.strip_prefix(&prefix).unwrap_or(why).to_string(),
            noticed: noticed.into(),
        }
    }

    /// The error that caused the others: for [`Error::Ranks`], the first
    /// error that is not a rank noticing another's failure
    /// ([`Error::PeerFailed`]), else the first; any other error is its own
    /// root.
    pub fn root(&self) -> &Error {
        match self {
            Error::Ranks(v) => v
                .iter()
                .map(Error::root)
                .find(|e| !matches!(e, Error::PeerFailed { .. }))
                .or_else(|| v.first().map(Error::root))
                .unwrap_or(self),
            e => e,
        }
    }
}

/// What kind of error an [`enum@Error`] is ([`Error::kind`]): one name per
/// cause, with no fields, for code that reacts to errors (and for the
/// Python exceptions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument of the caller's (a rank count, size, root, option).
    BadArgument,
    /// A buffer of the wrong length.
    BufferSize,
    /// Memory that could not be had.
    OutOfMemory,
    /// The ranks asked for different calls.
    Mismatch,
    /// Another rank called with bad arguments.
    PeerArgument,
    /// A malformed environment variable.
    Env,
    /// Not available here (no CUDA, a capability this backend or
    /// transport does not have).
    Unsupported,
    /// The CUDA driver failed inside a call.
    Cuda,
    /// Setting CUDA up failed (a context, a module, peer access).
    CudaSetup,
    /// NCCL failed.
    Nccl,
    /// MPI failed.
    Mpi,
    /// A bounded wait ran out.
    Timeout,
    /// The run was aborted.
    Aborted,
    /// This rank's own thread or step failed inside a call.
    RankFailed,
    /// Another rank failed, died or left.
    PeerFailed,
    /// The communicator must be rebuilt.
    Poisoned,
    /// A plan that cannot run here.
    Plan,
    /// A file or stream could not be used.
    Io,
    /// A bug in ringreduce.
    Internal,
}

impl ErrorKind {
    /// Whether errors of this kind leave the communicator unusable
    /// ([`Error::is_fatal`]).
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            ErrorKind::Timeout
                | ErrorKind::Aborted
                | ErrorKind::RankFailed
                | ErrorKind::PeerFailed
                | ErrorKind::Poisoned
                | ErrorKind::Cuda
                | ErrorKind::Mpi
        )
    }
}

#[cfg(test)]
mod tests;
