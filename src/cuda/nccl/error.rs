//! [`NcclError`]: what loading NCCL or an NCCL call can fail with.

use super::types::{ResultCode, Version};

/// Errors from loading NCCL or from an NCCL call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NcclError {
    /// Library not found; `tried` lists every path/name attempted, in order, with the reason
    /// each failed, and where Python wheels were looked for.
    #[error("NCCL library not found (tried: {})", tried.join("; "))]
    NotFound {
        /// Every path or name tried, with why it failed.
        tried: Vec<String>,
    },
    /// The explicitly given library could not be opened.
    #[error("NCCL library {path} could not be loaded: {reason}")]
    Load {
        /// The library.
        path: String,
        /// Why it could not be loaded.
        reason: String,
    },
    /// The library lacks a symbol every supported NCCL has.
    #[error("NCCL library {path} lacks symbol {symbol}")]
    Symbol {
        /// The library.
        path: String,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// An optional entry point this (older) NCCL does not export.
    #[error("{call} is not available in NCCL {version} ({path} does not export it)")]
    Unavailable {
        /// The entry point.
        call: &'static str,
        /// The loaded NCCL's version.
        version: Version,
        /// The library.
        path: String,
    },
    /// An argument value (datatype, operation) this NCCL version does not know.
    #[error("{call}: {what} needs NCCL >= {needs}, but {path} is NCCL {version}")]
    Unsupported {
        /// The call.
        call: &'static str,
        /// The argument value.
        what: String,
        /// The first NCCL version that knows it.
        needs: Version,
        /// The loaded NCCL's version.
        version: Version,
        /// The library.
        path: String,
    },
    /// Arguments rejected before calling NCCL.
    #[error("{call}: invalid argument: {reason}")]
    Invalid {
        /// The call.
        call: &'static str,
        /// What is wrong with its arguments.
        reason: String,
    },
    /// An NCCL call returned non-success: the call, the code and its name, NCCL's error
    /// string and, where NCCL has one, its last-error text.
    #[error("{call} failed: {code}: {message}{}", last_error_suffix(last_error.as_deref()))]
    Call {
        /// The call.
        call: &'static str,
        /// NCCL's result code.
        code: ResultCode,
        /// NCCL's error string for it.
        message: String,
        /// NCCL's last-error text, where it has one.
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
