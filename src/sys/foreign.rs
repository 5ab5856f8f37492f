//! Host memory another runtime owns (a Python buffer: a numpy array, a CPU
//! torch tensor), described by address and length, as slices for one call.
//!
//! The caller (the Python package) reads an array's address and length
//! from the array itself (`__array_interface__`, `data_ptr()`), checks that
//! it is a C-contiguous host array of the right type and size, and keeps
//! the array alive until the call returns. [`check`] makes what the
//! compiler cannot see explicit: no null address with a length, no output
//! overlapping another buffer of the call, no length that wraps the
//! address space; [`host_slices`] turns the described buffers into slices
//! after that check, under a contract only the caller can keep.

use crate::error::Error;

/// A host buffer as another runtime described it: start address and
/// length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSpan {
    /// The first byte's address.
    pub addr: usize,
    /// Its length in bytes.
    pub bytes: usize,
}

impl HostSpan {
    fn end(&self) -> usize {
        self.addr.saturating_add(self.bytes)
    }

    fn overlaps(&self, other: &HostSpan) -> bool {
        self.bytes > 0 && other.bytes > 0 && self.addr < other.end() && other.addr < self.end()
    }
}

/// Refuse what would make [`host_slices`] unsound: a null address with a
/// length, a range that wraps, outputs that overlap each other or an input
/// (an in-place call passes its buffers as outputs only).
pub fn check(sends: &[HostSpan], recvs: &[HostSpan]) -> Result<(), Error> {
    for (what, list) in [("input", sends), ("output", recvs)] {
        for (r, b) in list.iter().enumerate() {
            if b.bytes > 0 && b.addr == 0 {
                return Err(Error::BadArgument(format!(
                    "rank {r}: the {what} has a null address and {} bytes",
                    b.bytes
                )));
            }
            if b.addr.checked_add(b.bytes).is_none() || b.bytes > isize::MAX as usize {
                return Err(Error::BadArgument(format!(
                    "rank {r}: the {what} of {} bytes at {:#x} wraps the address space",
                    b.bytes, b.addr
                )));
            }
        }
    }
    for (i, a) in recvs.iter().enumerate() {
        for (j, b) in recvs.iter().enumerate().skip(i + 1) {
            if a.overlaps(b) {
                return Err(Error::BadArgument(format!(
                    "the outputs of ranks {i} and {j} share memory: every rank needs its own output buffer"
                )));
            }
        }
        for (j, s) in sends.iter().enumerate() {
            if a.overlaps(s) {
                return Err(Error::BadArgument(format!(
                    "the output of rank {i} overlaps the input of rank {j}: out of place, inputs and outputs must not share memory (call the in-place form instead)"
                )));
            }
        }
    }
    Ok(())
}

/// Read-only inputs and exclusive outputs of one call.
pub type Slices<'a> = (Vec<&'a [u8]>, Vec<&'a mut [u8]>);

/// The inputs as byte slices and the outputs as mutable byte slices, once
/// [`check`] accepted them (its error otherwise).
///
/// # Safety
/// Each span describes host memory of this process that stays allocated
/// for `'a`; the inputs are readable and written by nobody for `'a`; the
/// outputs are writable and neither read nor written by anyone else for
/// `'a` (the caller holds the arrays for the whole call, and nothing else
/// runs on them). What `check` cannot see is exactly this: whether the
/// addresses are memory at all, and who else uses it.
pub unsafe fn host_slices<'a>(sends: &[HostSpan], recvs: &[HostSpan]) -> Result<Slices<'a>, Error> {
    check(sends, recvs)?;
    let send = sends
        .iter()
        .map(|b| {
            if b.bytes == 0 {
                &[][..]
            } else {
                // SAFETY: non-null, `bytes` long, does not wrap (checked
                // above); valid for reads and unwritten for 'a by the
                // caller's contract.
                unsafe { std::slice::from_raw_parts(b.addr as *const u8, b.bytes) }
            }
        })
        .collect();
    let recv = recvs
        .iter()
        .map(|b| {
            if b.bytes == 0 {
                &mut [][..]
            } else {
                // SAFETY: non-null, `bytes` long, does not wrap and overlaps
                // no other slice of this call (checked above); valid and
                // exclusive for 'a by the caller's contract.
                unsafe { std::slice::from_raw_parts_mut(b.addr as *mut u8, b.bytes) }
            }
        })
        .collect();
    Ok((send, recv))
}

#[cfg(test)]
mod tests;
