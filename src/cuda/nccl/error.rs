//! [`NcclError`]: what loading NCCL or an NCCL call can fail with.

use super::types::{ResultCode, Version};

/// Errors from loading NCCL or from an NCCL call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NcclError {
    /// Library not found; `tried` lists every path/name attempted, in order, with the reason
    /// each failed, and where Python wheels were looked for.
    #[error("NCCL library not found (tried: {})", tried.join("; "))]
    NotFound { tried: Vec<String> },
    /// The explicitly given library could not be opened.
    #[error("NCCL library {path} could not be loaded: {reason}")]
    Load { path: String, reason: String },
    /// The library lacks a symbol every supported NCCL has.
    #[error("NCCL library {path} lacks symbol {symbol}")]
    Symbol { path: String, symbol: &'static str },
    /// An optional entry point this (older) NCCL does not export.
    #[error("{call} is not available in NCCL {version} ({path} does not export it)")]
    Unavailable {
        call: &'static str,
        version: Version,
        path: String,
    },
    /// An argument value (datatype, operation) this NCCL version does not know.
    #[error("{call}: {what} needs NCCL >= {needs}, but {path} is NCCL {version}")]
    Unsupported {
        call: &'static str,
        what: String,
        needs: Version,
        version: Version,
        path: String,
    },
    /// Arguments rejected before calling NCCL.
    #[error("{call}: invalid argument: {reason}")]
    Invalid { call: &'static str, reason: String },
    /// An NCCL call returned non-success: the call, the code and its name, NCCL's error
    /// string and, where NCCL has one, its last-error text.
    #[error("{call} failed: {code}: {message}{}", last_error_suffix(last_error.as_deref()))]
    Call {
        call: &'static str,
        code: ResultCode,
        message: String,
        last_error: Option<String>,
    },
}

fn last_error_suffix(last: Option<&str>) -> String {
    last.map(|l| format!(" (last error: {l})"))
        .unwrap_or_default()
}

impl From<NcclError> for crate::error::Error {
    fn from(e: NcclError) -> Self {
        crate::error::Error::Nccl(std::sync::Arc::new(e))
    }
}
