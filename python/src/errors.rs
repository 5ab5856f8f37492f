//! `ringreduce.Error` and its subclasses, and the boundary every call
//! crosses: the interpreter lock released, panics caught.

use pyo3::create_exception;
use pyo3::prelude::*;
use ringreduce::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};

create_exception!(
    _ringreduce,
    RingError,
    pyo3::exceptions::PyException,
    "Any error of ringreduce; the message is the engine's."
);
create_exception!(
    _ringreduce,
    ArgumentError,
    RingError,
    "A bad argument: type, device, shape, stride, count, size, rank, option."
);
create_exception!(
    _ringreduce,
    MismatchError,
    RingError,
    "The ranks asked for different calls (collective, type, op, count, root)."
);
create_exception!(
    _ringreduce,
    TimeoutError,
    RingError,
    "A bounded wait ran out (the engine's timeout)."
);
create_exception!(
    _ringreduce,
    PeerError,
    RingError,
    "Another rank failed, died, left or aborted the run, or called with bad arguments (the message names it); or this engine must be rebuilt."
);
create_exception!(
    _ringreduce,
    UnavailableError,
    RingError,
    "What was asked for is not available here (no CUDA, not supported by this backend)."
);
create_exception!(
    _ringreduce,
    CudaError,
    RingError,
    "The CUDA driver or NCCL failed."
);
create_exception!(
    _ringreduce,
    InternalError,
    RingError,
    "A bug in ringreduce (a broken invariant or a caught panic)."
);

/// The exception class of an engine error.
#[derive(Clone, Copy)]
enum Kind {
    Argument,
    Mismatch,
    Timeout,
    Peer,
    Unavailable,
    Cuda,
    Internal,
    Other,
}

fn kind(e: &Error) -> Kind {
    use ringreduce::ErrorKind as K;
    match e.kind() {
        K::BadArgument | K::BufferSize | K::Env | K::OutOfMemory => Kind::Argument,
        K::Mismatch => Kind::Mismatch,
        K::Timeout => Kind::Timeout,
        K::Aborted | K::RankFailed | K::PeerFailed | K::PeerArgument | K::Poisoned => Kind::Peer,
        K::Unsupported => Kind::Unavailable,
        K::Cuda | K::CudaSetup | K::Nccl => Kind::Cuda,
        K::Internal | K::Plan => Kind::Internal,
        _ => Kind::Other,
    }
}

/// The Python exception for an engine error, with its message.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match kind(&e) {
        Kind::Argument => ArgumentError::new_err(msg),
        Kind::Mismatch => MismatchError::new_err(msg),
        Kind::Timeout => TimeoutError::new_err(msg),
        Kind::Peer => PeerError::new_err(msg),
        Kind::Unavailable => UnavailableError::new_err(msg),
        Kind::Cuda => CudaError::new_err(msg),
        Kind::Internal => InternalError::new_err(msg),
        Kind::Other => RingError::new_err(msg),
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Run `f` with the interpreter lock released; an error becomes its
/// exception, a panic an `InternalError` (never a Python-level crash).
pub fn guarded<R: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> ringreduce::Result<R> + Send,
) -> PyResult<R> {
    let out = py.detach(move || catch_unwind(AssertUnwindSafe(f)));
    match out {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(to_py(e)),
        Err(p) => Err(InternalError::new_err(format!(
            "ringreduce panicked (a bug; please report it): {}",
            panic_text(&*p)
        ))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<RingError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("MismatchError", py.get_type::<MismatchError>())?;
    m.add("TimeoutError", py.get_type::<TimeoutError>())?;
    m.add("PeerError", py.get_type::<PeerError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
