//! Plain NCCL values and the argument checks that need no library and no GPU:
//! version codes, `ncclResult_t`, `ncclDataType_t` / `ncclRedOp_t` tables and the
//! validation of a collective's arguments against one NCCL version.

#![deny(unsafe_code)]

use std::fmt;
use std::path::Path;

use super::binding::NcclError;

/// An NCCL version, ordered by `(major, minor, patch)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch level.
    pub patch: u32,
}

impl Version {
    /// The version `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// Decodes an `ncclGetVersion` code: `major*10000 + minor*100 + patch` since NCCL 2.9,
    /// `major*1000 + minor*100 + patch` before (codes below 10000). `None` for codes <= 0.
    pub(crate) fn from_code(code: i32) -> Option<Version> {
        let code = u32::try_from(code).ok().filter(|&c| c > 0)?;
        let (major, minor, patch) = if code >= 10_000 {
            (code / 10_000, (code % 10_000) / 100, code % 100)
        } else {
            (code / 1_000, (code % 1_000) / 100, code % 100)
        };
        Some(Version::new(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// `ncclGetVersion` code to `"major.minor.patch"` (e.g. `22803` -> `"2.28.3"`); codes <= 0
/// are printed as they are.
pub(crate) fn version_code_to_string(code: i32) -> String {
    match Version::from_code(code) {
        Some(v) => v.to_string(),
        None => code.to_string(),
    }
}

/// A non-success `ncclResult_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultCode {
    /// `ncclUnhandledCudaError` (1): a CUDA call inside NCCL failed.
    UnhandledCudaError,
    /// `ncclSystemError` (2): a system call (socket, shared memory, ...) failed.
    SystemError,
    /// `ncclInternalError` (3).
    InternalError,
    /// `ncclInvalidArgument` (4).
    InvalidArgument,
    /// `ncclInvalidUsage` (5).
    InvalidUsage,
    /// `ncclRemoteError` (6, NCCL >= 2.12): a peer failed or went away.
    RemoteError,
    /// `ncclInProgress` (7, NCCL >= 2.14): a non-blocking operation is still running.
    InProgress,
    /// Any other value (a newer NCCL, or `ncclSuccess` where an error was expected).
    Other(i32),
}

impl ResultCode {
    /// The code for a raw `ncclResult_t` value.
    pub fn from_raw(code: i32) -> ResultCode {
        match code {
            1 => ResultCode::UnhandledCudaError,
            2 => ResultCode::SystemError,
            3 => ResultCode::InternalError,
            4 => ResultCode::InvalidArgument,
            5 => ResultCode::InvalidUsage,
            6 => ResultCode::RemoteError,
            7 => ResultCode::InProgress,
            other => ResultCode::Other(other),
        }
    }

    /// The raw `ncclResult_t` value.
    pub fn raw(self) -> i32 {
        match self {
            ResultCode::UnhandledCudaError => 1,
            ResultCode::SystemError => 2,
            ResultCode::InternalError => 3,
            ResultCode::InvalidArgument => 4,
            ResultCode::InvalidUsage => 5,
            ResultCode::RemoteError => 6,
            ResultCode::InProgress => 7,
            ResultCode::Other(code) => code,
        }
    }

    /// The enumerator's name in `nccl.h`, `None` for [`ResultCode::Other`].
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            ResultCode::UnhandledCudaError => "ncclUnhandledCudaError",
            ResultCode::SystemError => "ncclSystemError",
            ResultCode::InternalError => "ncclInternalError",
            ResultCode::InvalidArgument => "ncclInvalidArgument",
            ResultCode::InvalidUsage => "ncclInvalidUsage",
            ResultCode::RemoteError => "ncclRemoteError",
            ResultCode::InProgress => "ncclInProgress",
            ResultCode::Other(_) => return None,
        })
    }
}

impl fmt::Display for ResultCode {
    /// `ncclInvalidUsage (5)`, or `ncclResult_t 42` for an unknown value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.raw()),
            None => write!(f, "ncclResult_t {}", self.raw()),
        }
    }
}

// The whole table of NCCL's values, as nccl.h has it; the engine maps its
// own DataType and ReduceOp, the binding's tests use the rest.
#[allow(dead_code)]
/// `ncclDataType_t` values, as the `int` NCCL takes.
pub mod datatype {
    pub const INT8: i32 = 0;
    pub const UINT8: i32 = 1;
    pub const INT32: i32 = 2;
    pub const UINT32: i32 = 3;
    pub const INT64: i32 = 4;
    pub const UINT64: i32 = 5;
    pub const FLOAT16: i32 = 6;
    pub const FLOAT32: i32 = 7;
    pub const FLOAT64: i32 = 8;
    /// NCCL >= 2.10.
    pub const BFLOAT16: i32 = 9;
    /// NCCL >= 2.24.
    pub const FLOAT8E4M3: i32 = 10;
    /// NCCL >= 2.24.
    pub const FLOAT8E5M2: i32 = 11;
}

