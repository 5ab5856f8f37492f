//! The one place this crate turns addresses that Python handed over into
//! Rust slices. Everything else is safe code over those slices.
//!
//! The Python side (`ringreduce/__init__.py`) reads an array's address and
//! length from the array itself (`__array_interface__`, `data_ptr()`), checks
//! that it is a C-contiguous host array of the right type and size, and keeps
//! the array alive (it is an argument of the running call) until the call
//! returns. The checks below make what the compiler cannot see explicit:
//! no null address with a length, no output overlapping another buffer of
//! the call, no length that wraps the address space.

use ringreduce::Error;

/// A host buffer as Python described it: start address and length in bytes.
#[derive(Debug, Clone, Copy)]
pub struct Raw {
    pub addr: usize,
    pub bytes: usize,
}

impl Raw {
    fn end(&self) -> usize {
        self.addr.saturating_add(self.bytes)
    }

    fn overlaps(&self, other: &Raw) -> bool {
        self.bytes > 0 && other.bytes > 0 && self.addr < other.end() && other.addr < self.end()
    }
}

/// Refuse what would make [`bytes`] or [`bytes_mut`] unsound: a null address
/// with a length, a range that wraps, outputs that overlap each other or an
/// input (an in-place call passes its buffers as outputs only).
pub fn check(sends: &[Raw], recvs: &[Raw]) -> Result<(), Error> {
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

/// The inputs as byte slices.
///
/// # Safety
/// Each `Raw` must describe memory that stays allocated, readable and
/// unwritten by anyone else for `'a` (the Python caller holds the arrays for
/// the whole call), and [`check`] must have accepted the call.
pub unsafe fn bytes<'a>(list: &[Raw]) -> Vec<&'a [u8]> {
    list.iter()
        .map(|b| {
            if b.bytes == 0 {
                &[][..]
            } else {
                // SAFETY: non-null, `bytes` long, does not wrap (checked by
                // `check`); valid for reads for 'a by the caller's contract.
                unsafe { std::slice::from_raw_parts(b.addr as *const u8, b.bytes) }
            }
        })
        .collect()
}

/// The outputs as mutable byte slices.
///
/// # Safety
/// As for [`bytes`], and the memory must be writable and used by nothing
/// else for `'a`; [`check`] has made sure no two outputs and no output and
/// input overlap.
pub unsafe fn bytes_mut<'a>(list: &[Raw]) -> Vec<&'a mut [u8]> {
    list.iter()
        .map(|b| {
            if b.bytes == 0 {
                &mut [][..]
            } else {
                // SAFETY: non-null, `bytes` long, does not wrap and overlaps
                // no other slice of this call (checked by `check`); valid
                // and exclusive for 'a by the caller's contract.
                unsafe { std::slice::from_raw_parts_mut(b.addr as *mut u8, b.bytes) }
            }
        })
        .collect()
}
