//! The pure bookkeeping of how a CUDA rank reaches its peers, shared by the
//! backend's two peer exchanges (rank threads of one process,
//! [`super::InProcess`]; one rank per process over CUDA IPC,
//! [`super::Ipc`]) and tested without a GPU: how many events a plan's signals need, which peers' buffers to
//! (re)open after a reserve, and the interprocess event handles' wire form.

use crate::cuda::IpcEventHandle;
use crate::error::{Error, Result};

/// The event count to grow to for a plan of `signals` signals when each
/// rank has `have` (`None`: enough already): a power of two, at least 64,
/// and never more than `cap` (the job's shared board between processes;
/// `None` in one process, whose board grows with the events). A plan with
/// more signals than `cap` is refused, naming its need.
pub(super) fn events_to_grow(
    signals: usize,
    have: usize,
    cap: Option<usize>,
) -> Result<Option<usize>> {
    if signals <= have {
        return Ok(None);
    }
    let want = signals.next_power_of_two().max(64);
    match cap {
        None => Ok(Some(want)),
        Some(c) if signals > c => Err(Error::Plan(format!(
            "a plan with {signals} signals; the job's shared board holds {c}"
        ))),
        Some(c) => Ok(Some(want.min(c))),
    }
}

/// After a reserve's all-gather: the ranks whose buffer this process must
/// (re)open, because its owner replaced it (`replaced[r]`) or this process
/// never opened it (`!known(r)`). A rank missing from `replaced` counts as
/// replaced.
pub(super) fn to_reopen(
    ranks: usize,
    replaced: &[bool],
    known: impl Fn(usize) -> bool,
) -> Vec<usize> {
    (0..ranks)
        .filter(|&r| replaced.get(r).copied().unwrap_or(true) || !known(r))
        .collect()
}

/// Interprocess event handles as one all-gather record.
pub(super) fn encode_events(hs: &[IpcEventHandle]) -> Vec<u8> {
    hs.iter().flat_map(|h| h.0).collect()
}

/// The handles of an all-gather record made by [`encode_events`] (a
/// trailing partial handle is dropped).
pub(super) fn decode_events(b: &[u8]) -> Vec<IpcEventHandle> {
    b.chunks_exact(64)
        .map(|c| {
            let mut h = [0u8; 64];
            h.copy_from_slice(c);
            IpcEventHandle(h)
        })
        .collect()
}

#[cfg(test)]
mod tests;