#[allow(dead_code)]
/// `ncclRedOp_t` values, as the `int` NCCL takes (only the built-in operations).
pub mod redop {
    pub const SUM: i32 = 0;
    pub const PROD: i32 = 1;
    pub const MAX: i32 = 2;
    pub const MIN: i32 = 3;
    /// NCCL >= 2.10.
    pub const AVG: i32 = 4;
}

/// The first NCCL 2 release: everything older is not NCCL 2's API at all.
const NCCL_2: Version = Version::new(2, 0, 0);
/// `ncclBfloat16` and `ncclAvg` arrived in NCCL 2.10.
const NCCL_2_10: Version = Version::new(2, 10, 0);
/// The fp8 types arrived in NCCL 2.24.
const NCCL_2_24: Version = Version::new(2, 24, 0);

/// `(name, element size in bytes, first version)` of each `ncclDataType_t`, by value.
const DATATYPES: [(&str, usize, Version); 12] = [
    ("ncclInt8", 1, NCCL_2),
    ("ncclUint8", 1, NCCL_2),
    ("ncclInt32", 4, NCCL_2),
    ("ncclUint32", 4, NCCL_2),
    ("ncclInt64", 8, NCCL_2),
    ("ncclUint64", 8, NCCL_2),
    ("ncclFloat16", 2, NCCL_2),
    ("ncclFloat32", 4, NCCL_2),
    ("ncclFloat64", 8, NCCL_2),
    ("ncclBfloat16", 2, NCCL_2_10),
    ("ncclFloat8e4m3", 1, NCCL_2_24),
    ("ncclFloat8e5m2", 1, NCCL_2_24),
];

/// `(name, first version)` of each built-in `ncclRedOp_t`, by value.
const REDOPS: [(&str, Version); 5] = [
    ("ncclSum", NCCL_2),
    ("ncclProd", NCCL_2),
    ("ncclMax", NCCL_2),
    ("ncclMin", NCCL_2),
    ("ncclAvg", NCCL_2_10),
];

fn datatype_entry(datatype: i32) -> Option<(&'static str, usize, Version)> {
    DATATYPES.get(usize::try_from(datatype).ok()?).copied()
}

fn redop_entry(op: i32) -> Option<(&'static str, Version)> {
    REDOPS.get(usize::try_from(op).ok()?).copied()
}

/// The `nccl.h` name of a datatype value (`7` -> `ncclFloat32`).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn datatype_name(datatype: i32) -> Option<&'static str> {
    datatype_entry(datatype).map(|(name, _, _)| name)
}

/// The element size in bytes of a datatype value.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn datatype_size(datatype: i32) -> Option<usize> {
    datatype_entry(datatype).map(|(_, size, _)| size)
}

/// The `nccl.h` name of a built-in reduction value (`0` -> `ncclSum`).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn op_name(op: i32) -> Option<&'static str> {
    redop_entry(op).map(|(name, _)| name)
}

/// The collectives this binding checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Collective {
    AllReduce,
    ReduceScatter,
    AllGather,
}

impl Collective {
    pub(super) fn call(self) -> &'static str {
        match self {
            Collective::AllReduce => "ncclAllReduce",
            Collective::ReduceScatter => "ncclReduceScatter",
            Collective::AllGather => "ncclAllGather",
        }
    }
}

/// The arguments of one collective call, as they will be passed to NCCL.
#[derive(Debug, Clone, Copy)]
pub(super) struct CollArgs {
    pub kind: Collective,
    pub send: u64,
    pub recv: u64,
    /// `count` (all-reduce), `recvcount` (reduce-scatter) or `sendcount` (all-gather).
    pub count: usize,
    pub datatype: i32,
    /// `None` for all-gather, which takes no operation.
    pub op: Option<i32>,
    pub nranks: usize,
    pub rank: usize,
}

/// Byte range `[start, end)` of one buffer; `None` when it is empty.
type Span = Option<(u64, u64)>;

