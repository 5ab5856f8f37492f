//! The memory a CPU rank's buffer lives in, as the links make it: the
//! process's heap (ranks as threads), a shared mapping (ranks as
//! processes), or the caller's own slice lent for one call.

use crate::error::{Error, Result};

/// One rank's buffer as this process holds it.
pub(crate) enum Storage {
    /// Heap memory of this process: 8-byte words, so every element type is
    /// aligned.
    Heap(Vec<u64>),
    /// A shared-memory mapping (page-aligned): this rank's own buffer, or a
    /// peer process's, in the multi-process mode.
    Shared(crate::sys::shm::Mapping),
    /// The caller's own slice, lent for one host-slice call
    /// ([`crate::sys::lend`]): no copy in or out.
    Lent(crate::sys::lend::Loan),
}

impl Storage {
    /// This process's own bytes (heap or mapping); a lent slice is only
    /// accessed during a call, through the CPU backend's lock on it.
    pub(crate) fn bytes(&mut self) -> Result<&mut [u8]> {
        match self {
            Storage::Heap(v) => Ok(bytemuck::cast_slice_mut(v)),
            Storage::Shared(m) => Ok(m.bytes_mut()),
            Storage::Lent(_) => Err(Error::internal(
                "a lent slice is read and written only by its call",
            )),
        }
    }
}