impl CollArgs {
    /// Checks everything that can be checked without the GPU: the datatype and operation
    /// exist in NCCL `version`, the element counts and byte sizes fit the address space,
    /// non-empty buffers are not null, and the buffers overlap only in NCCL's in-place
    /// layout. `path` names the library in version errors.
    pub(super) fn validate(&self, version: Version, path: &Path) -> Result<(), NcclError> {
        let call = self.kind.call();
        let invalid = |reason: String| NcclError::Invalid { call, reason };
        let unsupported = |what: String, needs: Version| NcclError::Unsupported {
            call,
            what,
            needs,
            version,
            path: path.display().to_string(),
        };

        let Some((type_name, size, since)) = datatype_entry(self.datatype) else {
            return Err(invalid(format!(
                "datatype {} is not an ncclDataType_t (known: 0..={})",
                self.datatype,
                DATATYPES.len() - 1
            )));
        };
        if version < since {
            return Err(unsupported(
                format!("datatype {} ({type_name})", self.datatype),
                since,
            ));
        }
        if let Some(op) = self.op {
            let Some((op_name, since)) = redop_entry(op) else {
                return Err(invalid(format!(
                    "op {op} is not a built-in ncclRedOp_t (known: 0..={})",
                    REDOPS.len() - 1
                )));
            };
            if version < since {
                return Err(unsupported(format!("op {op} ({op_name})"), since));
            }
        }
        if self.nranks == 0 || self.rank >= self.nranks {
            return Err(invalid(format!(
                "communicator rank {} of {} ranks",
                self.rank, self.nranks
            )));
        }

        // Element counts of the send and receive buffers, and of the in-place offset.
        let total = || {
            self.count.checked_mul(self.nranks).ok_or_else(|| {
                invalid(format!(
                    "count {} times {} ranks overflows usize",
                    self.count, self.nranks
                ))
            })
        };
        // `rank * count <= total` (rank < nranks), so the offset cannot overflow.
        let (send_elems, recv_elems, offset_elems) = match self.kind {
            Collective::AllReduce => (self.count, self.count, 0),
            Collective::ReduceScatter => (total()?, self.count, self.rank * self.count),
            Collective::AllGather => (self.count, total()?, self.rank * self.count),
        };
        let bytes = |elems: usize, what: &str| {
            elems
                .checked_mul(size)
                .filter(|&b| isize::try_from(b).is_ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "{what} of {elems} x {type_name} ({size} B each) does not fit the address space"
                    ))
                })
        };
        let send_bytes = bytes(send_elems, "sendbuff")?;
        let recv_bytes = bytes(recv_elems, "recvbuff")?;
        let offset = bytes(offset_elems, "in-place offset")?;

        let send = span(self.send, send_bytes, "sendbuff").map_err(invalid)?;
        let recv = span(self.recv, recv_bytes, "recvbuff").map_err(invalid)?;
        let (Some(s), Some(r)) = (send, recv) else {
            return Ok(());
        };
        // NCCL's in-place layouts: the smaller buffer is the rank's slice of the larger one.
        let (in_place, rule) = match self.kind {
            Collective::AllReduce => (s.0 == r.0, "recvbuff == sendbuff"),
            Collective::ReduceScatter => (
                s.0.checked_add(offset as u64) == Some(r.0),
                "recvbuff == sendbuff + rank * recvcount * size",
            ),
            Collective::AllGather => (
                r.0.checked_add(offset as u64) == Some(s.0),
                "sendbuff == recvbuff + rank * sendcount * size",
            ),
        };
        if !in_place && s.0 < r.1 && r.0 < s.1 {
            return Err(invalid(format!(
                "sendbuff [{:#x}, {:#x}) and recvbuff [{:#x}, {:#x}) overlap but are not \
                 the in-place layout ({rule}, rank {})",
                s.0, s.1, r.0, r.1, self.rank
            )));
        }
        Ok(())
    }
}

/// The byte range of a buffer of `bytes` bytes at device address `ptr`.
fn span(ptr: u64, bytes: usize, what: &str) -> Result<Span, String> {
    if bytes == 0 {
        return Ok(None);
    }
    if ptr == 0 {
        return Err(format!("{what} is null but holds {bytes} bytes"));
    }
    if usize::try_from(ptr).is_err() {
        return Err(format!("{what} {ptr:#x} is not an address of this machine"));
    }
    match ptr.checked_add(bytes as u64) {
        Some(end) => Ok(Some((ptr, end))),
        None => Err(format!(
            "{what} {ptr:#x} + {bytes} bytes wraps around the address space"
        )),
    }
}

#[cfg(test)]
mod tests;
